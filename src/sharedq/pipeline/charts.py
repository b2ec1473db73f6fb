"""PNG charts of the jobs' tables: queue depth over time, latency, work per server, usage.

Each function takes the pandas DataFrame of one job table (small: one row per queue
and interval, per message, per server) and writes one PNG.  They draw on a bare
``matplotlib.figure.Figure`` with the Agg canvas, never through ``pyplot``, so that
no display is needed, no global figure state is shared between threads, and the
backend a user configured does not matter.  An empty table still gives a chart (with
"no data" on it), so that a report always has every picture it names.

Column contracts (written by the ``stats``, ``track`` and ``capacity`` jobs):

- depth: ``queue, interval_start, depth`` (``stats/queues``);
- latency: ``put_to_get_ms, put_to_commit_ms`` (``track/messages``), or, without the
  messages, the percentiles of ``track/latency`` (``scope, name, get_p50_ms, ...``);
- work: ``server, puts, gets, commits, backouts`` (``stats/servers``);
- usage: ``structure, time, entries, elements`` (``capacity/usage``);
- events: ``queue, time, depth`` (``events/depth``) and ``queue, time, event,
  coordinator, log_depth`` and optionally ``messages`` (``events/groups``);
- ims: ``cqs, local, global, serial`` (``ims/inputs``) and ``scope, name, p50_ms,
  p90_ms, p99_ms`` (``ims/latency_pct``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

if TYPE_CHECKING:
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]
    from matplotlib.axes import Axes

#: Queues drawn one line each in the depth chart; the others are summed as "others".
MAX_DEPTH_LINES = 8
#: Marker and colour of each depth event type in the events chart.
EVENT_MARKERS = {"high": ("^", "tab:red"), "low": ("v", "tab:blue"), "full": ("X", "black")}
#: Events up to this many are labelled with their coordinator.
MAX_EVENT_LABELS = 24
_SIZE = (8.0, 4.2)
_DPI = 100


def _figure() -> tuple[Figure, Axes]:
    figure = Figure(figsize=_SIZE, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def _save(figure: Figure, path: str | Path) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(target, format="png")
    return target


def _no_data(axes: Axes, what: str) -> None:
    axes.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=axes.transAxes)
    axes.set_xticks([])
    axes.set_yticks([])


def _times(column: pd.Series) -> pd.Series:
    """Timestamps as naive UTC (matplotlib's date axis), whatever zone Parquet gave."""
    import pandas as pd  # type: ignore[import-untyped, unused-ignore]

    values = pd.to_datetime(column, utc=True)
    return values.dt.tz_localize(None)


def time_axis(axes: Axes) -> None:
    """A time axis readable at any span: concise tick labels (``39.6`` seconds,
    ``05:50``, ``Jan-02``) and, once at the axis' end, the date and time they lie in
    (``2026-Nov-24 05:50``), instead of a full timestamp on every tick."""
    import matplotlib.dates as mdates

    # matplotlib's date classes are not annotated: called through Any-typed names.
    locator_class: Callable[..., Any] = mdates.AutoDateLocator
    formatter_class: Callable[..., Any] = mdates.ConciseDateFormatter
    locator = locator_class(minticks=4, maxticks=8)
    axes.xaxis.set_major_locator(locator)
    axes.xaxis.set_major_formatter(formatter_class(locator))
    axes.set_xlabel("time (UTC)")


def depth_chart(queues: pd.DataFrame, path: str | Path) -> Path:
    """Queue depth at the end of each interval, one line per queue (the deepest first).

    Why: a queue whose depth climbs and stays up is a consumer that stopped; a
    structure fills with it.  Beyond :data:`MAX_DEPTH_LINES` queues the rest are summed.
    """
    figure, axes = _figure()
    axes.set_title("Queue depth over time")
    frame = queues.dropna(subset=["interval_start"]) if len(queues) else queues
    if frame is None or len(frame) == 0:
        _no_data(axes, "queue intervals")
        return _save(figure, path)
    frame = frame.assign(interval_start=_times(frame["interval_start"]))
    frame = frame.assign(queue=frame["queue"].astype(str))
    table = frame.pivot_table(
        index="interval_start", columns="queue", values="depth", aggfunc="last"
    ).sort_index()
    table = table.ffill().fillna(0)
    order = table.max().sort_values(ascending=False).index.tolist()
    shown, rest = order[:MAX_DEPTH_LINES], order[MAX_DEPTH_LINES:]
    for queue in shown:
        axes.step(table.index, table[queue], where="post", label=queue)
    if rest:
        axes.step(table.index, table[rest].sum(axis=1), where="post", label="others", ls="--")
    time_axis(axes)
    axes.set_ylabel("messages on the queue")
    axes.legend(fontsize="small", loc="upper left")
    return _save(figure, path)


def latency_chart(
    path: str | Path,
    messages: pd.DataFrame | None = None,
    latency: pd.DataFrame | None = None,
) -> Path:
    """How long messages waited: histograms of put-to-get and put-to-commit times.

    Why: the percentiles in the summary hide the shape; a long tail (messages stuck
    behind a slow server, backouts) shows here.  From ``track/messages`` when given;
    otherwise bars of the per-queue percentiles of ``track/latency``.
    """
    import numpy as np

    figure, axes = _figure()
    axes.set_title("Latency distribution")
    columns = [("put_to_get_ms", "put to get"), ("put_to_commit_ms", "put to commit")]
    if messages is not None and len(messages):
        series = [
            (label, messages[name].dropna().astype(float).to_numpy())
            for name, label in columns
            if name in messages
        ]
        series = [(label, values) for label, values in series if len(values)]
        if series:
            low = max(min(float(v.min()) for _, v in series), 0.01)
            high = max(max(float(v.max()) for _, v in series), low * 10)
            bins = [float(b) for b in np.geomspace(low, high, 40)]
            for label, values in series:
                axes.hist(np.clip(values, low, high), bins=bins, alpha=0.6, label=label)
            axes.set_xscale("log")
            axes.set_xlabel("milliseconds (log scale)")
            axes.set_ylabel("messages")
            axes.legend(fontsize="small")
            return _save(figure, path)
    if latency is not None and len(latency):
        per_queue = latency[latency["scope"] == "queue"] if "scope" in latency else latency
        if len(per_queue):
            names = per_queue["name"].astype(str).tolist()
            x = np.arange(len(names))
            for offset, column in zip(
                (-0.25, 0.0, 0.25), ("get_p50_ms", "get_p90_ms", "get_p99_ms"), strict=True
            ):
                values = per_queue[column].astype(float).fillna(0).to_numpy()
                axes.bar(x + offset, values, width=0.25, label=column.removeprefix("get_"))
            axes.set_xticks(x, names, rotation=30, ha="right", fontsize="small")
            axes.set_ylabel("put to get, ms")
            axes.legend(fontsize="small")
            return _save(figure, path)
    _no_data(axes, "latencies")
    return _save(figure, path)


def work_chart(servers: pd.DataFrame, path: str | Path) -> Path:
    """Puts, gets, commits and backouts per server, side by side.

    Why: shared queues balance work by whoever asks first; a server doing little, or
    backing out much, stands out against its peers.
    """
    import numpy as np

    figure, axes = _figure()
    axes.set_title("Work per server")
    if len(servers) == 0:
        _no_data(axes, "servers")
        return _save(figure, path)
    frame = servers.sort_values("server")
    names = frame["server"].astype(str).tolist()
    kinds = [k for k in ("puts", "gets", "commits", "backouts") if k in frame]
    width = 0.8 / max(len(kinds), 1)
    x = np.arange(len(names))
    for i, kind in enumerate(kinds):
        values = frame[kind].fillna(0).astype(float).to_numpy()
        axes.bar(x + (i - (len(kinds) - 1) / 2) * width, values, width=width, label=kind)
    axes.set_xticks(x, names)
    axes.set_ylabel("operations")
    axes.legend(fontsize="small")
    return _save(figure, path)


def usage_chart(
    usage: pd.DataFrame, path: str | Path, overflow: pd.DataFrame | None = None
) -> Path:
    """List entries and data elements in use over time, per structure, with each pair's
    overflow mode intervals shaded (``overflow``: ``structure, entered, left``, the
    ``capacity/overflow_modes`` table; an open interval runs to the end).

    Why: the capacity recommendation rests on these peaks; the chart shows whether a
    peak was a burst or a plateau, and where overflow moved queues out of a primary
    (its own line drops there while its overflow structure's rises).
    """
    figure, axes = _figure()
    axes.set_title("Structure usage over time")
    if len(usage) == 0:
        _no_data(axes, "structure changes")
        return _save(figure, path)
    frame = usage.assign(time=_times(usage["time"])).sort_values(["structure", "seq"])
    for structure, rows in frame.groupby("structure", sort=True):
        axes.step(rows["time"], rows["entries"], where="post", label=f"{structure} entries")
        axes.step(
            rows["time"], rows["elements"], where="post", ls="--", label=f"{structure} elements"
        )
    if overflow is not None and len(overflow):
        end = frame["time"].max()
        spans = zip(_times(overflow["entered"]), _times(overflow["left"]), strict=True)
        for i, (start, stop) in enumerate(spans):  # NaT (stop != stop): open to the end
            stop = max(end, start) if stop is None or stop != stop else max(stop, start)
            label = "overflow mode" if i == 0 else None
            axes.axvspan(start, stop, color="0.5", alpha=0.2, hatch="//", label=label)
            axes.axvline(start, color="0.3", lw=1)
    time_axis(axes)
    axes.set_ylabel("in use")
    axes.legend(fontsize="small", loc="upper left")
    return _save(figure, path)


def events_chart(depth: pd.DataFrame, groups: pd.DataFrame, path: str | Path) -> Path:
    """Committed depth of each queue that had depth events, with every event marked
    (High ▲, Low ▼, Full ✕) where it happened on the line, labelled with its coordinator
    and, in brackets, the event messages issued for it (``messages``, when given); with
    several queues, the queue's name first.

    Why: a High followed soon by a Low is a queue that a burst filled and the
    consumers drained; High after High with no Low between cannot happen (the event
    toggles itself off), so the markers also check the toggling.  One marker per
    event (CorrelId), however many managers issued a message for it.
    """
    figure, axes = _figure()
    axes.set_title("Queue depth events")
    if len(groups) == 0:
        _no_data(axes, "depth events")
        return _save(figure, path)
    marks = groups.assign(time=_times(groups["time"]), queue=groups["queue"].astype(str))
    queues = sorted(marks["queue"].unique().tolist())[:MAX_DEPTH_LINES]
    lines = depth.assign(queue=depth["queue"].astype(str)) if len(depth) else depth
    for queue in queues:
        rows = lines[lines["queue"] == queue] if len(lines) else lines
        if len(rows):
            rows = rows.assign(time=_times(rows["time"])).sort_values(["time"])
            axes.step(rows["time"], rows["depth"], where="post", label=queue)
    for event, (marker, colour) in EVENT_MARKERS.items():
        chosen = marks[(marks["event"] == event) & marks["queue"].isin(queues)]
        if len(chosen):
            axes.scatter(
                chosen["time"],
                chosen["log_depth"].fillna(0).astype(float),
                marker=marker,
                color=colour,
                s=60,
                zorder=3,
                label=f"{event} event",
            )
    if len(marks) <= MAX_EVENT_LABELS:
        for row in marks[marks["queue"].isin(queues)].itertuples():
            issued = f" ({row.messages})" if "messages" in marks else ""
            where = f"{row.queue}: " if len(queues) > 1 else ""
            axes.annotate(
                f"{where}{row.coordinator or '?'}{issued}",
                (row.time, float(row.log_depth or 0)),
                textcoords="offset points",
                xytext=(4, 6),
                fontsize="x-small",
            )
    time_axis(axes)
    axes.set_ylabel("committed messages on the queue")
    axes.legend(fontsize="small", loc="upper left")
    return _save(figure, path)


def ims_chart(inputs: pd.DataFrame, latency: pd.DataFrame, path: str | Path) -> Path:
    """Full-function inputs per IMS, stacked local / global / serial (``ims/inputs``),
    and the input-to-reply latency percentiles per IMS (``ims/latency_pct``, scope
    ``cqs``) beside them.

    Why: local processing saves a put, a notification and a read; the share each IMS
    got shows how often a region was waiting, and the latency what it cost or saved.
    """
    import numpy as np

    figure = Figure(figsize=_SIZE, dpi=_DPI, layout="constrained")
    FigureCanvasAgg(figure)
    left, right = figure.subplots(1, 2)
    left.set_title("IMS inputs: local vs global")
    right.set_title("Input to reply, ms")
    if len(inputs) == 0:
        _no_data(left, "IMS inputs")
    else:
        frame = inputs.sort_values("cqs")
        x = np.arange(len(frame))
        bottom = np.zeros(len(frame))
        for column in ("local", "global", "serial"):
            values = frame[column].fillna(0).astype(float).to_numpy()
            left.bar(x, values, bottom=bottom, label=column)
            bottom += values
        left.set_xticks(x, frame["cqs"].astype(str).tolist())
        left.set_ylabel("inputs")
        left.legend(fontsize="small")
    per = latency[latency["scope"] == "cqs"] if "scope" in latency else latency
    if len(per) == 0:
        _no_data(right, "latencies")
    else:
        per = per.sort_values("name")
        x = np.arange(len(per))
        for offset, column in zip((-0.25, 0.0, 0.25), ("p50_ms", "p90_ms", "p99_ms"), strict=True):
            values = per[column].astype(float).fillna(0).to_numpy()
            right.bar(x + offset, values, width=0.25, label=column.removesuffix("_ms"))
        right.set_xticks(x, per["name"].astype(str).tolist())
        right.legend(fontsize="small")
    return _save(figure, path)
