"""Group commit: concurrent commits on one host share one sync of the file system.

A commit under ``every_commit`` durability waits until its records are on stable
storage.  Synced one file at a time, each writer pays a sync per commit however many
writers commit at the same moment: four queue managers of a host committing together
make four syncs, each its own trip to the disk.  Linux's ``syncfs`` puts everything
written to a file system on stable storage in one call, whichever process wrote it;
this module lets every writer of the host that logs to one file system share those
calls, as a database's WAL writer flushes for the transactions committing meanwhile.

The rule that keeps it correct: a commit's records are durable once a ``syncfs``
that *started after they were written* has completed.  Syncs of a file system are
numbered host-wide, in a small counter file (``started``, ``done``, the slots below)
kept in host-local storage (``/dev/shm``, else the temporary directory; never on a
shared or network file system, whose other hosts' page caches no ``syncfs`` here
reaches), mapped into every process that uses it.

One syncer per host and file system.  Every process with a writer on the file system
keeps a thread blocked in ``flock`` on the host's syncer lock; the one that holds it
is the *syncer* (when its process dies, or its last writer closes, the lock and the
role pass to the next).  A committer, its records written, reads ``started`` and
publishes ``started + 1`` in its thread's slot of the counter file (a slot per
committing thread, claimed from the file: one writer per slot), rings the *doorbell*
(a futex word; a wake-up only when the syncer sleeps idle, or gathers and this was
the last committer it waited for) and sleeps on ``done`` (a futex) until it reaches
the number it published.  The syncer loops: while some slot wants more than
``done``, it numbers a sync (``started``), runs ``syncfs``, records it ``done`` and
wakes the sleepers; otherwise it sleeps on the doorbell.  Committers that come in
while a sync runs are covered by the next one: one sync per round, however many.

The window.  Committers that come in one after another would settle into turns,
each turn a sync.  So each committer also marks its slot *active* (the ``started + 1``
it saw), and before a sync, and after one while the committers it woke come back, the
syncer waits for every committer active in the last two syncs to come in, up to the
window the committers publish (``group_commit_window_us``), woken by the last.

A committer alone (no other slot marked active in the last two syncs) neither rings
nor waits: it syncs its own files (``fdatasync``), and does not wait for other
files' writes to reach the disk.

A ``syncfs`` covers every file, so every writer of the process on the file system
(the group's *members*) counts its records written before the commit read
``started`` as synced when the sync it waited for completes: the second stream of a
unit of work over two does not wait for another sync.

A failed ``syncfs`` is never taken as done.  The syncer counts it in the file's
*failures* word and gives up the role; every process that was attached then sees the
count change and its group breaks: every later commit through it fails.  Linux
reports a write-back error once per open file; a later ``syncfs`` that succeeds says
nothing of the pages that failed, so nothing after a failure may be called durable.

Never waiting forever.  A committer whose sync makes no progress (``done`` does not
move) for :data:`STALL_S` (a syncer stopped or wedged) syncs for itself (its own
files, or its own ``syncfs``) and returns; until ``done`` moves again the commits of
its process do the same at once.  A wake-up lost (the doorbell rung as the syncer
fell asleep, a slot shared by threads past :data:`_PER_PROCESS` or processes past
:data:`_SLOTS`) costs at most
:data:`_WAIT_S`, after which the committer publishes and rings again.

The counters are read and written in place, without a lock: each number has one
writer (a slot its thread, ``started`` and ``done`` the syncer) and x86-64 keeps
stores in order; elsewhere (where that is not known) a writer syncs its own files.
The file's name carries the layout's version (``v6``): a process of an older version
keeps to its own files and its own leaders.  Where ``syncfs`` is missing (not Linux)
a writer syncs its own files as before.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import fcntl
import logging
import mmap
import os
import platform
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple, Protocol

logger = logging.getLogger("sharedq.log")

#: Where the host's counter and lock files live: storage of this host alone.
HOST_DIR = Path("/dev/shm")
#: The longest a committer waits for the syncer to make progress (``done`` to move)
#: before it syncs for itself.
STALL_S = 1.0
#: Committer slots: threads that can each have one of their own (the last is shared
#: by any process past them), and the most one process claims.
_SLOTS = 64
_PER_PROCESS = 8
#: The counter file: little-endian 8-byte cells (syncs started, done, failed; the
#: syncer's process id; the gathering window in microseconds; per slot the sync its
#: thread waits for, and the ``started + 1`` its last commit saw, which marks it
#: active), the futex words (doorbell, the syncer's state), the slots' owners (pids).
_STARTED, _DONE, _FAILURES, _SYNCER, _WINDOW = range(5)
_WANTS = 8
_ACTIVE = _WANTS + _SLOTS
_CELLS = _ACTIVE + _SLOTS
_WORDS_AT = 2048
_DOORBELL, _ASLEEP = range(2)
#: The syncer's states in the asleep word: idle, or gathering the active committers.
_IDLE, _GATHERING = 1, 2
_OWNERS_AT = 3072
_FILE_BYTES = 4096
_COUNTER = ctypes.c_uint64.__ctype_le__
#: The longest a committer sleeps before it publishes and rings again without a
#: wake-up; the longest the syncer sleeps idle before it looks whether it should stop.
_WAIT_S = 0.01
_IDLE_S = 1.0
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1
_WAKE_ALL = 0x7FFFFFFF
#: Whether this machine's stores are seen by other processors in the order they were
#: made (x86-64's total store order): the counters are then read and written in place.
_ORDERED = platform.machine().lower() in ("x86_64", "amd64")


class Member(Protocol):
    """A writer whose records a group's syncs cover (``LogWriter``)."""

    @property
    def last_lsn(self) -> int: ...

    def synced_through(self, lsn: int) -> None: ...


