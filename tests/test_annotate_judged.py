"""The blind annotation round trip under judge rubrics (issue 20 item 5: "the same commands
serve every judge rubric"; core/annotate/judged.py).

On the demo store judged by two judge runs of ``authtrace-correctness`` (the embedded lexical
judge, and a model judge through the Ollama stub that rates every answer 2): export a sample
of the judged items, check it carries the judge's prompt and no rating, fill labels, import,
and check ``report agreement --rubric ... --json`` against Cohen's κ computed here with the
plain formula from the judgments read straight from the store. Also ``authtrace-evidence``
(items per gold unit / segment, 0/1 labels) and the one-line errors.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest
from conftest import demo_into
from model_stub import ModelStub
from test_annotate import _cli, _kappa, _rows, _write
from test_fanin_judged import stub_judge_run
from test_judges import tiny  # noqa: F401 - the fixture

from core.annotate.roundtrip import CSV_COLUMNS, JUDGE_ITEM_COLUMN
from core.backends import make_backend
from core.execution.runs import DEMO_RUN, run_conditions
from core.judges.rubrics import AUTHTRACE_AC_SYSTEM
from core.judges.runs import make_judge, run_judge
from core.store import Store
from core.store.annotations import annotation_labels, sampled_items
from core.views.judged import annotated_runs

RUBRIC = "authtrace-correctness"


@pytest.fixture(scope="module")
def judged_db(tmp_path_factory) -> Path:
    """The demo store with two correctness judge runs and one evidence judge run."""
    db = tmp_path_factory.mktemp("annotate_judged") / "demo.duckdb"
    store = Store(db)
    demo_into(store)
    run_judge(store, RUBRIC, make_judge("embedded"), name="j-lexical", run=DEMO_RUN)
    with ModelStub() as stub:
        stub.answer_for = lambda messages: "2"
        judge = make_backend(
            "ollama", "stub-model", hosts=[stub.url], options={"temperature": 0, "seed": 0}
        )
        done = run_judge(
            store, RUBRIC, judge, name="j-model", run=DEMO_RUN, conditions=["retrieved"]
        )
        assert done.errors == 0 and done.executed == 200
    run_judge(
        store,
        "authtrace-evidence",
        make_judge("embedded"),
        name="j-ev",
        run=DEMO_RUN,
        conditions=["retrieved"],
    )
    return db


@pytest.fixture
def db(judged_db: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "store.duckdb"
    shutil.copy(judged_db, copy)
    return copy


def _judge_labels(db: Path, judge: str) -> dict[str, str]:
    """item_id -> the judge run's rating as text, straight from the store (independent of core)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT i.item_id, j.rating FROM annotation_items i JOIN judgments j "
            "ON j.target_run = i.run_id AND j.instance_id = i.instance_id "
            "AND j.condition = i.condition AND j.item = i.variant AND j.rubric = i.rubric "
            "WHERE j.run_id = ? AND j.error IS NULL AND j.rating IS NOT NULL",
            [judge],
        ).fetchall()
    finally:
        con.close()
    return {item: str(int(r)) for item, r in rows}


def test_judge_rubric_round_trip_reproduces_an_independent_kappa(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    code, stdout, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        DEMO_RUN,
        "--rubric",
        RUBRIC,
        "--sample",
        40,
        "--seed",
        5,
        "--out",
        out,
        "--db",
        db,
    )
    assert code == 0, err
    assert "judgment items" in stdout and "condition x judge:j-lexical rating" in stdout
    rows = _rows(out)
    assert list(rows[0]) == [*CSV_COLUMNS[:-1], JUDGE_ITEM_COLUMN, "label"]
    assert len(rows) == 40 and all(r["label"] == "" for r in rows)
    # the annotator reads what the judge read: the rubric's system turn and the answer
    assert all(r["item"].startswith(AUTHTRACE_AC_SYSTEM[:60]) for r in rows)
    assert all(r["answer"] in r["item"] for r in rows if r["answer"])
    # blind: the sample spans the four conditions (strata condition x judge rating)
    assert {r["condition"] for r in rows} == {"no_evidence", "full_context", "retrieved", "oracle"}

    lexical = _judge_labels(db, "j-lexical")
    model = _judge_labels(db, "j-model")
    assert set(lexical) == {r["item_id"] for r in rows}  # the embedded judge judged every answer
    # the annotator: the lexical judge's label, except every 4th item one point higher (mod 4)
    given = {}
    for k, row in enumerate(rows):
        label = lexical[row["item_id"]]
        if k % 4 == 0:
            label = str((int(label) + 1) % 4)
        row["label"] = given[row["item_id"]] = label
    filled = tmp_path / "bob.csv"
    _write(filled, rows)
    code, stdout, err = _cli(
        capsys,
        "annotate",
        "import",
        filled,
        "--run",
        DEMO_RUN,
        "--rubric",
        RUBRIC,
        "--annotator",
        "bob",
        "--db",
        db,
    )
    assert code == 0, err and "40 new" in stdout
    code, stdout, err = _cli(
        capsys, "report", "agreement", "--run", DEMO_RUN, "--rubric", RUBRIC, "--json", "--db", db
    )
    assert code == 0, err
    rep = json.loads(stdout)
    assert rep["labels"] == ["0", "1", "2", "3"]
    assert rep["raters"] == {"bob": 40, "judge:j-lexical": 40, "judge:j-model": len(model)}
    pairs = {(p["rater_a"], p["rater_b"]): p for p in rep["pairs"]}
    pair = pairs[("bob", "judge:j-lexical")]
    items = sorted(given)
    a, b = [given[i] for i in items], [lexical[i] for i in items]
    assert pair["n"] == 40 and pair["agreed"] == 30
    assert pair["kappa"] == pytest.approx(_kappa(a, b), abs=1e-12)
    # the model judge judged the retrieved answers only: its pairs are over those items
    both = sorted(set(given) & set(model))
    assert pairs[("bob", "judge:j-model")]["n"] == len(both) > 0
    assert set(model.values()) == {"2"}
    # three raters: Fleiss and ordinal Krippendorff over the items every one rated
    multi = rep["all_raters"]
    assert multi["n"] == len(both) and multi["alpha_level"] == "ordinal"

    # a second import of the same file adds nothing
    code, stdout, _ = _cli(
        capsys,
        "annotate",
        "import",
        filled,
        "--run",
        DEMO_RUN,
        "--rubric",
        RUBRIC,
        "--annotator",
        "bob",
        "--db",
        db,
    )
    assert code == 0 and "0 new, 40 unchanged" in stdout


