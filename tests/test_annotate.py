"""The blind annotation round trip on the demo store (issue 20 item 5; core/annotate/roundtrip.py).

Export a sample, fill labels in the test, import, and check ``report agreement --json``
against a κ computed here with the plain formula; re-import adds nothing; bad files leave the
store as it was; the exported file carries no rule label.
"""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import duckdb
import pytest
from conftest import demo_into
from test_cli import run_cli

from core.annotate.roundtrip import (
    AMBIGUOUS,
    CSV_COLUMNS,
    _neutral,
    _restored,
    allocate,
    item_id,
)
from core.cli import main
from core.execution.runs import DEMO_RUN
from core.scoring.rows import FAILURE_LABELS
from core.store import Store

VOCAB = (*FAILURE_LABELS, AMBIGUOUS)


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> Path:
    """The demo store (embedded reader, four conditions), built once for the module."""
    db = tmp_path_factory.mktemp("annotate") / "demo.duckdb"
    demo_into(Store(db))
    return db


@pytest.fixture
def db(demo_db: Path, tmp_path: Path) -> Path:
    """A private copy of the demo store."""
    copy = tmp_path / "store.duckdb"
    shutil.copy(demo_db, copy)
    return copy


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def _export(capsys, db: Path, out: Path, n: int = 30, seed: int = 3) -> str:
    code, stdout, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        DEMO_RUN,
        "--sample",
        n,
        "--seed",
        seed,
        "--out",
        out,
        "--db",
        db,
    )
    assert code == 0, err
    return stdout


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def _rule_labels(db: Path) -> dict[str, str]:
    """item_id -> the rule label, read straight from the store (independent of core)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT i.item_id, s.failure_label FROM annotation_items i JOIN scores s "
            "USING (run_id, instance_id, condition, variant)"
        ).fetchall()
    finally:
        con.close()
    return dict(rows)


def _tables(db: Path) -> dict[str, list[tuple]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {
            t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall()
            for t in ("annotation_items", "annotations")
        }
    finally:
        con.close()


def _kappa(a: list[str], b: list[str]) -> float:
    """Cohen's kappa by the plain formula: (p_o - p_e) / (1 - p_e)."""
    n = len(a)
    po = sum(x == y for x, y in zip(a, b, strict=True)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[k] * cb[k] for k in set(ca) | set(cb)) / n**2
    return (po - pe) / (1 - pe)


def _relabel(rows: list[dict[str, str]], rule: dict[str, str], every: int) -> dict[str, str]:
    """Copy the rule label, except every ``every``-th row gets the next vocabulary label."""
    given = {}
    for k, row in enumerate(rows):
        label = rule[row["item_id"]]
        if k % every == 0:
            label = VOCAB[(VOCAB.index(label) + 1 + k % 3) % len(VOCAB)]
        row["label"] = given[row["item_id"]] = label
    return given


# ------------------------------------------------------------------------- allocation
def test_allocation_by_hand():
    # strata sizes 9, 34, 27, 3, 4, 39 (total 116), n = 20; quotas n * size / 116:
    #   1.552, 5.862, 4.655, 0.517, 0.690, 6.724 -> floors 1, 5, 4, 0, 0, 6 (sum 16)
    # 4 left, by largest remainder: .862 (s2), .724 (s6), .690 (s5), .655 (s3)
    #   -> 1, 6, 5, 0, 1, 7
    # s4 has none: the donor most over its quota: s3 (5 - 4.655 = .345) -> 1, 6, 4, 1, 1, 7
    sizes = dict(zip("abcdef", (9, 34, 27, 3, 4, 39), strict=True))
    assert allocate(sizes, 20) == dict(zip("abcdef", (1, 6, 4, 1, 1, 7), strict=True))
    # fewer items than strata: plain largest remainder, some strata get none
    # quotas 2 * (1, 1, 8) / 10 = .2, .2, 1.6 -> floors 0, 0, 1; remainder .6 -> c: 0, 0, 2
    assert allocate({"a": 1, "b": 1, "c": 8}, 2) == {"a": 0, "b": 0, "c": 2}
    assert allocate({"a": 1, "b": 2}, 50) == {"a": 1, "b": 2}


