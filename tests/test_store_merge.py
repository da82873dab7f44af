"""``store export`` and ``store merge`` (issue 21 item 4): real stores, built by real processes.

Two stores import the HotpotQA fixture and run one run each in their own ``python -m core``
processes; merged, they report exactly what one store that ran both runs reports.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import duckdb
import pyarrow.parquet as pq
import pytest
from conftest import ROOT, shared_fixture

from core.cli import main
from core.store import SCHEMA_VERSION, Store
from core.types import Dataset, Instance, Passage

FIXTURE = "hotpotqa/hotpot_dev_distractor_sample53.json"
FOUR = "no_evidence,full_context,retrieved,oracle"
RUNS = {"r1": ("--top-k", "3"), "r2": ("--top-k", "5")}


def _cli(*args: str) -> subprocess.CompletedProcess:
    res = subprocess.run(
        [sys.executable, "-m", "core", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    return res


def _fill(db, run: str | None, *extra: str) -> None:
    """Import the fixture as ``hp`` and run ``run`` (embedded reader), each in its own process."""
    res = _cli(
        "import",
        "dataset",
        "--format",
        "hotpotqa",
        shared_fixture(FIXTURE),
        "--name",
        "hp",
        "--db",
        db,
    )
    assert res.returncode == 0, res.stderr
    if run is not None:
        res = _cli(
            "run",
            "--db",
            db,
            "--dataset",
            "hp",
            "--backend",
            "embedded",
            "--conditions",
            extra[0] if extra else FOUR,
            *RUNS.get(run, ()),
            "--name",
            run,
        )
        assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """``a`` (run r1), ``b`` (run r2), each by its own processes; ``both`` ran r1 and r2 in
    this one process."""
    root = tmp_path_factory.mktemp("merge")
    paths = {k: root / f"{k}.duckdb" for k in ("a", "b", "both")}
    _fill(paths["a"], "r1")
    _fill(paths["b"], "r2")
    _fill(paths["both"], None)
    for run, extra in RUNS.items():
        argv = [
            "run",
            "--db",
            str(paths["both"]),
            "--dataset",
            "hp",
            "--backend",
            "embedded",
            "--conditions",
            FOUR,
            *extra,
            "--name",
            run,
        ]
        assert main(argv) == 0
    return paths


def _reports(capsys, db) -> dict[str, object]:
    out = {}
    for args in (
        ("oncu", "--run", "r1"),
        ("oncu", "--run", "r2"),
        ("oncu",),
        ("failures", "--run", "hp"),
    ):
        assert main(["report", *args, "--db", str(db), "--json"]) == 0
        out[" ".join(args)] = json.loads(capsys.readouterr().out)
    assert main(["report", "runs", "--db", str(db), "--json"]) == 0
    keep = (
        "run",
        "kind",
        "dataset",
        "backend",
        "model",
        "status",
        "n_planned",
        "n_done",
        "n_errors",
    )
    out["runs"] = [{k: r[k] for k in keep} for r in json.loads(capsys.readouterr().out)]
    return out


def _counts(db) -> dict[str, int]:
    with Store(db).connect(read_only=True) as con:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
            ).fetchall()
        ]
        return {t: con.execute(f'SELECT count(*) FROM "{t}"').fetchall()[0][0] for t in tables}


def test_merged_store_reports_what_one_store_running_both_reports(stores, tmp_path, capsys):
    target = tmp_path / "merged.duckdb"
    assert (
        main(
            ["store", "merge", str(stores["a"]), str(stores["b"]), "--into", str(target), "--json"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert (out["datasets_added"], out["runs_added"], out["runs_skipped"]) == (
        ["hp"],
        ["r1", "r2"],
        [],
    )
    # the dataset came from both; b's copy (another import, same content) is counted once
    assert out["tables"]["instances"] == {"rows": 106, "added": 53, "same": 53, "skipped": 0}
    assert out["tables"]["predictions"] == {"rows": 424, "added": 424, "same": 0, "skipped": 0}
    assert _reports(capsys, target) == _reports(capsys, stores["both"])
    merged, both = _counts(target), _counts(stores["both"])
    for table in ("datasets", "instances", "passages", "runs", "predictions", "scores"):
        assert merged[table] == both[table], table
    assert Store(target).content_hash("hp") == Store(stores["a"]).content_hash("hp")
    # merging again adds nothing: every row is there with the same content
    version = Store(target).data_version("hp")
    assert main(["store", "merge", str(stores["a"]), "--into", str(target), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["runs_added"] == [] and again["runs_same"] == ["r1"]
    assert all(c["added"] == 0 for c in again["tables"].values())
    assert _counts(target) == merged
    # the first merge counted as a change of hp; one that added nothing to hp leaves it be
    assert version[1] >= 1 and Store(target).data_version("hp") == version


def test_a_run_with_other_content_is_refused_or_skipped(stores, tmp_path, capsys):
    other = tmp_path / "other.duckdb"
    _fill(other, "r1", "oracle")  # r1 again, with one condition only
    target = tmp_path / "t.duckdb"
    shutil.copy(stores["a"], target)
    before = _counts(target)
    version = Store(target).data_version()
    assert main(["store", "merge", str(other), "--into", str(target)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"error: run 'r1' is stored in {other} and in {target} with other content; nothing "
        "merged (--on-conflict skip keeps the target's and goes on)"
    )
    assert _counts(target) == before and Store(target).data_version() == version
    # a new target is not left behind
    fresh = tmp_path / "fresh.duckdb"
    assert main(["store", "merge", str(stores["a"]), str(other), "--into", str(fresh)]) == 1
    assert "run 'r1'" in capsys.readouterr().err and not fresh.exists()
    # skip: the target's r1 stays, the collision is counted
    assert main(["store", "merge", str(other), "--into", str(target), "--on-conflict", "skip"]) == 0
    text = capsys.readouterr().out
    assert "0 runs added" in text and "1 runs and 0 other rows skipped" in text
    assert "skipped run 'r1'" in text
    assert f"  predictions {53:>18} read {0:>9} added {0:>9} same {53:>7} skipped" in text
    assert _counts(target)["predictions"] == before["predictions"] == 212


def test_a_dataset_of_the_same_name_with_other_content_is_refused(stores, tmp_path, capsys):
    odd = tmp_path / "odd.duckdb"
    inst = Instance("x1", "Who?", "Nobody", (Passage("p1", 0, "T", "text", "d1", "gold", True),))
    Store(odd).write_dataset(Dataset("hp", "test", "test", {}, (inst,)))
    fresh = tmp_path / "fresh.duckdb"
    assert main(["store", "merge", str(stores["a"]), str(odd), "--into", str(fresh)]) == 1
    err = capsys.readouterr().err.strip()
    a_hash, odd_hash = Store(stores["a"]).content_hash("hp"), Store(odd).content_hash("hp")
    assert err == (
        f"error: dataset 'hp' has other content in {odd} than in {stores['a']} (fingerprint "
        f"{odd_hash[:12]} vs {a_hash[:12]}); nothing merged"
    )
    assert not fresh.exists()


def test_tables_the_merge_does_not_know_merge_too(stores, tmp_path, capsys):
    extra = tmp_path / "extra.duckdb"
    shutil.copy(stores["b"], extra)
    with duckdb.connect(str(extra)) as con:
        con.execute("CREATE TABLE notes (note_id VARCHAR PRIMARY KEY, body VARCHAR)")
        con.execute("INSERT INTO notes VALUES ('n1', 'first'), ('n2', 'second')")
    target = tmp_path / "t.duckdb"
    shutil.copy(stores["a"], target)
    assert main(["store", "merge", str(extra), "--into", str(target), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["tables"]["notes"] == {"rows": 2, "added": 2, "same": 0, "skipped": 0}
    with duckdb.connect(str(extra)) as con:
        con.execute("UPDATE notes SET body = 'changed' WHERE note_id = 'n2'")
    assert main(["store", "merge", str(extra), "--into", str(target)]) == 1
    assert "table notes: key note_id='n2' is stored in" in capsys.readouterr().err


def test_an_input_of_another_schema_version_is_refused(stores, tmp_path, capsys):
    old = tmp_path / "old.duckdb"
    shutil.copy(stores["b"], old)
    with duckdb.connect(str(old)) as con:
        con.execute("DELETE FROM schema_version WHERE version = ?", [SCHEMA_VERSION])
    target = tmp_path / "t.duckdb"
    assert main(["store", "merge", str(old), "--into", str(target)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"error: store {old}: schema version {SCHEMA_VERSION - 1}, this program's is "
        f"{SCHEMA_VERSION}: open it once with this program (any write migrates it) and merge "
        "again"
    )
    assert not target.exists()


def test_export_writes_one_parquet_per_table_with_its_rows(stores, tmp_path, capsys):
    out = tmp_path / "parquet"
    assert main(["store", "export", "--db", str(stores["a"]), "--out", str(out), "--json"]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest == json.loads((out / "manifest.json").read_text())
    counts = _counts(stores["a"])
    assert set(manifest["tables"]) == set(counts)
    for table, entry in manifest["tables"].items():
        assert pq.read_table(out / entry["file"]).num_rows == entry["rows"] == counts[table]
    assert manifest["tables"]["predictions"]["rows"] == 212
    assert manifest["tables"]["runs"]["primary_key"] == ["run_id"]
    assert manifest["schema_version"] == SCHEMA_VERSION
    assert manifest["datasets"] == {"hp": Store(stores["a"]).content_hash("hp")}
    assert {p.name for p in out.iterdir()} == {f"{t}.parquet" for t in counts} | {"manifest.json"}
