"""A store file that is damaged or not a DuckDB store is refused by every command (issue 17).

Each corrupt store is built from the bytes of a real store (random bytes, cut in the middle,
blocks overwritten in the middle, the main header overwritten), or is another kind of file (a
SQLite database, plain text, a directory, an empty file). Every command, reading or writing,
answers ``error: store PATH: not a readable evidence store (...)`` on one line, exits 1 and
leaves the file byte for byte as it was.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from core.cli import main
from core.store import Store, StoreError
from core.store.connection import unreadable_store_error

ROOT = Path(__file__).resolve().parents[1]
_HEADERS = 3 * 4096
_BLOCK = 262144


def _results_csv(path: Path, model: str = "m1") -> Path:
    """A small results CSV (two samples, two conditions) in the released per-sample columns."""
    header = (
        "sample_id,model_name,method,source,reasoning_type,answer_type,context_length,"
        "evidence_position,evidence_density,distractor_similarity,gold_answer,"
        "predicted_answer,gold_evidence_ids,predicted_evidence_ids"
    )
    rows = [header]
    for sid in ("s1", "s2"):
        for method in ("no_evidence", "direct"):
            rows.append(
                f"{sid},{model},{method},controlled,single_hop,entity,4000,front,"
                "low,none,Paris,Paris,p1,p1"
            )
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def good_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real store: the controlled-200 demo dataset and an imported results run ``r1``."""
    tmp = tmp_path_factory.mktemp("good")
    db = tmp / "good.duckdb"
    assert main(["demo", "--db", str(db)]) == 0
    csv_path = str(_results_csv(tmp / "r.csv"))
    argv = ["import", "results", "--format", "oncu-release", csv_path, "--name", "r1"]
    assert main([*argv, "--db", str(db)]) == 0
    return db


def _make(kind: str, good: Path, dest: Path) -> Path:
    """A corrupt store of ``kind`` at ``dest`` (made from ``good``'s bytes where it needs them)."""
    data = good.read_bytes()
    rng = random.Random(17)
    if kind == "random":
        dest.write_bytes(rng.randbytes(300_000))
    elif kind == "truncated":
        dest.write_bytes(data[: len(data) // 2])
    elif kind == "overwritten":
        # every data block from the second one on is overwritten in its middle: whatever a
        # command reads beyond the catalog fails its checksum
        buf = bytearray(data)
        for start in range(_HEADERS + _BLOCK, len(buf), _BLOCK):
            buf[start + 1000 : start + 60_000] = rng.randbytes(59_000)
        dest.write_bytes(bytes(buf))
    elif kind == "header":
        dest.write_bytes(rng.randbytes(4096) + data[4096:])
    elif kind == "sqlite":
        con = sqlite3.connect(dest)
        con.execute("CREATE TABLE runs (run_id TEXT)")
        con.commit()
        con.close()
    elif kind == "text":
        dest.write_text("run_id,model\nr1,m1\n" * 50, encoding="utf-8")
    elif kind == "empty":
        dest.write_bytes(b"")
    elif kind == "directory":
        dest.mkdir()
        (dest / "inside.txt").write_text("x", encoding="utf-8")
    elif kind == "other-duckdb":
        con = duckdb.connect(str(dest))
        con.execute("CREATE TABLE customers (id INTEGER, name VARCHAR)")
        con.execute("INSERT INTO customers VALUES (1, 'a')")
        con.close()
    else:
        raise AssertionError(kind)
    return dest


def _fingerprint(path: Path) -> str:
    """The file's SHA-256 (a directory: its listing and files' hashes)."""
    if path.is_dir():
        parts = sorted(
            f"{p.name}:{hashlib.sha256(p.read_bytes()).hexdigest()}" for p in path.iterdir()
        )
        return "dir:" + ",".join(parts)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _commands(tmp: Path, db: Path) -> dict[str, list[str]]:
    """Every store command, reading or writing, with arguments that work on ``good_store``."""
    jsonl = tmp / "ds.jsonl"
    jsonl.write_text(
        json.dumps(
            {
                "id": "q1",
                "question": "capital?",
                "answer": "Paris",
                "passages": [{"id": "p1", "text": "Paris is the capital.", "is_gold": True}],
            }
        )
        + "\n",
        encoding="utf-8",
    )
    d = ["--db", str(db)]
    return {
        "datasets": ["datasets", *d],
        "import dataset": ["import", "dataset", "--format", "jsonl", str(jsonl), "--name", "n", *d],
        "import results": [
            "import",
            "results",
            "--format",
            "oncu-release",
            str(_results_csv(tmp / "r2.csv")),
            "--name",
            "r2",
            *d,
        ],
        "run embedded": [
            "run",
            "--backend",
            "embedded",
            "--dataset",
            "controlled-200",
            "--conditions",
            "no_evidence",
            "--name",
            "e1",
            *d,
        ],
        "score": ["score", *d],
        "report oncu": ["report", "oncu", *d],
        "report failures": ["report", "failures", "--run", "r1", *d],
        "report runs": ["report", "runs", *d],
        "export table": [
            "export",
            "table",
            "condition_matrix",
            "--runs",
            "r1",
            "--out",
            str(tmp / "t.csv"),
            *d,
        ],
        "export figure": [
            "export",
            "figure",
            "condition_matrix",
            "--runs",
            "r1",
            "--out",
            str(tmp / "f.csv"),
            *d,
        ],
        "demo": ["demo", *d],
        "generate": ["generate", "ruler-lite", *d],
    }


@pytest.mark.parametrize(
    "kind",
    [
        "random",
        "truncated",
        "overwritten",
        "header",
        "sqlite",
        "text",
        "empty",
        "directory",
        "other-duckdb",
    ],
)
def test_every_command_refuses_a_corrupt_store_in_one_line(kind, good_store, tmp_path, capsys):
    db = _make(kind, good_store, tmp_path / "bad.duckdb")
    before = _fingerprint(db)
    for label, argv in _commands(tmp_path, db).items():
        capsys.readouterr()
        code = main(argv)
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert code == 1, (label, out, err)
        assert len(lines) == 1, (label, err)
        assert lines[0].startswith(f"error: store {db}: not a readable evidence store ("), (
            label,
            lines[0],
        )
        assert _fingerprint(db) == before, label
    assert not Path(str(db) + ".wal").exists()


def test_the_good_store_still_answers_every_command(good_store, tmp_path, capsys):
    """The same commands on an undamaged copy succeed (the refusals above are not a bad setup)."""
    db = tmp_path / "copy.duckdb"
    shutil.copy(good_store, db)
    for label, argv in _commands(tmp_path, db).items():
        assert main(argv) == 0, (label, capsys.readouterr())


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("truncated", "truncated: "),
        ("sqlite", "a SQLite database"),
        ("empty", "an empty file of 0 bytes"),
        ("directory", "a directory"),
        ("text", "not a DuckDB database file"),
        ("other-duckdb", "a DuckDB database without the evidence-store tables"),
    ],
)
def test_the_reason_says_what_the_file_is(kind, reason, good_store, tmp_path):
    db = _make(kind, good_store, tmp_path / "bad.duckdb")
    for read_only in (True, False):
        with pytest.raises(StoreError, match="not a readable evidence store") as info:
            Store(db).dataset_names() if read_only else Store(db).schema_version()
        assert f"({reason}" in str(info.value)
        with (
            pytest.raises(StoreError, match="not a readable evidence store"),
            Store(db).attached(read_only=read_only),
        ):
            pass


