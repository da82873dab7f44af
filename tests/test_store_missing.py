"""A read-only command never creates a store or a folder (issue 36 item 8).

``python -m core report oncu --db no/such/dir/s.duckdb`` used to create the folders and an
empty store, then say "no runs at all". Now: one line naming the path (and the closest
existing ``.duckdb`` of its folder), exit 1, nothing created.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from core.store import Store

ROOT = Path(__file__).resolve().parents[1]


def _core(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_report_on_a_missing_folder_names_it_and_creates_nothing(tmp_path):
    db = tmp_path / "no" / "such" / "dir" / "s.duckdb"
    got = _core("report", "oncu", "--db", str(db))
    assert got.returncode == 1
    lines = got.stderr.strip().splitlines()
    assert lines == [
        f"error: no such store: {db} (its folder {db.parent} does not exist; nothing created)"
    ], got.stderr
    assert "Traceback" not in got.stderr
    assert not (tmp_path / "no").exists()


def test_a_mistyped_name_gets_the_closest_store_of_its_folder(tmp_path):
    Store(tmp_path / "evidence.duckdb").schema_version()  # a store made by a write
    Store(tmp_path / "other.duckdb").schema_version()
    before = sorted(p.name for p in tmp_path.iterdir())
    got = _core("report", "oncu", "--db", str(tmp_path / "evidnce.duckdb"))
    assert got.returncode == 1
    assert got.stderr.strip() == (
        f"error: no such store: {tmp_path / 'evidnce.duckdb'}; the "
        f"closest in that folder is {tmp_path / 'evidence.duckdb'} "
        "(nothing created)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_datasets_and_store_export_refuse_a_missing_store(tmp_path):
    db = tmp_path / "missing.duckdb"
    for args in (("datasets",), ("store", "export", "--out", str(tmp_path / "out"))):
        got = _core(*args, "--db", str(db))
        assert got.returncode == 1, (args, got.stderr)
        assert got.stderr.strip() == f"error: no such store: {db} (nothing created)", got.stderr
    assert list(tmp_path.iterdir()) == []