class SyncStatistics(NamedTuple):
    """What this process's writers asked of the disk (since the process started).

    ``commits``: durable points that had to wait for a sync (a commit, an
    ``every_record`` append, ``append(commit=True)``) because their records were not
    yet synced.  ``syncs``: sync calls made for segment data (``fdatasync`` of a
    segment, ``syncfs`` of a group, by this process's syncer for every process of the
    host).  ``syncs / commits`` is what group commit saves.  ``sync_seconds``: the time
    those calls took, so ``sync_seconds / syncs`` is what one sync costs on this disk.
    """

    commits: int
    syncs: int
    sync_seconds: float


_stats_lock = threading.Lock()
_commits = 0
_syncs = 0
_sync_seconds = 0.0


def sync_statistics() -> SyncStatistics:
    """This process's counts of commits that waited for a sync, and of syncs made."""
    with _stats_lock:
        return SyncStatistics(_commits, _syncs, _sync_seconds)


def count_commit() -> None:
    global _commits
    with _stats_lock:
        _commits += 1


def count_syncs(n: int, seconds: float) -> None:
    global _syncs, _sync_seconds
    with _stats_lock:
        _syncs += n
        _sync_seconds += seconds


def _load_syncfs() -> ctypes._CFuncPtr | None:  # type: ignore[name-defined]
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        syncfs = libc.syncfs
    except (OSError, AttributeError):
        return None
    syncfs.argtypes = [ctypes.c_int]
    syncfs.restype = ctypes.c_int
    return syncfs


_SYNCFS = _load_syncfs()


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


def _load_futex() -> tuple[ctypes._CFuncPtr, int] | None:  # type: ignore[name-defined]
    """libc's ``syscall`` and ``SYS_futex`` (x86-64's, the machine group commit runs on)."""
    if not _ORDERED or ctypes.sizeof(ctypes.c_long) != 8:
        return None
    try:
        syscall = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True).syscall
    except (OSError, AttributeError):
        return None
    syscall.argtypes = [
        ctypes.c_long,
        ctypes.c_void_p,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint,
    ]
    syscall.restype = ctypes.c_long
    return syscall, 202


_FUTEX = _load_futex()


def _timespec(seconds: float) -> _Timespec:
    whole = int(seconds)
    return _Timespec(whole, int((seconds - whole) * 1e9))


#: The sleeps, made once.
_WAIT_REF = ctypes.byref(_timespec(_WAIT_S))
_IDLE_REF = ctypes.byref(_timespec(_IDLE_S))


def _host_dir() -> Path:
    if HOST_DIR.is_dir() and os.access(HOST_DIR, os.W_OK | os.X_OK):
        return HOST_DIR
    return Path(tempfile.gettempdir())


