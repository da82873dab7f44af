"""The Runs page's import replaces a dataset that has runs only as the user says (issue 35
item 1): the same choice as ``--with-runs`` (refuse, drop, keep-orphans), shown once "Replace
existing" is ticked, and carried to the store's write."""

from __future__ import annotations

import pytest
from conftest import ROOT, shared_fixture

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"


@pytest.fixture
def store_with_a_run(tmp_path, monkeypatch):
    from core.backends import make_backend
    from core.datasets.importers import read_dataset
    from core.execution.runs import run_conditions
    from core.store import Store

    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.write_dataset(read_dataset(shared_fixture(HOTPOT), "hotpotqa", "hp").dataset)
    run_conditions(store, "hp", make_backend("embedded"), ["oracle"], name="r1")
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    return db


def test_the_choice_appears_with_replace(store_with_a_run):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("screens/runs.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    keys = {s.key for s in at.selectbox}
    assert "runs.import_with_runs" not in keys
    at.checkbox(key="runs.import_replace").check().run()
    choice = at.selectbox(key="runs.import_with_runs")
    assert choice.value == "refuse if it has runs"
    assert list(choice.options) == [
        "refuse if it has runs",
        "drop them (delete with it)",
        "keep them (orphans)",
    ]


def test_import_file_refuses_drops_or_keeps_the_runs(store_with_a_run):
    from core.store import Store
    from screens.parts.common import import_file

    path = shared_fixture(HOTPOT)
    with pytest.raises(ValueError, match="--with-runs drop"):
        import_file("dataset: hotpotqa", path, "hp", replace=True)
    assert Store(store_with_a_run).run_row("r1") is not None  # nothing written
    import_file("dataset: hotpotqa", path, "hp", replace=True, with_runs="keep-orphans")
    assert Store(store_with_a_run).run_row("r1") is not None
    import_file("dataset: hotpotqa", path, "hp", replace=True, with_runs="drop")
    assert Store(store_with_a_run).run_row("r1") is None
