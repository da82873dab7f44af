"""Import results -> store -> reports, through the real CLI and the real DuckDB file.

The released Qwen2.5-14B outputs must give the published numbers (SPEC §6.5) when they go
through the whole product path (CSV -> instances, runs, predictions -> re-scored ``scores``
table -> ``report``), and a small hand-made file of the same format must give hand-computed
values, so the reports are not tuned to the two fixtures.
"""

from __future__ import annotations

import csv
import json

import pytest
from conftest import shared_fixture
from test_cli import run_cli
from test_oncu_release import CONTROLLED, HOTPOTQA, PUBLISHED, _close3

from core.oncu.metrics import sample_level_means
from core.store import Store


def _json(*args) -> object:
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def release_db(tmp_path_factory):
    db = tmp_path_factory.mktemp("rel") / "r.duckdb"
    for rel, name in ((CONTROLLED, "ctl"), (HOTPOTQA, "hp")):
        res = run_cli(
            "import",
            "results",
            "--format",
            "oncu-release",
            shared_fixture(rel),
            "--name",
            name,
            "--db",
            db,
        )
        assert res.returncode == 0, res.stderr
        assert "read 800 predictions of 200 instances" in res.stdout
    return db


@pytest.mark.parametrize(("rel", "run"), [(CONTROLLED, "ctl"), (HOTPOTQA, "hp")])
def test_release_numbers_through_the_cli(release_db, rel, run):
    pub = PUBLISHED[rel]
    rows = _json("report", "oncu", "--db", release_db, "--run", run, "--json")
    by_cond = {r["condition"]: r for r in rows}
    assert set(by_cond) == {"full_context", "retrieved"}
    for cond, row in by_cond.items():
        assert row["run"] == run and row["model"] == "qwen2.5:14b"
        assert (row["valid_groups"], row["total_groups"]) == pub["groups"]
        assert _close3(row["oncu_clipped"], pub["oncu"][cond])
        # Table 23 divides 3-decimal group averages; the exact ratio is within 0.001.
        assert abs(row["oncu_weighted"] - pub["weighted"][cond]) <= 0.001
        lo, hi = pub["oncu_ci"][cond]
        assert abs(row["oncu_ci_low"] - lo) <= 0.01 and abs(row["oncu_ci_high"] - hi) <= 0.01
        for c, f1 in pub["f1"].items():
            assert _close3(row["sample_means"][c], f1), (cond, c)  # 0.5375 -> 0.538
        n_invalid = pub["groups"][1] - pub["groups"][0]
        assert sum(row["invalid_reasons"].values()) == n_invalid
    if run == "hp":
        assert by_cond["full_context"]["invalid_reasons"] == {"oracle_not_above_no_evidence": 9}

    fails = {
        r["condition"]: r
        for r in _json("report", "failures", "--db", release_db, "--run", run, "--json")
    }
    for cond, pct in pub["failure"].items():
        assert {k: round(fails[cond][k], 1) for k in pct} == pct, cond

    paired = _json(
        "report",
        "paired",
        "--db",
        release_db,
        "--run",
        run,
        "--a",
        "retrieved",
        "--b",
        "full_context",
        "--json",
    )
    mean, lo, hi, effect = pub["paired"]
    assert _close3(paired["mean"], mean) and _close3(paired["effect"], effect)
    assert abs(paired["ci_low"] - lo) <= 0.01 and abs(paired["ci_high"] - hi) <= 0.01
    assert paired["p"] < 0.001 and paired["n"] == 200

    store = Store(release_db)
    means = sample_level_means(store.analysis_frame([run])).set_index("condition")
    for cond, ev in pub["ev_f1"].items():
        assert _close3(means.loc[cond, "ev_f1"], ev)


def test_rescoring_is_idempotent(release_db):
    before = _json("report", "oncu", "--db", release_db, "--json")
    res = run_cli("score", "--db", release_db)
    assert res.returncode == 0 and "re-scored 1600 predictions of 2 run(s)" in res.stdout
    assert _json("report", "oncu", "--db", release_db, "--json") == before


# ---------------------------------------------------------------- a hand-made file
_HEADER = [
    "sample_id",
    "model_name",
    "method",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "gold_answer",
    "predicted_answer",
    "gold_evidence_ids",
    "predicted_evidence_ids",
    "cue_applicable",
    "parse_error",
    "answer_f1_relaxed",
]
_GOLD = {"a1": ("Paris", "none"), "a2": ("42", "none"), "b1": ("blue whale", "high")}
#: answers[model][method] = (a1, a2, b1); None = no row in the file.
_ANSWERS = {
    "m1": {
        "no_evidence": ("London", "None", "whale"),
        "oracle": ("Paris", "42", "blue whale"),
        "direct": ("Paris", "41", "blue whale"),
        "retrieve_then_read": ("paris", "42", ""),
    },
    "m2": {
        "no_evidence": ("London", "0", "whale"),
        "oracle": ("Paris", "x", None),
        "direct": ("Paris", "42", "blue whale"),
        "retrieve_then_read": ("Paris", "", "blue whale"),
    },
}


