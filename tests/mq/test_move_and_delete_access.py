"""The seam's ``move_and_delete_entries``: one request without a journal; with one, the
two requests it stands for, each noted as ``move_entries`` and ``delete_entries`` note
theirs (their kind and meanings), on both backends."""

from __future__ import annotations

from sharedq.cf import BulkMove, ById, CouplingFacility, ListMismatch, StructureParams
from sharedq.mq.journal import ChangeKind
from sharedq.seam import Journal, StructureAccess
from sharedq.seam.access import JournalFailure
from sharedq.seam.notes import EntryMeaning
from tests.mq.recording import Recording

UOW = b"U" * 16


def _failure(error: Exception, note: object) -> JournalFailure:
    return JournalFailure(str(error))


def _access(
    facility: CouplingFacility, journal: Journal, requests: list[str]
) -> tuple[StructureAccess, list[BulkMove], list[bytes]]:
    """An access to a fresh structure holding two puts to commit and two gets."""
    facility.create(StructureParams.for_capacity("SEAMMD", list_count=4, entries=50, elements=200))
    conn = facility.connect("SEAMMD", "U1")

    def faults(request: str, structure: str, before: bool) -> None:
        if before:
            requests.append(request)

    acc = StructureAccess(conn, 1, journal, _failure, faults)
    ids = [
        conn.write(n % 2, bytes([0xF6, n]) * 8, entry_id=bytes([1, n]) * 6).entry.entry_id
        for n in range(4)
    ]
    moves = [BulkMove(i, 1, new_key=bytes([4]) * 16, set_version=0, from_list=0) for i in ids[0::2]]
    return acc, moves, ids[1::2]


def _meanings(ids: list[bytes]) -> list[EntryMeaning]:
    return [EntryMeaning(i, "Q", True, None) for i in ids]


def test_without_a_journal_it_is_one_request(facility: CouplingFacility) -> None:
    requests: list[str] = []
    acc, moves, gets = _access(facility, Journal(), requests)
    result = acc.move_and_delete_entries(
        moves,
        gets,
        move_kind=ChangeKind.COMMIT_PUTS,
        delete_kind=ChangeKind.COMMIT_GETS,
        uow=UOW,
        move_meanings=(),
        delete_meanings=(),
    )
    assert requests == ["move_and_delete_entries"]
    assert result.complete and result.processed == 4 and len(result.seqs) == 4
    assert acc.conn.list_info(1).entries == 2 and acc.conn.statistics().entries == 2


def test_a_journal_hears_the_move_and_the_delete_it_stands_for(
    facility: CouplingFacility,
) -> None:
    journal = Recording()
    requests: list[str] = []
    acc, moves, gets = _access(facility, journal, requests)
    ghost = b"\x01" + b"\x09" * 11
    move_meanings = _meanings([m.entry_id for m in moves])
    delete_meanings = _meanings([*gets, ghost])
    result = acc.move_and_delete_entries(
        moves,
        [*gets, ghost],
        missing_ok=True,
        move_kind=ChangeKind.COMMIT_PUTS,
        delete_kind=ChangeKind.COMMIT_GETS,
        uow=UOW,
        move_meanings=move_meanings,
        delete_meanings=delete_meanings,
    )
    assert requests == ["move_entries", "delete_entries"]
    assert result.complete and (result.processed, result.requested) == (5, 5)
    assert result.missing == (ghost,) and len(result.seqs) == 4
    assert [(r["request"], r["kind"], r["uow"]) for r in journal.records] == [
        ("move_entries", ChangeKind.COMMIT_PUTS, UOW),
        ("delete_entries", ChangeKind.COMMIT_GETS, UOW),
    ]
    assert journal.records[0]["entries"] == move_meanings
    assert journal.records[1]["entries"] == delete_meanings
    assert journal.records[0]["seqs"] + journal.records[1]["seqs"] == list(result.seqs)


def test_with_a_journal_a_stopped_move_leaves_the_deletes_undone(
    facility: CouplingFacility,
) -> None:
    journal = Recording()
    requests: list[str] = []
    acc, moves, gets = _access(facility, journal, requests)
    acc.conn.move(ById(moves[1].entry_id), 3)  # moved away: the second move stops
    result = acc.move_and_delete_entries(
        moves,
        gets,
        move_kind=ChangeKind.COMMIT_PUTS,
        delete_kind=ChangeKind.COMMIT_GETS,
        uow=UOW,
        move_meanings=_meanings([m.entry_id for m in moves]),
        delete_meanings=_meanings(gets),
    )
    assert requests == ["move_entries"]
    assert (result.processed, result.requested, type(result.error)) == (1, 4, ListMismatch)
    assert acc.conn.list_info(3).entries == 1 and acc.conn.statistics().entries == 4
    assert [r["request"] for r in journal.records] == ["move_entries"]