def test_a_label_off_the_judge_scale_is_one_line_and_changes_nothing(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert (
        _cli(
            capsys,
            "annotate",
            "export",
            "--run",
            DEMO_RUN,
            "--rubric",
            RUBRIC,
            "--sample",
            10,
            "--seed",
            1,
            "--out",
            out,
            "--db",
            db,
        )[0]
        == 0
    )
    rows = _rows(out)
    for row in rows:
        row["label"] = "2"
    rows[3]["label"] = "4"  # the 0-3 claim rubric has no 4
    _write(out, rows)
    code, _, err = _cli(
        capsys,
        "annotate",
        "import",
        out,
        "--run",
        DEMO_RUN,
        "--rubric",
        RUBRIC,
        "--annotator",
        "carol",
        "--db",
        db,
    )
    assert code == 1 and err.count("\n") == 1
    assert f"{out}: record 4: field 'label'" in err and "expected one of: 0, 1, 2, 3" in err
    code, stdout, _ = _cli(
        capsys, "report", "agreement", "--run", DEMO_RUN, "--rubric", RUBRIC, "--json", "--db", db
    )
    assert "carol" not in json.loads(stdout)["raters"]


def test_evidence_items_are_units_and_segments_with_binary_labels(db, tmp_path, capsys):
    out = tmp_path / "ev.csv"
    code, _, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        DEMO_RUN,
        "--rubric",
        "authtrace-evidence",
        "--sample",
        12,
        "--seed",
        2,
        "--out",
        out,
        "--db",
        db,
    )
    assert code == 0, err
    rows = _rows(out)
    assert len(rows) == 12 and {r["condition"] for r in rows} == {"retrieved"}
    assert all(r["item"] for r in rows)  # each row names the unit or segment to match
    judge = _judge_labels(db, "j-ev")
    for row in rows:
        row["label"] = judge[row["item_id"]]  # agreeing with the judge on every item
    _write(out, rows)
    assert (
        _cli(
            capsys,
            "annotate",
            "import",
            out,
            "--run",
            DEMO_RUN,
            "--rubric",
            "authtrace-evidence",
            "--annotator",
            "dan",
            "--db",
            db,
        )[0]
        == 0
    )
    code, stdout, _ = _cli(
        capsys,
        "report",
        "agreement",
        "--run",
        DEMO_RUN,
        "--rubric",
        "authtrace-evidence",
        "--json",
        "--db",
        db,
    )
    rep = json.loads(stdout)
    assert rep["labels"] == ["0", "1"]
    (pair,) = rep["pairs"]
    assert (pair["rater_a"], pair["rater_b"], pair["n"], pair["agreed"]) == (
        "dan",
        "judge:j-ev",
        12,
        12,
    )


def test_a_judge_rubric_without_judge_runs_is_one_line(db, tmp_path, capsys):
    code, _, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        DEMO_RUN,
        "--rubric",
        "crux-coverage",
        "--sample",
        5,
        "--seed",
        1,
        "--out",
        tmp_path / "x.csv",
        "--db",
        db,
    )
    assert code == 1 and err.count("\n") == 1
    assert f"no crux-coverage judge run judged run '{DEMO_RUN}'" in err
    assert not (tmp_path / "x.csv").exists()


