"""The pipeline's jobs, one module each: ``run(ctx, ...)`` and its ``command``."""