# ------------------------------------------------------------------------------ export
def test_export_is_blind_seeded_and_stratified(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    stdout = _export(capsys, db, out, n=20, seed=7)
    assert "0 failed calls" in stdout
    text = out.read_text(encoding="utf-8")
    rows = _rows(out)
    assert list(rows[0]) == list(CSV_COLUMNS) and len(rows) == 20
    assert all(r["label"] == "" for r in rows)
    # no rule label in any column but the free-text ones (question, answers, passages)
    for r in rows:
        for col in ("item_id", "run", "instance_id", "condition", "cited_ids", "label"):
            assert not any(lab in r[col] for lab in FAILURE_LABELS), (col, r[col])
    assert "failure_label" not in text
    assert [r["item_id"] for r in rows] == sorted(r["item_id"] for r in rows)
    # the same seed writes the same file; the sample is in the store
    again = tmp_path / "again.csv"
    stdout2 = _export(capsys, db, again, n=20, seed=7)
    assert again.read_bytes() == out.read_bytes()
    assert "(0 new to the store's sample)" in stdout2
    rule = _rule_labels(db)
    assert set(rule) == {r["item_id"] for r in rows}
    # stratified: every (condition, rule label) stratum of the failures has its allocation
    con = duckdb.connect(str(db), read_only=True)
    pool = dict(
        con.execute(
            "SELECT condition || '/' || failure_label, count(*) FROM scores "
            "WHERE failure_label IS NOT NULL AND failure_label <> 'success' GROUP BY 1 ORDER BY 1"
        ).fetchall()
    )
    con.close()
    drawn = Counter(f"{r['condition']}/{rule[r['item_id']]}" for r in rows)
    assert "success" not in {rule[r["item_id"]] for r in rows}
    assert set(drawn) == set(pool)  # 20 items >= 6 strata: one at least in each
    assert dict(drawn) == allocate(pool, 20)
    for r in rows:
        key = (r["run"], r["instance_id"], r["condition"], "", "failure_taxonomy")
        assert r["item_id"] == item_id(*key)


def test_failed_calls_are_not_sampled_and_are_counted(db, tmp_path, capsys):
    con = duckdb.connect(str(db))
    (n_failures,) = con.execute(
        "SELECT count(*) FROM scores WHERE failure_label NOT IN ('success')"
    ).fetchone()
    keys = con.execute(
        "SELECT instance_id, condition FROM scores WHERE condition = 'retrieved' "
        "AND failure_label = 'integration' ORDER BY instance_id LIMIT 3"
    ).fetchall()
    for iid, cond in keys:  # what a failed call looks like in the store (no label, error)
        con.execute(
            "UPDATE predictions SET error = 'timeout', answer = NULL "
            "WHERE instance_id = ? AND condition = ?",
            [iid, cond],
        )
        con.execute(
            "UPDATE scores SET failure_label = NULL WHERE instance_id = ? AND condition = ?",
            [iid, cond],
        )
    con.close()
    out = tmp_path / "all.csv"
    stdout = _export(capsys, db, out, n=1000, seed=1)
    assert "3 failed calls" in stdout
    rows = _rows(out)
    assert len(rows) == n_failures - 3  # every failure of the demo run but the three
    assert not {(r["instance_id"], r["condition"]) for r in rows} & set(keys)


# ---------------------------------------------------------------------- round trip
def test_round_trip_reproduces_an_independent_kappa(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    _export(capsys, db, out)
    rows = _rows(out)
    rule = _rule_labels(db)
    given = _relabel(rows, rule, every=3)
    filled = tmp_path / "alice.csv"
    _write(filled, rows)
    code, stdout, err = _cli(
        capsys, "annotate", "import", filled, "--run", DEMO_RUN, "--annotator", "alice", "--db", db
    )
    assert code == 0, err
    assert "30 new, 0 unchanged, 0 replaced" in stdout
    code, stdout, _ = _cli(capsys, "report", "agreement", "--run", DEMO_RUN, "--json", "--db", db)
    rep = json.loads(stdout)
    assert rep["raters"] == {"rule": 30, "alice": 30} and rep["all_raters"] is None
    (pair,) = rep["pairs"]
    assert (pair["rater_a"], pair["rater_b"], pair["n"]) == ("rule", "alice", 30)
    items = sorted(given)
    a, b = [rule[i] for i in items], [given[i] for i in items]
    expected = _kappa(a, b)
    assert 0.0 < expected < 1.0
    assert pair["kappa"] == pytest.approx(expected, abs=1e-12)
    assert pair["agreed"] == sum(x == y for x, y in zip(a, b, strict=True)) == 20
    assert sum(map(sum, pair["confusion"])) == 30
    by_label = {p["label"]: p for p in pair["per_label"]}
    for label in pair["labels"]:
        assert by_label[label]["count_a"] == a.count(label)
        assert by_label[label]["count_b"] == b.count(label)

    # a second import of the same file adds nothing and changes nothing
    before = _tables(db)
    code, stdout, _ = _cli(
        capsys, "annotate", "import", filled, "--run", DEMO_RUN, "--annotator", "alice", "--db", db
    )
    assert code == 0 and "0 new, 30 unchanged" in stdout
    assert _tables(db) == before

    # a third rater: Fleiss' kappa over the three, by the plain formula
    bob = _relabel(rows, rule, every=2)
    _write(tmp_path / "bob.csv", rows)
    assert (
        _cli(
            capsys,
            "annotate",
            "import",
            tmp_path / "bob.csv",
            "--run",
            DEMO_RUN,
            "--annotator",
            "bob",
            "--db",
            db,
        )[0]
        == 0
    )
    rep = json.loads(
        _cli(capsys, "report", "agreement", "--run", DEMO_RUN, "--json", "--db", db)[1]
    )
    assert [(p["rater_a"], p["rater_b"]) for p in rep["pairs"]] == [
        ("rule", "alice"),
        ("rule", "bob"),
        ("alice", "bob"),
    ]
    multi = rep["all_raters"]
    assert multi["raters"] == ["rule", "alice", "bob"] and multi["n"] == 30
    ratings = [[rule[i], given[i], bob[i]] for i in items]
    m, n = 3, len(ratings)
    p_i = [(sum(c * c for c in Counter(r).values()) - m) / (m * (m - 1)) for r in ratings]
    share = Counter(v for r in ratings for v in r)
    p_e = sum((c / (n * m)) ** 2 for c in share.values())
    fleiss = (sum(p_i) / n - p_e) / (1 - p_e)
    assert multi["fleiss_kappa"] == pytest.approx(fleiss, abs=1e-12)
    assert multi["krippendorff_alpha"] is not None


def test_replace_and_conflicts(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    _export(capsys, db, out, n=10, seed=5)
    rows = _rows(out)
    for r in rows:
        r["label"] = "selection"
    _write(tmp_path / "one.csv", rows)
    assert (
        _cli(
            capsys,
            "annotate",
            "import",
            tmp_path / "one.csv",
            "--run",
            DEMO_RUN,
            "--annotator",
            "ann",
            "--db",
            db,
        )[0]
        == 0
    )
    rows[4]["label"] = "conversion"
    _write(tmp_path / "two.csv", rows)
    before = _tables(db)
    code, _, err = _cli(
        capsys,
        "annotate",
        "import",
        tmp_path / "two.csv",
        "--run",
        DEMO_RUN,
        "--annotator",
        "ann",
        "--db",
        db,
    )
    assert code == 1
    assert err.strip() == (
        f"error: {tmp_path / 'two.csv'}: record 5: field 'label': ann labelled this item "
        "'selection' before, not 'conversion'; pass --replace to change it"
    )
    assert _tables(db) == before
    code, stdout, _ = _cli(
        capsys,
        "annotate",
        "import",
        tmp_path / "two.csv",
        "--run",
        DEMO_RUN,
        "--annotator",
        "ann",
        "--replace",
        "--db",
        db,
    )
    assert code == 0 and "0 new, 9 unchanged, 1 replaced" in stdout


@pytest.mark.parametrize(
    ("edit", "record", "field", "reason"),
    [
        (
            lambda rows: rows[2].update(label="Selection"),
            3,
            "label",
            "'Selection' is not a label of failure_taxonomy; expected one of: localization, "
            "selection, integration, conversion, success, parse, ambiguous",
        ),
        (
            lambda rows: rows[6].update(label="  "),
            7,
            "label",
            "blank; label every row (or pass --allow-blank)",
        ),
        (
            lambda rows: rows[1].update(item_id="i0000000000000000"),
            2,
            "item_id",
            "no item 'i0000000000000000' in the failure_taxonomy sample of run 'demo-embedded'",
        ),
        (lambda rows: rows[5].update(item_id=rows[0]["item_id"]), 6, "item_id", "repeats record 1"),
    ],
)
def test_a_bad_row_leaves_the_store_unchanged(db, tmp_path, capsys, edit, record, field, reason):
    out = tmp_path / "s.csv"
    _export(capsys, db, out, n=10, seed=5)
    rows = _rows(out)
    for r in rows:
        r["label"] = "integration"
    edit(rows)
    bad = tmp_path / "bad.csv"
    _write(bad, rows)
    before = _tables(db)
    code, stdout, err = _cli(
        capsys, "annotate", "import", bad, "--run", DEMO_RUN, "--annotator", "carol", "--db", db
    )
    assert code == 1 and stdout == ""
    assert err == f"error: {bad}: record {record}: field '{field}': {reason}\n"
    assert _tables(db) == before


def test_the_real_cli_one_line_error_and_allow_blank(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    _export(capsys, db, out, n=8, seed=2)
    rows = _rows(out)
    for k, r in enumerate(rows):
        r["label"] = "" if k in (1, 3) else "localization"
    _write(out, rows)
    res = run_cli("annotate", "import", out, "--run", DEMO_RUN, "--annotator", "dan", "--db", db)
    assert res.returncode == 1 and res.stdout == ""
    assert res.stderr.count("\n") == 1 and "Traceback" not in res.stderr
    assert f"{out}: record 2: field 'label': blank" in res.stderr
    res = run_cli(
        "annotate",
        "import",
        out,
        "--run",
        DEMO_RUN,
        "--annotator",
        "dan",
        "--allow-blank",
        "--db",
        db,
    )
    assert res.returncode == 0, res.stderr
    assert "6 new, 0 unchanged, 0 replaced, 2 blank skipped" in res.stdout
    res = run_cli("report", "agreement", "--run", DEMO_RUN, "--db", db)
    assert res.returncode == 0
    assert "rule vs dan: n 6" in res.stdout


def test_bad_arguments_are_one_line_errors(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    code, _, err = _cli(
        capsys,
        "annotate",
        "export",
        "--run",
        "nope",
        "--sample",
        5,
        "--seed",
        1,
        "--out",
        out,
        "--db",
        db,
    )
    assert code == 1 and err.startswith("error: no run 'nope'") and not out.exists()
    _export(capsys, db, out, n=5, seed=1)
    code, _, err = _cli(
        capsys, "annotate", "import", out, "--run", DEMO_RUN, "--annotator", "rule", "--db", db
    )
    assert code == 1 and "rater" in err and err.count("\n") == 1
    code, _, err = _cli(
        capsys,
        "annotate",
        "import",
        tmp_path / "absent.csv",
        "--run",
        DEMO_RUN,
        "--annotator",
        "x",
        "--db",
        db,
    )
    assert code == 1 and err == f"error: {tmp_path / 'absent.csv'}: file not found\n"


def test_deleting_the_run_deletes_its_sample_and_labels(db, tmp_path, capsys):
    out = tmp_path / "s.csv"
    _export(capsys, db, out, n=5, seed=1)
    rows = _rows(out)
    for r in rows:
        r["label"] = "parse"
    _write(out, rows)
    assert (
        _cli(
            capsys, "annotate", "import", out, "--run", DEMO_RUN, "--annotator", "eve", "--db", db
        )[0]
        == 0
    )
    assert len(_tables(db)["annotations"]) == 5
    Store(db).delete_run(DEMO_RUN)
    assert _tables(db) == {"annotation_items": [], "annotations": []}


@pytest.mark.parametrize(
    "text",
    ['=HYPERLINK("x")', "+1 wrong", "-x", "@a", "\tx", "'", "''=", "'plain", "-0.25", "plain", ""],
)
def test_cell_neutralization_is_undone_exactly(text):
    cell = _neutral(text)
    assert not cell.startswith(("=", "+", "@", "\t")) or cell == text
    assert _restored(cell) == text
