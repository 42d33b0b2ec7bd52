"""The Streambed page's HTML: escaped, newest cut first, a plot once there are two cuts."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace

from airflow_provider_streambed.ledger.runs import RunRecord, RunState
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.ui.page import (
    CutRow,
    GroupSummary,
    freshness_plot,
    render_error,
    render_group,
    render_index,
)

AT = dt.datetime(2026, 11, 25, 12, tzinfo=dt.UTC)


def test_names_are_escaped_and_linked() -> None:
    html = render_index([GroupSummary("<b>bank</b>", "lake/house", 3, AT)], ["catalog connection 'x' <down>"])
    assert "&lt;b&gt;bank&lt;/b&gt;" in html and "<b>bank" not in html
    assert "href='groups/lake%2Fhouse/%3Cb%3Ebank%3C%2Fb%3E'" in html
    assert "&lt;down&gt;" in html


def test_cuts_newest_first_with_rows_pins_and_a_plot() -> None:
    cuts = [CutRow(n, f"0/{n}", AT + dt.timedelta(minutes=n), f"run{n}", {"a": n, "b": 2 * n}, n == 1, 10.0 * n)
            for n in (1, 2, 3)]
    html = render_group("bank", "lake", cuts, highlight=2)
    assert html.index("id='cut-3'") < html.index("id='cut-2'") < html.index("id='cut-1'")
    assert "<tr id='cut-2' class='highlight'>" in html
    assert "<th>a rows</th><th>b rows</th>" in html
    assert "<td class='num'>3</td><td class='num'>6</td><td></td>" in html
    assert "<td class='pinned'>pinned</td>" in html
    assert "<td>2026-11-25T12:02:00+00:00</td><td class='num'>20.0 s</td><td>run2</td>" in html  # its freshness
    assert "points='40.0,126.7 330.0,73.3 620.0,20.0'" in html  # lag 10, 20, 30 s over 2 minutes
    assert ">2026-11-25 12:01:00</text>" in html and ">12:03:00 UTC</text>" in html  # the time axis
    assert freshness_plot(cuts[:1]) == "<p>The plot needs two cuts.</p>"


def test_the_last_capture_shows_its_holdback_figures() -> None:
    run = RunRecord("bank", "run<3>", Lsn(0x100), RunState.PINNED, AT, AT, holdback=(2, 75.25))
    html = render_group("bank", "lake", [], run)
    row = html.split("<table id='last-capture'>", 1)[1].split("</table>", 1)[0]
    assert "<td>run&lt;3&gt;</td><td>2026-11-25T12:00:00+00:00</td><td>0/100</td><td>pinned</td>" in row
    assert "<td class='num'>2</td><td class='num'>75.2 s</td>" in row
    unknown = render_group("bank", "lake", [], replace(run, holdback=None))
    assert "<td>pinned</td><td>-</td><td>-</td>" in unknown
    assert "last-capture" not in render_group("bank", "lake", [])


def test_what_the_page_cannot_list_is_named_with_the_setting_that_lists_it() -> None:
    html = render_index([], unlisted="in the secrets backend <vault>: name them in [streambed] catalog_conn_ids")
    assert "No group has published a cut" in html
    assert "<p class='unlisted'>in the secrets backend &lt;vault&gt;: name them in [streambed] catalog_conn_ids" in html
    assert "class='unlisted'" not in render_index([])


def test_an_error_is_a_page_with_the_way_back() -> None:
    html = render_error(404, "group 'b<a>nk' has no cut in 'lakehouse'")
    assert html.startswith("<!doctype html>") and "<title>Streambed: 404</title>" in html
    assert "<h1>404</h1><p class='problem'>group &#x27;b&lt;a&gt;nk&#x27; has no cut in" in html
    assert "<a href='/streambed/'>all groups</a>" in html
