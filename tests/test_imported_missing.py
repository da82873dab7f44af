"""Never a number that was not measured, on imported runs (issue 36 Build item 1's audit).

A dataset built from a results file keeps ids, gold answers and metadata only: its passages are
empty gold-only placeholders. Ranking them would report recall = coverage = 1 at every k, and
their empty titles would make title grounding equal evidence precision. These are missing, with
the reason and a count, in the views, the reports and the exports.
"""

from __future__ import annotations

import csv

import pytest
from conftest import build_release_store, demo_into

from core.cli import main
from core.crux.metrics import crux_evaluate
from core.figures.retrieval import missing_note, retrieval_curves_figure
from core.retrieval.retrievers import NO_TEXT_REASON, rankable
from core.types import Instance, Passage
from core.views.retrieval import audit_with_text


def _p(i: int, title: str, text: str, gold: bool) -> Passage:
    role = "gold" if gold else "distractor"
    return Passage(f"p{i:04d}", i - 1, title, text, f"d{i}", role, gold)


# chunk_size 6, overlap 0: each passage ("[passage_id: pXXXX] Title: T w1 w2" = 3 + 1 + 2
# tokens) is one chunk of its own, c0001 = p0001 (gold), c0002 = p0002 (distractor)
TEXTED = Instance(
    "a",
    "capital of france",
    "Paris",
    (_p(1, "A", "paris france", True), _p(2, "B", "berlin germany", False)),
)
# what an imported results row becomes: the gold passage, no title, no text
BARE = Instance("b", "", "Paris", (_p(1, "", "", True),), metadata={"imported_from": "x.csv"})


def test_rankable_counts_the_instances_without_text():
    keep, n, why = rankable([TEXTED, BARE])
    assert [i.instance_id for i in keep] == ["a"] and n == 1
    assert why.startswith(NO_TEXT_REASON) and "1 of 2 instances" in why
    assert rankable([TEXTED]) == ([TEXTED], 0, None)
    assert "all 1 instances" in rankable([BARE])[2]


def test_the_audit_ranks_only_instances_with_text_hand_checked():
    per, agg = audit_with_text([TEXTED, BARE], ["lexical"], [1, 2], 6, 0)
    assert set(per["instance_id"]) == {"a"}
    rows = {r["k"]: r for r in agg.to_dict("records")}
    # k = 1: 'france' ranks c0001 first -> {p0001}: recall 1, F1 1, no distractor
    assert (rows[1]["recall"], rows[1]["evidence_f1"], rows[1]["distractor_rate"]) == (1, 1, 0)
    # k = 2: {p0001, p0002}: precision 1/2, recall 1 -> F1 2/3; distractor rate 1/2
    assert rows[2]["evidence_f1"] == pytest.approx(2 / 3, abs=1e-15)
    assert rows[2]["distractor_rate"] == 0.5 and rows[2]["passages_per_context"] == 2
    assert all(r["n_instances"] == 1 and r["n_no_text"] == 1 for r in rows.values())
    assert "1 of 2 instances" in rows[1]["missing"]


def test_an_audit_with_no_text_at_all_is_missing_not_one():
    per, agg = audit_with_text([BARE], ["lexical", "oracle"], [1, 3], 220, 40)
    assert per.empty and len(agg) == 4
    for m in ("recall", "full_chain_coverage", "evidence_f1", "distractor_rate"):
        assert agg[m].isna().all(), m
    assert (agg["n_instances"] == 0).all() and (agg["n_no_text"] == 1).all()
    fig, _ = retrieval_curves_figure((per, agg))
    assert not fig.data  # nothing drawn: the figure says why instead
    assert NO_TEXT_REASON in fig.layout.annotations[0].text
    assert missing_note(agg).startswith(NO_TEXT_REASON)


def test_crux_leaves_out_instances_without_text_and_says_so():
    res = crux_evaluate([TEXTED, BARE], ["lexical"], [1], chunk_size=6, overlap=0, n_resamples=50)
    row = res.aggregate.iloc[0]
    # gold-derived answerability: p0001 answers its own sub-question; c0001 is ranked first
    assert (row["n"], row["coverage"], row["n_no_text"]) == (1, 1.0, 1)
    assert set(res.per_context["instance_id"]) == {"a"}
    assert res.note.startswith(f"Missing: {NO_TEXT_REASON} (1 of 2 instances")
    assert "derived from gold evidence" in res.note
    none = crux_evaluate([BARE], ["lexical", "oracle"], [1, 2], k_required=True, n_resamples=50)
    assert none.aggregate[["coverage", "alpha_ndcg", "density"]].isna().all().all()
    assert (none.aggregate["n"] == 0).all() and none.no_text == 1
    assert none.to_dict()["n_no_text"] == 1 and none.note.startswith("Missing: ")


