"""Group commit: concurrent commits on one host share one sync of the file system.

A commit under ``every_commit`` durability waits until its records are on stable
storage.  Synced one file at a time, each writer pays a sync per commit however many
writers commit at the same moment: four queue managers of a host committing together
make four syncs, each its own trip to the disk.  Linux's ``syncfs`` puts everything
written to a file system on stable storage in one call, whichever process wrote it;
this module lets every writer of the host that logs to one file system share those
calls, as a database shares one log flush among the transactions committing together.

The rule that keeps it correct: a commit's records are durable once a ``syncfs``
that *started after they were written* has completed.  Syncs of a file system are
numbered host-wide, in a small counter file (``started``, ``done``, the slots below)
kept in host-local storage (``/dev/shm``, else the temporary directory; never on a
shared or network file system, whose other hosts' page caches no ``syncfs`` here
reaches), mapped into every process that uses it.  A committer, its records
written, reads ``started`` (its *ticket*); it is done when ``done`` reaches
``ticket + 1``.  If not, it takes the *leader* lock (an ``flock``, one leader per
file system on the host; threads of a process queue on a lock of their own first),
looks again (the leader before it may have covered it), and otherwise numbers a new
sync, runs it, and records it done.  Committers that arrive while a sync runs wait
for the leader lock and are all covered by the next one: one sync per round, however
many writers, threads or processes committed in it.

The window.  Committers that come in one after another would settle into turns (half
of them waiting while the other half's sync runs, and so on), each turn a sync.  So
each committer also marks, in a slot of the counter file (its process and thread
hashed to one of :data:`_SLOTS`), the number of the sync it waits for; a leader
that sees committers active in the last two syncs that have not come in yet waits
for them, up to the writer's ``group_commit_window_us``, before it numbers its sync.
A committer alone never waits; nor does it ``syncfs``: when no other committer is
active, it syncs its own files (``fdatasync``) instead, and does not wait for other
files' writes to reach the disk.

A ``syncfs`` covers every file, so every writer of the process on the file system
(the group's *members*) counts its records written before the ticket as synced
when the sync completes: the second stream of a unit of work over two does not wait
for another sync.

A failed ``syncfs`` is never taken as done, and it breaks this process's group for
that file system: every later sync through it fails too.  Linux reports a write-back
error once per open file; a later ``syncfs`` that succeeds says nothing of the pages
that failed, so nothing after a failure may be called durable.

Waiting.  A committer queued behind another process's sync, and a leader gathering
committers, sleep on a futex (``FUTEX_WAIT``) in a page of the counter file
(:data:`_WORDS_AT`) rather than in a blocking ``flock`` or a polling sleep: every
release of the leader lock bumps the *released* word and wakes its sleepers at once
(one wake-up each, all together, where a chain of ``flock`` waiters is woken one after
another), and every arrival bumps the *arrived* word, waking a gathering leader as
soon as the last committer comes in rather than at its next poll.  The words only say
when to look again: what a committer decides, it decides from the counters; a
wake-up lost (a race the words do not close, or a
process killed between its release and its wake) costs at most a sleep's timeout
(:data:`_WAIT_S`, or the gathering window).  Where the futex call is not known
(another architecture) the waits are the blocking ``flock`` and the polling sleep.
The counters themselves are read and written in place, without a lock where the
machine keeps stores in order (:meth:`HostSync._counters`): a commit queued behind
another process's sync makes three system calls (two lock attempts, one sleep), a
leader four besides its ``syncfs`` (lock, release, wake, and a sleep if it gathers).
The file's name carries the layout's version (``v5``): a process of an older
version, which rewrote the whole file under the counters' lock, keeps to its own
files and syncs for itself.

Where ``syncfs`` is missing (not Linux) a writer syncs its own files as before.
"""

from __future__ import annotations

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
#: Committer slots (a process and thread hashed to one): how many committers a leader
#: can tell apart when it gathers them.
_SLOTS = 64
#: The host's counters, little-endian 8-byte numbers at the counter file's start:
#: syncs started and done, and per committer slot the number of the sync its last
#: commit waited for.
_COUNTER = ctypes.c_uint64.__ctype_le__


class Member(Protocol):
    """A writer whose records a group's syncs cover (``LogWriter``)."""

    @property
    def last_lsn(self) -> int: ...

    def synced_through(self, lsn: int) -> None: ...