def host_files(device: int) -> tuple[Path, Path]:
    """The host's syncer lock and counter file of the file system ``device``."""
    base = _host_dir() / f"sharedq-sync-v6-{os.getuid()}-{device:x}"
    return Path(f"{base}.lock"), Path(f"{base}.counters")


class HostSync:
    """The group commit of one file system on this host (one per process and device).

    :meth:`sync` returns once everything written to the file system before the call is
    on stable storage, sharing the host syncer's ``syncfs`` with every concurrent
    caller on the host.
    """

    def __init__(self, directory: Path, device: int) -> None:
        assert _FUTEX is not None
        self.device = device
        self.lock_path, self.counters_path = host_files(device)
        self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            self._counters_fd = _open_own(self.counters_path)
        except BaseException:
            os.close(self._fd)
            raise
        try:
            if os.fstat(self._counters_fd).st_size < _FILE_BYTES:
                os.ftruncate(self._counters_fd, _FILE_BYTES)  # zeros; every process alike
            self._map = mmap.mmap(self._counters_fd, _FILE_BYTES)
        except (OSError, ValueError) as exc:
            for fd in (self._fd, self._counters_fd):
                os.close(fd)
            raise OSError(f"cannot map {self.counters_path}: {exc}") from exc
        self._cells = (_COUNTER * _CELLS).from_buffer(self._map, 0)
        self._words = (ctypes.c_uint32 * 2).from_buffer(self._map, _WORDS_AT)
        self._done_at = ctypes.addressof(self._cells) + 8 * _DONE  # its low half: a futex
        self._doorbell_at = ctypes.addressof(self._words) + 4 * _DOORBELL
        #: Why the group broke (a failed sync), or ``None``.
        self.failure: str | None = None
        self._failures = self._cells[_FAILURES]
        #: The slots of the counter file this process claimed, and which thread has
        #: which (threads past :data:`_PER_PROCESS` share them).
        self._owned: list[int] = []
        self._slots: dict[int, int] = {}
        self._slot_lock = threading.Lock()
        #: ``done`` when a committer gave up waiting for the syncer (``None``: it moves).
        self._stalled_at: int | None = None
        #: This process's writers on the file system (with no other file system).
        self._members: weakref.WeakSet[Member] = weakref.WeakSet()
        #: The same as weak references in a tuple, remade at each join and leave.
        self._member_refs: tuple[weakref.ref[Member], ...] = ()
        #: The syncer lock's descriptors of this process's standby threads.
        self._role_fds: set[int] = set()
        #: Whether this process's thread serves as the host's syncer now.
        self.serving = False
        self._thread: threading.Thread | None = None
        self._standing = False
        self._standby_lock = threading.Lock()
        self._stand_by()

    def __repr__(self) -> str:
        return f"<HostSync device={self.device:x} slots={self._owned} failure={self.failure!r}>"

    # -- committers ------------------------------------------------------------------

    def sync(
        self,
        window_s: float = 0.0,
        *,
        committer: bool = True,
        alone: Callable[[], None] | None = None,
    ) -> None:
        """Everything written to the file system before this call, on stable storage.

        ``window_s``: when other committers are active (they committed when one of the
        last two syncs was the next), the syncer waits for them to come in, up to this
        long, before it starts the sync, so that they share it rather than wait for the
        next.  ``committer=False`` (a background sync) does not mark its thread active
        for the others.  ``alone``: how the caller syncs its own files; called instead
        of waiting for the syncer when no other committer is active on the host.
        Raises ``OSError`` if the sync failed, or an earlier one of this group did.
        """
        self._check()
        cells = self._cells
        slot = self._slots.get(threading.get_ident())
        if slot is None:
            slot = self.thread_slot()
        # What every member of this process has written so far: covered as well by a
        # syncfs that starts after ``started`` is read below.
        written = self._written()
        if not self._standing:
            self._stand_by()
        with self._slot_lock:
            started = cells[_STARTED]
            need = started + 1
            by_itself = False
            if committer:  # active: what another committer's look at the slots sees
                if cells[_ACTIVE + slot] != need:
                    cells[_ACTIVE + slot] = need
                by_itself = alone is not None and not self._others(slot, started)
            if not by_itself and cells[_WANTS + slot] < need:
                cells[_WANTS + slot] = need
            window_us = int(window_s * 1e6)
            if cells[_WINDOW] != window_us:
                cells[_WINDOW] = window_us
        if by_itself:
            assert alone is not None
            alone()
            return
        if self._await(slot, need, alone):
            for member, lsn in written:
                member.synced_through(lsn)

    def _others(self, slot: int, started: int) -> bool:
        """Whether another committer's slot is marked active: it committed when one of
        the last two syncs was the next (its mark is the ``started + 1`` it saw)."""
        marks = self._cells[_ACTIVE:_CELLS]
        marks[slot] = 0
        return max(marks) >= max(started, 1)

    def _ring(self, *, always: bool = False) -> None:
        """Tell the syncer a committer came in: a wake-up when it sleeps idle, or when it
        gathers and this was the last active committer it waited for."""
        words = self._words
        words[_DOORBELL] = (words[_DOORBELL] + 1) & 0xFFFFFFFF
        asleep = words[_ASLEEP]
        if always or asleep == _IDLE or (asleep and not _pending(self._cells[:_CELLS])):
            self._wake(self._doorbell_at, 1)

    def _await(self, slot: int, need: int, alone: Callable[[], None] | None) -> bool:
        """Sleep on ``done`` until it reaches ``need``; sync for itself if it stalls.
        Whether a ``syncfs`` covered it (not the caller's own files alone)."""
        assert _FUTEX is not None
        call, number = _FUTEX
        cells = self._cells
        done = cells[_DONE]
        if self._stalled_at is not None:
            if done == self._stalled_at:
                self._ring()
                return self._for_itself(alone)
            self._stalled_at = None
        self._ring()
        moved = time.monotonic()
        while done < need:
            self._check()
            call(number, self._done_at, _FUTEX_WAIT, done & 0xFFFFFFFF, _WAIT_REF, None, 0)
            now = cells[_DONE]
            if now != done:
                done, moved = now, time.monotonic()
                continue
            if time.monotonic() - moved >= STALL_S:
                self._stalled_at = done
                logger.warning(
                    "group commit: the host's syncer made no progress in %.1f s; "
                    "syncing for this process",
                    STALL_S,
                )
                return self._for_itself(alone)
            # No sync came in the wait: a wake-up lost, or the shared slot lowered by
            # another process.  Publish and ring again.
            with self._slot_lock:
                if cells[_WANTS + slot] < need:
                    cells[_WANTS + slot] = need
            self._ring(always=True)
        self._check()
        return True

    def _for_itself(self, alone: Callable[[], None] | None) -> bool:
        """The syncer stalls: this process's own files, or its own ``syncfs``."""
        if alone is not None:
            alone()
            return False
        self._syncfs()
        return True

    def _check(self) -> None:
        if self.failure is None and self._cells[_FAILURES] != self._failures:
            self.failure = "syncfs failed on the host's syncer"
        if self.failure is not None:
            raise OSError(f"an earlier {self.failure}: nothing written since is known durable")

    def join(self, member: Member) -> None:
        """``member``'s records count as synced by every ``syncfs`` of this group that
        starts after they were written, whoever asked for it."""
        self._members.add(member)
        self._member_refs = tuple(weakref.ref(m) for m in self._members)
        if not self._standing:
            self._stand_by()

    def leave(self, member: Member) -> None:
        """``member`` closed; the last to leave takes this process out of the syncer's
        role (a process that no longer logs keeps no thread for it)."""
        self._members.discard(member)
        self._member_refs = tuple(weakref.ref(m) for m in self._members)
        if not self._member_refs:
            self.stop(0.0)

    def _written(self) -> list[tuple[Member, int]]:
        """Each member of this process and the last lsn it has written so far."""
        written = []
        for ref in self._member_refs:
            member = ref()
            if member is not None:
                written.append((member, member.last_lsn))
        return written

    # -- the syncer ------------------------------------------------------------------

    def _stand_by(self) -> None:
        """Have this process's thread wait for the syncer role (again, after the last
        writer left): one thread at most, which keeps waiting if it still does."""
        with self._standby_lock:
            if self._standing or _exiting:
                return
            self._standing = True
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._standby, name=f"sharedq-syncer-{self.device:x}", daemon=True
                )
                self._thread.start()

    def _standby(self) -> None:
        """Wait for the syncer role (the host's lock), then serve until stopped; wait
        again if the process wants the role back meanwhile (:meth:`_stand_by`)."""
        fd: int | None = None
        try:
            fd = _open_own(self.lock_path)
            self._role_fds.add(fd)
            while True:
                fcntl.flock(fd, fcntl.LOCK_EX)  # blocks while another process serves
                with self._standby_lock:
                    if not self._standing or _exiting or self.failure is not None:
                        break  # stopped meanwhile (the map may be gone): pass it on
                    self.serving = True
                try:
                    self._serve()
                finally:
                    self.serving = False
                    fcntl.flock(fd, fcntl.LOCK_UN)  # the role passes on
                with self._standby_lock:
                    if not self._standing or _exiting or self.failure is not None:
                        break
        except OSError as exc:
            logger.error("group commit: the syncer of device %x stopped: %s", self.device, exc)
        finally:
            with self._standby_lock:
                self._thread = None
                self._standing = False
                if fd is not None:
                    self._role_fds.discard(fd)
                    os.close(fd)

    def _serve(self) -> None:
        assert _FUTEX is not None
        call, number = _FUTEX
        cells, words = self._cells, self._words
        cells[_SYNCER] = os.getpid()
        synced = False
        while self._standing and self.failure is None:
            seen = words[_DOORBELL]
            values = cells[:_ACTIVE]
            done, window_s = values[_DONE], values[_WINDOW] / 1e6
            if max(values[_WANTS:]) > done:
                if window_s:
                    self._gather(window_s)
                self._sync_round(max(values[_STARTED], done) + 1)
                synced = True
                continue
            if synced and window_s:
                # The committers just woken are likely to commit again: wait for them
                # as for a sync's (one sleep, woken by the last), not idle first.
                synced = False
                self._gather(window_s)
                continue
            synced = False
            words[_ASLEEP] = _IDLE
            call(number, self._doorbell_at, _FUTEX_WAIT, seen, _IDLE_REF, None, 0)
            words[_ASLEEP] = 0

    def _gather(self, window_s: float) -> None:
        """Wait until every active committer has asked for the next sync, or
        ``window_s``: committers that come in one after another would otherwise settle
        into turns, each turn a sync.  Asleep on the doorbell between looks; the last
        committer waited for wakes it."""
        assert _FUTEX is not None
        call, number = _FUTEX
        cells, words = self._cells, self._words
        deadline = time.monotonic() + window_s
        words[_ASLEEP] = _GATHERING
        try:
            while True:
                seen = words[_DOORBELL]
                if not _pending(cells[:_CELLS]):
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                call(
                    number,
                    self._doorbell_at,
                    _FUTEX_WAIT,
                    seen,
                    ctypes.byref(_timespec(left)),
                    None,
                    0,
                )
        finally:
            words[_ASLEEP] = 0

    def _sync_round(self, number: int) -> None:
        """Number a sync, run ``syncfs``, record it done and wake the committers."""
        cells = self._cells
        cells[_STARTED] = number
        try:
            self._syncfs()
        except OSError:
            cells[_FAILURES] += 1  # never done: every attached process's group breaks
            self._wake(self._done_at)
            raise
        cells[_DONE] = number
        self._wake(self._done_at)

    def _syncfs(self) -> None:
        started_s = time.perf_counter()
        failed = _SYNCFS is None or _SYNCFS(self._fd) != 0
        count_syncs(1, time.perf_counter() - started_s)
        if failed:
            error = ctypes.get_errno() if _SYNCFS is not None else 0
            self.failure = f"syncfs failed: {os.strerror(error)}"
            raise OSError(error, self.failure)

    def _wake(self, address: int, count: int = _WAKE_ALL) -> None:
        assert _FUTEX is not None
        call, number = _FUTEX
        call(number, address, _FUTEX_WAKE, count, None, None, 0)

    # -- slots and closing -----------------------------------------------------------

    def thread_slot(self) -> int:
        """The slot of the counter file the calling thread commits in: one of its own
        (claimed from the file, or left by a thread of the process that ended), or one
        it shares with other threads of the process past :data:`_PER_PROCESS`."""
        ident = threading.get_ident()
        with self._slot_lock:
            slot = self._slots.get(ident)
            if slot is not None:
                return slot
            live = {thread.ident for thread in threading.enumerate()}
            for gone in [t for t in self._slots if t not in live]:
                slot = self._slots.pop(gone)
                if slot not in self._slots.values():
                    break  # ended with its thread: this one's now
            else:
                slot = None
            if slot is None and len(self._owned) < _PER_PROCESS:
                slot = self._claim_slot()
                if slot is not None:
                    self._owned.append(slot)
            if slot is None:
                slot = self._owned[ident % len(self._owned)] if self._owned else _SLOTS - 1
            self._slots[ident] = slot
            return slot

    def _claim_slot(self) -> int | None:
        """A slot of the counter file for this process: a free one, or one whose process
        is gone; ``None`` when there is none."""
        owners = (ctypes.c_uint32 * _SLOTS).from_buffer(self._map, _OWNERS_AT)
        pid = os.getpid()
        fcntl.flock(self._counters_fd, fcntl.LOCK_EX)
        try:
            mine = set(self._owned)
            free = [n for n in range(_SLOTS - 1) if owners[n] in (0, pid) and n not in mine]
            if not free:
                free = [n for n in range(_SLOTS - 1) if not _alive(owners[n])]
            if not free:
                return None
            slot = free[0]
            owners[slot] = pid
            self._cells[_WANTS + slot] = 0
            self._cells[_ACTIVE + slot] = 0
            return slot
        finally:
            fcntl.flock(self._counters_fd, fcntl.LOCK_UN)
            del owners

    def stop(self, timeout_s: float = 1.0) -> None:
        """Give up the syncer role (or the wait for it) and let the thread end."""
        with self._standby_lock:
            self._standing = False
            thread = self._thread
        self._ring(always=True)
        if self.serving and thread is not None and timeout_s > 0:
            thread.join(timeout_s)

    def close(self) -> None:
        self.stop()
        owners = (ctypes.c_uint32 * _SLOTS).from_buffer(self._map, _OWNERS_AT)
        for slot in self._owned:
            if owners[slot] == os.getpid():
                owners[slot] = 0
        del owners
        if self._thread is not None:
            return  # waiting for the lock, or stopping: its map is left to it
        del self._cells, self._words
        self._map.close()
        for fd in (self._fd, self._counters_fd):
            os.close(fd)


