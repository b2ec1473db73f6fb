"""The operator's side of an incomplete log: see what is missing, accept it as lost.

A structure recovery that finds records missing from the log refuses and names them
(``LOG_INCOMPLETE``).  When the files cannot be put back, an operator checks the pair
(:func:`check_pair`, ``sharedq recovery check``) and accepts exactly the gaps found
(:func:`accept_loss`, ``sharedq recovery accept-loss``); the next recovery then goes on
and reports them as lost.  Nothing here changes a structure or the log.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sharedq.log import LogStream
from sharedq.log.continuity import Gap
from sharedq.recovery import log_check
from sharedq.recovery.errors import RecoveryReason, recovery_error
from sharedq.recovery.layout import PairLayout
from sharedq.recovery.structure_recovery import newest_image


@dataclass(frozen=True)
class PairCheck:
    """What a recovery of each of a pair's structures would find in the log now."""

    pair: str
    #: The SRDS a recovery would start from (``None``: the log alone).
    slot: int | None
    image_seq: int | None
    checks: dict[str, log_check.LogCheck]
    accepted: frozenset[tuple[str, int, int | None]]

    @property
    def gaps(self) -> list[Gap]:
        """Every gap any structure's recovery would meet (each once)."""
        seen: dict[tuple[str, int, int | None], Gap] = {}
        for result in self.checks.values():
            for gap in result.gaps:
                seen.setdefault(gap.key(), gap)
        return list(seen.values())

    @property
    def unaccepted(self) -> list[Gap]:
        return [gap for gap in self.gaps if gap.key() not in self.accepted]

    def lines(self) -> list[str]:
        start = "the log alone" if self.slot is None else f"SRDS{self.slot} (seq {self.image_seq})"
        out = [f"pair {self.pair}: recovery would start from {start}"]
        for structure, result in self.checks.items():
            report = log_check.report_of(result, [], 0)
            out.append(f"structure {structure}: {report.files} log files")
            out += [f"  skipped: {item}" for item in report.skipped]
            out += [f"  repaired: {item}" for item in report.repaired]
        for gap in self.gaps:
            mark = "accepted as lost" if gap.key() in self.accepted else "MISSING"
            out.append(f"{mark}: {gap}")
        if not self.gaps:
            out.append("every record a recovery needs is in the log")
        return out


def check_pair(root: str | os.PathLike[str], pair: str) -> PairCheck:
    """Check what a recovery of the pair under ``root`` would read, changing nothing."""
    layout = PairLayout(root, pair)  # type: ignore[arg-type]
    if not layout.log.exists():
        raise recovery_error(
            RecoveryReason.BAD_ARGUMENT, f"{layout.directory} holds no log of pair {pair}"
        )
    with LogStream.open_existing(layout.log) as stream:
        image, _, _ = newest_image(layout)
        structures = list(image.structures) if image is not None else [stream.structure]
        checks = {name: log_check.check(stream, name, image) for name in structures}
    return PairCheck(
        pair,
        None if image is None else image.slot,
        None if image is None else image.seq,
        checks,
        frozenset(log_check.accepted(layout)),
    )


def accept_loss(root: str | os.PathLike[str], pair: str, *, by: str = "operator") -> list[Gap]:
    """Accept as lost every gap a recovery of the pair would meet now; returns them.

    Only what the check finds now is accepted: a gap that appears later (another file
    lost) is refused again until it is accepted in turn.
    """
    found = check_pair(root, pair)
    layout = PairLayout(root, pair)  # type: ignore[arg-type]
    log_check.accept(layout, found.gaps, by)
    return found.gaps