class _Counters(NamedTuple):
    started: int
    done: int
    slots: tuple[int, ...]


#: How often a leader gathering commits looks whether they have all come in (where
#: it cannot sleep on the futex until one does).
GATHER_PAUSE_S = 0.0001
#: Where the futex words lie in the counter file (past the counters, which older
#: versions read alone), and the file's size with them.
_WORDS_AT = 1024
_WORDS_FILE_BYTES = 4096
#: The words: bumped at each release of the leader lock; bumped at each arrival; set
#: while a leader gathers.
_RELEASED, _ARRIVED, _GATHERING = range(3)
#: A byte per committer slot (and one for the others) after the words: set while a
#: committer sleeps queued for the leader lock.  A leader letting go of it wakes the
#: sleepers only if one is marked (a wake-up is a system call; alone, none is needed).
_SLEEPERS_AT = _WORDS_AT + 64
_SLEEPERS_END = _SLEEPERS_AT + _SLOTS + 1
_NO_SLEEPERS = bytes(_SLOTS + 1)
#: The longest a queued committer sleeps before it looks again without a wake-up (a
#: leader killed between releasing the lock and waking it, a lock held by an older
#: version): a sync that covers it, or the lock free to lead, is found by then.
_WAIT_S = 0.01
_FUTEX_WAIT = 0
_FUTEX_WAKE = 1
_WAKE_ALL = 0x7FFFFFFF
#: Whether this machine's stores are seen by other processors in the order they were
#: made (x86-64's total store order): the counters are then read and written in place
#: without their lock (:meth:`HostSync._counters`).
_ORDERED = platform.machine().lower() in ("x86_64", "amd64")
#: ``SYS_futex`` by machine (the architectures whose number is known here).
_FUTEX_SYSCALLS = {"x86_64": 202, "amd64": 202, "aarch64": 98, "arm64": 98, "riscv64": 98}


class SyncStatistics(NamedTuple):
    """What this process's writers asked of the disk (since the process started).

    ``commits``: durable points that had to wait for a sync (a commit, an
    ``every_record`` append, ``append(commit=True)``) because their records were not
    yet synced.  ``syncs``: sync calls made for segment data (``fdatasync`` of a
    segment, ``syncfs`` of a group).  ``syncs / commits`` is what group commit saves.
    ``sync_seconds``: the time those calls took, so ``sync_seconds / syncs`` is what
    one sync costs on this disk.
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
    """libc's ``syscall`` and ``SYS_futex`` of this machine, or ``None``."""
    number = _FUTEX_SYSCALLS.get(platform.machine().lower())
    if number is None or ctypes.sizeof(ctypes.c_long) != 8:
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
    return syscall, number


_FUTEX = _load_futex()


def _timespec(seconds: float) -> _Timespec:
    whole = int(seconds)
    return _Timespec(whole, int((seconds - whole) * 1e9))


#: The queued committer's sleep, made once.
_WAIT_TIMESPEC = _timespec(_WAIT_S)
_WAIT_REF = ctypes.byref(_WAIT_TIMESPEC)


class _Shared:
    """The host's counter file mapped into this process: the counters (``cells``, read
    and written in place, under the counters' lock as the file's bytes were) and the
    futex words after them (``words``)."""

    def __init__(self, fd: int) -> None:
        if os.fstat(fd).st_size < _WORDS_FILE_BYTES:
            os.ftruncate(fd, _WORDS_FILE_BYTES)  # zeros; every process grows it alike
        self.map = mmap.mmap(fd, _WORDS_FILE_BYTES)
        self.cells = (_COUNTER * (2 + _SLOTS)).from_buffer(self.map, 0)
        self.words = (ctypes.c_uint32 * 3).from_buffer(self.map, _WORDS_AT)
        base = ctypes.addressof(self.words)
        self.released_at = base + 4 * _RELEASED
        self.arrived_at = base + 4 * _ARRIVED
        #: libc's ``syscall`` and ``SYS_futex``, or ``None`` (no sleeping on the words).
        self.futex = _FUTEX

    def bump(self, index: int) -> None:
        """Raise a word by one (not atomic: two bumps at once may count as one, and the
        word changed either way, which is all a sleeper compares)."""
        words = self.words
        words[index] = (words[index] + 1) & 0xFFFFFFFF

    def wait(self, address: int, seen: int, timeout: _Timespec) -> None:
        """Sleep while the word at ``address`` is ``seen``, until woken or ``timeout``."""
        assert self.futex is not None
        call, number = self.futex
        call(number, address, _FUTEX_WAIT, seen, ctypes.byref(timeout), None, 0)

    def wake(self, address: int, count: int = _WAKE_ALL) -> None:
        if self.futex is not None:
            call, number = self.futex
            call(number, address, _FUTEX_WAKE, count, None, None, 0)

    def close(self) -> None:
        del self.cells, self.words  # the map cannot close while exported
        self.map.close()


