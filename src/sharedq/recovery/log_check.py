"""Before a recovery changes anything: are the records it needs all in the log?

A structure rebuilt from an SRDS needs every change logged after the SRDS's copy:
for each writer, every lsn after the position the SRDS recorded for it, up to the
writer's last (``sharedq.log.continuity``).  Recovery plans its read of the log, checks
that, and refuses (``LOG_INCOMPLETE``, naming each writer, range and file) before it
allocates anything when records are missing: a rebuild without them would look whole
and be wrong.  The same check serves the Spark pipeline's ``recover`` job and the
operator's ``sharedq recovery check``.

An operator who cannot get the records back (restore the file, repair from the other
copy of a dual log) may accept their loss: ``sharedq recovery accept-loss`` records
the exact gaps in the pair's ``ACCEPTED_LOSS`` state file, and a recovery whose gaps
are all accepted goes on, lists them in its report as lost, and passes over the
changes that cannot be applied without them (each also listed).  Once a structure
checkpoint is taken after it, the loss lies before every SRDS and no longer matters.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from sharedq.clock import SYSTEM_CLOCK, Clock
from sharedq.log import LogRecord, LogStream, ReadFilter
from sharedq.log.continuity import Coverage, Gap
from sharedq.log.reader import ReadPlan
from sharedq.recovery.errors import RecoveryError, RecoveryReason, recovery_error
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.srds import SrdsImage

#: Gaps named in full in a refusal; the rest are counted.
_NAMED = 8


@dataclass
class LogReport:
    """What a recovery read of the log, what it did not and why, and what was lost.

    ``skipped``: what was not read and loses nothing (damage before the SRDS, a torn
    last frame never acknowledged, records retention deleted below the SRDS);
    ``repaired``: damage the other copy of a dual log made good; ``lost``: gaps an
    operator accepted; ``passed_over``: changes replay could not apply without them.
    """

    files: int = 0
    records: int = 0
    from_seq: int | None = None
    skipped: list[str] = field(default_factory=list)
    repaired: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    passed_over: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """Nothing was lost and nothing passed over."""
        return not self.lost and not self.passed_over

    def lines(self) -> list[str]:
        """The report as lines for a log or a terminal."""
        start = "the start" if self.from_seq is None else f"seq {self.from_seq}"
        out = [f"read {self.files} log files from {start}: {self.records} records applied"]
        out += [f"skipped: {item}" for item in self.skipped]
        out += [f"repaired: {item}" for item in self.repaired]
        out += [f"LOST (accepted): {item}" for item in self.lost]
        out += [f"passed over: {item}" for item in self.passed_over]
        return out

    def note_conflict(self, record: LogRecord, why: str) -> None:
        self.passed_over.append(
            f"{record.change_op.name.lower()} at seq {record.seq} (writer {record.writer}, "
            f"lsn {record.lsn}): {why}"
        )


@dataclass
class LogCheck:
    """A planned read of what one structure's recovery needs, and what is missing."""

    structure: str
    plan: ReadPlan
    coverage: Coverage
    from_seq: int | None

    @property
    def gaps(self) -> list[Gap]:
        return self.coverage.gaps


def check(stream: LogStream, structure: str, image: SrdsImage | None) -> LogCheck:
    """Plan the read recovery of ``structure`` from ``image`` (or from the log alone)
    makes, and check that every record it needs is there (reads every data set it
    will read, every page checked)."""
    from_seq = image.structures[structure].seq + 1 if image is not None else None
    plan = stream.plan(ReadFilter(structures={structure}, from_seq=from_seq))
    # Without an SRDS (or one from before SRDS recorded positions), every lsn from 1.
    starts = image.positions if image is not None else None
    coverage = plan.check(starts=starts, needed_seq={structure: from_seq or 0})
    return LogCheck(structure, plan, coverage, from_seq)


def accepted(layout: PairLayout) -> set[tuple[str, int, int | None]]:
    """The gaps an operator accepted for the pair, by ``(writer, first, last)``."""
    body = layout.read_json(layout.accepted_loss_file) or {}
    return {(str(w), int(a), None if b is None else int(b)) for w, a, b, *_ in body.get("gaps", [])}


def accept(
    layout: PairLayout, gaps: Iterable[Gap], by: str, *, clock: Clock = SYSTEM_CLOCK
) -> list[Gap]:
    """Record ``gaps`` as accepted losses of the pair (kept with those accepted before),
    each with ``by`` and the time on ``clock``."""
    body = layout.read_json(layout.accepted_loss_file) or {"gaps": []}
    known = {tuple(item[:3]) for item in body["gaps"]}
    added = []
    for gap in gaps:
        key = [gap.writer, gap.first_lsn, gap.last_lsn]
        if tuple(key) not in known:
            body["gaps"].append([*key, gap.why, by, clock.now_us()])
            added.append(gap)
    layout.write_json(layout.accepted_loss_file, body)
    return added


def unaccepted(layout: PairLayout, gaps: list[Gap]) -> list[Gap]:
    ok = accepted(layout) if gaps else set()
    return [gap for gap in gaps if gap.key() not in ok]


def refusal(layout: PairLayout, structure: str, gaps: list[Gap], what: str) -> RecoveryError:
    """``LOG_INCOMPLETE`` naming every missing range (the first few in full)."""
    named = "; ".join(str(g) for g in gaps[:_NAMED])
    more = f"; and {len(gaps) - _NAMED} more" if len(gaps) > _NAMED else ""
    return recovery_error(
        RecoveryReason.LOG_INCOMPLETE,
        f"{what} of structure {structure} refused: records it needs are missing from the "
        f"log of pair {layout.pair}: {named}{more}.  Nothing was changed.  Put the missing "
        "files back (or the other copy of a dual log), or accept the loss with "
        f"`sharedq recovery accept-loss --root {layout.root} --pair {layout.pair}`",
        structure=structure,
        gaps=[str(g) for g in gaps],
    )


def report_of(result: LogCheck, lost: list[Gap], records: int) -> LogReport:
    coverage = result.coverage
    return LogReport(
        files=coverage.files,
        records=records,
        from_seq=result.from_seq,
        skipped=list(coverage.skipped),
        repaired=list(coverage.repaired),
        lost=[str(g) for g in lost],
    )
