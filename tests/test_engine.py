"""The execution engine (core/execution/engine.py) and the ``run`` command (core/commands/run.py)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from conftest import ROOT

from core.backends import EmbeddedReader, Reply
from core.cli import main
from core.execution.engine import Progress, cache_key, execute, options_hash, rerun_call
from core.execution.prompts import prompt_hash, template_hash
from core.execution.runs import RunSpec, run_conditions, start_run
from core.oncu.conditions import plan_conditions
from core.oncu.metrics import DEFAULT_GROUP_KEY, oncu_summary
from core.store import SCHEMA_VERSION, SCORE_COLUMNS, Store
from core.store import schema as store_mod
from core.types import CONDITIONS, Dataset, Instance, Passage

FOUR = list(CONDITIONS)


# ------------------------------------------------------------------------------ doubles


class Scripted:
    """A backend double: the embedded reader's answers, fixed server timings, scripted faults.

    Args:
        fail: prompt hashes answered with a permanent error.
        raise_on: prompt hashes on which ``generate`` raises.
        delay_s: sleep per call (to exercise concurrency and cancel).
        on_call: called with the call number (1-based) before answering.
    """

    name = "scripted"

    def __init__(
        self, model="script-1", *, fail=(), raise_on=(), delay_s=0.0, on_call=None, options=None
    ):
        self.model = model
        self.fail, self.raise_on = set(fail), set(raise_on)
        self.delay_s, self.on_call = delay_s, on_call
        self.options = dict(options or {"temperature": 0, "seed": 0})
        self.reader = EmbeddedReader()
        self.calls: list[str] = []
        self._lock = threading.Lock()

    def describe(self):
        return {
            "kind": "scripted",
            "model": self.model,
            "model_digest": "sha256:" + "cd" * 32,
            "options": dict(self.options),
            "label": "scripted double",
        }

    def generate(self, messages, options=None):
        h = prompt_hash(messages)
        with self._lock:
            self.calls.append(h)
            n = len(self.calls)
        if self.on_call is not None:
            self.on_call(n)
        if self.delay_s:
            time.sleep(self.delay_s)
        if h in self.raise_on:
            raise RuntimeError("boom")
        if h in self.fail:
            return Reply(text="", latency_ms=1.0, error="HTTP 500: model crashed")
        r = self.reader.generate(messages)
        return Reply(
            text=r.text,
            prompt_tokens=r.prompt_tokens,
            completion_tokens=r.completion_tokens,
            latency_ms=2.0,
            total_duration_ns=2_000_000,
            load_duration_ns=100,
            prompt_eval_duration_ns=300_000,
            eval_duration_ns=1_500_000,
            model_digest="sha256:" + "cd" * 32,
            logprob_confidence=0.75,
        )


_FILLER = " ".join(["The harbor opens at dawn and the boats leave before noon."] * 25)


def _instance(i: int, name: str, score: int) -> Instance:
    # ~300 tokens: two 220/40 chunks, so no retrieved prompt equals the full-context one
    passages = (
        Passage("p0001", 0, "Harbor", _FILLER, "d1"),
        Passage(
            "p0002",
            1,
            name,
            f"{name} scored {score} points on the final test.",
            "d2",
            "gold",
            True,
        ),
        Passage(
            "p0003", 2, "Other", "Another team scored 12 points on the test.", "d3", "distractor"
        ),
    )
    return Instance(
        f"t{i}",
        f"How many points did {name} score on the final test?",
        str(score),
        passages,
        answer_type="number",
        reasoning_type="single_hop",
        context_length=40,
        evidence_position="middle",
        distractor_similarity="low",
        evidence_density="low",
        fan_in=1,
        source="toy",
    )


TOY = Dataset(
    "toy",
    "test",
    "manual",
    {},
    (_instance(1, "Beta", 84), _instance(2, "Gamma", 71), _instance(3, "Delta", 90)),
)


@pytest.fixture
def toy_store(db_path):
    store = Store(db_path)
    store.write_dataset(TOY)
    return store


def _plan():
    return plan_conditions(TOY.instances, FOUR)


def _spec(run_id="t", **kw):
    base = dict(
        run_id=run_id,
        dataset="toy",
        backend="scripted",
        model="script-1",
        options={"temperature": 0, "seed": 0},
        conditions=tuple(FOUR),
    )
    base.update(kw)
    return RunSpec(**base)


def _preds(store, run_id):
    return store.prediction_rows(run_id).set_index(["instance_id", "condition", "variant"])


# ------------------------------------------------------------------- the CLI, end to end


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _run_embedded(db: Path, name: str, *extra: str) -> subprocess.CompletedProcess:
    """``python -m core run`` of controlled-200 with the embedded reader as run ``name``."""
    return _cli(
        "run",
        "--db",
        str(db),
        "--dataset",
        "controlled-200",
        "--backend",
        "embedded",
        *extra,
        "--name",
        name,
        "--json",
    )


@pytest.fixture(scope="module")
def controlled(tmp_path_factory):
    """controlled-200 generated and run with the four conditions through the real CLI."""
    db = tmp_path_factory.mktemp("engine") / "store.duckdb"
    gen = _cli("generate", "controlled", "--preset", "controlled-200", "--db", str(db))
    assert gen.returncode == 0, gen.stderr
    run = _run_embedded(db, "r1", "--conditions", "no_evidence,full_context,retrieved,oracle")
    assert run.returncode == 0, run.stderr
    return db, json.loads(run.stdout), run.stderr


def test_cli_run_stores_800_predictions_and_oncu_works(controlled):
    db, summary, stderr = controlled
    # controlled_000132 and controlled_000185 ask the very same question, so their
    # no-evidence prompts are identical: the second is served from the first's reply.
    assert {
        k: summary[k]
        for k in (
            "run",
            "planned",
            "executed",
            "cached",
            "skipped_existing",
            "errors",
            "parse_errors",
        )
    } == {
        "run": "r1",
        "planned": 800,
        "executed": 799,
        "cached": 1,
        "skipped_existing": 0,
        "errors": 0,
        "parse_errors": 0,
    }
    assert summary["status"] == "done" and summary["seconds"] > 0
    assert "800/800" in stderr and "calls/s" in stderr and "ETA" in stderr
    store = Store(db)
    preds = store.prediction_rows("r1")
    assert len(preds) == 800
    assert preds.groupby("condition").size().to_dict() == {c: 200 for c in FOUR}
    assert preds[["instance_id", "condition", "variant"]].drop_duplicates().shape[0] == 800
    hits = preds[preds["cache_hit"]]
    assert list(zip(hits["instance_id"], hits["condition"], strict=True)) == [
        ("controlled_000185", "no_evidence")
    ]
    assert preds["error"].isna().all() and preds["parse_error"].isna().all()
    assert preds["f1_relaxed"].notna().all()
    run = store.run_row("r1")
    assert run["status"] == "done" and run["n_planned"] == run["n_done"] == 800
    assert run["template_hash"] == template_hash()
    assert run["retrieval"]["condition_id"] == "retrieved|lexical@3|chunk220/40"
    assert run["backend_info"]["baseline"] is True
    assert run["conditions"] == FOUR
    assert 0 < run["model_seconds"] < run["wall_seconds"]
    assert preds["total_duration_ns"].fillna(0).sum() / 1e9 == pytest.approx(run["model_seconds"])
    # ONCU on the stored run, and an independent recomputation of the weighted ratio.
    frame = store.analysis_frame(["r1"])
    out = oncu_summary(frame, ci=False).set_index("condition")
    for cond in ("full_context", "retrieved"):
        assert out.loc[cond, "total_groups"] == 192
        assert out.loc[cond, "valid_groups"] == 167
        means = frame.pivot_table(
            index=list(DEFAULT_GROUP_KEY),
            columns="condition",
            values="f1_relaxed",
            aggfunc="mean",
        )
        valid = means[means["oracle"] > means["no_evidence"]]
        assert len(valid) == 167
        weighted = (valid[cond] - valid["no_evidence"]).sum() / (
            valid["oracle"] - valid["no_evidence"]
        ).sum()
        assert out.loc[cond, "oncu_weighted"] == pytest.approx(weighted)
    rep = _cli("report", "oncu", "--db", str(db), "--run", "r1", "--json")
    assert rep.returncode == 0, rep.stderr
    assert {r["condition"] for r in json.loads(rep.stdout)} == {"full_context", "retrieved"}


def test_rerunning_the_same_command_makes_no_call(controlled):
    db, _, _ = controlled
    before = Store(db).prediction_rows("r1")[["instance_id", "condition", "created_at"]]
    run = _run_embedded(db, "r1")
    assert run.returncode == 0, run.stderr
    s = json.loads(run.stdout)
    assert (s["planned"], s["executed"], s["cached"], s["skipped_existing"]) == (800, 0, 0, 800)
    after = Store(db).prediction_rows("r1")[["instance_id", "condition", "created_at"]]
    pd.testing.assert_frame_equal(
        before.sort_values(["instance_id", "condition"]).reset_index(drop=True),
        after.sort_values(["instance_id", "condition"]).reset_index(drop=True),
    )


def test_another_run_with_the_same_config_is_served_from_cache(controlled):
    db, _, _ = controlled
    run = _run_embedded(db, "r2")
    assert run.returncode == 0, run.stderr
    s = json.loads(run.stdout)
    assert (s["planned"], s["executed"], s["cached"], s["skipped_existing"]) == (800, 0, 800, 0)
    assert s["model_seconds"] == 0.0
    store = Store(db)
    r1 = store.prediction_rows("r1").sort_values(["instance_id", "condition"])
    r2 = store.prediction_rows("r2").sort_values(["instance_id", "condition"])
    assert r2["cache_hit"].all()
    assert r2["total_duration_ns"].isna().all()
    cols = ["instance_id", "condition", "answer", "raw_response", *SCORE_COLUMNS]
    pd.testing.assert_frame_equal(r1[cols].reset_index(drop=True), r2[cols].reset_index(drop=True))


def test_cli_rejects_bad_input_with_one_line(tmp_path, capsys):
    db = str(tmp_path / "s.duckdb")
    Store(db).write_dataset(TOY)
    rc = main(["run", "--db", db, "--dataset", "nope", "--backend", "embedded", "--name", "x"])
    assert rc == 1
    assert capsys.readouterr().err.strip() == f"error: no dataset named 'nope' in {db}"
    rc = main(
        [
            "run",
            "--db",
            db,
            "--dataset",
            "toy",
            "--backend",
            "embedded",
            "--name",
            "x",
            "--conditions",
            "no_evidence,closed_book",
        ]
    )
    assert rc == 1
    assert "unknown condition 'closed_book'; choose from: no_evidence" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(
            [
                "run",
                "--db",
                db,
                "--dataset",
                "toy",
                "--backend",
                "embedded",
                "--name",
                "x",
                "--concurrency",
                "0",
            ]
        )
    assert exc.value.code == 2
    assert Store(db).runs_frame().empty


# ------------------------------------------------------------------- engine behaviour


def test_permanent_error_is_stored_as_an_error_not_an_answer_and_the_run_goes_on(toy_store):
    calls = _plan()
    bad = next(c for c in calls if c.instance_id == "t2" and c.condition == "full_context")
    backend = Scripted(fail={bad.prompt_hash})
    start_run(toy_store, _spec(), backend)
    assert toy_store.run_row("t")["status"] == "planned"
    s = execute(toy_store, "t", calls, backend)
    assert (s.planned, s.executed, s.cached, s.errors, s.parse_errors) == (12, 12, 0, 1, 0)
    assert s.status == "partial"  # some calls failed
    run = toy_store.run_row("t")
    assert (run["status"], run["n_done"], run["n_errors"]) == ("partial", 12, 1)
    preds = _preds(toy_store, "t")
    assert len(preds) == 12
    row = preds.loc[("t2", "full_context", "")]
    assert row["error"] == "HTTP 500: model crashed"
    assert pd.isna(row["parse_error"])  # an error, never also a parse error
    assert pd.isna(row["answer"]) and list(row["cited_ids"]) == []
    # errors are not answers: no scores, no failure label (missing in every aggregate)
    assert all(pd.isna(row[c]) for c in ("em_strict", "f1_relaxed", "ev_f1", "confidence_error"))
    assert pd.isna(row["failure_label"])
    ok = preds.drop(index=("t2", "full_context", ""))
    assert ok["error"].isna().all()
    assert ok.loc[("t1", "full_context", ""), "answer"] == "84"
    assert ok.loc[("t1", "full_context", ""), "em_strict"] == 1.0
    # a failed call is not cached; resuming makes it again and replaces the row
    healed = Scripted()
    s2 = execute(toy_store, "t", calls, healed)
    assert (s2.executed, s2.skipped_existing, s2.errors) == (1, 11, 0)
    assert healed.calls == [bad.prompt_hash]
    row = _preds(toy_store, "t").loc[("t2", "full_context", "")]
    assert pd.isna(row["error"]) and row["answer"] == "71" and row["em_strict"] == 1.0


def test_a_backend_that_raises_is_recorded_as_an_error(toy_store):
    calls = _plan()
    bad = calls[0]
    backend = Scripted(raise_on={bad.prompt_hash})
    start_run(toy_store, _spec(), backend)
    s = execute(toy_store, "t", calls, backend, concurrency=3)
    assert s.errors == 1 and s.executed == 12
    row = _preds(toy_store, "t").loc[(bad.instance_id, bad.condition, "")]
    assert row["error"] == "backend raised RuntimeError: boom"


def test_timings_logprob_confidence_meta_and_model_time_are_stored(toy_store):
    backend = Scripted()
    start_run(toy_store, _spec(), backend)
    s = execute(toy_store, "t", _plan(), backend)
    assert s.model_seconds == pytest.approx(12 * 0.002)
    preds = _preds(toy_store, "t")
    assert (preds["total_duration_ns"] == 2_000_000).all()
    assert (preds["load_duration_ns"] == 100).all()
    assert (preds["prompt_eval_duration_ns"] == 300_000).all()
    assert (preds["eval_duration_ns"] == 1_500_000).all()
    assert (preds["logprob_confidence"] == 0.75).all()
    assert not preds["cache_hit"].any()
    ret = preds.loc[("t1", "retrieved", "")]
    meta = json.loads(ret["meta"])
    assert meta["retrieval"] == "retrieved|lexical@3|chunk220/40"
    assert meta["chunk_ids"] == ["c0002", "c0001"]  # the chunk naming Beta ranks first
    assert meta["chunk_scores"][0] > meta["chunk_scores"][1]
    assert list(ret["input_passage_ids"]) == ["p0001", "p0002", "p0003"]
    assert json.loads(preds.loc[("t1", "oracle", ""), "meta"]) == {}
    run = toy_store.run_row("t")
    assert run["model_seconds"] == pytest.approx(0.024)
    assert run["options"] == {"temperature": 0, "seed": 0}
    assert run["model_digest"] == "sha256:" + "cd" * 32


def test_concurrency_gives_the_same_predictions_and_progress_is_reported(toy_store):
    seq, par = Scripted(), Scripted(delay_s=0.01)
    start_run(toy_store, _spec("seq"), seq)
    start_run(toy_store, _spec("par"), par)
    execute(toy_store, "seq", _plan(), seq)
    seen: list[Progress] = []
    # a different options hash keeps "par" off the cache of "seq"
    toy_store.save_run({"run_id": "par", "options": {"temperature": 0, "seed": 0, "x": 1}})
    s = execute(toy_store, "par", _plan(), par, concurrency=4, progress=seen.append)
    assert (s.executed, s.cached) == (12, 0)
    assert sorted(par.calls) == sorted(c.prompt_hash for c in _plan())
    cols = ["answer", "cited_ids", "confidence", *SCORE_COLUMNS]
    a = _preds(toy_store, "seq")[cols].sort_index()
    b = _preds(toy_store, "par")[cols].sort_index()
    pd.testing.assert_frame_equal(a, b)
    assert seen[0].done == 0 and seen[0].total == 12
    assert seen[-1].done == 12 and seen[-1].eta_s == 0.0
    assert [p.done for p in seen] == sorted(p.done for p in seen)
    assert all(p.total == 12 and p.errors == 0 for p in seen)


def test_cancel_stops_submitting_and_a_rerun_finishes_the_rest(toy_store):
    cancel = threading.Event()
    backend = Scripted(on_call=lambda n: cancel.set() if n == 3 else None)
    start_run(toy_store, _spec(), backend)
    s = execute(toy_store, "t", _plan(), backend, cancel=cancel)
    stored = len(toy_store.prediction_rows("t"))
    assert s.status == "cancelled" and toy_store.run_row("t")["status"] == "cancelled"
    # the third call set the flag; at most 2 * concurrency calls were submitted beyond it
    assert 3 <= stored <= 4 and s.executed == stored
    rest = Scripted()
    s2 = execute(toy_store, "t", _plan(), rest)
    assert (s2.skipped_existing, s2.executed, s2.status) == (stored, 12 - stored, "done")
    assert len(toy_store.prediction_rows("t")) == 12
    assert not set(rest.calls) & set(backend.calls)


def test_duplicate_prompts_in_one_execution_are_sent_once(toy_store):
    twin = Instance("t9", TOY.instances[0].question, "84", TOY.instances[0].passages, fan_in=1)
    store = toy_store
    store.write_dataset(
        Dataset("toy2", "test", "manual", {}, (TOY.instances[0], twin)), replace=False
    )
    backend = Scripted()
    start_run(store, _spec("d", dataset="toy2"), backend)
    calls = plan_conditions(store.load_instances("toy2"), FOUR)
    s = execute(store, "d", calls, backend)
    assert (s.planned, s.executed, s.cached) == (8, 4, 4)
    preds = _preds(store, "d")
    assert preds.xs("t9", level="instance_id")["cache_hit"].all()


def test_a_run_name_cannot_be_reused_with_another_configuration(toy_store):
    start_run(toy_store, _spec(), Scripted())
    with pytest.raises(ValueError, match=r"run 't' exists with another model \('script-1'"):
        start_run(toy_store, _spec(model="script-2"), Scripted("script-2"))
    with pytest.raises(ValueError, match="exists with another options"):
        start_run(toy_store, _spec(options={"temperature": 0.7}), Scripted())
    toy_store.save_run({"run_id": "t", "retrieval": {"top_k": 3}})
    with pytest.raises(ValueError, match="exists with another retrieval setting"):
        start_run(toy_store, _spec(retrieval={"top_k": 5}), Scripted())
    with pytest.raises(ValueError, match="no dataset named 'nope'"):
        start_run(toy_store, _spec("u", dataset="nope"), Scripted())
    toy_store.save_run({"run_id": "t", "model_digest": None})  # server was down at the start
    start_run(toy_store, _spec(conditions=("oracle",)), Scripted())  # same config: reopened
    assert toy_store.run_row("t")["model_digest"] == "sha256:" + "cd" * 32
    assert toy_store.run_row("t")["conditions"] == FOUR


def test_execute_rejects_bad_arguments(toy_store):
    with pytest.raises(ValueError, match="no run 'ghost'"):
        execute(toy_store, "ghost", _plan(), Scripted())
    start_run(toy_store, _spec(), Scripted())
    with pytest.raises(ValueError, match="duplicate planned call"):
        execute(toy_store, "t", _plan()[:2] * 2, Scripted())
    with pytest.raises(ValueError, match="concurrency must be an integer >= 1"):
        execute(toy_store, "t", _plan(), Scripted(), concurrency=0)


def test_cache_key_covers_backend_model_options_and_prompt():
    base = cache_key("ollama", "sha256:aa", options_hash({"seed": 0, "num_ctx": 8}), "h1")
    assert base == cache_key("ollama", "sha256:aa", options_hash({"num_ctx": 8, "seed": 0}), "h1")
    assert (
        len(
            {
                base,
                cache_key("openai", "sha256:aa", options_hash({"seed": 0, "num_ctx": 8}), "h1"),
                cache_key("ollama", "sha256:bb", options_hash({"seed": 0, "num_ctx": 8}), "h1"),
                cache_key("ollama", "sha256:aa", options_hash({"seed": 1, "num_ctx": 8}), "h1"),
                cache_key("ollama", "sha256:aa", options_hash({"seed": 0, "num_ctx": 8}), "h2"),
            }
        )
        == 5
    )


def test_run_conditions_caches_across_runs_but_not_across_options(toy_store):
    a = run_conditions(toy_store, "toy", Scripted(), FOUR, name="a")
    b = run_conditions(toy_store, "toy", Scripted(), FOUR, name="b")
    c = run_conditions(
        toy_store, "toy", Scripted(options={"temperature": 0, "seed": 1}), FOUR, name="c"
    )
    assert (a.executed, a.cached) == (12, 0)
    assert (b.executed, b.cached) == (0, 12)
    assert (c.executed, c.cached) == (12, 0)
    again = run_conditions(toy_store, "toy", Scripted(), FOUR, name="a")
    assert (again.planned, again.skipped_existing, again.executed) == (12, 12, 0)


def test_rerun_call_replaces_the_row_and_uses_the_cache(toy_store):
    backend = Scripted()
    run_conditions(toy_store, "toy", backend, FOUR, name="a")
    inst = toy_store.load_instances("toy", ["t1"])[0]
    (call,) = plan_conditions([inst], ["retrieved"], top_k=1)  # a prompt not made before
    row = rerun_call(toy_store, "a", call, backend)
    assert (row["instance_id"], row["condition"], row["variant"]) == ("t1", "retrieved", "")
    assert row["cache_hit"] is False and row["prompt_hash"] == call.prompt_hash
    assert backend.calls[-1] == call.prompt_hash
    assert row["answer"] == "84" and row["em_strict"] == 1.0
    assert row["cited_ids"] == ["p0002"]
    assert row["input_passage_ids"] == list(call.input_passage_ids)
    assert len(toy_store.prediction_rows("a")) == 12
    again = rerun_call(toy_store, "a", call, Scripted(fail={call.prompt_hash}))
    assert again["cache_hit"] is True and again["answer"] == "84" and again["error"] is None


def test_a_version_1_store_is_migrated_keeping_its_predictions(db_path):
    con = duckdb.connect(str(db_path))
    con.execute(store_mod._MIGRATIONS[0])
    con.execute("CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TIMESTAMP)")
    con.execute("INSERT INTO schema_version VALUES (1, current_timestamp)")
    con.execute(
        "INSERT INTO predictions (run_id, instance_id, condition, answer) "
        "VALUES ('old', 'i1', 'oracle', 'x')"
    )
    con.close()
    store = Store(db_path)
    assert store.schema_version() == SCHEMA_VERSION
    rows = store.prediction_rows("old")
    assert list(rows["answer"]) == ["x"] and rows["meta"].isna().all()
    store.save_run({"run_id": "old", "model_seconds": 1.5})
    assert store.run_row("old")["model_seconds"] == 1.5


# ---------------------------------------------------------- the write path (issue 9 overhead)


class Citing(Scripted):
    """Scripted, but one prompt's reply cites gold, a distractor and an id never shown."""

    def __init__(self, odd: str, **kw):
        super().__init__(**kw)
        self.odd = odd

    def generate(self, messages, options=None):
        if prompt_hash(messages) != self.odd:
            return super().generate(messages, options)
        text = json.dumps(
            {
                "answer": "12",
                "evidence_ids": ["p0002", "p9999", "p0003"],
                "confidence": 0.4,
                "explanation": "x",
            }
        )
        return Reply(text=text, latency_ms=1.0, total_duration_ns=1_000)


