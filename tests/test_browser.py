"""The dashboard in a real browser: Debian Chromium (headless) driven by pytest-playwright.

Starts ``streamlit run app.py`` on a free localhost port against a temporary store (the released
controlled outputs + the embedded-reader demo), opens every page, performs one Case-view rerun
and one figure download, saves screenshots under ``test-results/screenshots/`` and asserts that
no page shows a Streamlit exception box.
"""

from __future__ import annotations

import pytest
from conftest import (
    SHOTS,
    assert_no_exception,
    build_release_store,
    settle,
    streamlit_server,
)

pytestmark = [pytest.mark.browser, pytest.mark.slow]

PAGES = (
    "overview",
    "conditions",
    "length_position",
    "retrieval",
    "fanin",
    "interventions",
    "dolce",
    "case_view",
    "runs",
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("browser") / "store.duckdb"
    build_release_store(db, demo=True)
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=600)


def test_every_page_renders_without_exceptions(server, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    seen = []
    for name in PAGES:
        path = "" if name == "overview" else name
        page.goto(f"{server}/{path}")
        _settle(page)
        assert_no_exception(page, name)
        page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        seen.append(name)
    assert {"overview", "conditions", "length_position", "retrieval", "case_view", "runs"} <= set(
        seen
    )
    page.goto(server)
    _settle(page)
    # tables are canvas grids: check the metrics (800 imported + 800 embedded predictions)
    metric = page.locator('[data-testid="stMetric"]', has_text="Predictions")
    assert "1,600" in metric.inner_text()


def test_case_view_rerun_in_the_browser(server, page):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/case_view?dataset=controlled-200&instance=controlled_000001")
    question = page.get_by_text("Which lab developed Model Gamma 01805?", exact=True).first
    question.wait_for(timeout=90_000)  # the first script run has drawn the instance
    _settle(page)
    assert question.is_visible()
    page.get_by_role("button", name="Run now").click()
    page.get_by_text("Trace divergence D").wait_for(timeout=60_000)
    _settle(page)
    assert_no_exception(page, "case_view rerun")
    assert page.get_by_text("Perturbed").first.is_visible()
    page.screenshot(path=str(SHOTS / "case_view_rerun.png"), full_page=True)


def test_figure_download_in_the_browser(server, page, tmp_path):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/conditions")
    _settle(page)
    page.locator('[data-testid="stPopover"] button').first.click()
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="PNG", exact=True).first.click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    data = target.read_bytes()
    # named after the figure, the dataset and the runs shown (as the command line's exports)
    assert target.name.startswith("condition_matrix-controlled") and target.suffix == ".png"
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1400, 900)  # default 700 x 450 at PNG scale 2
    page.screenshot(path=str(SHOTS / "download_menu.png"))
    assert_no_exception(page, "download")


def test_table_csv_download_is_made_on_click(server, page, tmp_path):
    """Table downloads are made when clicked (deferred), and hold the table the page shows."""
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/conditions")
    _settle(page)
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="CSV", exact=True).first.click()
    target = tmp_path / info.value.suggested_filename
    info.value.save_as(target)
    header = target.read_text(encoding="utf-8-sig").splitlines()[0].split(",")
    assert target.suffix == ".csv" and len(header) > 2, header
    assert "condition" in header or "group" in " ".join(header), header
    assert_no_exception(page, "table download")


def test_a_page_url_as_the_first_request_gets_the_app_menu(page, tmp_path):
    """A fresh server whose first request is a page's URL (a bookmark, a link in a paper's
    notes) shows that page under the app's menu, not Streamlit's listing of ``screens/``
    (helper modules included) that it uses until ``app.py`` has run once."""
    with streamlit_server(tmp_path / "empty.duckdb", tmp_path) as url:
        page.goto(f"{url}/conditions")
        # the first menu drawn, before anything settles: the app's page titles only (a
        # `pages/` folder made Streamlit list its files, helpers included, until app.py ran)
        first = page.locator('[data-testid="stSidebarNavLink"]')
        first.first.wait_for(timeout=90_000)
        shown = [m.split("\n")[-1].strip() for m in first.all_inner_texts()]
        assert not {"common", "app", "case view", "exports", "widgets"} & set(shown), shown
        _settle(page)
        assert_no_exception(page, "conditions as first request")
        menu = page.locator('[data-testid="stSidebarNavLink"]').all_inner_texts()
        titles = [m.split("\n")[-1].strip() for m in menu]
        assert "Conditions & ONCU" in titles and "Overview" in titles, titles
        assert not {"common", "app", "case view"} & set(titles), titles
        # the page reruns once when it leaves Streamlit's directory mode: its heading can be
        # drawn a moment after the menu
        heading = page.get_by_role("heading", name="Conditions & ONCU")
        heading.first.wait_for(timeout=30_000)
        assert heading.count() >= 1
        assert page.url.rstrip("/").endswith("/conditions")
