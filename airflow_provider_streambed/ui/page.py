"""HTML of the Streambed page: pure functions of the records the app reads (escaped, no scripts)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import quote

from airflow_provider_streambed.ledger.runs import RunRecord

#: Where Airflow's api-server mounts the page's app.
URL_PREFIX = "/streambed"
#: Width and height of the freshness plot, in SVG units.
PLOT_WIDTH, PLOT_HEIGHT = 640, 200

STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5rem; color: #1f2937; }
table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; }
th, td { border-bottom: 1px solid #e5e7eb; padding: 0.3rem 0.8rem; text-align: left; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.pinned { font-weight: 600; }
tr.highlight { background: #fef3c7; }
"""


@dataclass(frozen=True, slots=True)
class CutRow:
    """One cut as the page shows it; ``lag_seconds`` is its freshness: from the commit of the
    newest source transaction it holds (else its run's pin) to its publish."""

    cut_id: int
    watermark: str
    published_at: dt.datetime
    run_key: str
    rows: dict[str, int]
    pinned: bool
    lag_seconds: float | None


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """A group in the index: where its ledger is and its newest cut."""

    name: str
    conn_id: str
    last_cut: int | None
    last_published_at: dt.datetime | None


def _document(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}</body></html>")


def group_href(conn_id: str, group: str) -> str:
    """The page of a group, relative to the app's root."""
    return f"groups/{quote(conn_id, safe='')}/{quote(group, safe='')}"


def page_url(conn_id: str, group: str, cut: int | None = None) -> str:
    """The absolute path of a group's page on the api-server (of one cut, when given)."""
    return f"{URL_PREFIX}/{group_href(conn_id, group)}" + (f"?cut={cut}" if cut is not None else "")


def render_index(groups: Sequence[GroupSummary], problems: Sequence[str] = (), unlisted: str | None = None) -> str:
    """The list of groups, with their newest cut; ``problems`` (a connection that failed) are shown
    too, and ``unlisted``: why some catalog connections may be missing and how to list them."""
    rows = "".join(
        f"<tr><td><a href='{escape(group_href(g.conn_id, g.name))}'>{escape(g.name)}</a></td>"
        f"<td>{escape(g.conn_id)}</td><td class='num'>{g.last_cut if g.last_cut is not None else '-'}</td>"
        f"<td>{escape(g.last_published_at.isoformat(timespec='seconds')) if g.last_published_at else '-'}</td></tr>"
        for g in groups
    )
    table = ("<table><tr><th>group</th><th>catalog connection</th><th>last cut</th><th>published at</th></tr>"
             f"{rows}</table>") if groups else "<p>No group has published a cut in the configured catalogs.</p>"
    notes = "".join(f"<p class='problem'>{escape(problem)}</p>" for problem in problems)
    if unlisted:
        notes += f"<p class='unlisted'>{escape(unlisted)}</p>"
    return _document("Streambed", f"<h1>Streambed groups</h1>{table}{notes}")


def render_error(status: int, message: str) -> str:
    """An error as a page of the Streambed page's look: the status, what went wrong, the way back."""
    return _document(f"Streambed: {status}", f"<p><a href='{URL_PREFIX}/'>all groups</a></p>"
                     f"<h1>{status}</h1><p class='problem'>{escape(message)}</p>")


def render_group(
    group: str, conn_id: str, cuts: Sequence[CutRow], last_run: RunRecord | None = None, highlight: int | None = None
) -> str:
    """A group's last capture (``last_run``), its cuts, newest first, and its freshness plot;
    ``highlight`` marks one cut."""
    members = sorted({name for cut in cuts for name in cut.rows})
    head = "".join(f"<th>{escape(name)} rows</th>" for name in members)
    rows = "".join(_cut_row(cut, members, cut.cut_id == highlight)
                   for cut in sorted(cuts, key=lambda c: c.cut_id, reverse=True))
    table = (f"<table><tr><th>cut</th><th>W</th><th>published at</th><th>lag</th><th>run</th>{head}<th></th></tr>"
             f"{rows}</table>"
             if cuts else "<p>No cut yet.</p>")
    body = (f"<p><a href='../../'>all groups</a></p><h1>Group {escape(group)}</h1>"
            f"<p>catalog connection {escape(conn_id)}</p>{last_capture(last_run)}"
            f"<h2>Freshness</h2>{freshness_plot(cuts)}"
            f"<h2>Cuts</h2>{table}")
    return _document(f"Streambed: {group}", body)


