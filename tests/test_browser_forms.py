"""Forms do what they show (issue 36 items 3 and 7), in a real browser.

Enter in the Launch form never launches; a launch uses the values on screen when Launch is
clicked, the run stores them and its card shows them; a numeric parameter shows its declared
range beside the field and a value outside it is refused with a one-line reason.
"""

from __future__ import annotations

import re

import pytest
from conftest import assert_no_exception, choose, demo_into, settle, streamlit_server

from core.store import Store

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def runs_url(tmp_path_factory):
    """The Runs page of a fresh server on a demo store, and the store's path."""
    db = tmp_path_factory.mktemp("browser_forms") / "store.duckdb"
    demo_into(Store(db))
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        yield f"{url}/runs", db


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=300)


def _job(page, name: str):
    return page.locator(".st-key-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"runs.job.{name}"))


def _number(form, label: str, value: str) -> None:
    box = form.get_by_role("spinbutton", name=label)
    box.fill(value)
    box.press("Tab")


def test_enter_never_launches_and_launch_uses_what_is_shown(runs_url, page):
    url, db = runs_url
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.goto(url)
    _settle(page)
    choose(page, page, "Method", "CUE-R interventions", settle_page=_settle)
    _settle(page)
    form = page.get_by_test_id("stForm")
    name = form.get_by_role("textbox", name="Run name")
    # the method's form replaces the previous one: wait until the old field has gone
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stForm"] input')]
                 .filter(e => e.getAttribute('aria-label') === 'Run name').length === 1""",
        timeout=60_000,
    )
    name.fill("enter-run")
    _settle(page)
    name.press("Enter")
    _settle(page)
    page.wait_for_timeout(1500)
    assert _job(page, "enter-run").count() == 0, "Enter launched the run"
    assert Store(db).run_row("enter-run") is None
    _number(form, "top-k", "1")
    _number(form, "chunk-size", "80")
    _number(form, "overlap", "10")
    _settle(page)
    page.get_by_role("button", name="Launch", exact=True).click()
    box = _job(page, "enter-run").first
    box.wait_for(timeout=60_000)
    card = box.inner_text()
    assert "chunk-size 80" in card and "overlap 10" in card and "top-k 1" in card, card
    for _ in range(600):
        if "· done ·" in box.inner_text() or "· failed ·" in box.inner_text():
            break
        page.wait_for_timeout(200)
    row = Store(db).run_row("enter-run")
    assert row is not None and row["status"] == "done", row
    retrieval = row["retrieval"]
    assert (retrieval["chunk_size"], retrieval["overlap"], retrieval["top_k"]) == (80, 10, 1)
    assert_no_exception(page, "runs after the launch")


def _alert(page, text: str) -> str:
    """The text of the alert that contains ``text`` (waits for it)."""
    box = page.get_by_test_id("stAlert").filter(has_text=text).first
    box.wait_for(timeout=30_000)
    return box.inner_text()


@pytest.mark.parametrize(
    ("label", "value", "reason"),
    [
        ("top-k", "100000", "top-k 100000 is out of range: 1–1,000"),
        ("Concurrency", "99999", "Concurrency 99999 is out of range: 1–256"),
        ("Timeout (s)", "-5", "must be > 0 seconds"),
    ],
)
def test_out_of_range_values_are_refused_with_one_line(runs_url, page, label, value, reason):
    url, db = runs_url
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.goto(url)
    _settle(page)
    method = page.get_by_test_id("stSelectbox").filter(has_text="Method").first
    if not method.is_visible():  # a job exists: the launch form is folded
        page.locator("details").filter(has_text="Launch a run").first.locator("summary").click()
        _settle(page)
    form = page.get_by_test_id("stForm")
    form.get_by_role("textbox", name="Run name").fill(f"range-{value}")
    assert form.get_by_role("spinbutton", name="top-k (1–1,000)").is_visible()
    assert form.get_by_role("spinbutton", name="Concurrency (1–256)").is_visible()
    _number(form, label, value)
    page.get_by_role("button", name="Launch", exact=True).click()
    _settle(page)
    text = _alert(page, reason)
    assert len(text.strip().splitlines()) == 1, text
    assert Store(db).run_row(f"range-{value}") is None
    assert _job(page, f"range-{value}").count() == 0
    assert_no_exception(page, "runs after a refused launch")
