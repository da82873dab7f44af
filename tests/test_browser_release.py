"""A released run read in a real browser (issue 34 item 7, issue 36 item 1).

The HotpotQA run of the ONCU release is uploaded on the Runs page as its three files (metrics
CSV, parsed predictions, raw replies). The Case view of a retrieved failure must then show the
model's explanation and raw reply as released, the release's parse beside this tool's, and say
that the release holds no question or passage text; Fan-in must not show a measured ER / EP of 0
for the retrieved calls, whose shown passages the release does not record.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from conftest import (
    RELEASE_HOTPOTQA,
    ROOT,
    SHOTS,
    assert_no_exception,
    settle,
    shared_fixture,
    streamlit_server,
)

from core.store import Store

pytestmark = [pytest.mark.browser]

_RUN = "hotpotqa_qwen25_14b_200"
_IID = "hotpotqa_5adddccd5542997dc7907069"
# hand-read from the fixture's parsed_predictions.jsonl, line 15 (retrieve_then_read; gold
# answer "keyboard function keys", released answer "Siri Remote": a wrong answer)
_EXPLANATION = (
    "The Siri Remote is designed specifically to work with the always-on Siri "
    "capable Apple TV, which was originally interacted with by the Apple Remote."
)
_KINDS = ("per_sample_metrics.csv", "parsed_predictions.jsonl", "raw_model_responses.jsonl")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``(url, db, files)``: a server on an empty store, and the release's three files."""
    csv_path = shared_fixture(RELEASE_HOTPOTQA)
    files = [csv_path.with_name(f"{_RUN}.{k}") for k in _KINDS]
    db = tmp_path_factory.mktemp("release") / "store.duckdb"
    Store(db)  # an empty store
    # issue 36.1's steps: the metrics CSV alone, imported with the command line
    alone = tmp_path_factory.mktemp("alone") / files[0].name
    shutil.copy(files[0], alone)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "import",
            "results",
            "--format",
            "oncu-release",
            str(alone),
            "--name",
            "csv-only",
            "--db",
            str(db),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url, db, files


def _settle(page) -> None:
    settle(page, timeout_ms=120_000, draw_ms=400)


@pytest.fixture(scope="module")
def imported(server, browser):
    """Upload the three files on the Runs page and import them (once for the module)."""
    url, db, files = server
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.goto(f"{url}/runs")
    _settle(page)
    box = page.get_by_test_id("stFileUploader").filter(has_text="Files (written under")
    box.locator('input[type="file"]').set_input_files([str(f) for f in files])
    page.get_by_role("button", name="Import", exact=True).wait_for(timeout=60_000)
    _settle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    done = page.get_by_text("read 800 predictions of 200 instances", exact=False)
    done.first.wait_for(timeout=180_000)
    _settle(page)
    assert_no_exception(page, "runs")
    text = done.first.inner_text()
    assert "explanations: 621" in text and "raw replies: 800 of 800" in text
    page.screenshot(path=str(SHOTS / "release_import.png"))
    page.close()
    try:
        yield url, db, files
    finally:  # the uploads are copies of the shared fixtures: none is left in the checkout
        for f in files:
            (ROOT / "data" / "uploads" / f.name).unlink(missing_ok=True)


def test_case_view_shows_a_released_failure_with_its_explanation_and_reply(imported, page):
    url, db, files = imported
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/case_view?dataset={_RUN}&instance={_IID}&condition=retrieved")
    page.get_by_text("Raw response").first.wait_for(timeout=180_000)
    _settle(page)
    assert_no_exception(page, "case_view")
    # the picked prediction is the retrieved one, a wrong answer
    picked = page.get_by_role("combobox", name="Prediction").input_value()
    assert picked == f"{_RUN} · retrieved"
    explanation = page.get_by_text(_EXPLANATION, exact=True)
    explanation.first.wait_for(timeout=90_000)
    assert explanation.first.is_visible()
    # the raw reply exactly as the model wrote it (the fixture's raw_response)
    replies = [json.loads(line) for line in files[2].read_text(encoding="utf-8").splitlines()]
    raw = next(
        r["raw_response"]
        for r in replies
        if (r["sample_id"], r["method"]) == (_IID, "retrieve_then_read")
    )
    codes = page.locator('[data-testid="stCode"] pre').evaluate_all(
        "els => els.map(e => e.innerText)"
    )
    assert raw.strip() in [c.strip() for c in codes]
    body = page.locator("body").inner_text()
    assert "The release's parse and this tool's parse of the raw reply" in body
    assert "The store holds no question or passage text for this instance" in body
    page.screenshot(path=str(SHOTS / "release_case_view.png"), full_page=True)


@pytest.mark.parametrize("dataset", [_RUN, "csv-only"])
def test_fanin_of_the_release_shows_no_zero_er_for_retrieved(imported, page, dataset):
    """Uploaded with its side files, or the CSV alone by the command line (issue 36.1)."""
    url, _, _ = imported
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/fanin?dataset={dataset}")
    warning = page.get_by_text("ER / EP not measured for", exact=False)
    warning.first.wait_for(timeout=180_000)
    _settle(page)
    assert_no_exception(page, "fanin")
    text = warning.first.inner_text()
    assert f"{dataset} · retrieved: 200 of 200" in text
    assert "oracle" not in text  # the oracle's pack is its gold evidence: measured
    page.screenshot(path=str(SHOTS / f"release_fanin_{dataset}.png"), full_page=True)


def test_a_rerun_of_a_released_instance_is_refused_with_its_reason(imported, page):
    """No question or passage text: the rerun is refused in one line, nothing is run."""
    url, db, _ = imported
    runs_before = len(Store(db).runs_frame(live=False))
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/case_view?dataset={_RUN}&instance={_IID}&condition=retrieved")
    page.get_by_text("Raw response").first.wait_for(timeout=180_000)
    _settle(page)
    page.get_by_role("button", name="Run now").click()
    refusal = page.get_by_text(
        f"cannot rerun {_IID}: the store holds no question or passage text for it", exact=False
    )
    refusal.first.wait_for(timeout=120_000)
    _settle(page)
    assert_no_exception(page, "case_view rerun")
    assert "shown 3 items" not in page.locator("body").inner_text()
    assert len(Store(db).runs_frame(live=False)) == runs_before  # no companion run made


def test_a_dataset_file_uploaded_as_results_is_named(server, page):
    """Issue 36 "Why" 12: the HotpotQA JSON uploaded as released results said "column named
    twice in the header"; the page now says what the file is and which choice to make, and
    imports nothing."""
    url, db, _ = server
    hotpot = shared_fixture("hotpotqa/hotpot_dev_distractor_sample53.json")
    before = sorted(Store(db).runs_frame()["run_id"])
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/runs")
    _settle(page)
    box = page.get_by_test_id("stFileUploader").filter(has_text="Files (written under")
    box.locator('input[type="file"]').set_input_files([str(hotpot)])
    page.get_by_role("button", name="Import", exact=True).wait_for(timeout=60_000)
    _settle(page)
    page.get_by_role("button", name="Import", exact=True).click()
    alert = page.get_by_test_id("stAlert").filter(has_text="looks like a HotpotQA file")
    alert.first.wait_for(timeout=60_000)
    text = alert.first.inner_text()
    assert 'choose format hotpotqa (choose What: "dataset: hotpotqa" above)' in text, text
    assert "named twice" not in text
    assert_no_exception(page, "runs, wrong format")
    assert sorted(Store(db).runs_frame()["run_id"]) == before
