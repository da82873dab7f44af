"""A figure renderer that died is never waited on (issue 36 item 4: a download that hangs).

Kaleido marks its background renderer open when it starts the thread and never notices the
thread's end; an export then waited forever on its queue. Here the renderer's thread is ended
under it (as a crashed browser ends it) and an export must still come back, with a file, and
the next ``start_renderer`` must start a live one again. Run in a child process: the renderer
is process-wide.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow

_SCRIPT = """
import plotly.graph_objects as go
from kaleido._sync_server import GlobalKaleidoServer
from core.export import render as export

assert export.start_renderer()
server = GlobalKaleidoServer()
server._task_queue.put(None)  # the renderer's loop returns: its thread ends, kaleido not told
server._thread.join(30)
assert not server._thread.is_alive() and server.is_running()
svg = export.figure_bytes(go.Figure(go.Bar(x=[1], y=[2])), "svg")
assert svg.lstrip().startswith(b"<svg"), svg[:40]
assert export.start_renderer() and server._thread.is_alive()
png = export.figure_bytes(go.Figure(go.Bar(x=[1], y=[2])), "png")
assert png[:4] == b"\\x89PNG"
print("ok")
"""


def test_an_export_after_the_renderer_died_comes_back_and_restarts_it():
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
