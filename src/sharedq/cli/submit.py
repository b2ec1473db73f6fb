"""The ``spark-submit`` entry point: the same commands as ``sharedq pipeline``.

    script="$(python -c 'import sharedq.cli.submit as s; print(s.__file__)')"
    spark-submit --master yarn "$script" recover --input /shared/recovery --output /shared/out

``--master`` left out means "what spark-submit set".
"""

from __future__ import annotations

import sys

from sharedq.cli.exits import RET_FAILED, RET_OK
from sharedq.cli.pipeline import pipeline
from sharedq.errors import SharedqError


def main(argv: list[str] | None = None) -> int:
    try:
        pipeline.main(args=argv, prog_name="sharedq-pipeline", standalone_mode=False)
    except SharedqError as exc:
        print(f"sharedq: {exc}", file=sys.stderr)
        return RET_FAILED
    return RET_OK


if __name__ == "__main__":
    sys.exit(main())
