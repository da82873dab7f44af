"""The failure browser's kinds, gold column and run banners in a real browser (issue 36 items 6
and 11).

With "(all datasets)" the browser counts answers only: DOLCE probes and CUE-R interventions
are their own kinds, listed when chosen. Every row shows the gold answer. A Case-view rerun
against a server that is down does not put a banner on every page of the dataset: its run is
in the banner only when chosen, the Case view shows no run-level banner, and the banner can
be hidden until more calls fail.
"""

from __future__ import annotations

import re

import pytest
from conftest import (
    assert_no_exception,
    build_release_store,
    choose,
    dead_url,
    pick,
    settle,
    shared_fixture,
    streamlit_server,
)
from playwright.sync_api import expect

from core import views
from core.backends.embedded import EmbeddedReader
from core.execution.rerun import RerunRequest, base_shown_ids, rerun
from core.execution.runs import run_probes
from core.store.failure_rows import FailureFilter
from core.store.schema import bump_data_version

pytestmark = [pytest.mark.browser]
_BANNER = "calls of the selected runs failed"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``(url, store, rerun run)``: the release and the demo, DOLCE probes of one instance, and
    a rerun of a released prediction against a dead server."""
    shared_fixture("oncu_release")
    db = tmp_path_factory.mktemp("kinds") / "store.duckdb"
    store = build_release_store(db, demo=True)
    run_probes(store, "controlled-200", EmbeddedReader(), name="probes-1", units="passage", limit=1)
    # the demo run stands in for an imported release with text: a rerun then goes to a
    # companion run of kind "rerun", here against an Ollama host that is down
    with store.transaction() as con:
        con.execute(
            "UPDATE runs SET backend = 'oncu-release', kind = 'imported' "
            "WHERE run_id = 'demo-embedded'"
        )
        bump_data_version(con, runs=["demo-embedded"])
    iid = store.list_instance_ids("controlled-200")[0]
    shown = base_shown_ids(
        views.case_data(store, "controlled-200", iid, ["demo-embedded"])["predictions"],
        "demo-embedded",
        "oracle",
    )
    got = rerun(
        store,
        RerunRequest(
            "controlled-200",
            iid,
            "demo-embedded",
            "oracle",
            "remove",
            shown[0],
            {},
            "ollama",
            "x",
            dead_url(),
        ),
    )
    assert got["error"] and got["run"] != "demo-embedded", got
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        yield url, store, got["run"], iid


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=300)


def _total(page) -> int:
    text = page.get_by_text(re.compile(r"^[\d,]+ predictions in this list")).first.inner_text()
    return int(text.split()[0].replace(",", ""))


def test_all_datasets_counts_answers_and_shows_gold(server, page):
    url, store, _, _ = server
    page.set_viewport_size({"width": 1600, "height": 1000})
    page.goto(f"{url}/failures?dataset=*&only=0")
    page.get_by_role("heading", name="Failure browser").wait_for(timeout=90_000)
    _settle(page)
    assert_no_exception(page, "failures, all datasets")
    runs = tuple(views.stored_runs(store)["run_id"])
    _, answers = store.failure_page(
        FailureFilter(runs=runs, kinds=("answer",), failures_only=False), 0, 1
    )
    _, every = store.failure_page(FailureFilter(runs=runs, failures_only=False), 0, 1)
    assert every["total"] > answers["total"]  # the probes are there, and not counted
    assert _total(page) == answers["total"]
    # the grid's accessible copy is filled after the canvas draws (late under load): wait
    headers = page.locator('[data-testid="stDataFrame"] th')
    expect(headers.filter(has_text=re.compile(r"^\s*gold answer\s*$")).first).to_be_attached(
        timeout=60_000
    )
    page.goto(f"{url}/failures?dataset=*&only=0&kind=answer,probe")
    _settle(page)
    probes = store.failure_page(
        FailureFilter(runs=runs, kinds=("answer", "probe"), failures_only=False), 0, 1
    )[1]
    assert _total(page) == probes["total"] > answers["total"]


def test_a_dead_server_rerun_banner_only_where_it_applies(server, page):
    url, _, rerun_run, iid = server
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/case_view?dataset=controlled-200&instance={iid}")
    page.get_by_text("Raw response").first.wait_for(timeout=90_000)
    _settle(page)
    assert page.get_by_text(_BANNER).count() == 0  # the Case view: no run-level banner
    page.goto(f"{url}/conditions?dataset=controlled-200")
    _settle(page)
    assert page.get_by_text(_BANNER).count() == 0  # the rerun is not chosen: no banner
    page.goto(f"{url}/failures?dataset=controlled-200&runs={rerun_run}")
    _settle(page)
    assert page.get_by_text(_BANNER).count() == 1  # chosen: it applies
    page.get_by_role("button", name="Hide this notice").click()
    _settle(page)
    assert page.get_by_text(_BANNER).count() == 0
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Overview").click()
    _settle(page)
    page.get_by_test_id("stSidebarNav").get_by_role("link", name="Failure browser").click()
    _settle(page)
    assert page.get_by_text(_BANNER).count() == 0  # hidden until more calls fail


def test_a_refused_rerun_replaces_the_old_result_in_place(server, page):
    url, _, _, iid = server
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/case_view?dataset=controlled-200&instance={iid}")
    page.get_by_text("Raw response").first.wait_for(timeout=90_000)
    _settle(page)
    choose(page, page, "Base run", "demo-embedded", settle_page=_settle)
    page.get_by_role("button", name="Run now").click()  # embedded reader: a result with D
    page.get_by_text("Trace divergence D").wait_for(timeout=90_000)
    _settle(page)
    assert page.get_by_text("Perturbed").first.is_visible()
    box = page.get_by_test_id("stSelectbox").filter(has_text="Backend (for imported runs)")
    pick(page, box.first, "openai", "backend", settle_page=_settle)
    page.get_by_role("button", name="Run now").click()
    alert = page.get_by_test_id("stAlert").filter(has_text="Rerun not made")
    alert.first.wait_for(timeout=60_000)
    _settle(page)
    text = alert.first.inner_text()
    assert "needs the Server URL field" in text and "--base-url" not in text, text
    assert page.get_by_text("Trace divergence D").count() == 0  # the old result is gone
    assert page.get_by_text("Perturbed").count() == 0
    assert_no_exception(page, "refused rerun")
