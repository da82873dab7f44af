"""One selection state for the whole app, in a real browser (issue 36 items 2 and 9).

The sidebar's store, dataset, runs, score field, filters and export preset survive every page
change (a sidebar link, a drill-down, the back button) and are written to the URL; the URL
opened in a fresh browser context restores them. A Case view opened from a filtered failure
list keeps that list in its link: a fresh context shows "Instance i of n (failure browser
filter)" and steps through the same n instances.
"""

from __future__ import annotations

import re

import pytest
from conftest import (
    assert_no_exception,
    build_release_store,
    choose,
    press_until,
    settle,
    streamlit_server,
)

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``(url, db)``: a server on a store with the released outputs and the demo."""
    db = tmp_path_factory.mktemp("state") / "store.duckdb"
    build_release_store(db, hotpotqa=True, demo=True)
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        yield url, db


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=300)


def _box(page, label: str) -> str:
    """The text shown in the sidebar's selectbox labelled ``label``."""
    box = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text=label)
    return box.first.locator("input").first.input_value()


def _nav(page, title: str) -> None:
    """Click the sidebar's navigation link ``title``."""
    page.get_by_test_id("stSidebarNav").get_by_role("link", name=title).click()
    page.wait_for_timeout(300)
    _settle(page)


def _open_export(page) -> None:
    exp = page.get_by_test_id("stSidebar").locator("details").filter(has_text="Export settings")
    if not exp.first.get_attribute("open"):
        exp.first.locator("summary").click()
    _settle(page)


def test_sidebar_selection_survives_page_changes_and_links(server, page, browser):
    url, _ = server
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(url)
    _settle(page)
    sidebar = page.get_by_test_id("stSidebar")
    choose(page, sidebar, "Dataset", "hotpotqa", settle_page=_settle)
    _settle(page)
    choose(page, sidebar, "Score field", "em_strict", settle_page=_settle)
    _settle(page)
    _open_export(page)
    choose(page, sidebar, "Venue preset", "acl-column", settle_page=_settle)
    _settle(page)
    seen = []
    for title in (
        "Conditions & ONCU",
        "Length & position",
        "Fan-in",
        "Conditions & ONCU",
        "Failure browser",
        "Overview",
        "Conditions & ONCU",
    ):
        _nav(page, title)
        assert_no_exception(page, title)
        seen.append((title, _box(page, "Dataset"), _box(page, "Score field")))
    assert all(s[1:] == ("hotpotqa", "em_strict") for s in seen), seen
    _open_export(page)
    assert _box(page, "Venue preset") == "acl-column"
    assert "dataset=hotpotqa" in page.url and "score=em_strict" in page.url, page.url
    assert "preset=acl-column" in page.url, page.url
    # the back button: the previous page, the same selection
    page.go_back()
    _settle(page)
    assert (_box(page, "Dataset"), _box(page, "Score field")) == ("hotpotqa", "em_strict")
    # the link in a fresh browser context restores it
    link = page.url
    fresh = browser.new_context(viewport={"width": 1440, "height": 900})
    other = fresh.new_page()
    other.goto(link)
    _settle(other)
    assert (_box(other, "Dataset"), _box(other, "Score field")) == ("hotpotqa", "em_strict")
    _open_export(other)
    assert _box(other, "Venue preset") == "acl-column"
    fresh.close()


def _position(page) -> str:
    """The Case view's "Instance i of n ..." caption."""
    cap = page.get_by_text(re.compile(r"^Instance \d[\d,]* of \d[\d,]*")).first
    cap.wait_for(timeout=60_000)
    return cap.inner_text()


def test_case_link_from_a_filtered_failure_list_keeps_the_list(server, page, browser):
    url, _ = server
    page.set_viewport_size({"width": 1400, "height": 1000})
    # the failure browser's list from its own link: one dataset, wrong answers only
    page.goto(f"{url}/failures?dataset=hotpotqa&outcome=wrong&cond=retrieved")
    page.get_by_role("heading", name="Failure browser").wait_for(timeout=90_000)
    _settle(page)
    assert_no_exception(page, "failures")
    grid = page.get_by_test_id("stDataFrame").filter(visible=True).first
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # the first row's marker
    page.get_by_text("Raw response").first.wait_for(timeout=90_000)
    _settle(page)
    here = _position(page)
    assert here.startswith("Instance 1 of ") and "(failure browser filter)" in here, here
    link = page.url
    assert "from=failures" in link and "list=" in link, link

    fresh = browser.new_context(viewport={"width": 1400, "height": 1000})
    other = fresh.new_page()
    other.goto(link)
    other.get_by_text("Raw response").first.wait_for(timeout=90_000)
    _settle(other)
    assert_no_exception(other, "case view from a link")
    assert _position(other) == here
    back = other.get_by_role("link", name="Back to the failure browser")
    back.wait_for(timeout=30_000)
    other.get_by_role("heading", name="Case view").click()  # focus the page, not a field
    press_until(other, "j", here.replace("Instance 1 of", "Instance 2 of"))
    assert _position(other) == here.replace("Instance 1 of", "Instance 2 of")
    # the way back restores the browser's list (dataset, outcome, condition)
    back.click()
    other.get_by_role("heading", name="Failure browser").wait_for(timeout=90_000)
    _settle(other)
    assert "outcome=wrong" in other.url and "dataset=hotpotqa" in other.url, other.url
    fresh.close()