def _pending(cells: list[int]) -> bool:
    """Whether a committer active in one of the last two syncs (its mark says) has not
    asked for the next one yet: what a syncer gathering waits for."""
    started, done = cells[_STARTED], cells[_DONE]
    low = max(started - 1, 1)
    marks = cells[_ACTIVE:_CELLS]
    wants = cells[_WANTS:_ACTIVE]
    return any(mark >= low and want <= done for mark, want in zip(marks, wants, strict=True))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_own(path: Path) -> int:
    """Open (or create) a host file of this user's; refuse a link or another's file."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(f"{path} is not this user's own file (mode 0600)")
    return fd


_groups: dict[int, HostSync] = {}
_groups_lock = threading.Lock()
#: Set at interpreter exit: a thread that gets the syncer role then lets it go at once.
_exiting = False


def host_sync(directory: Path) -> HostSync | None:
    """This process's group commit for the file system holding ``directory``.

    ``None`` where ``syncfs`` or the in-place counters are not available, or the host
    files cannot be used (a warning says why): the caller syncs its own files.
    """
    if _SYNCFS is None or _FUTEX is None:
        return None
    device = os.stat(directory).st_dev
    with _groups_lock:
        group = _groups.get(device)
        if group is None:
            try:
                group = HostSync(directory, device)
            except OSError as exc:
                logger.warning(
                    "group commit off for %s: its host files cannot be used (%s); "
                    "each writer syncs its own files",
                    directory,
                    exc,
                )
                return None
            _groups[device] = group
        return group


def _stop_at_exit() -> None:
    """The syncer role passes on before the interpreter stops running threads."""
    global _exiting
    _exiting = True
    for group in list(_groups.values()):
        group.stop(0.5)


atexit.register(_stop_at_exit)


def _forget_after_fork() -> None:
    """A child gets its own files and thread: ``flock`` is per open file, shared with
    the parent, so the child lets go of its copy of the syncer lock's descriptor (the
    role stays with the parent, and passes on when the parent dies)."""
    global _groups_lock, _stats_lock
    _groups_lock = threading.Lock()
    _stats_lock = threading.Lock()
    for group in _groups.values():
        for fd in group._role_fds:
            with contextlib.suppress(OSError):
                os.close(fd)
    _groups.clear()  # the parent's other descriptors stay open in the child, unused


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
