"""Agreement between judge runs of one rubric (issue 20 item 4): ``report agreement --judges``.

Two CRUX answerability judge runs rate the same six (sub-question, passage) pairs; the second
judge's ratings are set by hand, one of its calls failed. Hand-checked values on the five items
both rated, judge 1 = (5, 3, 3, 5, 0) and judge 2 = (5, 3, 0, 5, 0):

- raw agreement p_o = 4/5 = 0.8;
- marginals: judge 1 {5: 2, 3: 2, 0: 1}, judge 2 {5: 2, 3: 1, 0: 2}, so
  p_e = (2*2 + 2*1 + 1*2) / 25 = 8/25 and Cohen's kappa = (0.8 - 0.32) / (1 - 0.32) = 12/17;
- quadratic weights (i - j)^2 on the 0-5 ratings: observed disagreement (3 vs 0) 9 * 1/5 = 1.8;
  expected sum_ij p1(i) p2(j) (i - j)^2 = 4.32 + 2.08 + 2.36 = 8.76, so the weighted kappa is
  1 - 1.8 / 8.76 = 58/73.
"""

from __future__ import annotations

import json

import duckdb
import pandas as pd
import pytest
from test_crux import _instance
from test_judges import _SQ

from core.cli import main
from core.judges.agreement import judge_agreement
from core.judges.runs import make_judge, run_judge
from core.store import Store
from core.types import Dataset, Instance

#: Judge 2's ratings by item (None: its call failed).
J2 = {"s1|p0001": 5, "s1|p0002": 3, "s2|p0001": 0, "s2|p0002": 5, "s3|p0001": 0, "s3|p0002": None}


@pytest.fixture
def judged(tmp_path):
    db = tmp_path / "j.duckdb"
    store = Store(db)
    other = Instance("q2", "Which?", "y", passages=_instance().passages, fan_in=2)
    store.write_dataset(Dataset("tiny", "test", "test", {}, (_instance(), other)))
    sq = pd.DataFrame([{"instance_id": "q1", "sq_id": s, "text": t} for s, t in _SQ.items()])
    empty = pd.DataFrame(columns=["instance_id", "sq_id", "passage_id", "rating", "judge"])
    store.write_crux_judgments("tiny", sq, empty)
    run_judge(store, "crux-answerability", make_judge("embedded"), name="j1", dataset="tiny")
    got = store.judgments_frame(runs=["j1"]).set_index("item")["rating"].to_dict()
    # the lexical judge's own ratings are judge 1 (pinned here, so the hand values hold)
    assert got == {
        "s1|p0001": 5,
        "s1|p0002": 3,
        "s2|p0001": 3,
        "s2|p0002": 5,
        "s3|p0001": 0,
        "s3|p0002": 0,
    }
    with duckdb.connect(str(db)) as con:
        for run in ("j2", "j3"):  # copies of j1: another judge of the same rubric
            con.execute(
                f"INSERT INTO runs SELECT * REPLACE ('{run}' AS run_id) FROM runs "
                "WHERE run_id = 'j1'"
            )
            con.execute(
                f"INSERT INTO judgments SELECT * REPLACE ('{run}' AS run_id) "
                "FROM judgments WHERE run_id = 'j1'"
            )
        for item, rating in J2.items():
            con.execute(
                "UPDATE judgments SET rating = ?, error = ? WHERE run_id = 'j2' AND item = ?",
                [rating, None if rating is not None else "HTTP 500", item],
            )
    return store


def test_two_judges_agree_as_computed_by_hand(judged):
    rep = judge_agreement(judged, ["j1", "j2"])
    assert rep["rubric"] == "crux-answerability" and rep["scale"] == [0, 1, 2, 3, 4, 5]
    assert rep["judges"] == {"j1": {"rated": 6, "failed": 0}, "j2": {"rated": 5, "failed": 1}}
    (pair,) = rep["pairs"]
    assert (pair["n"], pair["agreed"]) == (5, 4)
    assert pair["raw_agreement"] == pytest.approx(0.8)
    assert pair["kappa"] == pytest.approx(12 / 17)
    assert pair["weighted_kappa"] == pytest.approx(58 / 73)
    # rows judge 1, columns judge 2, over the scale 0..5: the one disagreement is 3 -> 0
    assert pair["confusion"][3][0] == 1 and sum(map(sum, pair["confusion"])) == 5
    assert rep["all_raters"] is None


def test_three_judges_add_fleiss_and_alpha_and_the_cli_prints_json(judged, capsys):
    rc = main(["report", "agreement", "--judges", "j1,j2,j3", "--json", "--db", str(judged.path)])
    assert rc == 0
    rep = json.loads(capsys.readouterr().out)
    assert [(p["rater_a"], p["rater_b"], p["n"]) for p in rep["pairs"]] == [
        ("j1", "j2", 5),
        ("j1", "j3", 6),
        ("j2", "j3", 5),
    ]
    assert rep["pairs"][1]["kappa"] == pytest.approx(1.0)  # j3 is a copy of j1
    multi = rep["all_raters"]
    assert multi["n"] == 5 and multi["fleiss_kappa"] is not None
    assert multi["krippendorff_alpha"] is not None


def test_bad_requests_are_one_line_errors(judged, capsys):
    db = str(judged.path)
    assert main(["report", "agreement", "--judges", "j1", "--db", db]) == 1
    assert "two or more judge runs" in capsys.readouterr().err
    assert main(["report", "agreement", "--judges", "j1,nope", "--db", db]) == 1
    assert "no judgments in run(s) nope" in capsys.readouterr().err
    assert main(["report", "agreement", "--db", db]) == 1
    assert "give --run R (annotation sample) or --judges J1,J2" in capsys.readouterr().err