def last_capture(run: RunRecord | None) -> str:
    """The newest run's pin and the holdback figures of its capture: the transactions open longer
    than the capture's threshold when W was pinned, which this cut could not hold."""
    if run is None:
        return ""
    if run.holdback is None:
        figures = "<td>-</td><td>-</td>"
    else:
        count, oldest = run.holdback
        figures = f"<td class='num'>{count}</td><td class='num'>{oldest:.1f} s</td>"
    return ("<h2>Last capture</h2><table id='last-capture'><tr><th>run</th><th>pinned at</th><th>W</th><th>state</th>"
            "<th>held back</th><th>oldest held back</th></tr>"
            f"<tr><td>{escape(run.run_key)}</td><td>{escape(run.pinned_at.isoformat(timespec='seconds'))}</td>"
            f"<td>{escape(str(run.watermark))}</td><td>{escape(run.state.value)}</td>{figures}</tr></table>")


def _cut_row(cut: CutRow, members: Sequence[str], highlight: bool) -> str:
    marked = " class='highlight'" if highlight else ""
    pinned = "<td class='pinned'>pinned</td>" if cut.pinned else "<td></td>"
    counts = "".join(f"<td class='num'>{cut.rows.get(name, -1)}</td>" for name in members)
    lag = "-" if cut.lag_seconds is None else f"{cut.lag_seconds:.1f} s"
    return (f"<tr id='cut-{cut.cut_id}'{marked}><td class='num'>{cut.cut_id}</td><td>{escape(cut.watermark)}</td>"
            f"<td>{escape(cut.published_at.isoformat(timespec='seconds'))}</td><td class='num'>{lag}</td>"
            f"<td>{escape(cut.run_key)}</td>"
            f"{counts}{pinned}</tr>")


def freshness_plot(cuts: Sequence[CutRow]) -> str:
    """An SVG line of each cut's lag (seconds from the commit of the newest source transaction it
    holds, else its run's pin, to its publish) over publish time."""
    points = sorted((cut.published_at, cut.lag_seconds) for cut in cuts if cut.lag_seconds is not None)
    if len(points) < 2:
        return "<p>The plot needs two cuts.</p>"
    start, end = points[0][0], points[-1][0]
    span = max((end - start).total_seconds(), 1.0)
    top = max(lag for _, lag in points) or 1.0
    coordinates = " ".join(
        f"{40 + (at - start).total_seconds() / span * (PLOT_WIDTH - 60):.1f},"
        f"{PLOT_HEIGHT - 20 - lag / top * (PLOT_HEIGHT - 40):.1f}" for at, lag in points
    )
    return (f"<svg id='freshness' width='{PLOT_WIDTH}' height='{PLOT_HEIGHT}' role='img' "
            f"aria-label='cut lag over time'><line x1='40' y1='{PLOT_HEIGHT - 20}' x2='{PLOT_WIDTH - 20}' "
            f"y2='{PLOT_HEIGHT - 20}' stroke='#9ca3af'/><line x1='40' y1='20' x2='40' y2='{PLOT_HEIGHT - 20}' "
            f"stroke='#9ca3af'/><text x='44' y='16' font-size='11'>lag, max {top:.1f} s</text>"
            f"<text x='40' y='{PLOT_HEIGHT - 4}' font-size='11'>{start:%Y-%m-%d %H:%M:%S}</text>"
            f"<text x='{PLOT_WIDTH - 20}' y='{PLOT_HEIGHT - 4}' font-size='11' text-anchor='end'>"
            f"{end:%H:%M:%S} UTC</text>"
            f"<polyline fill='none' stroke='#2563eb' stroke-width='2' points='{coordinates}'/></svg>")
