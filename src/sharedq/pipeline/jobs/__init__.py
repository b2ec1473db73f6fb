"""The pipeline's jobs, one module each: a plain function ``run(ctx, ...)``.

Their commands (``sharedq pipeline JOB``) are in :mod:`sharedq.cli.pipeline`.
"""
