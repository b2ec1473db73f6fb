"""The demo's closing report: read from the pipeline's tables, printed as three tables.

The figures come from what the pipeline wrote (Parquet), not from the demo's own
counters, so that the balance sheet is the log's account of every message.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from rich.console import Console
from rich.table import Table

from sharedq.pipeline.transforms.tracking import BALANCE_SHEET as _BALANCE_COLUMNS


@dataclass(frozen=True)
class DemoSummary:
    """Work per manager, latency percentiles, and the balance sheet, as the pipeline found them."""

    servers: list[dict[str, Any]]
    latency: list[dict[str, Any]]
    balance: list[dict[str, Any]]

    def total(self, column: str) -> int:
        return sum(int(row[column] or 0) for row in self.balance)

    @property
    def put_committed(self) -> int:
        return self.total("put_committed")

    @property
    def still_queued(self) -> int:
        return self.total("still_queued")

    @property
    def balanced(self) -> bool:
        """Opening + put = gotten and committed + still queued + expired + cold-queued.

        The opening balance is what the oldest SRDS the log continues from held: the
        log before it was deleted once two checkpoints covered it.
        """
        came = self.total("opening") + self.put_committed
        went = sum(self.total(c) for c in _BALANCE_COLUMNS[2:])
        return came == went and all(bool(r["balanced"]) for r in self.balance)


def read_summary(pipeline_output: Path) -> DemoSummary:
    def rows(relative: str) -> list[dict[str, Any]]:
        table = pq.read_table(pipeline_output / relative)
        return list(table.to_pylist())

    return DemoSummary(rows("stats/servers"), rows("track/latency"), rows("track/balance"))


def print_summary(
    console: Console, summary: DemoSummary, live_depths: dict[str, int], nothing_lost: bool
) -> None:
    work = Table(title="work per manager (from the log)")
    for column in ("manager", "puts", "gets", "commits", "backouts", "share of gets"):
        work.add_column(column, justify="left" if column == "manager" else "right")
    for row in sorted(summary.servers, key=lambda r: str(r["server"])):
        work.add_row(
            str(row["server"]),
            str(row["puts"]),
            str(row["gets"]),
            str(row["commits"]),
            str(row["backouts"]),
            f"{100 * float(row['share_of_gets'] or 0):.1f} %",
        )
    console.print(work)
    latency = Table(title="latency, ms (put to get / put to commit)")
    for column in ("scope", "messages", "p50", "p90", "p99"):
        latency.add_column(column, justify="left" if column == "scope" else "right")
    for row in sorted(summary.latency, key=lambda r: (r["scope"] != "all", r["scope"], r["name"])):
        latency.add_row(
            "all" if row["scope"] == "all" else f"{row['scope']} {row['name']}",
            str(row["count"]),
            f"{_ms(row['get_p50_ms'])} / {_ms(row['commit_p50_ms'])}",
            f"{_ms(row['get_p90_ms'])} / {_ms(row['commit_p90_ms'])}",
            f"{_ms(row['get_p99_ms'])} / {_ms(row['commit_p99_ms'])}",
        )
    console.print(latency)
    sheet = Table(
        title="balance sheet: opening + put = gotten + still queued + expired + cold-queued"
    )
    for column in ("queue", "opening", "put", "gotten", "queued", "expired", "cold", "live depth"):
        sheet.add_column(column, justify="left" if column == "queue" else "right")
    for row in sorted(summary.balance, key=lambda r: str(r["queue"])):
        sheet.add_row(
            str(row["queue"]),
            *(str(row[c]) for c in _BALANCE_COLUMNS),
            str(live_depths.get(str(row["queue"]), "")),
        )
    sheet.add_row(
        "total",
        *(str(summary.total(c)) for c in _BALANCE_COLUMNS),
        str(sum(live_depths.values())),
        style="bold",
    )
    console.print(sheet)
    verdict = (
        "[bold green]nothing lost[/bold green]: every committed message is accounted for"
        if nothing_lost
        else "[bold red]MISMATCH[/bold red]: the log's account and the queues disagree"
    )
    console.print(verdict)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"
