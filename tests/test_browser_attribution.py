"""An instance's attribution, opened from the failure browser in Chromium (issue 40, done-when 4).

The store holds a small attribution run (the embedded reader, 4 instances of controlled-200,
16 ablations). The failure browser lists its calls; a selected row opens the Case view, whose
link opens the Attribution page on that instance. The page's weights are the report's
(``report attribution --json``) for that instance, and its cited-vs-causal table's counts
are the report's.
"""

from __future__ import annotations

import json
import math
from urllib.parse import parse_qs, urlparse

import pytest
from conftest import SHOTS, assert_no_exception, settle, streamlit_server

from core.backends import EmbeddedReader
from core.cli import main
from core.datasets.controlled import build_controlled
from core.execution.runs import run_attribution
from core.store import Store

pytestmark = [pytest.mark.browser]

_RUN = "att"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(url, db)``: a server on a store with one attribution run."""
    db = tmp_path_factory.mktemp("attribution") / "store.duckdb"
    store = Store(db)
    store.write_dataset(build_controlled(preset="controlled-200", seed=42, name="c200"))
    run_attribution(store, "c200", EmbeddedReader(), name=_RUN, instances="4", ablations=16)
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url, db


def _settle(page) -> None:
    settle(page, timeout_ms=120_000, draw_ms=500)


def _cells(grid) -> list[str]:
    return [c.strip() for c in grid.locator("td").all_inner_texts()]


def test_open_attribution_from_the_failure_browser(served, page, capsys):
    url, db = served
    capsys.readouterr()
    assert main(["report", "attribution", "--db", str(db), "--run", _RUN, "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)

    page.set_viewport_size({"width": 1400, "height": 1100})
    page.goto(f"{url}/failures?only=0")
    page.get_by_role("heading", name="Failure browser").wait_for(timeout=120_000)
    _settle(page)
    assert_no_exception(page, "failures")
    grid = page.get_by_test_id("stDataFrame").filter(visible=True).first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's marker
    link = page.get_by_role(
        "link", name=f"Attribution: which passages this answer depended on (run {_RUN})"
    )
    link.wait_for(timeout=120_000)
    _settle(page)
    assert "/case_view" in page.url
    iid = parse_qs(urlparse(page.url).query)["instance"][0]
    link.click()
    page.get_by_role("heading", name="Attribution", exact=True).wait_for(timeout=120_000)
    page.get_by_text("Unablated answer").wait_for(timeout=120_000)
    _settle(page)
    assert_no_exception(page, "attribution page")
    assert f"instance={iid}" in page.url and f"run={_RUN}" in page.url
    page.screenshot(path=str(SHOTS / "attribution.png"), full_page=True)

    grids = page.get_by_test_id("stDataFrame").filter(visible=True)
    weights = next(_cells(g) for g in grids.all() if "p0001" in _cells(g))
    mine = [p for p in rep["passages"] if p["instance_id"] == iid]
    # the grid draws the rows in view (its accessible copy, raw values): each drawn
    # passage's weight is the report's
    drawn = [p for p in mine if p["passage_id"] in weights]
    assert len(drawn) >= 5, (iid, weights[:20])
    for p in drawn:
        at = weights.index(p["passage_id"])
        if p["weight"] is not None and math.isfinite(p["weight"]):
            shown = float(weights[at + 2])
            assert shown == pytest.approx(p["weight"], abs=5e-5), (p, weights[at : at + 5])

    cc = rep["cited_vs_causal"]["cells"]
    table = next(_cells(g) for g in grids.all() if "not cited" in _cells(g))
    cited = table[table.index("cited") + 1 : table.index("cited") + 4]
    not_cited = table[table.index("not cited") + 1 : table.index("not cited") + 4]
    assert [int(x) for x in cited] == [
        cc["cited_causal"],
        cc["cited_not_causal"],
        cc["cited_causal"] + cc["cited_not_causal"],
    ]
    assert [int(x) for x in not_cited] == [
        cc["not_cited_causal"],
        cc["not_cited_not_causal"],
        cc["not_cited_causal"] + cc["not_cited_not_causal"],
    ]