@pytest.mark.parametrize("prefetch", [True, False], ids=["titles-read-once", "per-batch"])
def test_scores_written_by_the_engine_equal_a_rescoring_from_the_store(
    toy_store, monkeypatch, prefetch
):
    from core.execution import score_rows as batch_scores
    from core.scoring.rows import score_frame

    if not prefetch:  # a run with more passages than the writer reads up front
        monkeypatch.setattr(batch_scores, "PREFETCH_MAX", 0)
    calls = _plan()
    odd = next(c for c in calls if c.instance_id == "t1" and c.condition == "full_context")
    bad = next(c for c in calls if c.instance_id == "t3" and c.condition == "oracle")
    backend = Citing(odd.prompt_hash, fail={bad.prompt_hash})
    start_run(toy_store, _spec(), backend)
    execute(toy_store, "t", calls, backend)
    stored = _preds(toy_store, "t")[list(SCORE_COLUMNS)].sort_index()
    frame = toy_store.scoring_frame(["t"])
    again = pd.concat(
        [frame[["instance_id", "condition", "variant"]], score_frame(frame)],
        axis=1,
    ).set_index(["instance_id", "condition", "variant"])[list(SCORE_COLUMNS)]
    again = again.sort_index()

    def plain(df):
        return df.astype(object).where(df.notna(), None)

    pd.testing.assert_frame_equal(plain(stored), plain(again))
    # one of the two scored cited ids is gold; p9999 was never shown: set aside, not scored
    row = stored.loc[("t1", "full_context", "")]
    assert row["ev_precision"] == row["title_grounding"] == pytest.approx(1 / 2)
    preds = toy_store.prediction_rows("t").set_index(["instance_id", "condition", "variant"])
    assert json.loads(preds.loc[("t1", "full_context", ""), "meta"])["parse"] == {
        "unshown_ids": ["p9999"]
    }
    assert (row["em_strict"], row["ev_recall"]) == (0.0, 1.0)
    # the failed call: no scores, no label, in the engine's write and in a rescoring alike
    assert stored.loc[("t3", "oracle", "")].isna().all()


