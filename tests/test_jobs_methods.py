"""Every method launched as a background job (issue 18 item 3): the argv each kind builds is what
a user would type, the real CLI parser accepts it with the same values, the form's knobs are
the CLI's flags (names, defaults, help), progress lines parse, the plan's longest prompt is
measured, and a real child process runs a tiny CUE-R and DOLCE job to ``done``."""

from __future__ import annotations

import argparse
import sys
import time

import pytest
from model_stub import PASSAGE

from core.cli import build_parser
from core.commands.run import ProgressBar
from core.datasets.controlled import build_controlled
from core.dolce.probes import plan_probes, split_units
from core.execution.engine import Progress
from core.execution.jobs import (
    METHODS,
    MethodRequest,
    RunJob,
    RunRequest,
    command_for,
    longest_prompt_chars,
    method_params,
    parse_progress,
    run_command,
)
from core.execution.prompts import build_messages
from core.oncu.conditions import plan_conditions
from core.store import Store
from core.types import Instance, Passage

PY = [sys.executable, "-m", "core"]


def _parse(argv: list[str]) -> argparse.Namespace:
    assert argv[:3] == PY
    return build_parser().parse_args(argv[3:])


def _subparser(*names: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in names:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


COMMANDS = {
    "interventions": ("run-interventions",),
    "probes": ("run-probes",),
    "fanin-grid": ("generate", "controlled"),
    "judge": ("judge", "crux"),
    "attribution": ("run-attribution",),
}


# ------------------------------------------------------------------------------ argv
def test_interventions_argv_is_the_typed_command_and_parses():
    req = MethodRequest(
        "interventions",
        "/s/store.duckdb",
        "controlled-200",
        "cuer",
        params={
            "top_k": 1,
            "operators": ["remove"],
            "replace_hardness": ["easy"],
            "two_support": False,
            "zero_retrieval": False,
            "retriever": "lexical",
        },
    )
    argv = command_for(req)
    assert argv == PY + [
        "run-interventions",
        "--db",
        "/s/store.duckdb",
        "--dataset",
        "controlled-200",
        "--backend",
        "embedded",
        "--top-k",
        "1",
        "--operators",
        "remove",
        "--replace-hardness",
        "easy",
        "--no-two-support",
        "--no-zero-retrieval",
        "--name=cuer",
    ]
    args = _parse(argv)
    assert (args.top_k, args.operators, args.replace_hardness) == (1, "remove", "easy")
    assert (args.two_support, args.zero_retrieval, args.retriever) == (False, False, "lexical")
    assert args.duplicate_positions == "end" and args.name == "cuer"


def test_a_server_backend_passes_model_host_timeout_and_concurrency():
    req = MethodRequest(
        "interventions",
        "/s.duckdb",
        "d",
        "r",
        backend="ollama",
        model="qwen2.5:14b",
        hosts=("http://gpu:11434",),
        concurrency=4,
        timeout_s=30.0,
        params={"num_ctx": 8192},
    )
    argv = command_for(req)
    assert argv[3:] == [
        "run-interventions",
        "--db",
        "/s.duckdb",
        "--dataset",
        "d",
        "--backend",
        "ollama",
        "--model",
        "qwen2.5:14b",
        "--host",
        "http://gpu:11434",
        "--timeout",
        "30",
        "--num-ctx",
        "8192",
        "--concurrency",
        "4",
        "--name=r",
    ]
    args = _parse(argv)
    assert (args.host, args.timeout, args.num_ctx, args.concurrency) == (
        ["http://gpu:11434"],
        30.0,
        8192,
        4,
    )


def test_probes_argv_is_the_typed_command_and_parses():
    req = MethodRequest(
        "probes",
        "/s.duckdb",
        "controlled-200",
        "dolce",
        params={"units": "passage", "strategy": "take-every-3", "limit": 1, "seed": 0},
    )
    argv = command_for(req)
    assert argv[3:] == [
        "run-probes",
        "--db",
        "/s.duckdb",
        "--dataset",
        "controlled-200",
        "--backend",
        "embedded",
        "--units",
        "passage",
        "--strategy",
        "take-every-3",
        "--limit",
        "1",
        "--name=dolce",
    ]
    args = _parse(argv)
    assert (args.units, args.strategy, args.limit, args.seed) == ("passage", "take-every-3", 1, 0)


def test_fanin_grid_and_judge_argv_parse():
    grid = command_for(
        MethodRequest("fanin-grid", "/s.duckdb", "", "grid", params={"seed": 7, "replace": True})
    )
    assert grid[3:] == [
        "generate",
        "controlled",
        "--preset",
        "fanin-grid",
        "--seed",
        "7",
        "--replace",
        "--name",
        "grid",
        "--db",
        "/s.duckdb",
    ]
    args = _parse(grid)
    assert (args.preset, args.seed, args.replace, args.name) == ("fanin-grid", 7, True, "grid")

    judge = command_for(
        MethodRequest(
            "judge",
            "/s.duckdb",
            "hotpot",
            "judge hotpot",
            backend="openai",
            model="m",
            base_url="http://127.0.0.1:8000/v1",
            concurrency=8,
            params={"passages": "all", "judge": "qwen-judge"},
        )
    )
    assert judge[3:] == [
        "judge",
        "crux",
        "--db",
        "/s.duckdb",
        "--dataset",
        "hotpot",
        "--backend",
        "openai",
        "--model",
        "m",
        "--base-url",
        "http://127.0.0.1:8000/v1",
        "--passages",
        "all",
        "--judge",
        "qwen-judge",
    ]  # judge crux takes no --concurrency
    args = _parse(judge)
    assert (args.judge_kind, args.passages, args.judge) == ("crux", "all", "qwen-judge")


def test_conditions_go_through_run_command():
    req = RunRequest("/s.duckdb", "d", "r", ("oracle",))
    assert req.kind == "conditions"
    assert command_for(req) == run_command(req)
    assert _parse(command_for(req)).conditions == "oracle"


@pytest.mark.parametrize(
    ("req", "message"),
    [
        (MethodRequest("interventions", "/s", "d", "r", params={"top_k": 0}), "'top_k' must be"),
        (
            MethodRequest("interventions", "/s", "d", "r", params={"operators": []}),
            "'operators' needs at least one value",
        ),
        (
            MethodRequest("interventions", "/s", "d", "r", params={"operators": ["smash"]}),
            "'smash' is not one of",
        ),
        (
            MethodRequest("probes", "/s", "d", "r", params={"strategy": "take-every-x"}),
            "'strategy'",
        ),
        (MethodRequest("probes", "/s", "d", "r", params={"nope": 1}), "unknown parameter 'nope'"),
        (MethodRequest("probes", "/s", "", "r"), "a run needs a dataset"),
        (MethodRequest("probes", "/s", "d", "  "), "must not be empty"),
        (MethodRequest("judge", "/s", "d", "j", backend="gpt"), "unknown backend 'gpt'"),
        (MethodRequest("grid", "/s", "d", "r"), "unknown method 'grid'"),
    ],
)
def test_a_bad_request_is_one_line_naming_the_value(req, message):
    with pytest.raises(ValueError, match=None) as err:
        command_for(req)
    assert message in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kind", list(METHODS))
def test_the_form_knobs_are_the_cli_flags(kind):
    sub = _subparser(*COMMANDS[kind])
    flags = {s: a for a in sub._actions for s in a.option_strings}
    for p in method_params(kind):
        action = flags[p.flag]
        default = ",".join(p.default) if p.multiple else p.default
        assert action.default == default, p.name
        if p.choices is not None and not p.multiple:
            assert list(action.choices) == list(p.choices), p.name
        if kind in ("interventions", "probes"):  # built from the declarations: same help
            assert action.help == p.help, p.name
    # and nothing the form leaves out but the shared fields
    shared = {
        "--db",
        "--dataset",
        "--backend",
        "--model",
        "--host",
        "--base-url",
        "--timeout",
        "--concurrency",
        "--name",
        "--json",
        "--preset",
        "-h",
        "--help",
        "--with-runs",
    }  # a replace that would drop runs is typed, not clicked
    negated = {f for f in flags if f.startswith("--no-")}  # --no-two-support: the same knob
    assert set(flags) - shared - negated == {p.flag for p in method_params(kind)}


# ------------------------------------------------------------------------------ progress
def test_progress_lines_parse_as_the_cli_prints_them():
    line = ProgressBar().line(Progress(done=184, total=200, rate=12.5, eta_s=65.0, errors=3))
    p = parse_progress(line)
    assert (p.done, p.total, p.rate, p.eta, p.eta_s, p.errors) == (184, 200, 12.5, "1m05s", 65.0, 3)
    assert p.fraction == 0.92
    first = parse_progress(ProgressBar().line(Progress(0, 79, 0.0, float("nan"), 0)))
    assert (first.eta, first.eta_s, first.fraction) == ("--", None, 0.0)
    assert parse_progress("probe plan: 79 spans") is None


# ------------------------------------------------------------------------------ prompt size
def _instance() -> Instance:
    long = Passage("p0002", 1, "Far", "Filler words here. " * 60, "d2")
    return Instance("q1", "What is the capital of Zarnovia?", "Keltbridge", (PASSAGE, long))


def test_longest_prompt_is_the_full_context_or_the_longest_probe():
    inst = _instance()
    full = sum(len(m["content"]) for m in build_messages(inst, "full_context"))
    req = RunRequest("/s", "d", "r", ("no_evidence", "full_context"))
    assert longest_prompt_chars([inst], req) == full
    probe = MethodRequest("probes", "/s", "d", "r", params={"units": "passage"})
    calls = plan_probes(inst, units="passage", lengths=[len(split_units(inst, "passage"))])
    assert longest_prompt_chars([inst], probe) == max(
        sum(len(m["content"]) for m in c.messages) for c in calls
    )
    grid = MethodRequest("fanin-grid", "/s", "", "g")
    assert longest_prompt_chars([inst], grid) == 0


def _longest_planned(calls) -> int:
    return max(sum(len(m["content"]) for m in c.messages) for c in calls)


def test_the_retrieved_bound_is_never_below_a_planned_prompt():
    inst = _instance()
    for k in (1, 2):
        default = _longest_planned(plan_conditions([inst], ["retrieved"], top_k=k))
        req = RunRequest("/s", "d", "r", ("retrieved",), top_k=k)
        assert longest_prompt_chars([inst], req) >= default
        small = _longest_planned(
            plan_conditions([inst], ["retrieved"], top_k=k, chunk_size=40, overlap=10)
        )
        cuer = MethodRequest(
            "interventions", "/s", "d", "r", params={"top_k": k, "chunk_size": 40, "overlap": 10}
        )
        bound = longest_prompt_chars([inst], cuer)
        # at least the base trace, at most the base plus one whole passage more
        assert small <= bound <= small + len(inst.passages[1].text) + 200


# ------------------------------------------------------------------------------ real jobs
def _wait(job: RunJob, timeout_s: float = 180.0) -> None:
    deadline = time.time() + timeout_s
    while job.running and time.time() < deadline:
        time.sleep(0.2)
    assert not job.running, job.lines[-5:]


@pytest.mark.slow
def test_tiny_cuer_and_dolce_jobs_finish_done_in_a_child_process(tmp_path):
    db = tmp_path / "s.duckdb"
    store = Store(db)
    store.write_dataset(build_controlled(preset="controlled-200", seed=42, name="demo"))

    cuer = RunJob.start(
        MethodRequest(
            "interventions",
            str(db),
            "demo",
            "cuer",
            params={
                "top_k": 1,
                "operators": ["remove"],
                "two_support": False,
                "zero_retrieval": False,
            },
        )
    )
    _wait(cuer)
    assert (cuer.status(), cuer.returncode) == ("done", 0), cuer.lines[-5:]
    row = store.run_row("cuer")
    assert (row["status"], row["kind"]) == ("done", "interventions")
    preds = store.prediction_rows("cuer")
    base = preds[preds["condition"] == "retrieved"]
    inter = preds[preds["condition"] == "intervention"]
    # one remove per answered base trace (the target: cited, else the top-ranked chunk)
    answered = int((base["error"].fillna("") == "").sum())
    assert len(base) == 200 and len(inter) == answered == 200
    assert all(v.startswith("remove") for v in inter["variant"])
    p = cuer.progress()  # the last phase (the interventions), complete
    assert (p.done, p.total, p.errors) == (200, 200, 0)

    dolce = RunJob.start(
        MethodRequest("probes", str(db), "demo", "dolce", params={"units": "passage", "limit": 1})
    )
    _wait(dolce)
    assert dolce.status() == "done", dolce.lines[-5:]
    row = store.run_row("dolce")
    assert (row["status"], row["kind"]) == ("done", "probes")
    first = store.load_instances("demo")[:1]
    planned = plan_probes(first[0], units="passage")
    probes_stored = store.prediction_rows("dolce")
    assert len(probes_stored) == len(planned) and set(probes_stored["condition"]) == {"probe"}
    assert dolce.progress().done == len(planned)
