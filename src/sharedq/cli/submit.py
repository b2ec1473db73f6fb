"""The ``spark-submit`` entry point: the same commands as ``sharedq pipeline``.

    script="$(python -c 'import sharedq.cli.submit as s; print(s.__file__)')"
    spark-submit --master yarn "$script" recover --input /shared/recovery --output /shared/out

``--master`` left out means "what spark-submit set".
"""

from __future__ import annotations

import sys

import click

from sharedq.cli.exits import RET_FAILED, RET_OK
from sharedq.cli.failures import as_failure
from sharedq.cli.pipeline import pipeline
from sharedq.errors import SharedqError


def main(argv: list[str] | None = None) -> int:
    """Run one pipeline command; what a user can fix is one line and an exit code, as
    under ``sharedq`` (:mod:`sharedq.cli.failures`), never a traceback."""
    try:
        pipeline.main(args=argv, prog_name="sharedq-pipeline", standalone_mode=False)
    except click.ClickException as exc:  # a usage error, or a Failed
        exc.show()
        return exc.exit_code
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        return RET_FAILED
    except (SharedqError, OSError) as exc:
        failure = as_failure(exc)
        assert failure is not None
        failure.show()
        return RET_FAILED
    return RET_OK


if __name__ == "__main__":
    sys.exit(main())
