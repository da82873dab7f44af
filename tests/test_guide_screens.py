"""The user guide's walkthrough in a real browser; its screenshots are the guide's figures.

Prepares a store with the guide's own commands (``import dataset --format hotpotqa`` of the real
HotpotQA sample, then ``run`` of the four conditions with the ``embedded`` baseline reader),
starts ``streamlit run app.py`` on a free localhost port and walks ``docs/USER_GUIDE.md`` in
headless Debian Chromium: import a file and launch a run on the Runs page, read the ONCU audit
on Conditions & ONCU, open a failure case in the Case view and rerun it with a perturbation,
download a figure. Every step asserts its key elements and the absence of a Streamlit exception
box, and saves ``test-results/screenshots/guide-NN-<step>.png`` (1280x800 viewport).

Regenerate the guide's images::

    .venv/bin/python -m pytest -m browser tests/test_guide_screens.py
    cp test-results/screenshots/guide-*.png docs/img/
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import (
    ROOT,
    SHOTS,
    assert_no_exception,
    choose,
    pick,
    settle,
    shared_fixture,
    streamlit_server,
)
from playwright.sync_api import TimeoutError as PlaywrightTimeout

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
VIEWPORT = {"width": 1280, "height": 800}
#: The guide's failure case: full context answers the distractor "Kenton Richardson" leads to.
CASE = "5a7bbb64554299042af8f7cc"
QUESTION = "Who is older, Annie Morton or Terry Richardson?"
DISTRACTOR = "p0010"
#: Its context length (tokens): the sidebar filter that narrows the audit to its group.
CASE_LENGTH = "860"


def _cli(db: Path, *args: str) -> str:
    """Run ``python -m core ARGS --db DB`` exactly as the guide writes it; return stdout."""
    proc = subprocess.run(
        [sys.executable, "-m", "core", *args, "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"core {' '.join(args)}: {proc.stderr[-800:]}"
    return proc.stdout


@pytest.fixture(scope="module")
def hotpot_file() -> Path:
    return shared_fixture(HOTPOT)


@pytest.fixture(scope="module")
def uploaded(hotpot_file):
    """Where the Runs page writes the uploaded file; removed afterwards unless it was there."""
    from core.execution.jobs import UPLOAD_DIR

    target = UPLOAD_DIR / hotpot_file.name
    existed = target.exists()
    yield target
    if not existed:
        target.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def server(tmp_path_factory, hotpot_file):
    db = tmp_path_factory.mktemp("guide") / "guide.duckdb"
    _cli(db, "import", "dataset", "--format", "hotpotqa", str(hotpot_file), "--name", "hotpot")
    _cli(
        db,
        "run",
        "--dataset",
        "hotpot",
        "--backend",
        "embedded",
        "--conditions",
        "no_evidence,full_context,retrieved,oracle",
        "--retriever",
        "lexical",
        "--top-k",
        "3",
        "--concurrency",
        "2",
        "--name",
        "hotpot-embedded",
    )
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url


def _check(page, step: str) -> None:
    """No Streamlit exception box; then save the step's screenshot (viewport only)."""
    assert_no_exception(page, step)
    page.screenshot(path=str(SHOTS / f"guide-{step}.png"))


def _choose(page, scope, label: str, option: str) -> None:
    choose(page, scope, label, option)


def _show_audit(page, caption: str) -> None:
    """Wait for ``caption`` in the ONCU audit tab; the page drawn anew may open another tab
    (then the audit tab is clicked again, the newest one while old and new are both there)."""
    for _ in range(3):
        settle(page)
        try:
            page.get_by_text(caption).wait_for(timeout=10_000)
            return
        except PlaywrightTimeout:
            page.get_by_role("tab", name="ONCU audit").last.click()
    page.get_by_text(caption).wait_for(timeout=30_000)


def _grids(page):
    """The visible dataframes (canvas grids) of the page, top to bottom."""
    return page.get_by_test_id("stDataFrame").filter(visible=True)


def _select_first_row(page, grid) -> None:
    """Tick the first row of a selectable grid (a canvas: click its row-marker cell)."""
    grid.scroll_into_view_if_needed()
    box = grid.bounding_box()
    page.mouse.click(box["x"] + 18, box["y"] + 35 + 17)  # marker column, below the header
    settle(page)


