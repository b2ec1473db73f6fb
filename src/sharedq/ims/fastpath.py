"""Fast Path on shared queues (redbook §3.2, spec §1.17 and §9.3): ``docs/ims.md``.

An IMS with Fast Path has IFP regions, each serving one PSB (its *balancing group*),
and a CQS connected to the EMHQ pair.  Each Fast Path transaction has a *sysplex
processing code* (the DBFHAGU0 exit's choice, here a definition): ``LOCAL_ONLY``,
``LOCAL_FIRST`` (the default) or ``GLOBAL_ONLY``.  Local work waits in this IMS's
balancing group and never touches the structure; global work goes to the EMHQ program
ready queue (``X'01' + PSB``), which every IMS with an IFP region for the PSB
registers.  Replies go to the EMHQ LTERM ready queue (``X'05' + LTERM``), registered
by the IMS the input came from when it first puts a Fast Path input for that LTERM.

The PSB name tables are kept in step *through the structure*: while this IMS has IFP
regions for a PSB (its local table), one entry sits on the EMHQ queue ``X'01' + PSB +
IMSID``, which no IMS registers.  Another IMS's global table for the PSB is the set of
group members whose entry is there, read with one CQSQUERY when its local table does
not have the PSB, so no IMS holds a stale copy.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from sharedq.cqs import CQSError, CQSReason, CQSService, Kind, LockToken, Uow, make_name
from sharedq.ims.definitions import check_name
from sharedq.ims.errors import IMSReason, ims_error

logger = logging.getLogger(__name__)

#: A Fast Path program: the input's data, its reply.
IFPProgram = Callable[[bytes], bytes]

PROGRAM_READY = 1
LTERM_READY = 5
#: More than this many queued to the balancing group: local only if regions / 4 > queued.
QUEUED_LIMIT = 5
DFS2533 = "DFS2533 ROUTING CODE NOT ACTIVE."
DFS2529I = "DFS2529I NO FAST PATH REGION IS ACTIVE"
#: Sent instead of a reply when the IFP program abends (the seed is silent: IMS's text).
DFS555I = "DFS555I TRANSACTION ABEND"


class SPC(Enum):
    """The sysplex processing code (§3.2)."""

    LOCAL_ONLY = "local only"
    LOCAL_FIRST = "local first"
    GLOBAL_ONLY = "global only"


@dataclass(frozen=True)
class FPTransaction:
    """A Fast Path transaction: its code is its routing code; ``psb`` its program."""

    code: str
    psb: str
    spc: SPC = SPC.LOCAL_FIRST

    def __post_init__(self) -> None:
        check_name(self.code, "routing code")
        check_name(self.psb, "PSB")
        if not isinstance(self.spc, SPC):
            raise ims_error(IMSReason.BAD_DEFINITION, f"{self.code}: spc must be an SPC")


@dataclass(frozen=True)
class FastPathDefinition:
    """The Fast Path transactions, the IFP regions (name -> PSB) started at start, and
    the shared-queues group's IMSIDs (whose table entries make the global tables)."""

    transactions: Sequence[FPTransaction]
    regions: Mapping[str, str]
    group: Sequence[str]


def local_first(local_regions: int, queued: int) -> bool:
    """§3.2.2: local when a local IFP region serves the PSB and no more than 5 are
    queued to the balancing group, or, when more are, regions / 4 > queued."""
    if local_regions < 1:
        return False
    return queued <= QUEUED_LIMIT or local_regions / 4 > queued


def program_ready(psb: str) -> bytes:
    return make_name(PROGRAM_READY, psb)


def table_entry(psb: str, imsid: str) -> bytes:
    return make_name(PROGRAM_READY, psb, imsid)


def _body(lterm: str, code: str, data: bytes) -> bytes:
    return lterm.ljust(8).encode() + code.ljust(8).encode() + data


def _split(body: bytes) -> tuple[str, str, bytes]:
    return body[:8].decode().rstrip(), body[8:16].decode().rstrip(), body[16:]


@dataclass
class _Work:
    lterm: str
    code: str
    data: bytes
    token: LockToken | None  # None: local (never in the structure)
    uow: Uow | None = None


