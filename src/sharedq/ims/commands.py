"""The operator's /START and /STOP commands of an IMS system (a mixin of :class:`IMS`).

Kept apart from :mod:`sharedq.ims.system` so that the system module stays a readable
size: the commands only change what is stopped and then ask the system to register
interest again (``_reconcile``) and to look for work (``_wake``).
"""

from __future__ import annotations

import threading
from typing import cast

from sharedq.cqs import CQSService
from sharedq.ims import queues
from sharedq.ims.definitions import SystemDefinition, Transaction
from sharedq.ims.errors import IMSReason, ims_error
from sharedq.ims.region import Host, Region


class Commands:
    """/STOP and /START of transactions, programs and regions, /DEQUEUE SUSPEND."""

    cqs: CQSService
    definition: SystemDefinition
    imsid: str
    _lock: threading.Condition
    _stopped_trans: set[str]
    _stopped_psbs: set[str]
    _regions: dict[str, Region]

    def _reconcile(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        raise NotImplementedError

    def _check_started(self) -> None:
        raise NotImplementedError

    def _queue_of(self, tran: Transaction) -> bytes:
        raise NotImplementedError

    def _host(self) -> Host:
        return cast(Host, self)

    def stop_transaction(self, code: str) -> None:
        """/STOP TRAN: no scheduling here; interest deregistered.  Input is still queued."""
        self._transaction(code)
        with self._lock:
            self._stopped_trans.add(code)
        self._reconcile()

    def start_transaction(self, code: str) -> None:
        """/START TRAN: interest registered again (a trigger of §1.11)."""
        self._transaction(code)
        with self._lock:
            self._stopped_trans.discard(code)
        self._reconcile()
        self._wake()

    def dequeue_suspend(self, code: str) -> None:
        """/DEQUEUE SUSPEND: a USTOPped serial transaction registered again; the
        suspended messages of another moved back to its ready queue (CQSMOVE)."""
        tran = self._transaction(code)
        while not tran.serial and self.cqs.move(
            queues.transaction_suspend(code), self._queue_of(tran)
        ):
            pass
        self.start_transaction(code)

    def stop_program(self, psb: str) -> None:
        """/STOP PGM: its transactions are not scheduled here (input goes global)."""
        self._psb(psb)
        with self._lock:
            self._stopped_psbs.add(psb)

    def start_program(self, psb: str) -> None:
        """/START PGM: its transactions are scheduled here again."""
        self._psb(psb)
        with self._lock:
            self._stopped_psbs.discard(psb)
        self._wake()

    def stopped_programs(self) -> set[str]:
        with self._lock:
            return set(self._stopped_psbs)

    def stop_region(self, name: str) -> None:
        """/STOP REGION: stops after its program; interest in transactions no running
        region serves any more is deregistered."""
        self._check_started()
        with self._lock:
            region = self._regions.pop(name, None)
        if region is None:
            raise ims_error(IMSReason.UNKNOWN_RESOURCE, f"no region {name} running")
        region.stop()
        self._reconcile()

    def start_region(self, name: str) -> None:
        """/START REGION: a defined region starts; transactions of its classes registered."""
        self._check_started()
        found = next((r for r in self.definition.regions if r.name == name), None)
        if found is None:
            raise ims_error(IMSReason.UNKNOWN_RESOURCE, f"no region {name} defined")
        with self._lock:
            if name in self._regions:
                raise ims_error(IMSReason.ALREADY_STARTED, f"region {name} is running")
            self._regions[name] = Region(self._host(), found)
        self._reconcile()
        self._wake()

    def _transaction(self, code: str) -> Transaction:
        tran = self.definition.transaction(code)
        if tran is None:
            raise ims_error(IMSReason.UNKNOWN_RESOURCE, f"{self.imsid}: no transaction {code!r}")
        return tran

    def _psb(self, psb: str) -> None:
        if all(p.psb != psb for p in self.definition.programs):
            raise ims_error(IMSReason.UNKNOWN_RESOURCE, f"{self.imsid}: no PSB {psb!r}")