def _write_hand_file(path) -> None:
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(_HEADER)
        for model, methods in _ANSWERS.items():
            for method, answers in methods.items():
                for sid, answer in zip(_GOLD, answers, strict=True):
                    if answer is None:
                        continue
                    gold, dist = _GOLD[sid]
                    cited = "p1" if answer == gold else ""
                    # the file's own score column is deliberately wrong: it must be ignored
                    w.writerow(
                        [
                            sid,
                            model,
                            method,
                            "toy",
                            "single_hop",
                            "entity",
                            "4000",
                            "front",
                            "low",
                            dist,
                            gold,
                            answer,
                            "p1",
                            cited,
                            "True",
                            "",
                            "0.123",
                        ]
                    )


def test_hand_computed_oncu_on_another_file(tmp_path):
    """Relaxed F1 per group, by hand.

    m1, group none (a1, a2): S_none 0, S_oracle 1, full 0.5 -> raw 0.5, retrieved 1 -> raw 1.
    m1, group high (b1): no_evidence "whale" vs "blue whale" F1 = 2/3, S_oracle 1;
       full 1 -> raw (1 - 2/3) / (1/3) = 1; retrieved "" -> raw (0 - 2/3) / (1/3) = -2.
    m1 full: clipped mean (0.5 + 1) / 2 = 0.75, weighted (0.5 + 1/3) / (1 + 1/3) = 0.625.
    m1 retrieved: clipped (1 + 0) / 2 = 0.5, raw mean -0.5, weighted (1 - 2/3) / (4/3) = 0.25.
    m2, group none: S_none 0, S_oracle 0.5, full 1 -> raw 2 (above oracle), retrieved 0.5 -> 1;
       group high has no oracle row -> missing_oracle.
    """
    f = tmp_path / "toy.per_sample_metrics.csv"
    _write_hand_file(f)
    db = tmp_path / "t.duckdb"
    res = run_cli("import", "results", "--format", "oncu-release", f, "--name", "toy", "--db", db)
    assert res.returncode == 0, res.stderr
    assert "runs: toy/m1, toy/m2" in res.stdout
    rows = {(r["run"], r["condition"]): r for r in _json("report", "oncu", "--db", db, "--json")}

    m1f, m1r = rows["toy/m1", "full_context"], rows["toy/m1", "retrieved"]
    assert (m1f["valid_groups"], m1f["total_groups"]) == (2, 2)
    assert m1f["oncu_clipped"] == pytest.approx(0.75)
    assert m1f["oncu_raw_mean"] == pytest.approx(0.75)
    assert m1f["oncu_weighted"] == pytest.approx(0.625)
    assert m1r["oncu_clipped"] == pytest.approx(0.5)
    assert m1r["oncu_raw_mean"] == pytest.approx(-0.5)
    assert m1r["oncu_weighted"] == pytest.approx(0.25)
    assert (m1r["n_below_baseline"], m1r["n_above_oracle"]) == (1, 0)
    assert m1f["sample_means"]["no_evidence"] == pytest.approx((0 + 0 + 2 / 3) / 3)

    m2f = rows["toy/m2", "full_context"]
    assert (m2f["valid_groups"], m2f["total_groups"]) == (1, 2)
    assert m2f["invalid_reasons"] == {"missing_oracle": 1}
    assert m2f["oncu_clipped"] == pytest.approx(1.0) and m2f["oncu_raw_mean"] == pytest.approx(2)
    assert m2f["n_above_oracle"] == 1

    (f1,) = [
        r
        for r in _json("report", "failures", "--db", db, "--run", "toy/m1", "--json")
        if r["condition"] == "full_context"
    ]
    # a1, b1 correct (success); a2 wrong with nothing cited (localization)
    assert f1["success"] == pytest.approx(200 / 3) and f1["localization"] == pytest.approx(100 / 3)

    paired = _json("report", "paired", "--db", db, "--run", "toy/m1", "--json")
    # retrieved - full per instance: a1 0, a2 +1, b1 -1 -> mean 0, sd 1 -> effect 0
    assert paired["mean"] == pytest.approx(0) and paired["effect"] == pytest.approx(0)

    # --group-key source,model: m1's three instances form one group.
    # S_none (0 + 0 + 2/3) / 3 = 2/9, S_oracle 1, full (1 + 0 + 1) / 3 = 2/3, retrieved
    # (1 + 1 + 0) / 3 = 2/3 -> ONCU (2/3 - 2/9) / (1 - 2/9) = 4/7 for both.
    coarse = _json(
        "report", "oncu", "--db", db, "--run", "toy/m1", "--group-key", "source,model", "--json"
    )
    for row in coarse:
        assert (row["valid_groups"], row["total_groups"]) == (1, 1)
        assert row["oncu_raw_mean"] == pytest.approx(4 / 7)
        assert row["s_none"] == pytest.approx(2 / 9)
    res = run_cli("report", "oncu", "--db", db, "--group-key", "source,nope")
    assert res.returncode == 1 and res.stderr.count("\n") == 1
    assert "group key column(s) ['nope'] not in the frame" in res.stderr


def test_report_errors_are_one_line(tmp_path):
    db = tmp_path / "e.duckdb"
    Store(db).schema_version()  # an empty store (a missing one is its own error)
    res = run_cli("report", "oncu", "--db", db, "--run", "nope")
    assert (
        res.returncode == 1
        and res.stderr.count("\n") == 1
        and "no runs matching 'nope'" in (res.stderr)
    )
    res = run_cli("report", "oncu", "--db", db, "--score-field", "bogus")
    assert res.returncode == 2
