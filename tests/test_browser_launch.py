"""CUE-R interventions and DOLCE probes launched from the Runs page in a real browser (issue 18
item 3, done-when): each job shows a progress bar while it runs, finishes, and the Runs table
then lists the run with its kind and status ``done``.

The store is the demo (controlled-200 and the embedded reader's four-condition run); both jobs
run the embedded reader as real child processes (``python -m core run-interventions`` /
``run-probes``) with small settings: CUE-R at top-k 1 (about 1,400 calls), DOLCE on the first
instance's passages (79 probes).
"""

from __future__ import annotations

import re
import time

import pytest
from conftest import SHOTS, assert_no_exception, choose, demo_into, settle, streamlit_server

from core.store import Store

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def runs_url(tmp_path_factory):
    """The Runs page of a fresh server on a demo store."""
    db = tmp_path_factory.mktemp("browser_launch") / "store.duckdb"
    demo_into(Store(db))
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield f"{url}/runs", db


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=300)


def _job(page, name: str):
    """The bordered box of job ``name`` in the jobs list (its container key, as a class)."""
    return page.locator(".st-key-" + re.sub(r"[^A-Za-z0-9_-]", "-", f"runs.job.{name}"))


def _launch_and_follow(page, name: str, label: str) -> tuple[bool, str]:
    """Click Launch, then watch the job's box until it says done.

    Returns whether a progress bar was seen while the job ran, and the final progress text.
    """
    page.get_by_role("button", name="Launch", exact=True).click()
    box = _job(page, name)
    box.first.wait_for(timeout=60_000)
    seen_running = False
    deadline = time.time() + 180
    while time.time() < deadline:
        head = box.first.locator("strong").first.locator("xpath=..").inner_text()
        if "running" in head and box.first.get_by_test_id("stProgress").count():
            seen_running = True
        if f"embedded · done · {label}" in head:
            break
        if "failed" in head or "cancelled" in head:
            pytest.fail(f"{name}: {box.first.inner_text()}")
        page.wait_for_timeout(150)
    else:
        pytest.fail(f"{name} did not finish: {box.first.inner_text()}")
    bar = box.first.get_by_test_id("stProgress")
    bar.first.wait_for(timeout=10_000)
    # the box's status line and its bar are two elements of one fragment run: the status can
    # be drawn a moment before the bar of the same run, so read the bar once it is redrawn
    # (a done job's bar is full; a bar that never fills fails the caller's assertion)
    text = bar.first.inner_text()
    until = time.time() + 10
    while time.time() < until:
        counts = re.search(r"([\d,]+)/([\d,]+)", text)  # "1,400/1,400 calls"
        if counts and counts.group(1) == counts.group(2):
            break
        page.wait_for_timeout(200)
        text = bar.first.inner_text()
    return seen_running, text


def _run_row(page, name: str) -> list[str]:
    """The cells of ``name``'s row in the Runs table (the grid's accessible copy)."""
    grid = page.get_by_test_id("stDataFrame").filter(has=page.locator("td", has_text=name))
    grid.first.wait_for(timeout=60_000)
    for row in grid.first.locator("tr").all():
        cells = [c.strip() for c in row.locator("td").all_inner_texts()]
        if name in cells:
            return cells
    return []


def test_cuer_and_dolce_launched_from_the_runs_page_finish_with_progress(runs_url, page):
    url, db = runs_url
    page.set_viewport_size({"width": 1400, "height": 1100})
    page.goto(url)
    _settle(page)
    assert_no_exception(page, "runs")

    # CUE-R interventions, base retrieval top-k 1
    choose(page, page, "Method", "CUE-R interventions", settle_page=_settle)
    _settle(page)
    form = page.get_by_test_id("stForm")
    form.get_by_role("textbox", name="Run name").fill("cuer-ui")
    topk = form.get_by_role("spinbutton", name="top-k")
    topk.fill("1")
    topk.press("Tab")
    seen, text = _launch_and_follow(page, "cuer-ui", "CUE-R interventions")
    assert seen, "no progress bar while the CUE-R job ran"
    counts = re.search(r"([\d,]+)/([\d,]+) calls", text)  # thousands separated: 1,400
    assert counts, text
    done, total = (int(g.replace(",", "")) for g in counts.groups())
    assert done == total > 0 and "0 errors" in text, text
    assert_no_exception(page, "runs after CUE-R")

    # DOLCE probes on the first instance, passages as units (the form folds once jobs run)
    # the page reruns once more as the job ends and folds the form: start from a fresh load,
    # where the fold is shut (jobs exist), and open it
    page.reload()
    _settle(page)
    method = page.get_by_test_id("stSelectbox").filter(has_text="Method").first
    if not method.is_visible():
        page.locator("details").filter(has_text="Launch a run").first.locator("summary").click()
    method.wait_for(state="visible", timeout=30_000)
    _settle(page)
    choose(page, page, "Method", "DOLCE probes", settle_page=_settle)
    _settle(page)
    form = page.get_by_test_id("stForm")
    form.get_by_role("textbox", name="Run name").fill("dolce-ui")
    choose(page, form, "units", "passage", settle_page=_settle)
    limit = form.get_by_role("spinbutton", name="limit")
    limit.fill("1")
    limit.press("Tab")
    seen, text = _launch_and_follow(page, "dolce-ui", "DOLCE probes")
    assert seen, "no progress bar while the DOLCE job ran"
    assert "79/79 calls" in text and "0 errors" in text, text
    assert_no_exception(page, "runs after DOLCE")

    # the Runs table, refreshed when the jobs ended: kind and status of both runs
    _settle(page)
    cuer = _run_row(page, "cuer-ui")
    dolce = _run_row(page, "dolce-ui")
    assert "interventions" in cuer and "done" in cuer, cuer
    assert "probes" in dolce and "done" in dolce, dolce
    store = Store(db)
    assert (store.run_row("cuer-ui")["kind"], store.run_row("dolce-ui")["status"]) == (
        "interventions",
        "done",
    )
    page.screenshot(path=str(SHOTS / "runs_launch.png"), full_page=True)