def test_crux_answerability_sample_comes_from_a_judge_run_of_the_dataset(tiny, tmp_path, capsys):  # noqa: F811
    """The passage rubric: --run names a crux-answerability judge run; items are its
    (sub-question, passage) pairs; every judge run of the rubric on the dataset is a rater."""
    store = Store(tiny)
    run_judge(store, "crux-answerability", make_judge("embedded"), name="ja-lex", dataset="tiny")
    stub_judge_run(store, "crux-answerability", "ja-model", "4", dataset="tiny")
    out = tmp_path / "ans.csv"
    code, stdout, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        "ja-lex",
        "--rubric",
        "crux-answerability",
        "--sample",
        50,
        "--seed",
        1,
        "--out",
        out,
        "--db",
        tiny,
    )
    assert code == 0, err and "judge:ja-lex" in stdout
    rows = _rows(out)
    pairs = {r["item_id"]: r for r in rows}
    lex = {}
    for r in store.judgments_frame(runs=["ja-lex"]).itertuples(index=False):
        lex[(r.instance_id, r.item)] = str(int(r.rating))
    assert len(rows) == len(lex) == 6  # the whole pool: 3 sub-questions x 2 gold passages
    for r in rows:
        assert r["condition"] == "" and r["answer"] == "" and r["question"]
        assert r["item"].startswith("Instruction: Determine whether")
        assert r["shown_passages"].startswith("[p")  # the judged passage, shown
    # the annotator says 4 everywhere except the first item
    given = {i: ("1" if k == 0 else "4") for k, i in enumerate(sorted(pairs))}
    for r in rows:
        r["label"] = given[r["item_id"]]
    _write(out, rows)
    code, _, err = _cli(
        capsys,
        "annotate",
        "import",
        out,
        "--run",
        "ja-lex",
        "--rubric",
        "crux-answerability",
        "--annotator",
        "erin",
        "--db",
        tiny,
    )
    assert code == 0, err
    code, stdout, _ = _cli(
        capsys,
        "report",
        "agreement",
        "--run",
        "ja-lex",
        "--rubric",
        "crux-answerability",
        "--json",
        "--db",
        tiny,
    )
    rep = json.loads(stdout)
    assert rep["raters"] == {"erin": 6, "judge:ja-lex": 6, "judge:ja-model": 6}
    by = {(p["rater_a"], p["rater_b"]): p for p in rep["pairs"]}
    model = by[("erin", "judge:ja-model")]
    assert (model["n"], model["agreed"]) == (6, 5)  # the model judge said 4 everywhere
    items = sorted(given)
    lex_labels = [lex[(pairs[i]["instance_id"], _answerability_item(store, i))] for i in items]
    a = [given[i] for i in items]
    pair = by[("erin", "judge:ja-lex")]
    assert pair["agreed"] == sum(x == y for x, y in zip(a, lex_labels, strict=True))
    if len(set(a)) > 1 or len(set(lex_labels)) > 1:
        assert pair["kappa"] == pytest.approx(_kappa(a, lex_labels), abs=1e-12)


def _answerability_item(store: Store, item_id: str) -> str:
    """The judged ``<sq>|<passage>`` of a sampled item, read from the store."""
    con = duckdb.connect(str(store.path), read_only=True)
    try:
        return con.execute(
            "SELECT variant FROM annotation_items WHERE item_id = ?", [item_id]
        ).fetchall()[0][0]
    finally:
        con.close()


def test_crux_answerability_needs_a_judge_run(tiny, tmp_path, capsys):  # noqa: F811
    store = Store(tiny)
    run_conditions(
        store,
        "tiny",
        make_backend("embedded"),
        ("retrieved",),
        name="r1",
        top_k=2,
        chunk_size=10,
        overlap=0,
    )
    code, _, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        "r1",
        "--rubric",
        "crux-answerability",
        "--sample",
        5,
        "--seed",
        1,
        "--out",
        tmp_path / "x.csv",
        "--db",
        tiny,
    )
    assert code == 1 and err.count("\n") == 1
    assert "'r1' is not a crux-answerability judge run" in err


def test_a_store_from_before_the_annotation_tables_reads_as_unannotated(db):
    """A read-only open does not migrate: the missing tables mean no labels. DuckDB's
    replacement scans are off, so the name ``annotations`` (a global of this module, from
    ``from __future__ import annotations``) is never read as a table."""
    con = duckdb.connect(str(db))
    con.execute("DROP TABLE annotations")
    con.execute("DROP TABLE annotation_items")
    con.execute("DELETE FROM schema_version WHERE version >= 5")
    con.close()
    store = Store(db)
    assert annotations is not None  # the module global DuckDB once picked up
    assert annotation_labels(store, DEMO_RUN, "failure_taxonomy").empty
    assert sampled_items(store, DEMO_RUN, "authtrace-correctness").empty
    assert annotated_runs(store, [DEMO_RUN]) == []
