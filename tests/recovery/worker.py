"""A queue manager in a process of its own that dies during a structure checkpoint.

``python -m tests.recovery.worker --facility URL --root DIR --kill-at POINT`` starts
manager ``QM1`` (id 1) of the recovery tests' group with a recovery log under ``DIR``,
puts a few persistent messages, then takes a structure checkpoint of the application
structure and SIGKILLs itself when the checkpoint reaches ``POINT`` (``quiesced``: it
holds the quiesce lock; ``written``: its SRDS is written, the log not yet deleted).
Nobody tells the structure: its connections fail when their leases lapse.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
from pathlib import Path

from sharedq.cf import open_facility
from sharedq.mq import QueueExists, QueueManager
from sharedq.recovery import RecoverySettings
from tests.recovery.conftest import ADMIN, APP, SMALL_LOG


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facility", required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--kill-at", required=True)
    args = parser.parse_args()

    def faults(point: str) -> None:
        if point == args.kill_at:
            print(f"dying at {point}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

    facility = open_facility(args.facility)
    settings = RecoverySettings(args.root, poll_seconds=0.05, log_config=SMALL_LOG)
    qm = QueueManager(
        facility,
        "QM1",
        1,
        admin=ADMIN,
        structures=[APP],
        recovery=settings,
        checkpoint_faults=faults,
    )
    with contextlib.suppress(QueueExists):
        qm.define_queue("WORK", structure=APP)
    for n in range(5):
        qm.open("WORK").put(b"from the worker %d" % n, persistent=True)
    print("checkpointing", flush=True)
    qm.checkpoint(APP)
    raise SystemExit("the checkpoint finished: the worker should have died")


if __name__ == "__main__":
    main()
