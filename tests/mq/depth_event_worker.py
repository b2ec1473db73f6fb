"""A queue manager in a process of its own, for the depth event tests on Redis.

``python -m tests.mq.depth_event_worker --facility URL --name QM2 --id 2 [--perfmev]
[--kill-after-toggle]`` starts the manager, prints ``ready``, then reads commands on
stdin, one a line, and prints ``ok`` after each:

* ``put Q N``: put N messages on queue Q (out of syncpoint);
* ``get Q N``: get N messages from queue Q;
* ``exit``: close the manager and exit.

``--kill-after-toggle``: the process kills itself with SIGKILL at its first structure
request after a definition rewrite (``update``): a depth event's toggle, before its
event message and broadcast.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from sharedq.cf import open_facility
from sharedq.mq import QueueManager

ADMIN = "EVADMIN"
APP = "EVAPP"


class KillAfterToggle:
    """A fault hook: SIGKILL at the first request after an ``update`` returned."""

    def __init__(self) -> None:
        self.toggled = False

    def __call__(self, request: str, structure: str, before: bool) -> None:
        if self.toggled and before:
            os.kill(os.getpid(), signal.SIGKILL)
        if request == "update" and not before:
            self.toggled = True


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--facility", required=True)
    parser.add_argument("--name", required=True)
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--perfmev", action="store_true")
    parser.add_argument("--kill-after-toggle", action="store_true")
    args = parser.parse_args(argv)
    facility = open_facility(args.facility)
    qm = QueueManager(
        facility,
        args.name,
        args.id,
        admin=ADMIN,
        structures=[APP],
        performance_events=args.perfmev,
        faults=KillAfterToggle() if args.kill_after_toggle else None,
    )
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "exit":
            break
        queue, count = qm.open(words[1]), int(words[2])
        for _ in range(count):
            if words[0] == "put":
                queue.put(b"from " + args.name.encode())
            else:
                queue.get()
        print("ok", flush=True)
    qm.close()
    facility.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