def test_a_truncated_store_is_not_written_by_the_engine_path(good_store, tmp_path):
    """``write_batch`` (the engine's attached connection) refuses before any write."""
    db = _make("truncated", good_store, tmp_path / "bad.duckdb")
    before = _fingerprint(db)
    with (
        pytest.raises(StoreError, match=r"truncated: \d+ bytes, its header needs \d+"),
        Store(db).write_batch(),
    ):
        pass
    assert _fingerprint(db) == before


def test_a_file_another_process_is_writing_is_not_called_cut(good_store, tmp_path):
    """The race the fault drill met: a reader looked while a writer had dropped the free
    blocks at the end and was half way through writing the next one, so the size fell short
    of the header's block count by part of a block. A file that moves between looks is
    being written, not cut; the same bytes left as they are are refused."""
    import threading

    from core.store import connection

    db = _make("truncated", good_store, tmp_path / "bad.duckdb")
    cut_at = db.stat().st_size
    stop = threading.Event()

    def write() -> None:  # a block written a few KiB at a time
        with db.open("ab") as fh:
            while not stop.is_set():
                fh.write(bytes(4096))
                fh.flush()
                stop.wait(0.01)

    writer = threading.Thread(target=write)
    writer.start()
    try:
        connection._check_file(db)  # no error: the file moved between looks
    finally:
        stop.set()
        writer.join()
    with db.open("r+b") as fh:  # back to the cut, and left alone: refused
        fh.truncate(cut_at)
    connection._CHECKED.pop(str(db), None)
    with pytest.raises(StoreError, match=r"truncated: \d+ bytes, its header needs \d+"):
        connection._check_file(db)


def test_a_sqlite_file_never_makes_duckdb_load_an_extension(good_store, tmp_path):
    """Refused before DuckDB reads it: no network fetch, no extension directory created."""
    db = _make("sqlite", good_store, tmp_path / "bad.duckdb")
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "core", "datasets", "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
    )
    assert proc.returncode == 1
    assert proc.stderr == f"error: store {db}: not a readable evidence store (a SQLite database)\n"
    assert not (home / ".duckdb").exists()


def test_a_missing_store_is_not_created_by_a_read_command(tmp_path, capsys):
    """Issue 36 item 8 (it was created): a command that only reads names the missing path."""
    db = tmp_path / "sub" / "new.duckdb"
    assert main(["datasets", "--db", str(db)]) == 1
    assert "no such store" in capsys.readouterr().err
    assert not (tmp_path / "sub").exists()


