"""Users that run in processes of their own, for the multi-process tests.

Each function is a process's whole life: it opens its own facility on the URL it is
given, as a queue manager on another host would.  They are top-level functions so
that ``multiprocessing``'s spawn start method can import them, and ``main`` runs
``hold`` for tests that start a plain subprocess (to kill it or pause it).
"""

from __future__ import annotations

import sys
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from typing import Protocol

from sharedq.cf import ById, CFError, Compare, Head, ListStructure, open_facility

COMMITTED = b"\x0a" + bytes(15)
GET = Head(0, key=COMMITTED, compare=Compare.LE)


class Sink(Protocol):
    """Where a worker reports: a multiprocessing queue, or a thread's ``queue.Queue``."""

    def put(self, item: str) -> None: ...


def watch(url: str, name: str, user: str, ready: Queue[int], results: Queue[object]) -> None:
    """Watch list 1; report the monitor id, then the events of the first wake-up."""
    with open_facility(url) as facility, facility.connect(name, user) as conn:
        ready.put(conn.monitor_list(1, token=user.encode()).monitor_id)
        events = conn.wait_events(timeout=30)
        results.put([(e.monitor_id, e.state.value, e.seq, e.token) for e in events])


def consume(
    url: str, name: str, user: str, own_list: int, done: Event, results: Queue[object]
) -> None:
    """Get committed entries from list 0 onto ``own_list`` until the producer is done.

    Reports the ids it got, how many gets it tried and how many wake-ups it had.
    """
    got: list[bytes] = []
    attempts = wakeups = 0
    with open_facility(url) as facility, facility.connect(name, user) as conn:
        conn.monitor_key_range(0, bytes(16), b"\x09" + b"\xff" * 15)
        while True:
            attempts += 1
            change = conn.move(GET, own_list)
            if change is not None:
                got.append(change.entry.entry_id)
                continue
            if done.is_set() and conn.read(GET) is None:
                break
            if conn.wait_events(timeout=0.2):
                wakeups += 1
    results.put((user, got, attempts, wakeups))


def churn(url: str, name: str, user: str, ready: Sink, results: Sink) -> None:
    """Write, get and delete until a request fails; report the failure's reason."""
    try:
        with open_facility(url) as facility:
            conn = facility.connect(name, user)
            ready.put(user)
            _cycle_until_failure(conn, user)
    except CFError as exc:
        results.put(exc.reason.name)
    except BaseException as exc:  # surfaced by the test as a wrong outcome
        results.put(f"unexpected {type(exc).__name__}: {exc}")


def _cycle_until_failure(conn: ListStructure, user: str) -> None:
    n = 0
    while True:
        n += 1
        conn.write(0, b"\x04" + n.to_bytes(15, "big"), user.encode())
        change = conn.move(GET, 1)
        if change is not None:
            conn.delete(ById(change.entry.entry_id))


def hold(url: str, name: str, user: str) -> None:
    """Connect, monitor list 0, take lock 3, say ``ready``; then obey stdin.

    ``write`` tries a write and prints its outcome (``ok`` or the reason); ``exit``
    disconnects.  The test kills or pauses this process to see its user fail.
    """
    facility = open_facility(url)
    conn = facility.connect(name, user)
    conn.monitor_list(0)
    conn.lock(3)
    print("ready", conn.user_id, flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "write":
            try:
                conn.write(2, bytes(16), b"from a paused process")
                print("ok", flush=True)
            except CFError as exc:
                print(exc.reason.name, flush=True)
        elif command == "exit":
            break
    if conn.connected:
        conn.disconnect()
    facility.close()


def main() -> None:
    url, name, user = sys.argv[1:4]
    hold(url, name, user)


if __name__ == "__main__":
    main()
