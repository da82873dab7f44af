"""A Case-view rerun against a dead server, in a real browser (issue 15, item 5).

The store holds the released controlled outputs (an imported run, whose reruns go to a
companion run); the rerun's backend is Ollama at a localhost port nobody listens on. The page
must show the error where the answer would be, offer Retry, and show no divergence.
"""

from __future__ import annotations

import pytest
from conftest import (
    SHOTS,
    assert_no_exception,
    build_release_store,
    choose,
    dead_url,
    settle,
    streamlit_server,
)
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.slow]

@pytest.fixture(scope="module")
def case_url(tmp_path_factory):
    """The Case view of an instance of the imported run, on a fresh server."""
    db = tmp_path_factory.mktemp("browser_rerun") / "store.duckdb"
    instance = build_release_store(db).list_instance_ids("controlled")[0]
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield f"{url}/case_view?dataset=controlled&instance={instance}"


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=600)


def _choose(page, label: str, option: str) -> None:
    choose(page, page, label, option, settle_page=_settle)


def _perturbed_box(page):
    """The column of the perturbed side (its answer, or the error in its place)."""
    return page.get_by_test_id("stColumn").filter(has_text="Perturbed").last


def test_a_rerun_against_a_dead_server_shows_the_error(case_url, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(case_url)
    _settle(page)
    assert_no_exception(page, "case_view")
    _choose(page, "Backend (for imported runs)", "ollama")
    page.get_by_role("textbox", name="Model (for imported runs)").fill("qwen2.5:14b")
    dead = dead_url()
    page.get_by_role("textbox", name="Server URL (ollama / openai)").fill(dead)
    page.get_by_role("button", name="Run now").click()
    page.get_by_role("button", name="Retry").wait_for(timeout=60_000)
    _settle(page)
    assert_no_exception(page, "case_view rerun")

    # the error stands where the perturbed answer would be: an error box, no answer line
    box = _perturbed_box(page)
    alert = box.locator('[data-testid="stAlert"]')
    assert alert.count() == 1
    text = alert.inner_text()
    assert "cannot reach Ollama" in text and dead in text, text
    assert box.get_by_text("Answer:").count() == 0
    assert page.get_by_text("not computed: the call failed").is_visible()
    body = page.locator("body").inner_text()
    assert "0.000" not in body and "D = 0" not in body
    assert "Answer diff" not in body
    page.screenshot(path=str(SHOTS / "case_view_rerun_dead_server.png"), full_page=True)

    # Retry runs the same request again: the server is still down, so the same error
    page.get_by_role("button", name="Retry").click()
    # the click's rerun may not have started when the page is first seen idle (a clean-clone
    # CI run read the box mid-rerun): see it start, let it end, then expect the error box
    # (an assertion that retries until it holds or 60 s pass)
    try:
        page.wait_for_selector('[data-testid="stApp"][data-test-script-state="running"]',
                               timeout=5_000)  # fmt: skip
    except PlaywrightTimeout:
        pass  # the rerun started and ended between two looks
    _settle(page)
    assert_no_exception(page, "case_view retry")
    expect(_perturbed_box(page)).to_contain_text("cannot reach Ollama", timeout=60_000)
    assert page.get_by_role("button", name="Retry").is_visible()
    assert "0.000" not in page.locator("body").inner_text()
