"""The Runs page's "Timeout (s)" field (issue 17 item 3): a launch from the dashboard runs with
the timeout the user typed, and a call that outlives it is stored as an error naming the flag.

The page is driven through Streamlit's AppTest; the run itself is the real child process the
page starts (``python -m core run``) against the stub Ollama server, stalled so every call
times out.
"""

from __future__ import annotations

import time

from conftest import ROOT
from model_stub import PASSAGE
from streamlit.testing.v1 import AppTest

from core.store import Store
from core.types import Dataset, Instance

APP = str(ROOT / "app.py")


def test_a_launch_with_a_timeout_fails_its_calls_with_an_error_naming_the_flag(
    tmp_path, monkeypatch, stub
):
    stub.stall_s = 10.0
    stub.set_mode("stall")
    db = tmp_path / "s.duckdb"
    inst = Instance("q1", "What is the capital of Zarnovia?", "Keltbridge", (PASSAGE,))
    Store(db).write_dataset(Dataset("one", "test", "test", {}, (inst,)))
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    monkeypatch.setenv("OLLAMA_HOST", stub.url)

    at = AppTest.from_file(APP, default_timeout=120)
    at.switch_page("screens/runs.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    inputs = {t.label: t for t in at.text_input}
    inputs["Run name"].set_value("slow")
    inputs["Model"].set_value("stub-model")
    next(s for s in at.selectbox if s.label == "Backend").set_value("ollama")
    at.number_input(key="runs.timeout").set_value(0.3)
    next(m for m in at.multiselect if m.label == "Conditions").set_value(["oracle"])
    next(b for b in at.button if b.label == "Launch").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]

    deadline = time.time() + 90
    row: dict = {}
    while time.time() < deadline:
        row = Store(db).run_row("slow") or {}
        if row.get("status") in ("failed", "done", "partial"):
            break
        time.sleep(0.5)
    assert row.get("status") == "failed", row
    errors = set(Store(db).prediction_rows("slow")["error"])
    # 4 tries of 0.3 s each: far below the 10 s stall and the default 600 s timeout
    assert errors == {
        f"timed out after 0.3s waiting for {stub.url} (a long prompt on a slow machine: raise "
        "--timeout SECONDS)"  # one deadline for the whole call, no retry after it
    }


def test_resume_of_a_running_run_says_so_and_starts_nothing(tmp_path, monkeypatch):
    """Resume on a run whose process is still running (it holds the run's lock): one
    warning, no second process, no exception box (issue 18 item 9)."""
    from core.store.locks import hold_run

    db = tmp_path / "s.duckdb"
    inst = Instance("q1", "What is the capital of Zarnovia?", "Keltbridge", (PASSAGE,))
    store = Store(db)
    store.write_dataset(Dataset("one", "test", "test", {}, (inst,)))
    store.save_run(
        {
            "run_id": "busy",
            "dataset_id": "one",
            "status": "running",
            "kind": "conditions",
            "backend": "embedded",
        }
    )
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    with hold_run(db, "busy"):  # as the run's own process would
        at = AppTest.from_file(APP, default_timeout=120)
        at.switch_page("screens/runs.py")
        at.run()
        at.selectbox(key="runs.pick").set_value("busy")
        next(b for b in at.button if b.label == "Resume").click()
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        warnings = [w.value for w in at.warning]
        assert len(warnings) == 1 and "is running" in warnings[0], warnings
        # nothing started: no job line for the run (jobs of other tests may be listed)
        assert not [m.value for m in at.markdown if m.value.startswith("**busy**")]
