"""Issue 18 items 7 and 9 in real Chromium: a typo'd store path creates nothing and shows one
line; the theme follows the system's light or dark preference.
"""

from __future__ import annotations

import pytest
from conftest import assert_no_exception, settle, streamlit_server

from core.store import Store
from core.types import Dataset, Instance

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    db = tmp_path_factory.mktemp("store") / "good.duckdb"
    inst = Instance("q1", "Where was Ada born?", "London", ())
    Store(db).write_dataset(Dataset("tiny", "test", "test", {}, (inst,)))
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        yield url


def _settle(page) -> None:
    settle(page, timeout_ms=60_000, draw_ms=300)


def test_a_typo_in_the_store_path_creates_nothing(server, page, tmp_path):
    typo = tmp_path / "nowhere" / "evidnce.duckdb"
    page.goto(server)
    _settle(page)
    field = page.get_by_role("textbox", name="Store (DuckDB file)")
    field.fill(str(typo))
    field.press("Enter")
    page.get_by_text("no such store").first.wait_for(timeout=30_000)
    _settle(page)
    assert_no_exception(page, "typo'd store path")
    assert page.get_by_role("button", name="Create a new store here").is_visible()
    assert not typo.exists() and not typo.parent.exists()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_theme_follows_the_system(server, browser, scheme):
    context = browser.new_context(color_scheme=scheme)
    try:
        page = context.new_page()
        page.goto(server)
        _settle(page)
        assert_no_exception(page, f"{scheme} theme")
        rgb = page.evaluate(
            "getComputedStyle(document.querySelector('[data-testid=\"stApp\"]')).backgroundColor"
        )
        r, g, b = (int(x) for x in rgb[rgb.index("(") + 1 : rgb.index(")")].split(",")[:3])
        brightness = (r + g + b) / 3
        assert (brightness > 128) == (scheme == "light"), (scheme, rgb)
    finally:
        context.close()
