"""A structure pair is one unit: the overflow structure is allocated with the primary's
layout, logged to the pair's one log stream, checkpointed to the pair's SRDS, recovered
and copied with it (no queue moves there yet: overflow processing is issue 18); the
EMHQ pair has a log stream, SRDS pair and checkpoint files of its own."""

from __future__ import annotations

from pathlib import Path

from sharedq.cf import CouplingFacility
from sharedq.cqs import Kind, StructurePair, structure_params
from sharedq.log import LogStream, RecordType
from sharedq.recovery import PairLayout, RecoverySettings, slot_status

from .conftest import EMHQ, MSGQ, MakeCQS
from .helpers import TRANA, where

OVERFLOW = "OVFL01"
EMHQ_OVERFLOW = "EOVFL01"


def records(root: Path, pair: str) -> list:  # type: ignore[type-arg]
    layout = PairLayout(root, pair)
    return list(LogStream(layout.log, name=f"{pair}.LOG", structure=pair).records())


def test_a_missing_overflow_structure_is_allocated_with_the_primarys_layout(
    facility: CouplingFacility, make_cqs: MakeCQS
) -> None:
    assert not facility.exists(OVERFLOW)
    make_cqs("IMSA", msgq=StructurePair(MSGQ, OVERFLOW))
    with (
        facility.connect(OVERFLOW, "AUDITOR") as overflow,
        facility.connect(MSGQ, "AUDITOR") as primary,
    ):
        mine, theirs = overflow.statistics(), primary.statistics()
    assert (mine.list_count, mine.element_size) == (theirs.list_count, theirs.element_size)
    assert mine.max_entries == theirs.max_entries
    assert [u.name for u in facility.connect(OVERFLOW, "LOOK").users() if u.name == "CQSIMSA"]


def test_both_pairs_each_with_its_log_srds_and_checkpoint_files(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    root = tmp_path / "recovery"
    settings = RecoverySettings(root, strchkpt=None)
    cqs = make_cqs(
        "IMSA",
        msgq=StructurePair(MSGQ, OVERFLOW),
        emhq=StructurePair(EMHQ, EMHQ_OVERFLOW, Kind.EMHQ),
        recovery=settings,
    )
    for primary, overflow in ((MSGQ, OVERFLOW), (EMHQ, EMHQ_OVERFLOW)):
        initialised = {
            r.structure
            for r in records(root, primary)
            if r.type == RecordType.STRUCTURE_INITIALIZATION
        }
        assert initialised == {primary, overflow}  # both, to the pair's one stream
    cqs.put(TRANA, b"full function")
    cqs.put(TRANA, b"fast path", kind=Kind.EMHQ)
    cqs.checkpoint("structure")
    cqs.disconnect()
    facility.delete(OVERFLOW, force=True)  # the overflow structure alone is lost
    facility.delete(EMHQ, force=True)  # and the EMHQ primary
    again = make_cqs(
        "IMSA",
        msgq=StructurePair(MSGQ, OVERFLOW),
        emhq=StructurePair(EMHQ, EMHQ_OVERFLOW, Kind.EMHQ),
        recovery=settings,
    )
    assert again.recovery_log is not None
    assert sorted(again.recovery_log.rebuilt()) == sorted([OVERFLOW, EMHQ])
    assert [m.body for m in again.browse(TRANA, kind=Kind.EMHQ)] == [b"fast path"]
    assert [m.body for m in again.browse(TRANA)] == [b"full function"]
    again.disconnect()

    for primary, overflow in ((MSGQ, OVERFLOW), (EMHQ, EMHQ_OVERFLOW)):
        layout = PairLayout(root, primary)
        assert layout.checkpoint_file("CQSIMSA").exists()
        assert any(s.valid for s in slot_status(layout.srds))
        found = records(root, primary)
        by_type: dict[RecordType, set[str]] = {}
        for record in found:
            by_type.setdefault(RecordType(record.type), set()).add(record.structure)
        # One stream per pair, with the records of both its structures.
        assert by_type[RecordType.STRUCTURE_CHECKPOINT] & {primary, overflow}
        assert RecordType.SYSTEM_CHECKPOINT in by_type
        assert RecordType.SHUTDOWN in by_type
        assert by_type[RecordType.REBUILD] & {primary, overflow}
        other = EMHQ if primary == MSGQ else MSGQ
        assert other not in {r.structure for r in found}


def test_the_overflow_structure_is_copied_with_the_pair(
    facility: CouplingFacility, make_cqs: MakeCQS, tmp_path: Path
) -> None:
    cqs = make_cqs(
        "IMSA",
        msgq=StructurePair(MSGQ, OVERFLOW),
        recovery=RecoverySettings(tmp_path / "recovery", strchkpt=None),
    )
    cqs.put(TRANA, b"stays")
    assert cqs.recovery_log is not None
    result = cqs.recovery_log.pairs[MSGQ].copy_structure(structure_params(OVERFLOW, messages=800))
    assert result is not None
    with facility.connect(OVERFLOW, "AUDITOR") as copied:
        assert copied.statistics().max_entries >= 800
    cqs.put(TRANA, b"after the copy")
    assert [m.body for m in cqs.browse(TRANA)] == [b"stays", b"after the copy"]
    assert len(where(facility, MSGQ)["ready"]) == 2