def test_a_checksum_error_while_reading_becomes_the_one_line_error(tmp_path):
    err = duckdb.Error(
        "Corrupt database file: computed checksum 1 does not match stored "
        "checksum 2 in block at location 3682304"
    )
    made = unreadable_store_error(tmp_path / "x.duckdb", err)
    assert str(made) == (
        f"store {tmp_path / 'x.duckdb'}: not a readable evidence store "
        "(corrupt: a block fails its checksum)"
    )
    assert unreadable_store_error(tmp_path / "x.duckdb", duckdb.Error("Binder Error: x")) is None


# ------------------------------------------------------------------------------ run names
_BAD_NAMES = [("", "must not be empty"), ("a\nb", "not printable"), ("x" * 129, "at most 128")]


@pytest.mark.parametrize(("name", "why"), _BAD_NAMES)
@pytest.mark.parametrize("command", ["run", "run-interventions", "run-probes"])
def test_every_run_command_refuses_a_bad_run_name(command, name, why, good_store, tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    shutil.copy(good_store, db)
    before = _fingerprint(db)
    code = main(
        [
            command,
            "--backend",
            "embedded",
            "--dataset",
            "controlled-200",
            f"--name={name}",
            "--db",
            str(db),
        ]
    )
    err = capsys.readouterr().err
    assert code == 1
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: run name ")
    assert why in err
    assert _fingerprint(db) == before  # no run row, nothing written
    assert [p.name for p in tmp_path.iterdir()] == ["s.duckdb"]  # no run lock file either
    assert sorted(Store(db).runs_frame()["run_id"]) == ["r1"]


@pytest.mark.parametrize(("name", "why"), _BAD_NAMES)
def test_the_python_entry_points_refuse_a_bad_run_name(name, why, good_store, tmp_path):
    """``open_run`` (every run kind goes through it) and the dashboard's run request."""
    from core.backends import make_backend
    from core.execution.jobs import RunRequest, run_command
    from core.execution.runs import open_run

    db = tmp_path / "s.duckdb"
    shutil.copy(good_store, db)
    with pytest.raises(ValueError, match=why):
        open_run(Store(db), make_backend("embedded"), name, "controlled-200")
    assert sorted(Store(db).runs_frame()["run_id"]) == ["r1"]
    with pytest.raises(ValueError, match=why):
        run_command(RunRequest(str(db), "controlled-200", name))


def test_the_dashboard_request_passes_a_good_name_whole(tmp_path):
    from core.execution.jobs import RunRequest, run_command

    argv = run_command(RunRequest(str(tmp_path / "s.duckdb"), "d", "  -odd name (v2)  "))
    assert "--name=-odd name (v2)" in argv


def test_the_file_check_never_unlocks_a_store_this_process_holds(good_store, tmp_path):
    """DuckDB's lock is a POSIX record lock, released when the process closes *any*
    descriptor of the file: the header check must not read a file this process has open.
    A second open inside the first (and its close) leaves the file locked to others."""
    db = tmp_path / "s.duckdb"
    shutil.copy(good_store, db)
    probe = (
        f"import duckdb\ntry:\n    duckdb.connect({str(db)!r}).close(); print('opened')\n"
        "except duckdb.IOException as e:\n    print('locked' if 'lock' in str(e) else e)"
    )

    def other_process() -> str:
        return subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120
        ).stdout.strip()

    store = Store(db)
    with store.connect() as con:
        with Store(db).connect() as again:  # same file, same process: no file check
            assert again.execute("SELECT 1").fetchone() == (1,)
        assert con.execute("SELECT count(*) FROM runs").fetchone() == (1,)
        assert other_process() == "locked"
    with store.attached():
        with (
            pytest.raises(StoreError, match="locked"),
            Store(db, lock_timeout=0.2).attached(),
        ):  # in use here: retried, no file check
            pass
        assert other_process() == "locked"
    assert other_process() == "opened"


def test_a_write_waits_for_a_read_only_connection_of_another_thread(tmp_path):
    """A page thread reading the store while another thread of the process writes it: DuckDB
    refuses the second mode of an open file ("different configuration"); the write waits
    for the reader to close instead of failing (CI saw the Runs page test fail so)."""
    import threading
    import time

    store = Store(tmp_path / "s.duckdb")
    store.schema_version()
    opened = threading.Event()

    def reader() -> None:
        with store.connect(read_only=True) as con:
            con.execute("SELECT 1").fetchall()
            opened.set()
            time.sleep(0.4)

    thread = threading.Thread(target=reader)
    thread.start()
    opened.wait(10)
    started = time.monotonic()
    with store.connect() as con:
        con.execute("SELECT 1").fetchall()
    thread.join()
    assert time.monotonic() - started >= 0.2  # it waited for the reader
