"""A queue manager process for the nonshared-queue crash test, killed with SIGKILL.

``python -m tests.mq.nonshared_worker --facility URL --root DIR --admin NAME`` starts
``QM1`` (id 1) on the facility (``memory://``: one of its own, where it creates the
administrative structure) with recovery settings at ``DIR``, defines the
nonshared queue ``LQ1`` and the shared queue ``SQ1``, and puts on both:

* ``PERSISTENT`` persistent messages, committed (half out of syncpoint, half in
  units of work of ``UNIT`` messages);
* ``NONPERSISTENT`` nonpersistent ones, out of syncpoint;
* ``IN_FLIGHT`` persistent ones in a unit of work it never commits;
* it gets ``GOTTEN`` of the committed persistent ones from ``LQ1`` in a committed
  unit, and one more in a unit it never commits.

Then it prints one JSON line (what it did) and waits on its standard input, which
never ends: the test kills it there with SIGKILL.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from sharedq.cf import open_facility
from sharedq.mq import Disposition, QueueManager, structure_params
from sharedq.recovery import RecoverySettings

PERSISTENT = 40
UNIT = 5
NONPERSISTENT = 7
IN_FLIGHT = 3
GOTTEN = 4


def run(facility_url: str, root: Path, admin: str) -> dict[str, list[str]]:
    """The workload; returns the bodies it left, by what should become of them."""
    facility = open_facility(facility_url)
    if not facility.exists(admin):  # memory://: the whole group is in this process
        facility.create(structure_params(admin, queues=16, managers=4, messages=2000))
    qm = QueueManager(facility, "QM1", 1, admin=admin, recovery=RecoverySettings(root=root))
    qm.define_queue("LQ1", disposition=Disposition.QMGR)
    qm.define_queue("SQ1")
    left: dict[str, list[str]] = {"committed": [], "nonpersistent": [], "lost": []}
    for name in ("LQ1", "SQ1"):
        queue = qm.open(name)
        for n in range(PERSISTENT // 2):
            queue.put(f"{name}.p{n}".encode(), persistent=True)
        for first in range(PERSISTENT // 2, PERSISTENT, UNIT):
            with qm.unit_of_work() as uow:
                for n in range(first, first + UNIT):
                    queue.put(f"{name}.p{n}".encode(), persistent=True, uow=uow)
        left["committed"] += [f"{name}.p{n}" for n in range(PERSISTENT)]
        for n in range(NONPERSISTENT):
            queue.put(f"{name}.n{n}".encode(), persistent=False)
        left["nonpersistent"] += [f"{name}.n{n}" for n in range(NONPERSISTENT)]
    lq1 = qm.open("LQ1")
    with qm.unit_of_work() as uow:
        for _ in range(GOTTEN):
            got = lq1.get(uow=uow).body.decode()
            left["committed"].remove(got)
            left["lost"].append(got)
    in_flight = qm.unit_of_work()  # never ended: the kill finds it in flight
    for n in range(IN_FLIGHT):
        lq1.put(f"LQ1.f{n}".encode(), persistent=True, uow=in_flight)
        left["lost"].append(f"LQ1.f{n}")
    lq1.get(uow=in_flight)  # given back by the restart: it stays committed
    return left


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--facility", required=True)
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--admin", required=True)
    args = parser.parse_args(argv)
    left = run(args.facility, args.root, args.admin)
    print(json.dumps(left), flush=True)
    sys.stdin.read()  # until killed
    return 0


if __name__ == "__main__":
    sys.exit(main())
