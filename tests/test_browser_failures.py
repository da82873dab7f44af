"""The failure browser in a real browser (issue 18 item 1): filter → open case → step with keys.

The store holds the demo (the embedded reader over controlled-200) with one call made a failed
call. The browser lists the filtered predictions, a selected row opens its instance in the Case
view, and the keys j / k step through the filtered list's instances (the order the store's own
query gives, read independently here).
"""

from __future__ import annotations

import pytest
from conftest import SHOTS, assert_no_exception, demo_into, press_until, settle, streamlit_server

from core.store import Store
from core.store.failure_rows import FailureFilter
from core.store.schema import bump_data_version

pytestmark = [pytest.mark.browser]

_RUN, _DATASET = "demo-embedded", "controlled-200"
_ERROR = "backend raised TimeoutError: read timed out"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``(url, store)``: a server on a fresh demo store with one failed call."""
    db = tmp_path_factory.mktemp("failures") / "store.duckdb"
    store = Store(db)
    demo_into(store)
    with store.transaction() as con:
        con.execute(
            "UPDATE predictions SET error = ?, answer = NULL, raw_response = '' "
            "WHERE run_id = ? AND instance_id = 'controlled_000003' AND condition = 'retrieved'",
            [_ERROR, _RUN],
        )
        con.execute(
            "UPDATE scores SET failure_label = NULL, em_strict = NULL, f1_relaxed = NULL "
            "WHERE run_id = ? AND instance_id = 'controlled_000003' AND condition = 'retrieved'",
            [_RUN],
        )
        bump_data_version(con, runs=[_RUN])
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url, store


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=400)


def _pick(page, label: str, option: str) -> None:
    """Add ``option`` to the multiselect labelled ``label``."""
    box = page.get_by_test_id("stMultiSelect").filter(has_text=label).first
    box.click()
    page.get_by_role("option", name=option, exact=True).click(timeout=10_000)
    page.keyboard.press("Escape")
    _settle(page)


def _picker(page) -> str:
    """The Case view's instance picker's shown label (question · id)."""
    return page.get_by_role("combobox", name="Instance").input_value()


def test_filter_open_case_and_step_with_the_keyboard(demo, page):
    url, store = demo
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/failures")
    page.get_by_role("heading", name="Failure browser").wait_for(timeout=90_000)
    _settle(page)
    assert_no_exception(page, "failures")
    # the failed call is counted above the table and listed as "call failed", not wrong
    assert page.get_by_text("1 failed call in this list", exact=False).is_visible()
    everything, counts = store.failure_page(FailureFilter(runs=(_RUN,)), 0, 50)
    assert counts["call failed"] == 1
    assert page.get_by_text(f"rows 1–50 of {counts['total']:,}").is_visible()

    _pick(page, "Condition", "oracle")
    _pick(page, "Failure label", "integration")
    assert_no_exception(page, "failures filtered")
    filt = FailureFilter(runs=(_RUN,), conditions=("oracle",), labels=("integration",))
    rows, counts = store.failure_page(filt, 0, 50)
    n = counts["total"]
    assert n >= 3 and rows["instance_id"].is_unique  # one run, one condition: one row each
    assert page.get_by_text(f"rows 1–{min(n, 50)} of {n}").is_visible()
    grid = page.get_by_test_id("stDataFrame").filter(visible=True).first
    cells = grid.locator("td").all_inner_texts()
    # (the grid's accessible copy holds the cells it draws: the left-hand columns)
    assert rows["instance_id"].iloc[0] in cells and "oracle" in cells
    assert "integration" in cells and "wrong" in cells
    assert "no_evidence" not in cells and "retrieved" not in cells
    page.screenshot(path=str(SHOTS / "failure_browser.png"))

    # select the first row: the Case view opens on its instance, stepping the filtered list
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the row marker, below the header
    page.get_by_text("Raw response").first.wait_for(timeout=90_000)
    _settle(page)
    assert_no_exception(page, "case view from the failure browser")
    assert "/case_view" in page.url and "from=failures" in page.url
    ids = list(rows["instance_id"])
    questions = {i.instance_id: i.question for i in store.load_instances(_DATASET, ids[:3])}
    assert questions[ids[0]][:40] in _picker(page)
    assert page.get_by_text(f"Instance 1 of {n} (failure browser filter)").is_visible()

    page.get_by_role("heading", name="Case view").click()  # focus the page, not a field
    press_until(page, "j", f"Instance 2 of {n} (failure browser filter)")
    assert questions[ids[1]][:40] in _picker(page), (ids[1], _picker(page))
    assert page.get_by_text(f"Instance 2 of {n} (failure browser filter)").is_visible()
    assert f"instance={ids[1]}" in page.url
    press_until(page, "ArrowRight", f"Instance 3 of {n} (failure browser filter)")
    assert questions[ids[2]][:40] in _picker(page)
    press_until(page, "k", f"Instance 2 of {n} (failure browser filter)")
    assert questions[ids[1]][:40] in _picker(page)
    assert_no_exception(page, "case view stepped with the keyboard")
