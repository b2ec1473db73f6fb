"""The data pipeline on Spark: jobs over the recovery log and the structure checkpoints.

Jobs (``sharedq pipeline JOB``; each a plain function ``run(ctx, ...)`` in
:mod:`sharedq.pipeline.jobs`, made a command by :mod:`sharedq.cli.pipeline`):
``recover`` (the structure image at the end of the log or at a point in time),
``print`` (the log print utility), ``track`` (the life of every message), ``stats``
(per queue and server), ``capacity`` (structure sizing), ``report`` (all of them,
charts and one HTML page).  Transformations live in :mod:`sharedq.pipeline.transforms`
and take and return DataFrames; reading is :mod:`sharedq.pipeline.sources`, sessions
:mod:`sharedq.pipeline.session`.  Operators read ``docs/pipeline.md``.
"""

from sharedq.pipeline.errors import (
    InvalidPipelineRequest,
    PipelineError,
    PipelineReason,
    pipeline_error,
)

__all__ = ["InvalidPipelineRequest", "PipelineError", "PipelineReason", "pipeline_error"]
