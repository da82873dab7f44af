"""Charts as the researcher sees them (issue 36 item 5), in a real browser.

No literal markup: the condition matrix's two-line tick labels ("No<br>evidence") are drawn
on two lines, never with the characters ``<br>``, and no hover or label text of the page
holds them.
"""

from __future__ import annotations

import pytest
from conftest import assert_no_exception, settle, streamlit_server

from core.runs import build_demo
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
    build_demo(Store(db))
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
