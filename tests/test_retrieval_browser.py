"""Chromium: the Retrieval page on imported results (issue 36 item 1's audit).

A dataset imported from the released metrics CSV has no passage text: the page says the audit
is missing, with the reason and the count, instead of ranking empty gold-only passages into
recall = coverage = 1.0 at every k.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import (
    RELEASE_HOTPOTQA,
    ROOT,
    assert_no_exception,
    settle,
    shared_fixture,
    streamlit_server,
)

from core.store import Store

pytestmark = [pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A server on a store holding the released HotpotQA metrics CSV, imported as 'rel'."""
    csv_path = shared_fixture(RELEASE_HOTPOTQA)
    db = tmp_path_factory.mktemp("rel") / "store.duckdb"
    Store(db)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "import",
            "results",
            "--format",
            "oncu-release",
            str(csv_path),
            "--name",
            "rel",
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
        yield url


def test_the_retrieval_page_says_the_audit_of_imported_results_is_missing(server, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/retrieval?dataset=rel")
    warning = page.get_by_text(
        "Missing: no passage text in this dataset: imported results", exact=False
    )
    warning.first.wait_for(timeout=180_000)
    settle(page, timeout_ms=120_000, draw_ms=400)
    assert_no_exception(page, "retrieval")
    assert "all 200 instances have no passage text to rank" in warning.first.inner_text()