class FastPath:
    """One IMS's Fast Path: input routing by SPC, IFP regions, PSB tables, replies."""

    def __init__(
        self,
        cqs: CQSService,
        imsid: str,
        definition: FastPathDefinition,
        programs: Mapping[str, IFPProgram],
    ) -> None:
        self._cqs = cqs
        self.imsid = imsid
        self._tran = {t.code: t for t in definition.transactions}
        for tran in definition.transactions:
            if not callable(programs.get(tran.psb)):
                raise ims_error(IMSReason.NO_PROGRAM, f"no IFP program for PSB {tran.psb}")
        self._definition = definition
        self._programs = dict(programs)
        self._lock = threading.Condition()
        self._regions: dict[str, tuple[str, threading.Thread]] = {}
        self._stopping: set[str] = set()
        self._local: dict[str, int] = {}  # the local PSB table: PSB -> IFP regions
        self._balg: dict[str, deque[_Work]] = {}  # queued to the balancing group
        self._busy: dict[str, int] = {}
        self._flag: set[str] = set()  # PSBs told of global work
        self._stopped_codes: set[str] = set()
        self._lterms: set[str] = set()  # EMHQ LTERMs registered
        self._replies: dict[str, deque[str]] = {}
        self._dead = False  # the IMS died: nothing more reaches the EMHQ from here
        self._completed: list[Uow] = []  # EMHQ inputs processed while the CQS was down
        #: What it did: inputs local/global, messages processed, DFS2529I sent.
        self.counts = dict.fromkeys(("local", "global", "processed", "abends", "dfs2529i"), 0)

    # -- commands -----------------------------------------------------------------------------

    def start(self) -> None:
        """Remove the table entries a failed incarnation of this IMS left (its
        emergency or cold restart), then start the defined IFP regions."""
        self.remove_entries(self.imsid)
        for name, psb in self._definition.regions.items():
            self.start_region(name, psb)

    def remove_entries(self, imsid: str) -> int:
        """Delete the PSB table entries of ``imsid`` (this IMS at its restart, or a
        member of the group that failed, §1.17): the global tables drop it.  Returns
        how many were deleted."""
        psbs = {t.psb for t in self._definition.transactions} | set(
            self._definition.regions.values()
        )
        removed = 0
        for psb in sorted(psbs):
            while (got := self._cqs.read(table_entry(psb, imsid), kind=Kind.EMHQ)) is not None:
                if got.token is not None:
                    self._cqs.delete(got.token)
                removed += 1
        return removed

    def shutdown(self) -> None:
        for name in list(self._regions):
            self.stop_region(name)
        for lterm in list(self._lterms):
            self._cqs.deregister(make_name(LTERM_READY, lterm), kind=Kind.EMHQ)
        self._lterms.clear()

    def stop_dead(self) -> None:
        """The IMS died (its CQS is stopped dead): the IFP regions end without a
        reply or a delete, nothing is deregistered; its table entries and the EMHQ
        messages its regions held stay on the structure."""
        with self._lock:
            self._dead = True
            self._stopping.update(self._regions)
            self._regions.clear()
            self._lterms.clear()
            self._lock.notify_all()

    def stop_routing_code(self, code: str) -> None:
        self._stopped_codes.add(self._fp(code).code)

    def start_routing_code(self, code: str) -> None:
        self._stopped_codes.discard(self._fp(code).code)

    def start_region(self, name: str, psb: str) -> None:
        """Start an IFP region for ``psb``; the first one creates the local table
        (its entry on the structure) and registers the program ready queue."""
        check_name(name, "region")
        if psb not in self._programs:
            raise ims_error(IMSReason.NO_PROGRAM, f"no IFP program for PSB {psb}")
        with self._lock:
            if name in self._regions:
                raise ims_error(IMSReason.BAD_ARGUMENT, f"region {name} is started")
            first = self._local.get(psb, 0) == 0
            self._local[psb] = self._local.get(psb, 0) + 1
            thread = threading.Thread(target=self._run, args=(name, psb), daemon=True)
            self._regions[name] = (psb, thread)
        if first:
            self._cqs.put(table_entry(psb, self.imsid), self.imsid.encode(), kind=Kind.EMHQ)
            if self._cqs.register(program_ready(psb), kind=Kind.EMHQ):
                self._told_psb(psb)
        thread.start()

    def stop_region(self, name: str) -> None:
        """Stop an IFP region (after its message in hand).  The last one of this IMS
        for its PSB deletes the local table; work queued here goes to the EMHQ if
        another IMS serves the PSB; if none does, the PSB's work is deleted and each
        inputting terminal gets ``DFS2529I``."""
        with self._lock:
            if name not in self._regions:
                raise ims_error(IMSReason.UNKNOWN_RESOURCE, f"no IFP region {name}")
            psb, thread = self._regions.pop(name)
            self._stopping.add(name)
            self._lock.notify_all()
        thread.join()
        with self._lock:
            self._stopping.discard(name)
            self._local[psb] -= 1
            last = self._local[psb] == 0
            left = list(self._balg.pop(psb, ())) if last else []
        if not last:
            return
        del self._local[psb]
        self._cqs.deregister(program_ready(psb), kind=Kind.EMHQ)
        got = self._cqs.read(table_entry(psb, self.imsid), kind=Kind.EMHQ)
        if got is not None and got.token is not None:
            self._cqs.delete(got.token)
        served = bool(self._servers(psb))
        for work in left:
            if served:
                self._cqs.put(
                    program_ready(psb), _body(work.lterm, work.code, work.data), kind=Kind.EMHQ
                )
            else:
                self._reply(work.lterm, DFS2529I.encode())
                self.counts["dfs2529i"] += 1
        if not served:
            while (msg := self._cqs.read(program_ready(psb), kind=Kind.EMHQ)) is not None:
                lterm = _split(msg.body)[0]
                self._reply(lterm, DFS2529I.encode())
                if msg.token is not None:
                    self._cqs.delete(msg.token)
                self.counts["dfs2529i"] += 1

    def regions(self) -> dict[str, str]:
        """The IFP regions started and not being stopped: name -> PSB."""
        with self._lock:
            return {name: psb for name, (psb, _) in self._regions.items()}

    def local_table(self) -> dict[str, int]:
        """The local PSB name table: PSB -> IFP regions here."""
        with self._lock:
            return dict(self._local)

    def global_table(self, psb: str) -> list[str]:
        """The other IMSs with IFP regions for ``psb`` (read from the structure)."""
        return [s for s in self._servers(psb) if s != self.imsid]

    def _servers(self, psb: str) -> list[str]:
        group = list(self._definition.group)
        counts = self._cqs.query([table_entry(psb, s) for s in group], kind=Kind.EMHQ)
        return [s for s, c in zip(group, counts, strict=True) if c.ready > 0]

    def _fp(self, code: str) -> FPTransaction:
        tran = self._tran.get(code)
        if tran is None:
            raise ims_error(IMSReason.UNKNOWN_DESTINATION, f"{code!r}: no Fast Path code")
        return tran

    # -- input --------------------------------------------------------------------------------

    def enter(self, lterm: str, code: str, data: bytes) -> Literal["local", "global"]:
        """A Fast Path input from ``lterm``: accepted or refused with ``DFS2533``
        (``ROUTING_NOT_ACTIVE``), then routed by the transaction's SPC."""
        tran = self._fp(code)
        if code in self._stopped_codes:
            raise ims_error(IMSReason.ROUTING_NOT_ACTIVE, f"{DFS2533} ({code} stopped)")
        with self._lock:
            here = self._local.get(tran.psb, 0)
            queued = len(self._balg.get(tran.psb, ()))
            local = here > 0 and (
                tran.spc is SPC.LOCAL_ONLY
                or (tran.spc is SPC.LOCAL_FIRST and local_first(here, queued))
            )
            if local:
                self._balg.setdefault(tran.psb, deque()).append(_Work(lterm, code, data, None))
                self._lock.notify_all()
        self._register_lterm(lterm)
        if local:
            self.counts["local"] += 1
            return "local"
        if tran.spc is SPC.LOCAL_ONLY:
            raise ims_error(IMSReason.ROUTING_NOT_ACTIVE, f"{DFS2533} (no IFP here for {code})")
        try:
            if here == 0 and not self._servers(tran.psb):
                raise ims_error(IMSReason.ROUTING_NOT_ACTIVE, f"{DFS2533} (no IFP for {tran.psb})")
            self._cqs.put(program_ready(tran.psb), _body(lterm, code, data), kind=Kind.EMHQ)
        except CQSError as error:
            if error.reason is not CQSReason.NOT_CONNECTED:
                raise
            raise ims_error(IMSReason.CQS_UNAVAILABLE, f"{code}: {error}") from error
        self.counts["global"] += 1
        return "global"

    def global_queued(self, psb: str) -> int:
        """How many inputs wait on the EMHQ program ready queue of ``psb``."""
        (counts,) = self._cqs.query([program_ready(psb)], kind=Kind.EMHQ)
        return counts.ready

    def queued(self, psb: str) -> int:
        """How many inputs wait in this IMS's balancing group for ``psb``."""
        with self._lock:
            return len(self._balg.get(psb, ()))

    # -- notification and regions -------------------------------------------------------------

    def told(self, queue: bytes) -> None:
        """The CQS says an EMHQ queue this IMS registered got work."""
        name = queue[1:9].decode().rstrip()
        if queue[0] == LTERM_READY:
            while (msg := self._cqs.read(queue, kind=Kind.EMHQ)) is not None:
                with self._lock:
                    self._replies.setdefault(name, deque()).append(msg.body.decode())
                    self._lock.notify_all()
                if msg.token is not None:
                    self._cqs.delete(msg.token)
        else:
            self._told_psb(name)

    def _told_psb(self, psb: str) -> None:
        with self._lock:
            self._flag.add(psb)
            self._lock.notify_all()

    def receive(self, lterm: str, timeout: float | None = None) -> str | None:
        """The next reply (or ``DFS2529I``) delivered to ``lterm`` by this IMS."""
        with self._lock:
            self._lock.wait_for(lambda: self._replies.get(lterm), timeout)
            replies = self._replies.get(lterm)
            return replies.popleft() if replies else None

    def _register_lterm(self, lterm: str) -> None:
        with self._lock:
            if lterm in self._lterms:
                return
            self._lterms.add(lterm)
        try:
            if self._cqs.register(make_name(LTERM_READY, lterm), kind=Kind.EMHQ):
                self.told(make_name(LTERM_READY, lterm))
        except CQSError as error:  # the CQS failed: local work goes on (§6.1)
            if error.reason is not CQSReason.NOT_CONNECTED:
                raise
            with self._lock:
                self._lterms.discard(lterm)  # registered when the CQS is back

    def release_lterm(self, lterm: str) -> None:
        """Deregister the EMHQ LTERM ready queue of ``lterm`` (its terminal logged or
        signed off); the next Fast Path input from it registers it again."""
        with self._lock:
            if lterm not in self._lterms:
                return
            self._lterms.discard(lterm)
        try:
            self._cqs.deregister(make_name(LTERM_READY, lterm), kind=Kind.EMHQ)
        except CQSError as error:
            if error.reason is not CQSReason.NOT_CONNECTED:
                raise

    def _next(self, name: str, psb: str) -> _Work | None:
        while True:
            with self._lock:
                self._lock.wait_for(
                    lambda: name in self._stopping or self._balg.get(psb) or psb in self._flag
                )
                if name in self._stopping:
                    return None
                balg = self._balg.get(psb)
                if balg:
                    self._busy[psb] = self._busy.get(psb, 0) + 1
                    return balg.popleft()
            try:
                msg = self._cqs.read(program_ready(psb), kind=Kind.EMHQ)
            except CQSError as error:  # the CQS failed: local work only (§6.1)
                logger.warning("%s: EMHQ read for %s failed: %s", self.imsid, psb, error)
                msg = None
            if msg is None:
                with self._lock:
                    self._flag.discard(psb)
                continue
            lterm, code, data = _split(msg.body)
            with self._lock:
                self._busy[psb] = self._busy.get(psb, 0) + 1
            return _Work(lterm, code, data, msg.token, msg.uow)

    def _run(self, name: str, psb: str) -> None:
        program = self._programs[psb]
        while (work := self._next(name, psb)) is not None:
            try:
                try:
                    reply = program(work.data)
                except Exception as error:  # an IFP abend: the input is discarded
                    logger.warning("%s: IFP %s abended: %r", self.imsid, name, error)
                    reply = f"{DFS555I} {work.code}".encode()
                    with self._lock:
                        self.counts["abends"] += 1
                with self._lock:  # counted before the reply: a test reads it after
                    if self._dead:
                        return
                    self.counts["processed"] += 1
                self._reply(work.lterm, reply)
                if work.token is not None:
                    self._delete(work)
            finally:
                with self._lock:
                    self._busy[psb] -= 1

    def _delete(self, work: _Work) -> None:
        assert work.token is not None
        try:
            self._cqs.delete(work.token)
        except CQSError as error:
            if error.reason is not CQSReason.NOT_CONNECTED or work.uow is None:
                raise
            with self._lock:  # deleted when the IMS reconnects (resync)
                self._completed.append(work.uow)

    def take_completed(self) -> list[Uow]:
        """The EMHQ inputs processed while the CQS was down, for the resync."""
        with self._lock:
            done, self._completed = self._completed, []
            return done

    def reconnected(self) -> None:
        """The CQS is back: register the program ready queues of the PSBs with IFP
        regions here and the LTERMs registered before, and read what waits there."""
        with self._lock:
            psbs, lterms = list(self._local), list(self._lterms)
        for psb in psbs:
            if self._cqs.register(program_ready(psb), kind=Kind.EMHQ):
                self._told_psb(psb)
        for lterm in lterms:
            if self._cqs.register(make_name(LTERM_READY, lterm), kind=Kind.EMHQ):
                self.told(make_name(LTERM_READY, lterm))

    def _reply(self, lterm: str, reply: bytes) -> None:
        """The reply to the EMHQ LTERM ready queue; with the CQS failed, straight to
        the LTERM here (its input came from this IMS: local work goes on, §6.1)."""
        try:
            self._cqs.put(make_name(LTERM_READY, lterm), reply, kind=Kind.EMHQ)
        except CQSError as error:
            if error.reason is not CQSReason.NOT_CONNECTED:
                raise
            with self._lock:
                self._replies.setdefault(lterm, deque()).append(reply.decode())
                self._lock.notify_all()
