"""Shared pytest fixtures: paths to the real third-party data in ../shared/fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"


def shared_fixture(relpath: str) -> Path:
    """Return ``../shared/fixtures/<relpath>``, skipping the test with a reason when absent."""
    path = FIXTURES / relpath
    if not path.exists():
        pytest.skip(f"real fixture {path} is absent (../shared is not beside this checkout)")
    return path


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh DuckDB store path in a temporary directory."""
    return tmp_path / "store.duckdb"