def test_a_write_batch_commits_or_rolls_back_and_leaves_the_file_unlocked(toy_store):
    start_run(toy_store, _spec(), Scripted())
    probe = [
        sys.executable,
        "-c",
        f"import duckdb; c = duckdb.connect({str(toy_store.path)!r}, read_only=True); "
        "print(c.execute(\"SELECT notes FROM runs WHERE run_id = 't'\").fetchone()[0])",
    ]
    with toy_store.write_batch() as con:
        con.execute("UPDATE runs SET notes = 'kept' WHERE run_id = 't'")
    out = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "kept", out.stderr
    with pytest.raises(RuntimeError, match="boom"):
        with toy_store.write_batch() as con:
            con.execute("UPDATE runs SET notes = 'lost' WHERE run_id = 't'")
            raise RuntimeError("boom")
    out = subprocess.run(probe, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "kept", out.stderr
    assert toy_store.run_row("t")["notes"] == "kept"  # a connect() after an attach works


def test_a_write_batch_waits_for_a_reader_process_to_let_go(toy_store):
    start_run(toy_store, _spec(), Scripted())
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import duckdb, time; c = duckdb.connect({str(toy_store.path)!r}, read_only=True); "
            "print('open', flush=True); time.sleep(1.0)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "open"
        t0 = time.monotonic()
        with toy_store.write_batch() as con:
            con.execute("UPDATE runs SET notes = 'after' WHERE run_id = 't'")
        assert time.monotonic() - t0 > 0.3  # it waited for the lock, then got it
    finally:
        holder.wait(timeout=30)
    assert toy_store.run_row("t")["notes"] == "after"
