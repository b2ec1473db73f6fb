"""One self-contained HTML page: every job's summary and the charts.

The charts are embedded as base64 ``<img>`` data so that the page can be mailed or
copied alone; each image also links to its PNG file next to the page (relative
path), for those who want the file.  Every piece of text that comes from the log
(queue names, server names, summaries) is escaped: a queue may be called anything.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Chart:
    """A PNG file and its caption."""

    title: str
    path: Path
    caption: str = ""


@dataclass(frozen=True)
class Section:
    """One job's part of the page: its summary text, and an error if it failed."""

    job: str
    summary: str
    seconds: float = 0.0
    error: str | None = None


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; }
pre { background: #f6f6f6; padding: 0.8em; overflow-x: auto; font-size: 0.85em; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #555; }
img { max-width: 100%; border: 1px solid #ddd; }
.error { color: #a00; } .meta { color: #666; font-size: 0.9em; }
nav a { margin-right: 1em; }
"""


def _anchor(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower())


def render_report(
    title: str,
    sections: Sequence[Section],
    charts: Sequence[Chart],
    *,
    base_dir: Path | None = None,
    source: str = "",
    generated: dt.datetime | None = None,
) -> str:
    """The page as a string.  ``base_dir``: where the page will live (chart links are
    made relative to it)."""
    when = (generated or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{esc(title)}</h1>",
        f'<p class="meta">Generated {esc(when)}'
        + (f" from <code>{esc(source)}</code>" if source else "")
        + "</p>",
        "<nav>"
        + '<a href="#charts">charts</a>'
        + "".join(f'<a href="#{_anchor(s.job)}">{esc(s.job)}</a>' for s in sections)
        + "</nav>",
        '<h2 id="charts">Charts</h2>',
    ]
    for chart in charts:
        data = base64.b64encode(chart.path.read_bytes()).decode("ascii")
        link = os.path.relpath(chart.path, base_dir) if base_dir is not None else chart.path.name
        parts += [
            "<figure>",
            f'<a href="{esc(Path(link).as_posix())}">'
            f'<img src="data:image/png;base64,{data}" alt="{esc(chart.title)}" '
            f'data-file="{esc(chart.path.name)}"></a>',
            f"<figcaption><b>{esc(chart.title)}</b>"
            + (f": {esc(chart.caption)}" if chart.caption else "")
            + "</figcaption>",
            "</figure>",
        ]
    if not charts:
        parts.append("<p>No charts.</p>")
    for section in sections:
        parts.append(f'<h2 id="{_anchor(section.job)}">{esc(section.job)}</h2>')
        if section.error:
            parts.append(f'<p class="error">Failed: {esc(section.error)}</p>')
        else:
            parts.append(f'<p class="meta">{section.seconds:.1f} s</p>')
            parts.append(f"<pre>{esc(section.summary.rstrip())}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def write_report(
    path: str | Path,
    title: str,
    sections: Sequence[Section],
    charts: Sequence[Chart],
    *,
    source: str = "",
) -> Path:
    """Render the page and write it to ``path``; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    page = render_report(title, sections, charts, base_dir=target.parent, source=source)
    target.write_text(page, encoding="utf-8")
    return target