def _host_dir() -> Path:
    if HOST_DIR.is_dir() and os.access(HOST_DIR, os.W_OK | os.X_OK):
        return HOST_DIR
    return Path(tempfile.gettempdir())


class HostSync:
    """The group commit of one file system on this host (one per process and device).

    :meth:`sync` returns once everything written to the file system before the call is
    on stable storage, sharing the ``syncfs`` with every concurrent caller on the host.
    """

    def __init__(self, directory: Path, device: int) -> None:
        self.device = device
        self._fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        base = _host_dir() / f"sharedq-sync-v5-{os.getuid()}-{device:x}"
        #: The host's leader lock for this file system (``flock``): held while a sync runs.
        self.lock_path = Path(f"{base}.lock")
        fds: list[int] = []
        try:
            for path in (self.lock_path, Path(f"{base}.counters")):
                fds.append(_open_own(path))
        except BaseException:
            for fd in (self._fd, *fds):
                os.close(fd)
            raise
        self._leader_fd, self._counters_fd = fds
        try:
            self._shared = _Shared(self._counters_fd)
        except (OSError, ValueError) as exc:
            for fd in (self._fd, *fds):
                os.close(fd)
            raise OSError(f"cannot map {base}.counters: {exc}") from exc
        #: Whether waits sleep on the futex words (else a blocking ``flock`` and polls).
        self._sleeps = self._shared.futex is not None
        #: This process's id, for the committer slots (a child makes its own groups).
        self._pid = os.getpid()
        self._leader = threading.Lock()  # one thread of the process at the flock
        self._counters_mutex = threading.Lock()  # flock is per open file, not per thread
        #: Why the group broke (a failed sync), or ``None``.
        self.failure: str | None = None
        #: This process's writers on the file system (with no other file system).
        self._members: weakref.WeakSet[Member] = weakref.WeakSet()
        #: The same as weak references in a tuple, remade at each join and leave: what a
        #: commit reads (a ``WeakSet``'s iteration costs a guard and a copy each time).
        self._member_refs: tuple[weakref.ref[Member], ...] = ()
        #: Set by the leader that found itself alone (``_leader`` held until read).
        self._alone = False
        #: The highest ``done`` this process has read from the counters or written:
        #: never more than the counters hold (they only go up), so a ticket below it
        #: is covered without another look at the file.
        self._done_seen = 0

    def __repr__(self) -> str:
        return f"<HostSync device={self.device:x} failure={self.failure!r}>"

    def sync(
        self,
        window_s: float = 0.0,
        *,
        committer: bool = True,
        alone: Callable[[], None] | None = None,
    ) -> None:
        """Everything written to the file system before this call, on stable storage.

        ``window_s``: when other committers are active (they took a ticket for one of
        the last two syncs), the leader waits for them to come in, up to this long,
        before it starts the sync, so that they share it rather than wait for the
        next.  ``committer=False`` (a background sync) is not waited for by others.
        ``alone``: how the caller syncs its own files; called instead of a ``syncfs``
        when no other committer is active on the host, so that a lone committer never
        waits for other files' writes.  Raises ``OSError`` if the sync failed, or an
        earlier one of this group did.
        """
        self._check()
        slot = hash((self._pid, threading.get_ident())) % _SLOTS if committer else None
        if alone is not None and _ORDERED and self._alone_by_look(slot):
            alone()
            return
        led = self._lead_at_once(slot, window_s, alone)
        if led is not None:
            if led:
                assert alone is not None
                alone()  # outside the locks: nobody waits for it
            return
        # What every member of this process has written so far: covered as well by a
        # syncfs that starts after the ticket below.
        written = self._written()
        ticket = self._counters(arrive=slot).started
        by_itself = False
        with self._leader:
            # A thread of this process that led meanwhile may have covered the ticket
            # (what it saw done, no system call); otherwise _lead looks at the counters.
            if self._done_seen <= ticket:
                self._lead(ticket, slot, window_s, alone)
                by_itself, self._alone = self._alone, False
        if by_itself:
            assert alone is not None
            alone()  # outside the locks: nobody waits for it
            return
        for member, lsn in written:
            member.synced_through(lsn)

    def _alone_by_look(self, slot: int | None) -> bool:
        """Whether a look at the counters, without the leader lock, finds this
        committer alone on the host and already marked for the next sync.

        A committer alone syncs its own files, which makes its records durable
        whatever any other process does meanwhile; so a look that reads a slot amid
        its write can only choose the caller's own sync where a shared one would have
        served, never lose a record.  The lock and the leader's bookkeeping are for
        sharing a ``syncfs``; a lone committer skips them (two ``flock`` calls and the
        counters' copies: 25-27 µs of CPU a commit on a RAM file system
        became 20-21, against 14-16 for ``GroupCommit.WRITER``).  A committer not yet marked
        for the next sync goes the long way once, which marks it, so that a process
        arriving later sees it active and shares with it.
        """
        values = self._shared.cells[:]  # a list: one copy of the mapped counters
        started = values[0]
        if slot is not None:
            if values[2 + slot] != started + 1:
                return False
            values[2 + slot] = 0  # its own mark set aside (as _others_active does)
        return max(values[2:]) < max(started - 1, 1)

    def _lead_at_once(
        self, slot: int | None, window_s: float, alone: Callable[[], None] | None
    ) -> bool | None:
        """The common case in few system calls: no sync under way on the host (the
        leader lock is free), so this committer leads at once: the lock taken, the
        counters looked at and its arrival marked in place, the lock let go and its
        sleepers woken (three calls besides the sync).

        Returns ``None`` when the leader lock is taken (the caller queues as usual),
        ``True`` when no other committer is active and the caller syncs its own files
        itself (``alone``), ``False`` when this call ran the group's ``syncfs``.
        """
        if not self._leader.acquire(blocking=False):
            return None
        try:
            try:
                fcntl.flock(self._leader_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return None
            try:
                self._check()
                before = self._peek(None)
                if slot is not None and before.slots[slot] != before.started + 1:
                    before = self._counters(arrive=slot)
                if alone is not None and not _others_active(before, slot):
                    return True
                slots = before.slots
                if slot is not None:  # as the counters are now, with this arrival
                    slots = (*slots[:slot], before.started + 1, *slots[slot + 1 :])
                # Written before the syncfs below starts: covered by it.
                written = self._written()
                self._sync_all(window_s, _Counters(before.started, before.done, slots))
            finally:
                self._release()
        finally:
            self._leader.release()
        for member, lsn in written:
            member.synced_through(lsn)
        return False

    def _lead(
        self, ticket: int, slot: int | None, window_s: float, alone: Callable[[], None] | None
    ) -> None:
        """Sync unless another leader's sync covered ``ticket`` meanwhile; or leave the
        sync to the caller (``self._alone``) when no other committer is active."""
        self._check()
        shared = self._shared
        if shared.futex is None:
            fcntl.flock(self._leader_fd, fcntl.LOCK_EX)
        else:
            # Until the leader lock is ours or a sync covered the ticket: asleep on the
            # released word between looks (its value read before each look, so that a
            # release after the look ends the sleep at once).  ``done`` is read in
            # place: it only goes up, and only after its sync completed.
            call, number = shared.futex
            words, cells = shared.words, shared.cells
            # Marked asleep before each try for the lock: a leader that held it then
            # sees the mark once it lets go, and wakes this committer.  (Marked again
            # each time: a leader that wakes the sleepers clears every mark.)
            sleeper = _SLEEPERS_AT + (_SLOTS if slot is None else slot)
            mapped = shared.map
            try:
                seen = words[_RELEASED]
                while True:
                    mapped[sleeper] = 1
                    try:
                        fcntl.flock(self._leader_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except BlockingIOError:
                        pass
                    # (the futex called here, not through a method: a thread asleep in
                    # _lead is what a test looks for)
                    call(number, shared.released_at, _FUTEX_WAIT, seen, _WAIT_REF, None, 0)
                    seen = words[_RELEASED]
                    done = cells[1]
                    if done > ticket:
                        self._done_seen = max(self._done_seen, done)
                        return
                    self._check()
            finally:
                mapped[sleeper] = 0
        try:
            now = self._peek(None)  # the leader lock is held: read right without a lock
            self._done_seen = max(self._done_seen, now.done)
            if now.done > ticket:
                return
            if alone is not None and not _others_active(now, slot):
                self._alone = True
                return
            self._sync_all(window_s, now)
        finally:
            self._release()

    def _release(self) -> None:
        """Let go of the host's leader lock, and wake the committers queued for it (when
        one is marked asleep, where stores are seen in order; always elsewhere).

        Waking them clears every mark: a sleeper marks itself again before each try,
        and a mark left by a process killed in its sleep would otherwise cost every
        later release on the host a wake-up call.  A committer that marked itself
        between the wake and the clearing sleeps unmarked until its timeout
        (:data:`_WAIT_S`) at worst, a wake-up lost as the module's docstring allows.
        """
        fcntl.flock(self._leader_fd, fcntl.LOCK_UN)
        if self._sleeps:
            shared = self._shared
            shared.bump(_RELEASED)
            marked = shared.map[_SLEEPERS_AT:_SLEEPERS_END] != _NO_SLEEPERS
            if marked or not _ORDERED:
                shared.wake(shared.released_at)
            if marked:
                shared.map[_SLEEPERS_AT:_SLEEPERS_END] = _NO_SLEEPERS

    def join(self, member: Member) -> None:
        """``member``'s records count as synced by every ``syncfs`` of this group that
        starts after they were written, whoever asked for it."""
        self._members.add(member)
        self._member_refs = tuple(weakref.ref(m) for m in self._members)

    def leave(self, member: Member) -> None:
        self._members.discard(member)
        self._member_refs = tuple(weakref.ref(m) for m in self._members)

    def _written(self) -> list[tuple[Member, int]]:
        """Each member of this process and the last lsn it has written so far."""
        written = []
        for ref in self._member_refs:
            member = ref()
            if member is not None:
                written.append((member, member.last_lsn))
        return written

    def _sync_all(self, window_s: float, now: _Counters) -> None:
        """Number a sync, run ``syncfs``, record it done (the leader lock is held)."""
        if window_s > 0:
            now = self._gather(window_s, now)
        number = max(now.started, now.done) + 1
        self._counters(started=number)
        started_s = time.perf_counter()
        failed = _SYNCFS is None or _SYNCFS(self._fd) != 0
        count_syncs(1, time.perf_counter() - started_s)
        if failed:
            error = ctypes.get_errno() if _SYNCFS is not None else 0
            self.failure = f"syncfs failed: {os.strerror(error)}"
            raise OSError(error, self.failure)
        self._counters(done=number)

    def _gather(self, window_s: float, now: _Counters) -> _Counters:
        """Wait until every active committer has a ticket for this sync, or ``window_s``.

        Looks at the counters without their lock (:meth:`_peek`): this leader holds
        the leader lock, so ``started`` and ``done`` do not change meanwhile, and a
        slot read while a committer writes it only decides whether to wait on.  Between
        looks it sleeps on the arrived word (each arrival wakes it), or polls.
        """
        deadline = time.monotonic() + window_s
        shared = self._shared if self._sleeps else None
        if shared is not None:
            shared.words[_GATHERING] = 1
        try:
            while True:
                if shared is not None:  # read before the look: an arrival after it wakes
                    seen = shared.words[_ARRIVED]
                    now = self._peek(now)
                # Active: a ticket for one of the last two syncs; waiting: for this one.
                # (``started + 1`` is at least 1, so empty slots count as neither.)
                low = max(now.started - 1, 1)
                if all(mark < low or mark > now.started for mark in now.slots):
                    return now
                left = deadline - time.monotonic()
                if left <= 0:
                    return now
                if shared is not None:
                    shared.wait(shared.arrived_at, seen, _timespec(left))
                else:
                    time.sleep(min(left, GATHER_PAUSE_S))
                    now = self._peek(now)
        finally:
            if shared is not None:
                shared.words[_GATHERING] = 0

    def _peek(self, now: _Counters | None) -> _Counters:
        """The counters read without their lock, by the holder of the leader lock.

        Only a leader changes ``started`` and ``done``: so while the leader lock is
        held they read right.  A slot read amid its committer's write may be read
        wrong, and that only decides how long to gather, whether another committer is
        active (``syncfs`` or the caller's own sync: either makes the caller's records
        durable, and a committer waiting for the group leads a sync of its own when
        none covered it), or whether this committer's arrival is written again (what
        a committer writes there now is ``started + 1``, which is what that check
        looks for).  ``now``: the leader's ``started`` and ``done``
        already read, kept as they are.
        """
        values = self._shared.cells[:]
        if now is None:
            return _Counters(values[0], values[1], tuple(values[2:]))
        return _Counters(now.started, now.done, tuple(values[2:]))

    def _check(self) -> None:
        if self.failure is not None:
            raise OSError(f"an earlier {self.failure}: nothing written since is known durable")

    def _counters(self, *, arrive: int | None = None, started: int = 0, done: int = 0) -> _Counters:
        """Read the host's counters; ``arrive`` marks a committer's slot as waiting for
        the next sync, ``started`` and ``done`` raise those (never lowered; only a
        leader, holding the leader lock, raises them).  Returns the counters as they
        were before any change.

        Each is an aligned 8-byte number of the mapped file, read and written in place,
        and each has one writer at a time (a slot its committer, ``started`` and
        ``done`` the leader), so no lock is needed where stores are seen in the order
        they were made (:data:`_ORDERED`): a committer's arrival is read after its
        records were written, and a leader's ``started`` is stored before its
        ``syncfs`` begins.  Elsewhere the counters' ``flock`` orders them.
        """
        if _ORDERED:
            return self._update(arrive, started, done)
        with self._counters_mutex:
            fcntl.flock(self._counters_fd, fcntl.LOCK_EX)
            try:
                return self._update(arrive, started, done)
            finally:
                fcntl.flock(self._counters_fd, fcntl.LOCK_UN)

    def _update(self, arrive: int | None, started: int, done: int) -> _Counters:
        shared = self._shared
        cells = shared.cells
        values = cells[:]  # in place: the file's bytes, mapped
        if started > values[0]:
            cells[0] = started
        if done > values[1]:
            cells[1] = done
        self._done_seen = max(self._done_seen, values[1], done)
        if arrive is not None:
            cells[2 + arrive] = values[0] + 1  # the sync that will cover it
            if self._sleeps:
                shared.bump(_ARRIVED)
                # A leader gathering is woken by the last committer it waits for (none
                # left active and not in), not by each.
                if shared.words[_GATHERING] and not _pending(cells[:]):
                    shared.wake(shared.arrived_at, 1)
        return _Counters(values[0], values[1], tuple(values[2:]))

    def close(self) -> None:
        self._shared.close()
        for fd in (self._fd, self._leader_fd, self._counters_fd):
            os.close(fd)


def _open_own(path: Path) -> int:
    """Open (or create) a host file of this user's; refuse a link or another's file."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    info = os.fstat(fd)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(f"{path} is not this user's own file (mode 0600)")
    return fd


def _pending(values: list[int]) -> bool:
    """Whether a committer active in one of the last two syncs (as the counters
    ``values`` say) has not come in for the next: what a leader gathering waits for."""
    started = values[0]
    low = max(started - 1, 1)
    return any(low <= mark <= started for mark in values[2:])


def _others_active(now: _Counters, slot: int | None) -> bool:
    """Whether a committer other than ``slot`` took a ticket for one of the last syncs."""
    slots = now.slots
    if slot is not None:  # the slot's own mark set aside, then one C-speed max
        slots = (*slots[:slot], 0, *slots[slot + 1 :])
    return max(slots) >= max(now.started - 1, 1)


_groups: dict[int, HostSync] = {}
_groups_lock = threading.Lock()


def host_sync(directory: Path) -> HostSync | None:
    """This process's group commit for the file system holding ``directory``.

    ``None`` where ``syncfs`` is not available or the host files cannot be used (a
    warning says why): the caller syncs its own files.
    """
    if _SYNCFS is None:
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


def _forget_after_fork() -> None:
    """A child gets its own files: ``flock`` is per open file, shared with the parent."""
    global _groups_lock, _stats_lock
    _groups_lock = threading.Lock()
    _stats_lock = threading.Lock()
    _groups.clear()  # the parent's descriptors stay open in the child, unused


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
