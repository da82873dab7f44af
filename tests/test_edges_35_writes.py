"""Issue 35, Why 7 and 9: every command that writes is all or nothing; CSV out is quoted.

Failed ``annotate export`` and ``batch export`` (a path that cannot be written, a disk that
fills up) left sample items or a run row behind; a refused ``run`` on a damaged store left a
``planned`` run row. Each test compares a digest of every table before and after (the
``data_version`` counters aside: a bump only makes the dashboard read again). ``annotate
export`` wrote a bare carriage return unquoted (the row split, its second part a live
formula ``=1``) and crashed on runs made by ``import results``.
"""

from __future__ import annotations

import csv
import io
import resource
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from conftest import ROOT, build_release_store

from core.backends import EmbeddedReader
from core.cli import main
from core.datasets.controlled import build_controlled
from core.execution.runs import run_conditions
from core.export.tables import csv_text
from core.store import Store


def digest(db: Path) -> dict[str, list]:
    """Every table's rows, sorted (``data_version`` aside)."""
    with duckdb.connect(str(db), read_only=True) as con:
        tables = [
            t
            for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
            if t != "data_version"
        ]
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in tables}


@pytest.fixture
def small(tmp_path) -> Path:
    """A store of 6 controlled instances and a run ``r`` of the embedded reader."""
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(build_controlled("controlled-200", limit=6, name="ds"))
    run_conditions(store, "ds", EmbeddedReader(workers=False), ("full_context", "oracle"), name="r")
    return store.path


