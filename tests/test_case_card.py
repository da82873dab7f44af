"""The case card (issue 19 item 5): one instance as LaTeX and as a figure, hand-checked.

A three-passage instance (one gold), a run with four conditions: no evidence, full context
citing the gold passage and a distractor, retrieved (shown p1 and p3), and a failed oracle
call. The card lists the passages shown (all three, through full context) marked gold or
distractor, the answers in condition order with the gold citation starred, the score with two
digits, and the failed call as "call failed: ..." with "--" for its score (never 0); hostile
text is escaped in LaTeX and drawn as text in the figure.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
from plotly.utils import PlotlyJSONEncoder

from core.export.case_card import card_rows, case_card_figure, case_card_latex
from core.store import Store
from core.types import Dataset, Instance, Passage
from core.views.case import case_data

HOSTILE = '50% of <a href="http://x">A&B</a> {c}_$'


@pytest.fixture(scope="module")
def case(tmp_path_factory) -> dict:
    store = Store(tmp_path_factory.mktemp("card") / "card.duckdb")
    passages = (
        Passage("p1", 0, "Alpha", "alpha text", "d1", "distractor", False),
        Passage("p2", 1, "Gold", "the answer is Velmora", "d2", "gold", True),
        Passage("p3", 2, "Gamma", HOSTILE, "d3", "distractor", False),
    )
    inst = Instance(
        instance_id="i1", question=f"Q {HOSTILE}?", gold_answer="Velmora", passages=passages
    )
    store.write_dataset(Dataset("D", "test", "test", {}, (inst,)))
    rows = [  # condition, answer, cited, input, error, f1_relaxed
        ("oracle", None, [], ["p2"], "backend raised TimeoutError", None),
        ("retrieved", "Alpha", ["p1"], ["p1", "p3"], None, 0.0),
        ("full_context", "Velmora", ["p2", "p3"], None, None, 1.0),
        ("no_evidence", "unknown", [], None, None, 0.25),
    ]
    preds = [
        {
            "run_id": "r",
            "instance_id": "i1",
            "condition": c,
            "variant": "",
            "answer": a,
            "cited_ids": cited,
            "input_passage_ids": shown,
            "error": e,
        }
        for c, a, cited, shown, e, _ in rows
    ]
    scores = [
        {"run_id": "r", "instance_id": "i1", "condition": c, "variant": "", "f1_relaxed": f1}
        for c, _, _, _, _, f1 in rows
    ]
    with store.transaction() as con:
        store.insert_run(
            con,
            {
                "run_id": "r",
                "dataset_id": "D",
                "backend": "imported",
                "model": "m",
                "status": "done",
                "kind": "imported",
            },
        )
        store.write_predictions(con, preds, replace=False)
        store.write_scores(con, pd.DataFrame(scores), replace=False)
    return {**case_data(store, "D", "i1", ["r"]), "_db": store.path}


def test_rows_list_shown_passages_and_answers_in_condition_order(case):
    passages, answers = card_rows(case)
    assert list(passages["passage_id"]) == ["p1", "p2", "p3"]
    assert list(passages["mark"]) == ["distractor", "gold", "distractor"]
    assert list(answers["condition"]) == ["no_evidence", "full_context", "retrieved", "oracle"]
    assert list(answers["cited"]) == ["", "p2*, p3", "p1", ""]
    assert answers["answer"].iloc[3] == "call failed: backend raised TimeoutError"
    assert answers["score"].iloc[:3].tolist() == [0.25, 1.0, 0.0]
    assert answers["score"].isna().iloc[3]  # a failed call has no score, never 0


def test_latex_is_escaped_booktabs_with_caption_and_label(case):
    tex = case_card_latex(case)
    for rule in (r"\toprule", r"\midrule", r"\bottomrule", r"\caption{", r"\label{tab:case-i1}"):
        assert rule in tex
    assert r"p2 (\textbf{gold})" in tex and "p1 (distractor)" in tex
    assert r'Question & Q 50\% of <a href="http://x">A\&B</a> \{c\}\_\$? \\' in tex.splitlines()
    lines = tex.splitlines()
    assert r"r & no\_evidence & unknown &  & 0.25 \\" in lines
    assert r"r & full\_context & Velmora & p2*, p3 & 1.00 \\" in lines
    assert r"r & oracle & call failed: backend raised TimeoutError &  & -- \\" in lines


def test_figure_has_two_tables_and_draws_data_as_text(case):
    fig = case_card_figure(case)
    assert [t.type for t in fig.data] == ["table", "table"]
    answers = fig.data[1].cells.values
    assert list(answers[1]) == ["no_evidence", "full_context", "retrieved", "oracle"]
    assert list(answers[4]) == ["0.25", "1.00", "0.00", "--"]
    text = json.dumps(fig.to_plotly_json(), cls=PlotlyJSONEncoder)
    assert "<a href" not in text  # the hostile link is broken by a word joiner


def test_cli_writes_the_card_as_latex_and_pdf(case, tmp_path, capsys):
    import shutil

    from core.cli import main

    db = str(case["_db"])
    tex = tmp_path / "card.tex"
    assert (
        main(
            ["export", "case", "--db", db, "--dataset", "D", "--instance", "i1", "--out", str(tex)]
        )
        == 0
    )
    assert r"r & oracle & call failed: backend raised TimeoutError &  & -- \\" in tex.read_text()
    assert (
        main(
            [
                "export",
                "case",
                "--db",
                db,
                "--dataset",
                "D",
                "--instance",
                "nope",
                "--out",
                str(tex),
            ]
        )
        == 1
    )
    assert "no instance 'nope'" in capsys.readouterr().err
    if shutil.which("chromium") is None:
        pytest.skip("no chromium: the PDF case card needs it (python -m core setup)")
    pdf = tmp_path / "card.pdf"
    assert (
        main(
            ["export", "case", "--db", db, "--dataset", "D", "--instance", "i1", "--out", str(pdf)]
        )
        == 0
    )
    assert pdf.read_bytes().startswith(b"%PDF")
