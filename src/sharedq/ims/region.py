"""A message processing region: a thread that runs application programs.

The IMS assigns a free region a transaction (with, for local processing, the input
message already on the lock queue); the region calls the transaction's program with a
:class:`~sharedq.ims.dli.DLI` and reports back when it returns.  Each ``GU`` after the
first is a sync point (the region's host puts the inserted messages, then deletes the
input: redbook Table 4's order), and the program's end is the last.  A program that
raises abends: the input goes back to the head of its queue (CQS unlock), its inserts
since the last sync point are discarded, and the IMS stops the program's PSB, as IMS
stops a program that abends, so that the message is not scheduled again and again here.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from sharedq.ims.definitions import Region as RegionDef
from sharedq.ims.definitions import SystemDefinition, Transaction
from sharedq.ims.dli import DLI, Destination, Input, Output, Program

logger = logging.getLogger("sharedq.ims")


class Host(Protocol):
    """What a region needs of its IMS (:class:`sharedq.ims.system.IMS`)."""

    imsid: str
    definition: SystemDefinition

    def read_input(self, transaction: Transaction) -> Input | None: ...

    def sync_point(self, held: Input | None, outputs: list[Output]) -> None: ...

    def back_out(
        self, held: Input | None, transaction: Transaction, error: BaseException
    ) -> None: ...

    def destination(self, name: str) -> Destination | None: ...

    def structure_full(self) -> bool: ...

    def region_done(self, region: Region, transaction: Transaction, dli: DLI) -> None: ...


@dataclass(frozen=True)
class Assignment:
    transaction: Transaction
    program: Program
    first: Input | None


class _Runtime:
    """The DL/I runtime of one scheduling: sync points and reads through the host."""

    def __init__(self, host: Host, transaction: Transaction) -> None:
        self._host = host
        self._transaction = transaction

    def next_input(self, previous: Input | None, outputs: list[Output]) -> Input | None:
        if previous is not None or outputs:
            self._host.sync_point(previous, outputs)
        return self._host.read_input(self._transaction)

    def destination(self, name: str) -> Destination | None:
        return self._host.destination(name)

    def transaction(self, code: str) -> Transaction | None:
        return self._host.definition.transaction(code)

    def scheduled(self) -> Transaction:
        return self._transaction

    def structure_full(self) -> bool:
        return self._host.structure_full()


class Region:
    """An MPR: waits for an assignment, runs it, reports back; ``busy`` while it has one."""

    def __init__(self, host: Host, definition: RegionDef) -> None:
        self._host = host
        self.definition = definition
        self.name = definition.name
        self.busy = False
        self._next: Assignment | None = None
        self._stop = False
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._run, name=f"mpr-{self.name}", daemon=True)
        self._thread.start()

    def serves(self, message_class: int) -> bool:
        return message_class in self.definition.classes

    def assign(self, assignment: Assignment) -> None:
        """Give the region work (the caller marked it busy)."""
        with self._ready:
            self._next = assignment
            self._ready.notify()

    def stop(self) -> None:
        """Stop after the program running now, if any; wait for it."""
        with self._ready:
            self._stop = True
            self._ready.notify()
        if self._thread is not threading.current_thread():
            self._thread.join()

    def abandon(self) -> None:
        """Stop without waiting (the IMS died): a program running now finds its IMS
        gone at its next call, and the region ends when it returns."""
        with self._ready:
            self._stop = True
            self._next = None
            self._ready.notify()

    def _run(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._next is not None or self._stop)
                if self._next is None:
                    return
                job, self._next = self._next, None
            self._schedule(job)

    def _schedule(self, job: Assignment) -> None:
        dli = DLI(_Runtime(self._host, job.transaction), self._host.imsid, job.first)
        try:
            job.program(dli)
        except Exception as error:  # an abend: back out the unit of work
            logger.warning("%s: program %s abended: %r", self.name, job.transaction.psb, error)
            dli.take_outputs()
            self._host.back_out(dli.input, job.transaction, error)
        else:
            held, outputs = dli.input, dli.take_outputs()
            if held is not None or outputs:
                self._host.sync_point(held, outputs)
                if held is not None:
                    dli.processed += 1
        finally:
            self._host.region_done(self, job.transaction, dli)
