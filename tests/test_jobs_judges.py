"""Judge runs launched as background jobs (issue 20 item 6): each rubric's argv is what a user
would type and the real CLI parser reads it with the same values, the form's knobs are the
command's flags, and a real child process runs the embedded judge to ``done`` with its progress
counting the judgments stored."""

from __future__ import annotations

import argparse
import sys
import time

import pandas as pd
import pytest
from test_crux import _instance

from core.backends import make_backend
from core.cli import build_parser
from core.execution.jobs import JUDGE_METHODS, MethodRequest, RunJob, command_for, method_params
from core.execution.runs import run_conditions
from core.judges.rubrics import RUBRICS
from core.judges.runs import plan_judgments
from core.store import Store
from core.types import Dataset, Instance

PY = [sys.executable, "-m", "core"]
RUN_RUBRICS = [r for r in RUBRICS if r != "crux-answerability"]


def _parse(argv: list[str]) -> argparse.Namespace:
    assert argv[:3] == PY
    return build_parser().parse_args(argv[3:])


def _subparser(*names: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def test_every_rubric_is_a_launchable_kind():
    assert sorted(JUDGE_METHODS) == sorted(f"judge-{r}" for r in RUBRICS)


@pytest.mark.parametrize("rubric", RUN_RUBRICS)
def test_a_run_rubric_argv_judges_the_chosen_run_and_parses(rubric):
    req = MethodRequest(
        f"judge-{rubric}",
        "/s.duckdb",
        "hotpot",
        "jr",
        backend="openai",
        model="m",
        base_url="http://127.0.0.1:8000/v1",
        concurrency=4,
        timeout_s=30.0,
        params={"conditions": "oracle,retrieved", "seed": 3},
        target_run="live",
    )
    argv = command_for(req)
    assert argv[3:] == [
        "judge",
        rubric,
        "--db",
        "/s.duckdb",
        "--run",
        "live",
        "--backend",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:8000/v1",
        "--timeout",
        "30",
        "--conditions",
        "oracle,retrieved",
        "--seed",
        "3",
        "--concurrency",
        "4",
        "--name=jr",
    ]
    args = _parse(argv)
    assert (args.judge_kind, args.rubric, args.run, args.dataset) == (rubric, rubric, "live", None)
    assert (args.conditions, args.seed, args.concurrency, args.name) == (
        "oracle,retrieved",
        3,
        4,
        "jr",
    )
    with pytest.raises(ValueError, match=f"{rubric} judges a run's answers: choose the judged run"):
        command_for(MethodRequest(f"judge-{rubric}", "/s", "d", "jr"))


def test_crux_answerability_argv_judges_the_dataset_and_parses():
    req = MethodRequest(
        "judge-crux-answerability", "/s.duckdb", "hotpot", "ja", params={"passages": "all"}
    )
    argv = command_for(req)
    assert argv[3:] == [
        "judge",
        "crux-answerability",
        "--db",
        "/s.duckdb",
        "--dataset",
        "hotpot",
        "--backend",
        "embedded",
        "--passages",
        "all",
        "--name=ja",
    ]
    args = _parse(argv)
    assert (args.rubric, args.dataset, args.run, args.passages) == (
        "crux-answerability",
        "hotpot",
        None,
        "all",
    )
    with pytest.raises(ValueError, match="judges the dataset's passages, not a run"):
        command_for(MethodRequest("judge-crux-answerability", "/s", "d", "ja", target_run="r"))


@pytest.mark.parametrize("kind", list(JUDGE_METHODS))
def test_the_form_knobs_are_the_judge_flags(kind):
    sub = _subparser("judge", kind.removeprefix("judge-"))
    flags = {s: a for a in sub._actions for s in a.option_strings}
    for p in method_params(kind):
        action = flags[p.flag]
        assert action.default == p.default, p.name
        if p.choices is not None:
            assert list(action.choices) == list(p.choices), p.name
    shared = {
        "--db",
        "--dataset",
        "--run",
        "--backend",
        "--model",
        "--host",
        "--base-url",
        "--timeout",
        "--concurrency",
        "--name",
        "--json",
        "-h",
        "--help",
    }
    # --passages only matters to crux-answerability, --conditions only to the run rubrics
    unused = {"--conditions"} if kind == "judge-crux-answerability" else {"--passages"}
    assert set(flags) - shared - unused == {p.flag for p in method_params(kind)}


@pytest.mark.slow
def test_an_embedded_judge_job_finishes_done_with_its_judgments_stored(tmp_path):
    db = tmp_path / "j.duckdb"
    store = Store(db)
    other = Instance("q2", "Which?", "y", passages=_instance().passages, fan_in=2)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (_instance(), other)))
    run_conditions(store, "tiny", make_backend("embedded"), ("no_evidence", "oracle"), name="r")
    _, plan, _ = plan_judgments(store, "authtrace-correctness", run="r")
    assert len(plan) == 4  # 2 instances x 2 conditions

    job = RunJob.start(
        MethodRequest("judge-authtrace-correctness", str(db), "tiny", "jac", target_run="r")
    )
    deadline = time.time() + 180
    while job.running and time.time() < deadline:
        time.sleep(0.2)
    assert (job.status(), job.returncode) == ("done", 0), job.lines[-5:]
    row = store.run_row("jac")
    assert (row["kind"], row["status"], row["n_done"], row["n_errors"]) == ("judge", "done", 4, 0)
    frame = store.judgments_frame(runs=["jac"])
    assert len(frame) == 4 and set(frame["target_run"]) == {"r"}
    assert set(frame["judge_model"]) == {"embedded:lexical-judge-v1"}
    assert pd.to_numeric(frame["rating"]).between(0, 3).all()
    p = job.progress()  # the child's progress lines count judgments
    assert (p.done, p.total, p.errors) == (4, 4, 0)
