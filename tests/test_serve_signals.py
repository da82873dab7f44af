"""``python -m core serve`` stops cleanly (issue 18 item 8): SIGTERM or SIGINT to ``serve``
ends the Streamlit server it started; nothing keeps serving the dashboard afterwards.

Real processes: ``serve`` as a subprocess, its real Streamlit child, a real HTTP port.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import ROOT, free_port

pytestmark = pytest.mark.slow


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(x) for x in path.read_text().split()] if path.exists() else []


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still has a pid until its parent reaps it: it serves nothing
    stat = Path(f"/proc/{pid}/stat")
    return not stat.exists() or stat.read_text().split(")")[-1].split()[0] == "Z"


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_ends_serve_and_its_streamlit_child(tmp_path, sig):
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core",
            "serve",
            "--db",
            str(tmp_path / "s.duckdb"),
            "--no-demo",
            "--port",
            str(port),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.time() + 90
        while not _answers(port) and time.time() < deadline and proc.poll() is None:
            time.sleep(0.3)
        assert _answers(port), "the dashboard never answered"
        children = _children(proc.pid)
        assert len(children) == 1, children  # the Streamlit server
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == 0
        deadline = time.time() + 10
        while not _gone(children[0]) and time.time() < deadline:
            time.sleep(0.1)
        assert _gone(children[0]), "Streamlit still runs after serve stopped"
        assert not _answers(port)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in _children(proc.pid):
            os.kill(pid, signal.SIGKILL)
