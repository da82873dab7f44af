"""The view in the URL (issue 18 item 4, :mod:`screens.parts.url_state`).

AppTest: query parameters restore the sidebar (dataset, score field, runs, group key, filters);
an unknown value gives one warning naming its parameter; a changed widget is written back to
the URL. Real Chromium: a URL round trip (open, change the dataset, reopen the address) restores
the view.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import (
    ROOT,
    assert_no_exception,
    build_release_store,
    choose,
    settle,
    streamlit_server,
)
from streamlit.testing.v1 import AppTest

APP = str(ROOT / "app.py")


@pytest.fixture(scope="module")
def store_path(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("url") / "store.duckdb"
    build_release_store(path, hotpotqa=True)
    return path


def _open(monkeypatch, store_path: Path, page: str, **params: str) -> AppTest:
    monkeypatch.setenv("EVIDENCE_DB", str(store_path))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page(page)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_query_params_restore_the_sidebar(monkeypatch, store_path):
    at = _open(
        monkeypatch,
        store_path,
        "screens/conditions.py",
        dataset="hotpotqa",
        score="f1_strict",
        runs="hotpotqa",
        group="source,model",
    )
    assert at.selectbox(key="global.dataset").value == "hotpotqa"
    assert at.selectbox(key="global.score_field").value == "f1_strict"
    assert at.multiselect(key="global.runs").value == ["hotpotqa"]
    assert at.multiselect(key="global.group_key").value == ["source", "model"]
    assert not at.warning
    # the URL keeps the view (the page's link shows it too)
    assert at.query_params["dataset"] == "hotpotqa"
    assert at.query_params["score"] == "f1_strict"
    links = [c.value for c in at.sidebar.code]
    assert any(v.startswith("/conditions?") and "score=f1_strict" in v for v in links), links


def test_unknown_dataset_is_one_warning(monkeypatch, store_path):
    at = _open(
        monkeypatch, store_path, "screens/conditions.py", dataset="no-such-set", score="f1_strict"
    )
    warnings = [w.value for w in at.warning if "URL parameter" in w.value]
    assert len(warnings) == 1 and "dataset" in warnings[0] and "no-such-set" in warnings[0]
    assert at.selectbox(key="global.dataset").value == "controlled"  # the default stays
    assert at.selectbox(key="global.score_field").value == "f1_strict"  # the good one applies
    assert "dataset" not in at.query_params


def test_changed_widget_is_written_to_the_url(monkeypatch, store_path):
    at = _open(monkeypatch, store_path, "screens/conditions.py")
    assert "score" not in at.query_params  # the default is not written
    at.selectbox(key="global.score_field").set_value("em_strict").run()
    assert at.query_params["score"] == "em_strict"
    at.selectbox(key="global.dataset").set_value("hotpotqa").run()
    assert at.query_params["dataset"] == "hotpotqa"
    assert at.selectbox(key="global.score_field").value == "em_strict"  # the URL did not undo it
    at.selectbox(key="global.score_field").set_value("f1_relaxed").run()
    assert "score" not in at.query_params


def test_filter_parameter_and_unknown_run(monkeypatch, store_path):
    at = _open(
        monkeypatch,
        store_path,
        "screens/conditions.py",
        dataset="controlled",
        runs="controlled,nope",
    )
    assert at.multiselect(key="global.runs").value == ["controlled"]
    warnings = [w.value for w in at.warning if "URL parameter" in w.value]
    assert len(warnings) == 1 and "runs" in warnings[0] and "nope" in warnings[0]
    # a filter: pick the first offered value of the first filter, then reopen by URL
    box = next(m for m in at.sidebar.multiselect if m.key.startswith("global.f."))
    col, value = box.key.removeprefix("global.f."), box.options[0]
    box.set_value([value]).run()
    assert at.query_params[f"f.{col}"] == str(value)
    again = _open(monkeypatch, store_path, "screens/conditions.py", **{f"f.{col}": str(value)})
    assert again.multiselect(key=f"global.f.{col}").value == [box.value[0]]


def test_conditions_tab_is_in_the_url(monkeypatch, store_path):
    """A link opens the tab it names (only that tab is computed); opening another tab writes
    it; the matrix, the default, is not written; an unknown name is one warning."""
    from conftest import open_tab

    at = _open(monkeypatch, store_path, "screens/conditions.py", tab="contrasts")
    assert at.session_state["conditions.tab"] == "Paired contrasts"
    assert at.query_params["tab"] == "contrasts"
    columns = [set(d.value.columns) for d in at.dataframe]
    assert any("contrast" in c for c in columns)  # the linked tab is the one computed
    assert not any({"condition", "n", "missing", "ci_method"} <= c for c in columns)  # matrix
    open_tab(at, "Calibration")
    assert at.query_params["tab"] == "calibration"
    assert any("ece" in set(d.value.columns) for d in at.dataframe)
    open_tab(at, "Four-condition matrix")
    assert "tab" not in at.query_params
    bad = _open(monkeypatch, store_path, "screens/conditions.py", tab="nope")
    warnings = [w.value for w in bad.warning if "URL parameter" in w.value]
    assert len(warnings) == 1 and "tab" in warnings[0] and "nope" in warnings[0]
    assert "tab" not in bad.query_params


def test_case_view_instance_follows_the_picker(monkeypatch, store_path):
    at = _open(monkeypatch, store_path, "screens/case_view.py", dataset="hotpotqa")
    first = at.selectbox(key="case.instance").value
    assert at.query_params["instance"] == first
    at.button(key="case.next").click().run()
    second = at.selectbox(key="case.instance").value
    assert second != first and at.query_params["instance"] == second
    again = _open(
        monkeypatch, store_path, "screens/case_view.py", dataset="hotpotqa", instance=second
    )
    assert again.selectbox(key="case.instance").value == second
    # another dataset: the instance of the old one leaves the URL
    again.selectbox(key="global.dataset").set_value("controlled").run()
    assert not again.exception
    assert again.query_params.get("instance") == again.selectbox(key="case.instance").value
    assert again.query_params["instance"] != second


# ------------------------------------------------------------------------------ browser
@pytest.fixture(scope="module")
def server(store_path, tmp_path_factory):
    with streamlit_server(store_path, tmp_path_factory.mktemp("log")) as url:
        yield url


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=600)


def _sidebar_value(page, label: str) -> str:
    box = page.get_by_test_id("stSidebar").get_by_test_id("stSelectbox").filter(has_text=label)
    return box.first.locator("input").first.input_value()  # the combobox holds the value


@pytest.mark.slow
@pytest.mark.browser
def test_url_round_trip_in_the_browser(server, page, context):
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{server}/conditions?dataset=hotpotqa&score=f1_strict")
    _settle(page)
    assert_no_exception(page, "conditions")
    assert _sidebar_value(page, "Dataset") == "hotpotqa"
    assert _sidebar_value(page, "Score field") == "f1_strict"
    choose(page, page.get_by_test_id("stSidebar"), "Dataset", "(all datasets)", _settle)
    page.wait_for_url(lambda u: "dataset=%2A" in u or "dataset=*" in u, timeout=30_000)
    _settle(page)
    choose(page, page.get_by_test_id("stSidebar"), "Dataset", "controlled", _settle)
    page.wait_for_url(lambda u: "dataset=" not in u, timeout=30_000)  # the default: short URL
    choose(page, page.get_by_test_id("stSidebar"), "Dataset", "hotpotqa", _settle)
    page.wait_for_url(lambda u: "dataset=hotpotqa" in u and "score=f1_strict" in u, timeout=30_000)
    _settle(page)
    page.get_by_role("tab", name="Paired contrasts").click()  # the open tab joins the link
    page.wait_for_url(lambda u: "tab=contrasts" in u and "dataset=hotpotqa" in u, timeout=30_000)
    _settle(page)
    url = page.url
    fresh = context.new_page()  # a new tab: a new session
    fresh.set_viewport_size({"width": 1400, "height": 1000})
    fresh.goto(url)
    _settle(fresh)
    assert_no_exception(fresh, "conditions (reopened)")
    assert _sidebar_value(fresh, "Dataset") == "hotpotqa"
    assert _sidebar_value(fresh, "Score field") == "f1_strict"
    tab = fresh.get_by_role("tab", name="Paired contrasts")
    assert tab.get_attribute("aria-selected") == "true"  # the link reopens the tab it names
    link = fresh.get_by_test_id("stSidebar").get_by_test_id("stCode").first.inner_text()
    assert link.strip() == url, (link, url)  # "Copy link" holds the address of this view
