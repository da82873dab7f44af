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


_SAME_BYTES = r"""
import re
import xml.etree.ElementTree as ET
import plotly.graph_objects as go
from kaleido._kaleido_tab._tab import _KaleidoTab
from core.export import render as export

reloads = []
reload = _KaleidoTab.reload
async def counted(self):
    reloads.append(1)
    await reload(self)
_KaleidoTab.reload = counted
renders = []
calc = _KaleidoTab._calc_fig
async def drawn(self, *args, **kwargs):
    renders.append(1)
    return await calc(self, *args, **kwargs)
_KaleidoTab._calc_fig = drawn

def plain(data, fmt):
    # plotly names its clip paths, traces and gradients with random ids, and a legend's
    # attributes may come in another order: neither is drawn
    if fmt == "pdf":
        return re.sub(rb"/(CreationDate|ModDate) ?\([^)]*\)", b"", data)
    if fmt == "png":
        return data
    text = data.decode()
    ids = {}
    for m in re.finditer(r"(?:trace|defs-|clip|topdefs-|-cb)([0-9a-f]{6})", text):
        ids.setdefault(m.group(1), len(ids))
    for k, v in ids.items():
        text = text.replace(k, f"U{v}")
    return ET.canonicalize(text)

figures = [
    go.Figure(go.Scatter(x=[1, 2, 3], y=[3, 1, 2], name="a"), layout={"title": "x"}),
    go.Figure(go.Heatmap(z=[[1, 2], [3, 4]], colorbar={"title": "c"})),
    go.Figure([go.Bar(x=["a", "b"], y=[i, i + 1], name=f"series {i}") for i in range(12)]),
    go.Figure(go.Scatter(x=[0, 1], y=[0, 1], mode="markers+text", text=["<b>p</b>", "q"])),
]
assert export.start_renderer()
first = {(i, f): plain(export.figure_bytes(fig, f), f)
         for i, fig in enumerate(figures) for f in ("svg", "png", "pdf")}
export.RELOAD_EVERY = 1  # kaleido's own way: a fresh page for every figure
again = {(i, f): plain(export.figure_bytes(fig, f), f)
         for i, fig in reversed(list(enumerate(figures))) for f in ("pdf", "png", "svg")}
assert set(first) == set(again)
for key in first:
    assert first[key] == again[key], key
assert len(reloads) >= len(again)
export.RELOAD_EVERY, reloads[:], renders[:] = 5, [], []
for _ in range(11):
    export.figure_bytes(figures[0], "svg")
assert len(renders) >= 11 and len(reloads) == len(renders) // 5, (renders, reloads)
print("ok")
"""


def test_a_kept_page_draws_every_figure_as_a_fresh_page_would():
    """Kaleido reloads its page after every figure unless told otherwise (``RELOAD_EVERY``):
    a figure drawn after others on one page is the same file, in every format, as on a
    fresh page, and the page is reloaded every ``RELOAD_EVERY`` figures."""
    done = subprocess.run(
        [sys.executable, "-c", _SAME_BYTES], cwd=ROOT, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