def _cli_limited(args: list[str], fsize: int) -> subprocess.CompletedProcess:
    """``python -m core ARGS`` with files limited to ``fsize`` bytes (a disk that fills up)."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))

    return subprocess.run(
        [sys.executable, "-m", "core", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=limit,
        timeout=120,
    )


# ------------------------------------------------------------------------ annotate export
@pytest.mark.parametrize("where", ["directory", "under-a-file"])
def test_annotate_export_to_a_bad_path_writes_nothing(small, tmp_path, capsys, where):
    (tmp_path / "file.txt").write_text("x")
    out = tmp_path if where == "directory" else tmp_path / "file.txt" / "sample.csv"
    before = digest(small)
    code = main(
        [
            "annotate",
            "export",
            "--run",
            "r",
            "--sample",
            "5",
            "--seed",
            "1",
            "--out",
            str(out),
            "--db",
            str(small),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1 and len(err.strip().splitlines()) == 1 and "--out" in err
    assert digest(small) == before


def test_annotate_export_on_a_full_disk_writes_nothing(small, tmp_path):
    before = digest(small)
    out = tmp_path / "big.csv"
    done = _cli_limited(
        [
            "annotate",
            "export",
            "--run",
            "r",
            "--sample",
            "12",
            "--seed",
            "1",
            "--out",
            str(out),
            "--db",
            str(small),
        ],
        fsize=2000,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists() and not list(tmp_path.glob(".big.csv*"))
    assert digest(small) == before


# ------------------------------------------------------------------------ batch export
def _batch(db: Path, out: Path) -> list[str]:
    return [
        "batch",
        "export",
        "conditions",
        "--db",
        str(db),
        "--dataset",
        "ds",
        "--run",
        "b",
        "--conditions",
        "oracle",
        "--model",
        "m",
        "--out",
        str(out),
    ]


@pytest.mark.parametrize("where", ["directory", "under-a-file"])
def test_batch_export_to_a_bad_path_writes_nothing(small, tmp_path, capsys, where):
    (tmp_path / "file.txt").write_text("x")
    out = tmp_path if where == "directory" else tmp_path / "file.txt" / "b.jsonl"
    before = digest(small)
    assert main(_batch(small, out)) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--out" in err
    assert digest(small) == before


def test_batch_export_on_a_full_disk_writes_nothing(small, tmp_path):
    before = digest(small)
    out = tmp_path / "b.jsonl"
    done = _cli_limited(_batch(small, out), fsize=3000)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not out.exists()
    assert digest(small) == before


# ------------------------------------------------------------------------ refused run
def test_refused_run_on_a_damaged_store_writes_no_run_row(small, capsys):
    with duckdb.connect(str(small)) as con:  # damaged: the passages table is gone
        con.execute("DROP TABLE passages")
    before = digest(small)
    code = main(
        [
            "run",
            "--dataset",
            "ds",
            "--backend",
            "embedded",
            "--conditions",
            "oracle",
            "--name",
            "new",
            "--db",
            str(small),
        ]
    )
    assert code == 1
    assert "Traceback" not in capsys.readouterr().err
    assert digest(small) == before


# ------------------------------------------------------------------------ CSV out
def test_csv_text_quotes_cr_lf_quote_and_comma():
    text = csv_text([["a\rb", "c\nd", 'e"f', "g,h", "plain"]])
    assert text == '"a\rb","c\nd","e""f","g,h",plain\n'
    assert next(csv.reader(io.StringIO(text, newline=""))) == [
        "a\rb",
        "c\nd",
        'e"f',
        "g,h",
        "plain",
    ]


def test_annotate_export_quotes_a_bare_cr_and_neutralizes_formulas(small, tmp_path):
    with duckdb.connect(str(small)) as con:
        con.execute(
            "UPDATE predictions SET answer = CASE condition WHEN 'oracle' "
            "THEN '=1+1\rx' ELSE 'Alpha\r=1+1' END WHERE run_id = 'r'"
        )
        con.execute("UPDATE scores SET failure_label = 'conversion' WHERE run_id = 'r'")
    out = tmp_path / "s.csv"
    assert (
        main(
            [
                "annotate",
                "export",
                "--run",
                "r",
                "--sample",
                "4",
                "--seed",
                "1",
                "--out",
                str(out),
                "--db",
                str(small),
            ]
        )
        == 0
    )
    raw = out.read_bytes().decode("utf-8")
    assert '"Alpha\r=1+1"' in raw  # the CR inside quotes: the row is not split there
    rows = list(csv.reader(io.StringIO(raw, newline="")))
    assert len(rows) == 5 and all(len(r) == len(rows[0]) for r in rows)
    answers = sorted(r[rows[0].index("answer")] for r in rows[1:])
    assert answers == ["'=1+1\rx"] * 2 + ["Alpha\r=1+1"] * 2  # the formula cell neutralized


def test_annotate_round_trip_on_an_imported_run(tmp_path, capsys):
    """Blind annotation of released results: export (crashed: 'NAType' object is not
    iterable), label, import."""
    db = tmp_path / "s.duckdb"
    build_release_store(db)
    out = tmp_path / "sample.csv"
    assert (
        main(
            [
                "annotate",
                "export",
                "--run",
                "controlled",
                "--sample",
                "10",
                "--seed",
                "3",
                "--out",
                str(out),
                "--db",
                str(db),
            ]
        )
        == 0
    )
    rows = list(csv.reader(io.StringIO(out.read_text("utf-8"), newline="")))
    header, body = rows[0], rows[1:]
    assert len(body) == 10
    label = header.index("label")
    for r in body:
        r[label] = "conversion"
    labelled = tmp_path / "labelled.csv"
    labelled.write_text(csv_text([header, *body]), encoding="utf-8")
    capsys.readouterr()
    assert (
        main(
            [
                "annotate",
                "import",
                str(labelled),
                "--run",
                "controlled",
                "--annotator",
                "ann",
                "--db",
                str(db),
            ]
        )
        == 0
    ), capsys.readouterr().err
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM annotations").fetchall()[0][0] == 10


def test_store_export_on_a_full_disk_leaves_no_files(small, tmp_path):
    out = tmp_path / "export"
    done = _cli_limited(["store", "export", "--out", str(out), "--db", str(small)], fsize=4000)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(out.iterdir()) == [] if out.exists() else True
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []
    ok = subprocess.run(
        [sys.executable, "-m", "core", "store", "export", "--out", str(out), "--db", str(small)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0 and (out / "manifest.json").exists()
