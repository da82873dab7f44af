"""``batch export attribution`` (issue 40 item 1): an attribution run's calls as batch files.

Two rounds, as CUE-R's: the unablated and ablated calls first, then (once their answers are
imported) the top-k drops. The answers come from the model stub (each request body POSTed
as it stands, as ``test_batch_files.py`` does); the imported run holds the same predictions
and the same report as a live ``run-attribution`` against the same stub.
"""

from __future__ import annotations

import json

from test_batch_files import _answer, _lines

from core.cli import main
from core.datasets.controlled import build_controlled
from core.store import Store

_ARGS = ["--dataset", "c200", "--instances", "3", "--ablations", "8", "--model", "stub-model"]


def test_two_rounds_then_the_same_run_as_a_live_one(stub, tmp_path, capsys):
    db = tmp_path / "b.duckdb"
    Store(db).write_dataset(build_controlled(preset="controlled-200", seed=42, name="c200"))

    def export(n: int) -> dict:
        out = tmp_path / f"round{n}.jsonl"
        assert (
            main(
                [
                    "batch",
                    "export",
                    "attribution",
                    "--db",
                    str(db),
                    *_ARGS,
                    "--name",
                    "ab",
                    "--out",
                    str(out),
                    "--json",
                ]
            )
            == 0
        )
        return json.loads(capsys.readouterr().out)

    first = export(1)
    assert first["phase"] == "ablations" and first["n_calls"] == 3 * 9
    answers = _answer(stub, _lines(tmp_path / "round1.jsonl"), tmp_path / "out1.jsonl")
    assert len(answers) == 27
    assert (
        main(
            [
                "batch",
                "import",
                str(tmp_path / "out1.jsonl"),
                "--run",
                "ab",
                "--db",
                str(db),
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()
    second = export(2)
    assert second["phase"] == "drops" and 0 < second["n_calls"] <= 6
    _answer(stub, _lines(tmp_path / "round2.jsonl"), tmp_path / "out2.jsonl")
    assert (
        main(
            [
                "batch",
                "import",
                str(tmp_path / "out2.jsonl"),
                "--run",
                "ab",
                "--db",
                str(db),
                "--json",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert export(3)["n_calls"] == 0

    live = [
        "run-attribution",
        "--db",
        str(db),
        *_ARGS,
        "--backend",
        "openai",
        "--base-url",
        stub.url,
        "--name",
        "live",
        "--json",
    ]
    assert main(live) == 0
    capsys.readouterr()
    store = Store(db)
    cols = ["instance_id", "condition", "variant", "prompt_hash", "answer", "meta"]
    got = store.prediction_rows("ab")[cols].sort_values(cols[:3]).reset_index(drop=True)
    want = store.prediction_rows("live")[cols].sort_values(cols[:3]).reset_index(drop=True)
    assert got.equals(want)
    reports = []
    for run in ("ab", "live"):
        assert main(["report", "attribution", "--db", str(db), "--run", run, "--json"]) == 0
        rep = json.loads(capsys.readouterr().out)
        reports.append((rep["passages"], rep["cited_vs_causal"], rep["lds"]))
    for a, b in zip(*reports, strict=True):
        assert json.dumps(
            [{k: v for k, v in r.items() if k != "run"} for r in a] if isinstance(a, list) else a,
            sort_keys=True,
        ) == json.dumps(
            [{k: v for k, v in r.items() if k != "run"} for r in b] if isinstance(b, list) else b,
            sort_keys=True,
        )