# ------------------------------------------------------------------- the released outputs


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """The released controlled and HotpotQA outputs, imported (no question or passage text)."""
    path = tmp_path_factory.mktemp("rel") / "s.duckdb"
    build_release_store(path, hotpotqa=True)
    return path


def _run(capsys, *argv: str) -> str:
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def test_report_retrieval_on_the_release_prints_missing(release, capsys):
    out = _run(
        capsys,
        "report",
        "retrieval",
        "--dataset",
        "hotpotqa",
        "--retrievers",
        "lexical,oracle",
        "--k",
        "1,5",
        "--db",
        str(release),
    )
    assert "1.000" not in out
    assert f"missing: {NO_TEXT_REASON} (all 200 instances" in out
    rows = [line.split() for line in out.splitlines()[1:5]]
    assert all(r[2:7] == ["--"] * 5 and r[7] == "0" for r in rows)


def test_report_crux_on_the_release_prints_missing(release, capsys):
    out = _run(
        capsys,
        "report",
        "crux",
        "--dataset",
        "hotpotqa",
        "--k",
        "1,3",
        "--k-required",
        "--resamples",
        "50",
        "--db",
        str(release),
    )
    assert "1.000" not in out
    assert f"Missing: {NO_TEXT_REASON} (all 200 instances" in out


def test_exports_on_the_release_have_no_one_rows(release, tmp_path, capsys):
    for name in ("retrieval_grid", "crux_table"):
        out = tmp_path / f"{name}.csv"
        extra = ["--option", "n_resamples=50"] if name == "crux_table" else []
        _run(
            capsys,
            "export",
            "table",
            name,
            "--dataset",
            "hotpotqa",
            "--out",
            str(out),
            *extra,
            "--db",
            str(release),
        )
        with out.open(encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        assert rows, name
        for r in rows:
            metrics = (
                ("recall", "full_chain_coverage", "evidence_f1")
                if name == "retrieval_grid"
                else ("coverage", "alpha_ndcg", "density")
            )
            assert all(r[m] == "" for m in metrics), (name, r)
            assert r["n_no_text"] == "200" and r["missing"].startswith(NO_TEXT_REASON)


def test_the_release_titles_are_empty_so_title_grounding_is_missing(release):
    from core.store import Store

    store = Store(release)
    for run in ("controlled", "hotpotqa"):
        rows = store.prediction_rows(run)
        scored = rows[rows["ev_precision"].notna()]
        assert len(scored) > 0, run
        # '' titles are no titles: missing (NaN, counted by the pages), not precision again
        assert rows["title_grounding"].isna().all(), run


def test_the_condition_matrix_counts_title_grounding_and_says_why_no_evidence_is_zero(release):
    from core.selection import Selection
    from core.store import Store
    from core.views.catalog import get_figure, get_table

    sel = Selection(dataset="hotpotqa", runs=["hotpotqa"])
    table = get_table("condition_matrix").build(Store(release), sel).set_index("condition")
    # no titles: every title grounding missing, counted as 0 scored of 200
    assert table["title_grounding"].isna().all() and (table["title_grounding_n"] == 0).all()
    assert (table["n"] == 200).all()
    fig, _ = get_figure("condition_matrix").build(Store(release), sel)
    ev = [t for t in fig.data if t.xaxis == "x2"][0]  # the evidence F1 panel
    notes = dict(zip(ev.x, ev.hovertext, strict=True))
    assert notes["No evidence"] == " (0 by construction: no passages are shown)"
    assert table.loc["no_evidence", "ev_f1"] == 0.0
    assert all(v == "" for k, v in notes.items() if k != "No evidence")


def test_the_demo_has_titles_so_title_grounding_is_measured(tmp_path):
    from core.selection import Selection
    from core.store import Store
    from core.views.catalog import get_table

    store = Store(tmp_path / "d.duckdb")
    demo_into(store)
    table = get_table("condition_matrix").build(store, Selection(dataset="controlled-200"))
    assert (table["title_grounding_n"] == table["n"] - table["missing"]).all()
    assert table["title_grounding"].notna().all()
