"""Registration of interest, events on empty/non-empty transitions, EMC accounting."""

from __future__ import annotations

import threading

from sharedq.cf import (
    ById,
    CouplingFacility,
    EmcAreaFull,
    Head,
    ListStructure,
    MonitorEvent,
    MonitorState,
    NoSuchMonitor,
)
from sharedq.cf.errors import InvalidRequest
from sharedq.testing.conformance._registry import MakeStructure, check, raises
from sharedq.testing.conformance.helpers import key
from sharedq.testing.waits import wait_asleep_in_wait_events

LOW = b"\x00" * 16
COMMITTED_HIGH = b"\x09" + b"\xff" * 15


def _pair(
    facility: CouplingFacility, make_structure: MakeStructure, **options: object
) -> tuple[ListStructure, ListStructure]:
    name = make_structure(**options)
    return facility.connect(name, "WATCHER"), facility.connect(name, "WORKER")


@check
def registration_returns_the_current_state(struct: ListStructure) -> None:
    empty = struct.monitor_list(0)
    assert not empty.nonempty and empty.list_number == 0
    struct.write(1, key(1))
    assert struct.monitor_list(1).nonempty


@check
def whole_list_goes_nonempty_and_back(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    watcher, worker = _pair(facility, make_structure)
    reg = watcher.monitor_list(2, notify_empty=True, token=b"QUEUE-A")
    change = worker.write(2, key(1))
    worker.write(2, key(2))  # already non-empty: no second event
    events = watcher.events_nowait()
    assert [(e.monitor_id, e.state, e.seq, e.token) for e in events] == [
        (reg.monitor_id, MonitorState.NONEMPTY, change.seq, b"QUEUE-A")
    ]
    worker.delete(Head(2))
    assert watcher.events_nowait() == []
    last = worker.delete(Head(2))
    assert last is not None
    events = watcher.events_nowait()
    assert [(e.state, e.seq) for e in events] == [(MonitorState.EMPTY, last.seq)]


@check
def empty_transitions_are_not_reported_unless_asked(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    watcher, worker = _pair(facility, make_structure)
    watcher.monitor_list(0)
    worker.write(0, key(1))
    worker.delete(Head(0))
    worker.write(0, key(2))
    states = [e.state for e in watcher.events_nowait()]
    assert states == [MonitorState.NONEMPTY]


@check
def key_range_sees_only_keys_in_its_range(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """Get-wait monitors the committed range; an uncommitted put does not wake it."""
    watcher, worker = _pair(facility, make_structure)
    watcher.monitor_key_range(0, LOW, COMMITTED_HIGH)
    uncommitted = worker.write(0, b"\xf6" + b"\x00" * 15).entry
    assert watcher.events_nowait() == []
    commit = worker.move(ById(uncommitted.entry_id), 0, new_key=b"\x04" + b"\x00" * 15)
    assert commit is not None
    events = watcher.events_nowait()
    assert [(e.state, e.seq) for e in events] == [(MonitorState.NONEMPTY, commit.seq)]


@check
def a_backed_out_get_returning_to_an_empty_range_wakes_the_monitor(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    watcher, worker = _pair(facility, make_structure)
    worker.write(0, b"\x04" + b"\x00" * 15, b"m")
    got = worker.move(Head(0), 5)
    assert got is not None
    watcher.monitor_key_range(0, LOW, COMMITTED_HIGH)
    back = worker.move(ById(got.entry.entry_id), 0, ignore_limit=True, increment_version=True)
    assert back is not None
    assert [e.seq for e in watcher.events_nowait()] == [back.seq]


@check
def sublist_monitor_watches_one_exact_key(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    watcher, worker = _pair(facility, make_structure)
    reg = watcher.monitor_sublist(1, key("TRANA"), token=b"T")
    worker.write(1, key("TRANB"))
    assert watcher.events_nowait() == []
    worker.write(1, key("TRANA"))
    (event,) = watcher.events_nowait()
    assert event.monitor_id == reg.monitor_id and event.list_number == 1


@check
def secondary_key_monitor_fires_only_when_the_key_is_assigned(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    """Patent S5: uncommitted puts carry no SLEK, so only the commit fires the EMC."""
    watcher, worker = _pair(facility, make_structure)
    watcher.monitor_sublist(0, b"CORREL-X", secondary=True, token=b"UNC")
    other = worker.write(0, b"\xf6" + b"\x01" * 15, adjunct=b"CORREL-Y").entry
    worker.move(ById(other.entry_id), 0, new_key=b"\x01" * 16, new_secondary_key=b"CORREL-Y")
    put = worker.write(0, b"\xf6" + b"\x02" * 15, adjunct=b"CORREL-X").entry
    assert watcher.events_nowait() == []
    commit = worker.move(ById(put.entry_id), 0, new_key=b"\x02" * 16, new_secondary_key=b"CORREL-X")
    assert commit is not None
    events = watcher.events_nowait()
    assert [(e.seq, e.token) for e in events] == [(commit.seq, b"UNC")]


@check
def each_user_gets_its_own_event(facility: CouplingFacility, make_structure: MakeStructure) -> None:
    name = make_structure()
    users = [facility.connect(name, f"QM{n}") for n in range(3)]
    for user in users:
        user.monitor_list(0)
    users[0].write(0, key(1))
    assert [len(user.events_nowait()) for user in users] == [1, 1, 1]


@check
def waiter_is_woken_by_the_change_not_by_polling(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    watcher, worker = _pair(facility, make_structure)
    watcher.monitor_list(0)
    received: list[MonitorEvent] = []

    def wait() -> None:
        received.extend(watcher.wait_events(timeout=30))

    thread = threading.Thread(target=wait)
    thread.start()
    wait_asleep_in_wait_events(thread)  # a change made now can only wake it
    assert received == []
    change = worker.write(0, key(1))
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert [e.seq for e in received] == [change.seq]


@check
def wait_events_times_out_empty(struct: ListStructure) -> None:
    struct.monitor_list(0)
    assert struct.wait_events(timeout=0.05) == []


@check
def wait_events_returns_at_once_when_events_are_queued(struct: ListStructure) -> None:
    struct.monitor_list(0)
    struct.write(0, key(1))
    assert len(struct.wait_events(timeout=0)) == 1


@check
def stop_monitor_frees_the_emc_and_drops_its_events(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    watcher, worker = _pair(facility, make_structure)
    keep = watcher.monitor_list(0)
    drop = watcher.monitor_list(1)
    assert watcher.statistics().emcs == 2
    worker.write(0, key(1))
    worker.write(1, key(1))
    watcher.stop_monitor(drop.monitor_id)
    assert watcher.statistics().emcs == 1
    assert [e.monitor_id for e in watcher.events_nowait()] == [keep.monitor_id]
    with raises(NoSuchMonitor):
        watcher.stop_monitor(drop.monitor_id)
    with raises(NoSuchMonitor):
        worker.stop_monitor(keep.monitor_id)  # not the worker's monitor


@check
def registration_fails_when_the_emc_area_is_full(
    facility: CouplingFacility, make_structure: MakeStructure
) -> None:
    name = make_structure(entries=4, elements=4, emc_percent=5)
    user = facility.connect(name, "U")
    stats = user.statistics()
    assert stats.max_emcs >= 1
    for n in range(stats.max_emcs):
        user.monitor_list(n % 8)
    with raises(EmcAreaFull) as info:
        user.monitor_list(0)
    assert info.value.reason_name == "EMC_AREA_FULL"
    assert user.statistics().emcs == stats.max_emcs


@check
def bad_registrations_are_refused(struct: ListStructure) -> None:
    with raises(InvalidRequest):
        struct.monitor_key_range(0, key(5), key(1))
    with raises(InvalidRequest):
        struct.monitor_list(99)
    with raises(InvalidRequest):
        struct.monitor_list(0, token=b"x" * 17)
    assert struct.statistics().emcs == 0
