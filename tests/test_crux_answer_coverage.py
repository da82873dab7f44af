"""CRUX on the generated answer (issue 20 item 3): Cov(y), Den(y) and Kendall tau-b in the layout
of seed 002 Table 3, hand-checked on tiny tables, and shown by ``report crux``."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from model_stub import ModelStub
from test_cli import run_cli
from test_judges import _SQ, tiny  # noqa: F401 - the fixture

from core.backends import make_backend
from core.crux.answers import answer_scores, kendall_table, ranking_metrics
from core.execution.runs import run_conditions
from core.store import Store
from core.types import count_tokens


def test_cov_y_and_den_y_hand_checked():
    # Q_ans {s1, s2}; s1 rated 4 >= eta 3, s2 rated 2: Cov(y) = 1/2 (s3 is not answerable).
    got = answer_scores({"s1": 4, "s2": 2, "s3": 5}, {"s1", "s2"}, "a b c d", 1.0, 20.0)
    assert got["cov_y"] == 0.5 and got["tokens_y"] == 4
    # Den(y) = ((1/2) / 4) / (1 / 20))^0.5 = sqrt(2.5)
    assert got["den_y"] == pytest.approx(math.sqrt(2.5))
    assert answer_scores({"s1": 4, "s2": 2}, {"s1", "s2"}, "a", 1.0, 20.0, eta=5)["cov_y"] == 0
    unrated = answer_scores({"s1": 4, "s2": math.nan}, {"s1", "s2"}, "a", 1.0, 20.0)
    assert math.isnan(unrated["cov_y"]) and math.isnan(unrated["den_y"])  # a failed judge call


def test_ranking_metrics_hand_checked():
    got = ranking_metrics([True, False, True], 2, 1.0)
    assert got["map"] == pytest.approx((1 / 1 + 2 / 3) / 2)
    assert got["ndcg"] == pytest.approx((1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)))


def _points(cov_y, k=None):
    n = len(cov_y)
    cols = {
        m: [1.0, 2.0, 3.0, 4.0][:n]
        for m in ("cov_z", "alpha_ndcg", "recall", "map", "ndcg", "den_z")
    }
    return pd.DataFrame(
        {**cols, "cov_y": cov_y, "den_y": [4.0, 3.0, 2.0, 1.0][:n], "k": k or [5] * n}
    )


def test_kendall_tau_b_hand_checked_with_and_without_ties():
    # x 1,2,3,4 vs y 1,3,2,4: 5 concordant, 1 discordant pair: (5 - 1) / 6
    t = kendall_table(_points([1.0, 3.0, 2.0, 4.0])).iloc[0]
    assert t["k"] == 5 and t["cov_z"] == pytest.approx(4 / 6) and t["cov_z_n"] == 4
    assert t["den_z"] == pytest.approx(-1.0)  # Den(Z) ranks against Den(y), reversed here
    # y 1,1,2,3 (one tie): tau-b = 5 / sqrt(6 * 5); tau-a would be 5 / 6
    tb = kendall_table(_points([1.0, 1.0, 2.0, 3.0])).iloc[0]
    assert tb["recall"] == pytest.approx(5 / math.sqrt(30))
    const = kendall_table(_points([2.0, 2.0, 2.0, 2.0])).iloc[0]
    assert math.isnan(const["map"]) and const["map_n"] == 4  # constant column: no tau
    rows = kendall_table(_points([1.0, 3.0, 2.0, 4.0], k=[3, 3, 5, 5]), "k")
    assert list(rows["k"]) == [3, 5] and list(rows["ndcg_n"]) == [2, 2]
    assert list(rows["ndcg"]) == pytest.approx([1.0, 1.0])


def _coverage_rating(messages):
    """The scripted coverage judge: s1 -> 4, s2 -> 1, s3 -> 3 (eta 3: s1 and s3 answered)."""
    text = messages[-1]["content"]
    for sq, rating in (("s1", "4"), ("s2", "1"), ("s3", "3")):
        if f"Question: {_SQ[sq]}\n" in text:
            return rating
    return None  # q2's derived sub-question: the reader answers, read as 0 (flagged)


def test_report_crux_shows_cov_y_den_y_and_tau_when_coverage_judgments_exist(tiny):  # noqa: F811
    store = Store(tiny)
    for k in (1, 3):
        run_conditions(
            store,
            "tiny",
            make_backend("embedded"),
            ("retrieved",),
            name=f"r{k}",
            top_k=k,
            chunk_size=10,
            overlap=0,
        )
    with ModelStub() as stub:
        stub.answer_for = _coverage_rating
        for k in (1, 3):
            res = run_cli(
                "judge",
                "crux-coverage",
                "--run",
                f"r{k}",
                "--backend",
                "ollama",
                "--model",
                "stub-model",
                "--host",
                stub.url,
                "--name",
                f"cov{k}",
                "--db",
                tiny,
            )
            assert res.returncode == 0, res.stderr
            assert "1 instances have no stored sub-questions" in res.stdout
    out = run_cli(
        "report",
        "crux",
        "--dataset",
        "tiny",
        "--retrievers",
        "lexical",
        "--k",
        "1",
        "--chunk-size",
        "10",
        "--overlap",
        "0",
        "--resamples",
        "50",
        "--json",
        "--db",
        tiny,
    )
    assert out.returncode == 0, out.stderr
    ac = json.loads(out.stdout)["answer_coverage"]
    per = {(r["run"], r["instance_id"]): r for r in ac["per_answer"]}
    preds = store.prediction_rows("r1").set_index("instance_id")["answer"]
    q1 = per["r1", "q1"]
    # q1: no passage ratings, so Q_ans = the 3 judged sub-questions; s1 and s3 reach eta 3.
    assert q1["cov_y"] == pytest.approx(2 / 3)
    # Den(y): Z* = both gold passages (gold-derived), Cov(Z*) 1 over 10 + 10 tokens
    ntok = count_tokens(preds["q1"])
    assert q1["den_y"] == pytest.approx(math.sqrt((2 / 3) / ntok / (1 / 20)))
    assert per["r1", "q2"]["cov_y"] == 0.0  # the derived sub-question's reply reads as 0
    assert {r["k"] for r in ac["kendall"]} == {1, 3, "all", "contexts"}
    assert ac["kendall_variant"].startswith("tau-b")
    text = run_cli(
        "report",
        "crux",
        "--dataset",
        "tiny",
        "--retrievers",
        "lexical",
        "--k",
        "1",
        "--chunk-size",
        "10",
        "--overlap",
        "0",
        "--resamples",
        "50",
        "--db",
        tiny,
    )
    assert text.returncode == 0, text.stderr
    assert "answer coverage Cov(y) / Den(y)" in text.stdout and "Kendall tau-b" in text.stdout
