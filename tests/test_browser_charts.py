"""Charts as the researcher sees them (issue 36 item 5), in a real browser.

No literal markup: the condition matrix's two-line tick labels ("No<br>evidence") are drawn
on two lines, never with the characters ``<br>``, and no hover or label text of the page
holds them. The Length & position heatmap's panels draw the same rows in the same order and
label a length one way ("16,000"), in the ticks and in the hovers.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

import pytest
from conftest import ROOT, assert_no_exception, demo_into, free_port, settle, streamlit_server

from core.store import Store

pytestmark = [pytest.mark.browser]

#: Every text the page's Plotly charts draw (ticks, titles, legends, annotations).
_TEXTS_JS = """() => [...document.querySelectorAll('.js-plotly-plot svg text')]
  .map(t => t.textContent)"""
#: Every hover text and tick text the charts hold (drawn on hover, so read from the data).
_DATA_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd => [
  ...(gd.data || []).flatMap(t => [].concat(t.text || [], t.hovertext || [])),
  ...Object.keys(gd.layout || {}).filter(k => /^[xy]axis/.test(k))
    .flatMap(k => gd.layout[k].ticktext || [])].map(String))"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("charts") / "store.duckdb"
    demo_into(Store(db))
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        yield url


def test_no_literal_br_in_chart_labels(server, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/conditions")
    page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
    settle(page, timeout_ms=90_000, draw_ms=1500)
    assert_no_exception(page, "conditions")
    drawn = page.evaluate(_TEXTS_JS)
    assert drawn and not [t for t in drawn if "<br" in t.lower()], drawn
    # "No<br>evidence": two line spans of one tick (their text joined: "Noevidence")
    assert "Noevidence" in drawn and "No<br>evidence" not in drawn
    held = page.evaluate(_DATA_JS)
    assert not [t for t in held if "<\u2060br" in t], held  # no broken (literal) line break


#: Per heatmap panel of each chart: its y axis's drawn categories (Plotly's full layout) and
#: the rows of its data.
_HEAT_JS = """() => [...document.querySelectorAll('.js-plotly-plot')].flatMap(gd =>
  (gd._fullData || []).filter(t => t.type === 'heatmap').map(t => ({
    axis: t.yaxis, rows: (t.y || []).map(String),
    drawn: (gd._fullLayout[t.yaxis.replace('y', 'yaxis')]._categories || []).map(String),
    hover: t.hovertemplate || ''})))"""


def test_heatmap_panels_line_up_with_one_length_format(server, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/length_position?dataset=controlled-200")
    page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
    settle(page, timeout_ms=90_000, draw_ms=800)
    assert_no_exception(page, "length_position")
    panels = page.evaluate(_HEAT_JS)
    assert len(panels) == 2, panels  # full context, retrieved
    rows = ["4,000", "8,000", "16,000"]
    for p in panels:
        assert p["rows"] == rows and p["drawn"] == rows, p
        assert "length %{y}" in p["hover"], p  # the hover shows the row's own label
    ticks = page.evaluate(_TEXTS_JS)
    assert {"4,000", "8,000", "16,000"} <= set(ticks)
    assert not {"4k", "8k", "16k", "4000", "8000", "16000"} & set(ticks), ticks


@pytest.fixture(scope="module")
def no_renderer(tmp_path_factory):
    """A server whose figure renderer cannot start (Kaleido finds no browser; its thread then
    hangs the server's exit, so the server is killed, not stopped, at the end)."""
    db = tmp_path_factory.mktemp("charts_fail") / "store.duckdb"
    demo_into(Store(db))
    port = free_port()
    env = dict(
        os.environ, EVIDENCE_DB=str(db), EVIDENCE_NO_DEMO="1", BROWSER_PATH="/nonexistent/chromium"
    )
    log = open(tmp_path_factory.mktemp("log") / "streamlit.log", "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.port",
            str(port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        yield url
    finally:
        proc.kill()
        proc.wait(10)
        log.close()


def test_a_failed_figure_download_says_why_in_place(no_renderer, page):
    """Issue 36 item 4: a PDF that cannot be made was no file and no message."""
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{no_renderer}/conditions")
    page.locator(".js-plotly-plot").first.wait_for(timeout=90_000)
    settle(page, timeout_ms=90_000, draw_ms=500)
    page.locator('[data-testid="stPopover"] button').first.click()
    page.get_by_role("button", name="PDF", exact=True).first.click()
    alert = page.get_by_test_id("stAlert").filter(has_text="was not made")
    alert.first.wait_for(timeout=90_000)
    text = alert.first.inner_text()
    assert "PDF of Answer and evidence scores" in text and "What to do" in text, text
    # the renderer's browser is missing: said at once (no wait for a renderer that hangs)
    assert "static export needs Chromium" in text and "python -m core setup" in text, text
    assert_no_exception(page, "failed download")
