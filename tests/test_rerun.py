"""Case-view reruns (issue 15, item 5): a failed call is an error, never an empty answer with
D = 0.000, and a rerun never changes the base run's row.

The base runs are real: the Ollama backend against the stub model server (``model_stub``) and
the embedded reader; the dead server is a localhost port nobody listens on.
"""

from __future__ import annotations

import pytest
from conftest import dead_url
from model_stub import ModelStub

from core.backends import EmbeddedReader, make_backend
from core.datasets.controlled import build_controlled
from core.execution.rerun import RerunRequest, base_shown_ids, rerun
from core.execution.runs import run_conditions
from core.store import Store
from core.types import Dataset

#: What a rerun must leave as it is on the base run's row.
RUN_FIELDS = (
    "status",
    "n_planned",
    "n_done",
    "n_errors",
    "model_seconds",
    "wall_seconds",
    "finished_at",
    "heartbeat_at",
    "pid",
)


def _row(store: Store, run_id: str) -> dict:
    row = store.run_row(run_id)
    return {k: row.get(k) for k in RUN_FIELDS}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    picks = tuple(full.instances[i] for i in (0, 50))
    store = Store(tmp_path_factory.mktemp("rerun") / "s.duckdb")
    store.write_dataset(Dataset("small", full.source, full.builder, full.builder_params, picks))
    with ModelStub() as stub:
        summary = run_conditions(
            store,
            "small",
            make_backend("ollama", "stub-model", hosts=[stub.url]),
            ["retrieved"],
            name="ol",
        )
    assert summary.status == "done" and summary.errors == 0
    summary = run_conditions(
        store, "small", EmbeddedReader(workers=False), ["retrieved"], name="emb"
    )
    assert summary.status == "done"
    # a run whose backend cannot be called again (as an imported one): reruns go to a companion
    store.save_run(
        {
            "run_id": "imp",
            "dataset_id": "small",
            "backend": "import",
            "model": "released",
            "status": "done",
            "n_planned": 2,
            "n_done": 2,
            "kind": "conditions",
        }
    )
    return store


def _request(store: Store, run_id: str, **kw) -> RerunRequest:
    iid = store.list_instance_ids("small")[0]
    shown = base_shown_ids(store.instance_predictions(["emb"], iid), "emb", "retrieved")
    return RerunRequest("small", iid, run_id, "retrieved", "remove", shown[0], {}, **kw)


def test_a_rerun_against_a_dead_server_returns_the_error_and_leaves_the_base_run(store):
    before = _row(store, "ol")
    assert (before["status"], before["n_planned"], before["n_done"]) == ("done", 2, 2)
    res = rerun(store, _request(store, "ol", host=dead_url()))
    assert res["run"] == "ol"  # a callable base run takes the rerun itself
    assert res["error"] and "\n" not in res["error"]
    assert res["perturbed"]["error"].startswith(res["error"])
    assert res["perturbed"]["answer"] is None
    assert res["divergence"] is None and res["diff"] == []
    assert res["original"]["error"] is None  # the stored original is shown as it was
    assert _row(store, "ol") == before
    # the failed call is stored (failures are data), beside the run's own predictions
    stored = store.prediction_rows("ol")
    failed = stored[stored["variant"] != ""]
    assert len(failed) == 1 and failed["error"].iloc[0] == res["perturbed"]["error"]


def test_a_successful_rerun_leaves_the_base_run(store):
    before = _row(store, "emb")
    res = rerun(store, _request(store, "emb"))
    assert res["error"] is None
    assert res["perturbed"]["error"] is None and res["perturbed"]["answer"] is not None
    assert isinstance(res["divergence"], float)
    assert _row(store, "emb") == before
    assert store.run_row("emb")["status"] == "done"


def test_a_retry_against_a_live_server_replaces_the_failed_rerun(store):
    before = _row(store, "ol")
    with ModelStub() as stub:
        res = rerun(store, _request(store, "ol", host=stub.url))
    assert res["error"] is None and res["perturbed"]["answer"] is not None
    assert isinstance(res["divergence"], float)
    assert _row(store, "ol") == before
    stored = store.prediction_rows("ol")
    assert len(stored[stored["variant"] != ""]) == 1  # replaced, not added


def test_a_companion_rerun_against_a_dead_server_is_a_failed_companion(store):
    before = _row(store, "imp")
    req = _request(store, "imp", backend="ollama", model="stub-model", host=dead_url())
    res = rerun(store, req)
    assert res["run"] == "small:rerun:ollama:stub-model"
    assert res["error"] and res["divergence"] is None
    assert res["original"]["error"] and res["perturbed"]["error"]
    assert _row(store, "imp") == before
    comp = store.run_row(res["run"])
    assert (comp["status"], comp["n_planned"], comp["n_done"], comp["n_errors"]) == (
        "failed",
        2,
        2,
        2,
    )
    # Retry: the same request against a server that answers
    with ModelStub() as stub:
        res = rerun(store, RerunRequest(**{**_fields(req), "host": stub.url}))
    assert res["error"] is None and isinstance(res["divergence"], float)
    comp = store.run_row(res["run"])
    assert (comp["status"], comp["n_planned"], comp["n_done"], comp["n_errors"]) == (
        "done",
        2,
        2,
        0,
    )
    assert _row(store, "imp") == before


def _fields(req: RerunRequest) -> dict:
    return {k: getattr(req, k) for k in RerunRequest.__dataclass_fields__}


def test_resuming_a_run_after_reruns_keeps_its_counts_and_status(tmp_path):
    # Reruns stored in a four-condition run (variant rows) are not calls of its plan: a later
    # resume neither counts them in n_planned / n_done nor lets a failed one make it partial.
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(
        Dataset(
            "small",
            full.source,
            full.builder,
            full.builder_params,
            (full.instances[0], full.instances[50]),
        )
    )
    reader = EmbeddedReader(workers=False)
    run_conditions(store, "small", reader, ["retrieved"], name="emb")
    iid = store.list_instance_ids("small")[0]
    shown = base_shown_ids(store.instance_predictions(["emb"], iid), "emb", "retrieved")
    assert (
        rerun(store, RerunRequest("small", iid, "emb", "retrieved", "remove", shown[0], {}))[
            "error"
        ]
        is None
    )
    assert len(store.prediction_rows("emb")) == 3  # two planned calls and the rerun
    summary = run_conditions(store, "small", reader, ["retrieved"], name="emb")
    assert (summary.status, summary.planned, summary.executed) == ("done", 2, 0)
    run = store.run_row("emb")
    assert (run["status"], run["n_planned"], run["n_done"], run["n_errors"]) == ("done", 2, 2, 0)
