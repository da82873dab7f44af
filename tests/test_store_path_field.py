"""The sidebar's store path (issue 18 item 7): stores are opened deliberately.

A typo is "no such store" and creates nothing; a directory, a SQLite file or a text file gets
one line (no exception box); creating a store is the explicit "Create a new store here"
button. Driven through Streamlit's AppTest on the real app.
"""

from __future__ import annotations

import sqlite3

import pytest
from conftest import ROOT
from streamlit.testing.v1 import AppTest

from core.store import Store
from core.types import Dataset, Instance

APP = str(ROOT / "app.py")


@pytest.fixture
def app(tmp_path, monkeypatch):
    db = tmp_path / "good.duckdb"
    inst = Instance("q1", "Where was Ada born?", "London", ())
    Store(db).write_dataset(Dataset("tiny", "test", "test", {}, (inst,)))
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _type_path(at: AppTest, path) -> AppTest:
    at.text_input(key="global.db").set_value(str(path)).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_typo_creates_nothing_and_says_no_such_store(app, tmp_path):
    typo = tmp_path / "missing" / "goood.duckdb"
    _type_path(app, typo)
    assert [e.value for e in app.error] == [f"no such store: {typo}"]
    assert not typo.exists() and not typo.parent.exists()
    # the page below stops: no metric of the store that is not there
    assert not app.metric
    # creating is the explicit action
    next(b for b in app.button if b.label == "Create a new store here").click().run()
    assert not app.exception and not app.error
    assert typo.exists() and Store(typo).dataset_names() == []


@pytest.mark.parametrize("kind", ["directory", "sqlite", "text"])
def test_a_path_that_is_no_store_gets_one_line(app, tmp_path, kind):
    path = tmp_path / f"x.{kind}"
    if kind == "directory":
        path.mkdir()
        why = "a directory"
    elif kind == "sqlite":
        sqlite3.connect(path).execute("create table t (a int)").connection.commit()
        why = "a SQLite database"
    else:
        path.write_text("hello, this is not a database\n" * 500)
        why = "not a DuckDB database file"
    before = sorted(p.name for p in tmp_path.iterdir())
    _type_path(app, path)
    errors = [e.value for e in app.error]
    assert len(errors) == 1 and why in errors[0] and "\n" not in errors[0], errors
    assert str(path) in errors[0]
    assert not any(b.label == "Create a new store here" for b in app.button)
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written beside it


def test_going_back_to_a_good_store_shows_it_again(app, tmp_path):
    _type_path(app, tmp_path / "nope.duckdb")
    assert app.error
    _type_path(app, tmp_path / "good.duckdb")
    assert not app.error
    metrics = {m.label: m.value for m in app.metric}
    assert metrics["Datasets"] == "1"
