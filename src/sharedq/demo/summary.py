"""The demo's closing report: read from the pipeline's tables, printed as tables.

The figures come from what the pipeline wrote (Parquet), not from the demo's own
counters, so that the balance sheet is the log's account of every message.

Two tables count puts, and count different things:

* the work table's ``puts`` are put *records*: every put a manager made, in a unit of
  work that committed or one that was backed out (by the application, or by a peer
  recovering a dead manager's units);
* the balance sheet's ``put`` are committed messages: what a unit of work committed
  (or a put out of syncpoint), the messages that can be gotten.

The line under the tables reconciles them: put records = committed + backed out +
uncommitted at the log's end.  Both count from the log's start, which is the
structure checkpoint the log was kept from; what was queued then is the balance
sheet's ``opening``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    #: Queue depth events, one per CorrelId (``events/groups``; empty if not run).
    events: list[dict[str, Any]] = field(default_factory=list)

    def total(self, column: str) -> int:
        return sum(int(row[column] or 0) for row in self.balance)

    @property
    def put_committed(self) -> int:
        return self.total("put_committed")

    @property
    def still_queued(self) -> int:
        return self.total("still_queued")

    @property
    def put_records(self) -> int:
        """Every put the log records (the work table's ``puts``), committed or not."""
        return sum(int(row["puts"] or 0) for row in self.servers)

    @property
    def puts_reconcile(self) -> bool:
        """Put records = committed puts + backed-out puts + puts uncommitted at the end."""
        return self.put_records == (
            self.put_committed + self.total("backed_out_puts") + self.total("uncommitted_puts")
        )

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

    groups = rows("events/groups") if (pipeline_output / "events" / "groups").exists() else []
    return DemoSummary(
        rows("stats/servers"),
        rows("track/latency"),
        rows("track/balance"),
        sorted(groups, key=lambda r: (r["time"], r["correl_id"])),
    )


def print_summary(
    console: Console,
    summary: DemoSummary,
    live_depths: dict[str, int],
    nothing_lost: bool,
    checkpoint_round: int | None = None,
) -> None:
    since = (
        f"the structure checkpoint of round {checkpoint_round}"
        if checkpoint_round is not None
        else "the structure checkpoint it was kept from"
    )
    console.print(
        f"The log starts at {since}: the figures below count from there, and what was "
        "queued then is the balance sheet's opening."
    )
    work = Table(
        title="work per manager (from the log)",
        caption="puts, gets: every put and get, in units committed or backed out; "
        "commits, backouts: units of work",
    )
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
    work.add_row(
        "total",
        str(summary.put_records),
        str(sum(int(r["gets"] or 0) for r in summary.servers)),
        str(sum(int(r["commits"] or 0) for r in summary.servers)),
        str(sum(int(r["backouts"] or 0) for r in summary.servers)),
        "",
        style="bold",
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
    if summary.events:
        print_events(console, summary.events)
    sheet = Table(
        title="balance sheet of committed messages",
        caption="opening + put = gotten + still queued + expired + cold-queued",
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
    backed_out, uncommitted = summary.total("backed_out_puts"), summary.total("uncommitted_puts")
    figures = (
        f"{summary.put_records} put records (the work table's puts)",
        f"{summary.put_committed} committed (the balance sheet's put)",
        f"{backed_out} backed out (by their unit, or by the peer that recovered the dead "
        "manager's units)",
        f"{uncommitted} uncommitted at the log's end",
    )
    if summary.puts_reconcile:
        console.print(f"puts: {figures[0]} = {' + '.join(figures[1:])}")
    else:
        console.print(f"puts: {', '.join(figures)}: these do not add up")
    verdict = (
        "[bold green]nothing lost[/bold green]: every committed message is accounted for"
        if nothing_lost
        else "[bold red]MISMATCH[/bold red]: the log's account and the queues disagree"
    )
    console.print(verdict)


def print_events(console: Console, groups: list[dict[str, Any]]) -> None:
    """The queue depth events, one row per CorrelId: who coordinated, who issued."""
    table = Table(
        title="queue depth events (from the log)",
        caption="n: event messages issued for the event (one CorrelId) by the managers "
        "listed; depth: what the coordinator counted; log: committed, in the log",
    )
    for column in ("time", "event", "queue", "coordinator", "n", "managers", "depth", "log"):
        numeric = column in ("n", "depth", "log")
        table.add_column(
            column, justify="right" if numeric else "left", no_wrap=column != "managers"
        )
    for row in groups:
        table.add_row(
            row["time"].strftime("%H:%M:%S.%f")[:-3] if row["time"] is not None else "?",
            str(row["event"]),
            str(row["queue"]),
            str(row["coordinator"] or "?"),
            str(row["messages"]),
            ", ".join(row["managers"] or []),
            _int(row["depth"]),
            _int(row["log_depth"]),
        )
    console.print(table)


def _int(value: Any) -> str:
    return "-" if value is None else str(value)


def _ms(value: Any) -> str:
    return "-" if value is None else f"{float(value):.1f}"