def test_guide_walkthrough(server, page, hotpot_file, uploaded):
    page.set_viewport_size(VIEWPORT)

    # 1. Overview: the store, its runs, the backends
    page.goto(server)
    settle(page)
    assert page.get_by_role("heading", name="Evidence-utilization diagnostics").is_visible()
    assert "212" in page.get_by_test_id("stMetric").filter(has_text="Predictions").inner_text()
    _check(page, "01-overview")

    # 2. Runs: import a HotpotQA file
    page.goto(f"{server}/runs")
    settle(page)
    main = page.get_by_test_id("stMain")
    _choose(page, main, "What", "dataset: hotpotqa")
    settle(page)
    page.get_by_label("Name in the store").fill("hotpot-ui")
    page.get_by_label("Name in the store").press("Enter")
    settle(page)
    page.get_by_test_id("stFileUploaderDropzoneInput").set_input_files(str(hotpot_file))
    settle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_text("wrote 53 instances").wait_for(timeout=30_000)
    assert uploaded.exists()
    settle(page)
    page.get_by_text("wrote 53 instances").scroll_into_view_if_needed()
    _check(page, "02-import")

    # 3. Runs: launch the four conditions on it (embedded here; Ollama in the guide)
    page.goto(f"{server}/runs")  # the form lists the datasets of the page's last run
    settle(page)
    form = page.get_by_test_id("stForm")
    if not form.is_visible():  # the expander starts closed (screens/runs.py)
        page.get_by_text("Launch a run", exact=True).click()
    _choose(page, form, "Dataset", "hotpot-ui")
    form.get_by_label("Run name", exact=True).fill("hotpot-ui-embedded")
    form.get_by_role("button", name="Launch").click()
    page.get_by_text("hotpot-ui-embedded · embedded · done").wait_for(timeout=60_000)
    settle(page)
    page.get_by_role("heading", name="Runs", exact=True).scroll_into_view_if_needed()
    _check(page, "03-launch")

    # 4. Conditions & ONCU: ONCU per condition, the four-condition matrix
    page.goto(f"{server}/conditions")
    settle(page)
    assert page.get_by_role("heading", name="Conditions & ONCU").is_visible()
    metric = page.get_by_test_id("stMetric").filter(has_text="full_context ONCU")
    # exact token counts are pooled into length buckets (1K, 2K, ...): 10 groups, not 53
    assert "8/10 valid groups" in metric.inner_text()
    _check(page, "04-conditions")

    # 5. the ONCU audit: raw vs clipped per group, with the [0, 1] band
    page.get_by_role("tab", name="ONCU audit").click()
    settle(page)
    assert page.get_by_text("Raw vs clipped ONCU per group", exact=True).is_visible()
    page.get_by_test_id("stPlotlyChart").filter(visible=True).first.scroll_into_view_if_needed()
    _check(page, "05-oncu-audit")

    # 6. the group table: valid / invalid with reasons; above oracle / below baseline counts
    caption = page.get_by_text("above oracle (raw > 1)")
    assert "4 invalid" in caption.inner_text()  # 2 groups x 2 conditions, S_oracle = S_none
    page.get_by_text("ONCU group audit", exact=True).first.scroll_into_view_if_needed()
    groups = _grids(page).nth(1)  # after the ONCU summary
    box = groups.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(3000, 0)  # scroll the grid right, to the raw/clipped/valid/reason columns
    page.wait_for_timeout(400)
    caption.scroll_into_view_if_needed()
    _check(page, "06-oncu-groups")

    # 7. drill down: narrow to the failure case's group, select it, list its predictions
    sidebar = page.get_by_test_id("stSidebar")
    sidebar.get_by_text("Filters (metadata cells)").click()
    pick(
        page,
        sidebar.get_by_test_id("stMultiSelect").filter(has_text="context length"),
        CASE_LENGTH,
        "the context-length filter",
        typed=True,
        timeout_ms=10_000,
    )
    page.keyboard.press("Escape")
    # the filtered audit: 2 groups x 2 conditions, all valid
    _show_audit(page, "below baseline (raw < 0), 0 invalid")
    settle(page)
    page.get_by_text("ONCU group audit", exact=True).first.scroll_into_view_if_needed()
    _select_first_row(page, _grids(page).nth(1))  # full_context, front: raw ONCU 0
    behind = page.get_by_text("predictions behind")
    behind.wait_for(timeout=30_000)
    cell = page.get_by_test_id("stMain").inner_text()
    assert "condition=full_context" in cell and f"context_length={CASE_LENGTH}" in cell, cell
    behind.scroll_into_view_if_needed()
    _check(page, "07-drill-down")

    # 8. Case view: select the prediction; full context cited a distractor and answered wrong
    _select_first_row(page, _grids(page).nth(2))
    page.wait_for_url(f"**/case_view?*instance={CASE}*", timeout=30_000)
    settle(page)
    assert page.get_by_text(QUESTION).is_visible()
    _check(page, "08-case-view")

    # 9. rerun it without the distractor the full-context answer cited
    main = page.get_by_test_id("stMain")
    _choose(page, main, "Base condition", "full_context")
    settle(page)
    form = page.get_by_test_id("stForm")
    _choose(page, form, "Operator", "remove")
    _choose(page, form, "Target passage", DISTRACTOR)
    form.get_by_role("button", name="Run now").click()
    page.get_by_text("Trace divergence D").wait_for(timeout=60_000)
    settle(page)
    shown = page.get_by_test_id("stMain").inner_text()
    assert "Perturbed" in shown, shown[-500:]
    assert "Terry Richardson" in shown[shown.rindex("Perturbed") :]  # the perturbed answer
    page.get_by_text("Trace divergence D").scroll_into_view_if_needed()
    _check(page, "09-rerun")

    # 10. export a figure for a paper: export settings, then the figure's download menu
    page.goto(f"{server}/conditions")
    settle(page)
    page.get_by_test_id("stSidebar").get_by_text("Export settings").click()
    page.locator('[data-testid="stPopover"] button').first.click()
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="PDF", exact=True).first.click()
    data = Path(info.value.path()).read_bytes()
    name = info.value.suggested_filename  # the figure, dataset and runs: condition_matrix-hp-...
    assert name.startswith("condition_matrix-") and name.endswith(".pdf"), name
    assert data[:5] == b"%PDF-"
    _check(page, "10-download")
