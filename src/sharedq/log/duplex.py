"""A duplex writer's half in the logging structure: push, trim, and copy back.

Under ``Durability.duplex`` a commit's records are safe once they are in the
operating system (written to the segment) and in the logging structure
(:mod:`sharedq.log.logging_structure`); the segment is synced on the writer's clock
later.  :class:`DuplexCopy` is the writer's side of that: the frames written since the
last push, one push at a time (commits that come together share it, as they share a
sync), the trim after each sync, and what to do when the logging structure does not
answer or has lost the writer's set: sync to disk, as a strict commit would, then
start the set afresh, so that a set with ``@open`` never misses a record that is not
on disk.  :func:`held_frames` reads back what a writer whose machine booted since it
stopped left there.
"""

from __future__ import annotations

import logging
import threading
import time

from sharedq.log.codec import FRAME, FRAME_HEADER_BYTES, decode_frames
from sharedq.log.logging_structure import LoggingStructure, LoggingUnavailable
from sharedq.log.records import LogRecord

logger = logging.getLogger(__name__)

#: Seconds a writer whose logging structure did not answer syncs to disk before it
#: asks the logging structure again.
RETRY_S = 1.0


class DuplexCopy:
    """One writer's records in the logging structure until its segment is synced.

    The writer appends ``(lsn, frame)`` to :attr:`unpushed` under its own lock as it
    writes each frame, and takes the list (under that lock) to push it.
    """

    def __init__(self, structure: LoggingStructure, writer: str, *, replicas: int = 0) -> None:
        self.structure = structure
        self.writer = writer
        #: Replicas of the logging structure each push waits for (``WAIT``).
        self.replicas = replicas
        #: Frames written and not yet pushed: ``(lsn, frame)``, in lsn order.
        self.unpushed: list[tuple[int, bytes]] = []
        #: Held for a push: commits that come meanwhile find their records pushed.
        self.lock = threading.Lock()
        #: Every record up to this lsn is in the logging structure or on disk.
        self.pushed_lsn = 0
        #: Pushes made, and commits that synced to disk because no push was possible.
        self.pushes = 0
        self.fallbacks = 0
        self._whole = False
        self._retry_at = 0.0
        self._trimmed = 0

    @property
    def whole(self) -> bool:
        """Commits push: the set holds every committed record not on disk.  ``False``
        while the structure is down or lost the set: commits sync to disk."""
        return self._whole

    def start(self) -> None:
        """Begin the writer's set; everything it wrote before is on disk."""
        if self.structure.on_this_machine():
            logger.warning(
                "writer %s: the logging structure %s is on this machine: a machine crash "
                "loses both copies of a commit's records (the seed's single point of "
                "failure, where its logger writes staging data sets); give it a Redis on "
                "another machine, or use every_commit durability",
                self.writer,
                self.structure.url,
            )
        policy = self.structure.eviction()
        if policy is not None:
            logger.warning(
                "writer %s: the logging structure %s may evict keys (maxmemory-policy %s): "
                "a set evicted makes commits sync to disk, and lost together with a "
                "machine crash loses records; set maxmemory-policy noeviction",
                self.writer,
                self.structure.url,
                policy,
            )
        connected = self.structure.replicas()
        if connected and not self.replicas:
            logger.warning(
                "writer %s: the logging structure %s has %d replica(s) and pushes do not "
                "wait for them: a failover to one that had not received the last pushes "
                "loses those commits' records; use duplex_ms=N,replicas=R",
                self.writer,
                self.structure.url,
                connected,
            )
        elif connected is not None and connected < self.replicas:
            logger.warning(
                "writer %s: the logging structure %s has %d replica(s) connected, %d asked "
                "for: commits sync to disk until enough acknowledge",
                self.writer,
                self.structure.url,
                connected,
                self.replicas,
            )
        self._restart()

    def push(self, frames: bytes, last_lsn: int) -> bool:
        """Push frames ending at ``last_lsn``; ``False``: sync them to disk instead,
        then call :meth:`after_sync`."""
        if not self._whole:
            return False
        try:
            pushed = self.structure.push(self.writer, last_lsn, frames, replicas=self.replicas)
        except LoggingUnavailable as exc:
            self._unanswered(exc)
            pushed = False
        else:
            if not pushed:
                logger.warning(
                    "writer %s: the logging structure %s lost its records (restarted "
                    "empty?); syncing to disk and starting them afresh",
                    self.writer,
                    self.structure.url,
                )
        if pushed:
            self.pushes += 1
        else:
            self._whole = False
            self.fallbacks += 1
        return pushed

    def after_sync(self) -> None:
        """Every record written so far is on disk: start the set afresh if it was lost."""
        if not self._whole and time.monotonic() >= self._retry_at:
            self._restart()

    def synced(self, durable_lsn: int) -> None:
        """Drop from the logging structure what a sync made durable."""
        if durable_lsn <= self._trimmed or not self._whole:
            return
        try:
            self.structure.trim(self.writer, durable_lsn)
        except LoggingUnavailable as exc:  # what stays is only read back if needed
            logger.debug("writer %s: trim failed: %s", self.writer, exc)
            return
        self._trimmed = durable_lsn

    def close(self) -> None:
        """The writer closed cleanly (everything on disk): forget its set."""
        try:
            self.structure.drop(self.writer)
        except LoggingUnavailable as exc:  # a closed writer's set is never read back
            logger.debug("writer %s: could not drop its logging set: %s", self.writer, exc)

    def _restart(self) -> None:
        try:
            self.structure.open(self.writer)
        except LoggingUnavailable as exc:
            self._unanswered(exc)
            self._whole = False
            return
        self._whole = True
        self._trimmed = 0

    def _unanswered(self, exc: LoggingUnavailable) -> None:
        logger.warning(
            "writer %s: the logging structure does not answer or its replicas did not "
            "acknowledge; commits sync to disk until it does: %s",
            self.writer,
            exc,
        )
        self._retry_at = time.monotonic() + RETRY_S


def held_frames(
    structure: LoggingStructure, writer: str
) -> tuple[list[tuple[LogRecord, bytes]], str | None] | None:
    """Every frame the logging structure holds for ``writer``, by lsn, with its record,
    and what was wrong with the batch the list stops at (``None``: nothing); ``None``
    if the writer's set is not whole (the structure lost it).

    Raises :class:`LoggingUnavailable` when the structure does not answer.  A batch
    that does not decode stops the list there: what follows cannot be trusted to
    continue it, and the caller reports the rest as lost.
    """
    batches = structure.held(writer)
    if batches is None:
        return None
    frames: dict[int, tuple[LogRecord, bytes]] = {}
    label = f"logging structure {structure.url} writer {writer}"
    problem = None
    for batch in batches:
        records, end, damages = decode_frames(batch, label, 0)
        if damages or end != len(batch):
            problem = "; ".join(map(str, damages)) or f"{len(batch) - end} bytes after its frames"
            problem = f"a batch does not decode: {problem}"
            logger.error("%s: %s", label, problem)
            break
        pos = 0
        for record in records:
            length = FRAME.unpack_from(batch, pos)[0]
            size = FRAME_HEADER_BYTES + length
            frames[record.lsn] = (record, batch[pos : pos + size])
            pos += size
    return [frames[lsn] for lsn in sorted(frames)], problem
