"""A failure-label drill-down clicked in a real browser (issue 15, item 7).

Starts ``streamlit run app.py`` against a store of the released controlled and HotpotQA
outputs, opens Conditions & ONCU > Failure labels, clicks the "integration" segment of the
controlled run's full-context bar in the Plotly chart itself, and reads what the page lists:
the bug listed "0 predictions behind condition=hotpot-emb, run=full_context" (run and
condition swapped, the label ignored).
"""

from __future__ import annotations

import csv

import pytest
from conftest import (
    RELEASE_CONTROLLED,
    SHOTS,
    assert_no_exception,
    build_release_store,
    settle,
    shared_fixture,
    streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

#: Finds the failure-label chart (the figure declaring run, condition, failure_label) and the
#: bar segment of one (run, condition, label); returns its centre in page coordinates.
_SEGMENT_JS = """([run, cond, label]) => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const drill = gd.layout && gd.layout.meta && gd.layout.meta.drill;
    if (!drill || !drill.keys.includes('failure_label')) continue;
    const t = gd.data.findIndex(tr => tr.name === label);
    const j = gd.data[t].customdata.findIndex(r => r[0] === run && r[1] === cond);
    const bars = gd.querySelectorAll('.barlayer .trace')[t].querySelectorAll('.point path');
    bars[j].scrollIntoView({block: 'center'});
    const box = bars[j].getBoundingClientRect();
    return {x: box.x + box.width / 2, y: box.y + box.height / 2, n: gd.data[t].customdata[j][3],
            w: box.width};
  }
  return null;
}"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("browser_drill") / "store.duckdb"
    build_release_store(db, hotpotqa=True)
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url


def test_clicking_a_failure_label_segment_lists_its_predictions(server, page):
    published = {
        r["sample_id"]
        for r in csv.DictReader(shared_fixture(RELEASE_CONTROLLED).open())
        if r["method"] == "direct" and r["failure_type"] == "evidence_integration_failure"
    }
    page.set_viewport_size({"width": 1400, "height": 1400})
    page.goto(f"{server}/conditions")
    settle(page, timeout_ms=90_000)
    page.get_by_role("tab", name="Failure labels").click()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.js-plotly-plot')].some(gd => gd.layout && "
        "gd.layout.meta && gd.layout.meta.drill && "
        "gd.layout.meta.drill.keys.includes('failure_label') && gd.offsetWidth > 0)",
        timeout=60_000,
    )
    page.wait_for_timeout(800)
    seg = page.evaluate(_SEGMENT_JS, ["controlled", "full_context", "integration"])
    assert seg is not None and seg["n"] == 20 and seg["w"] > 5, seg
    page.mouse.click(seg["x"], seg["y"])
    caption = page.locator('[data-testid="stMarkdownContainer"]', has_text="predictions behind")
    caption.first.wait_for(timeout=60_000)
    settle(page, timeout_ms=90_000)
    assert_no_exception(page, "failure-label drill-down")
    text = " ".join(caption.first.inner_text().split())
    assert text.startswith("20 predictions behind"), text
    assert "run=controlled, condition=full_context, failure_label=integration" in text, text
    # the listed rows: Streamlit's grid keeps an accessible copy of the cells it draws
    grid = page.locator('[data-testid="stDataFrame"]').filter(
        has=page.locator("td", has_text="integration")
    )
    grid.first.wait_for(timeout=30_000)
    cells = grid.first.locator("td").all_inner_texts()
    labels = {
        c
        for c in cells
        if c in ("integration", "success", "conversion", "selection", "localization", "parse")
    }
    ids = {c for c in cells if c.startswith("controlled_")}
    assert labels == {"integration"}, labels
    assert ids and ids <= published, sorted(ids - published)
    assert "full_context" in cells and "controlled" in cells
    assert "no_evidence" not in cells and "hotpotqa" not in cells
    page.screenshot(path=str(SHOTS / "failure_label_drill.png"), full_page=True)
