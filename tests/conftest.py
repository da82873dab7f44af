"""Shared pytest fixtures: paths to the real third-party data in ../shared/fixtures."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
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


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def streamlit_server(db: Path, logdir: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free localhost port against the store ``db`` (no demo
    build); yields its URL once it answers, stops it on exit. Its output goes to
    ``logdir/streamlit.log``."""
    port = free_port()
    env = dict(os.environ, EVIDENCE_DB=str(db), EVIDENCE_NO_DEMO="1")
    log = open(logdir / "streamlit.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port",
         str(port), "--server.address", "127.0.0.1", "--server.headless", "true",
         "--browser.gatherUsageStats", "false"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail(f"streamlit did not start on {url}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, page: str, dataset: str):
    """Streamlit's ``AppTest`` of ``app.py`` on the store ``db`` (no demo build), switched to
    ``page`` with ``dataset`` chosen in the sidebar; fails on an exception."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(page)
    at.run()
    at.selectbox(key="global.dataset").set_value(dataset).run()
    assert not at.exception, [e.value for e in at.exception]
    return at
