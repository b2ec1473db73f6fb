"""``sharedq walk``: a short, real walk through a list structure, printing each step.

It is what the patent's queue manager does with a list structure, one request at a
time, on whatever facility is named (the embedded one by default): an uncommitted
put that nobody can get, a commit that makes it visible and wakes a monitor, a get
that only takes committed entries, a backout that puts the entry back in its place
with a higher version, a list limit, and the structure's accounting.
"""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console

from sharedq.cf import (
    ById,
    Compare,
    CouplingFacility,
    Head,
    ListFull,
    ListStructure,
    StructureParams,
    open_facility,
)
from sharedq.cli import credentials
from sharedq.cli.credentials import password_file_option
from sharedq.cli.names import structure_name

PUT_LIST, GET_LIST_QM1 = 1, 2
COMMITTED_COMPARATOR = b"\x0a" + b"\x00" * 15


def _key(first: int, stamp: int) -> bytes:
    return bytes([first]) + stamp.to_bytes(8, "big") + b"\x00" * 7


def _show(console: Console, struct: ListStructure, list_number: int, label: str) -> None:
    entries = list(struct.scan(list_number))
    body = ", ".join(
        f"{e.data.decode()} (key X'{e.key[:2].hex().upper()}..' version {e.version})"
        for e in entries
    )
    console.print(f"    list {list_number} ({label}): {body or 'empty'}", markup=False)


@click.command()
@click.option(
    "--facility",
    "facility_url",
    default="memory://",
    show_default=True,
    help="Where the structure lives: memory:// or a redis:// URL.",
)
@password_file_option
@click.option(
    "--structure",
    default="WALK",
    show_default=True,
    callback=structure_name,
    help="Structure name to use.",
)
def walk(facility_url: str, password_file: Path | None, structure: str) -> None:
    """Walk through a list structure the way a shared queue manager uses it."""
    console = Console(highlight=False)
    facility = open_facility(credentials.facility_url(facility_url, password_file))
    try:
        _walk(console, facility, structure)
    finally:
        facility.close()


def _walk(console: Console, facility: CouplingFacility, name: str) -> None:
    params = StructureParams.for_capacity(name, list_count=4, entries=100, elements=200)
    facility.create(params)
    console.print(f"[bold]Allocated structure {name}[/] on {type(facility).__name__}")
    try:
        qm1 = facility.connect(name, "QM1")
        qm2 = facility.connect(name, "QM2")
        console.print(f"  QM1 is user {qm1.user_id}, QM2 is user {qm2.user_id}")
        stats = qm1.statistics()
        console.print(
            f"  capacity: {stats.max_entries} entries, {stats.max_elements} elements of "
            f"{stats.element_size} bytes, {stats.max_emcs} EMCs ({stats.emc_percent}% of "
            f"{stats.size} bytes)"
        )

        reg = qm2.monitor_key_range(PUT_LIST, b"\x00" * 16, b"\x09" + b"\xff" * 15)
        console.print(
            f"\n[bold]QM2 registers interest[/] in the committed key range of list "
            f"{PUT_LIST}: monitor {reg.monitor_id}, non-empty now: {reg.nonempty}"
        )

        put = qm1.write(PUT_LIST, _key(0xF6, 1), b"MSG-A", version=7)
        console.print(f"\n[bold]QM1 puts MSG-A uncommitted[/] (key X'F6..'), seq {put.seq}")
        _show(console, qm1, PUT_LIST, "put list")
        got = qm2.move(Head(PUT_LIST, key=COMMITTED_COMPARATOR, compare=Compare.LE), 3)
        outcome = "nothing, the head is uncommitted" if got is None else repr(got)
        console.print(f"  QM2 tries a get: {outcome}", markup=False)
        console.print(f"  QM2 events so far: {qm2.events_nowait()}", markup=False)

        commit = qm1.move(ById(put.entry.entry_id), PUT_LIST, new_key=_key(0x04, 1), set_version=0)
        assert commit is not None
        console.print(f"\n[bold]QM1 commits[/]: moves MSG-A to its committed key, seq {commit.seq}")
        _show(console, qm1, PUT_LIST, "put list")
        for event in qm2.wait_events(timeout=1.0):
            console.print(
                f"  QM2 is woken: monitor {event.monitor_id} went {event.state.value} at "
                f"seq {event.seq}"
            )

        got = qm2.move(Head(PUT_LIST, key=COMMITTED_COMPARATOR, compare=Compare.LE), GET_LIST_QM1)
        assert got is not None
        console.print(f"\n[bold]QM2 gets MSG-A[/] into its get list {GET_LIST_QM1}, seq {got.seq}")
        _show(console, qm2, PUT_LIST, "put list")
        _show(console, qm2, GET_LIST_QM1, "get list")

        qm1.set_list_controls(PUT_LIST, limit=1)
        qm1.write(PUT_LIST, _key(0x04, 2), b"MSG-B")
        console.print("\n[bold]The put list gets a limit of 1[/] and holds MSG-B now")
        try:
            qm1.write(PUT_LIST, _key(0x04, 3), b"MSG-C")
        except ListFull as exc:
            console.print(f"  a third put is refused: {exc}")

        back = qm2.move(
            ById(got.entry.entry_id), PUT_LIST, ignore_limit=True, increment_version=True
        )
        assert back is not None
        console.print(
            f"\n[bold]QM2 backs out its get[/]: MSG-A returns to its put-time position "
            f"despite the limit, version {back.entry.version} (its backout count), seq {back.seq}"
        )
        _show(console, qm2, PUT_LIST, "put list")

        stats = qm1.statistics()
        console.print(
            f"\n[bold]Accounting[/]: {stats.entries}/{stats.max_entries} entries, "
            f"{stats.elements}/{stats.max_elements} elements, {stats.emcs}/{stats.max_emcs} "
            f"EMCs, {stats.users} users, last seq {stats.seq}"
        )
        qm1.disconnect()
        qm2.disconnect()
    finally:
        facility.delete(name, force=True)
        console.print(f"\nDeleted structure {name}.")
