"""The ONCU small-group warning and its one-click coarser key in a real browser (issue 15
item 6): the 53 real HotpotQA records (exact token counts as lengths), embedded reader."""

from __future__ import annotations

import pytest
from conftest import SHOTS, assert_no_exception, settle, shared_fixture, streamlit_server

pytestmark = [pytest.mark.browser, pytest.mark.slow]

WARNING = "Most valid ONCU groups are tiny"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from core.backends import make_backend
    from core.datasets.importers import read_dataset
    from core.execution.runs import run_conditions
    from core.store import Store

    path = shared_fixture("hotpotqa/hotpot_dev_distractor_sample53.json")
    db = tmp_path_factory.mktemp("browser_oncu") / "store.duckdb"
    store = Store(db)
    store.write_dataset(read_dataset(path, fmt="hotpotqa", name="hp").dataset)
    run_conditions(
        store,
        "hp",
        make_backend("embedded"),
        ["no_evidence", "full_context", "retrieved", "oracle"],
        name="hp-emb",
    )
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url


def test_small_group_warning_and_one_click_coarser_key(server, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/conditions")
    settle(page, timeout_ms=90_000, draw_ms=600)
    assert_no_exception(page, "conditions")
    alert = page.locator('[data-testid="stAlert"]', has_text=WARNING)
    # a page URL as the first request reruns through app.py once: wait for the final run
    alert.wait_for(state="visible", timeout=90_000)
    assert alert.count() == 1
    assert "6 of 8" in alert.inner_text()
    page.screenshot(path=str(SHOTS / "oncu_small_groups.png"), full_page=True)
    page.get_by_role("button", name="Use coarser key").click()
    # the rerun removes the warning (wait for it: the click's rerun starts asynchronously)
    alert.wait_for(state="detached", timeout=90_000)
    settle(page, timeout_ms=90_000, draw_ms=600)
    assert_no_exception(page, "conditions after the coarser key")
    assert page.locator('[data-testid="stAlert"]', has_text=WARNING).count() == 0
    # the ONCU cards now report the coarser groups (4 valid groups, median size 8)
    cards = page.locator('[data-testid="stMetric"]', has_text="ONCU")
    assert "/4 valid groups" in cards.first.inner_text()
