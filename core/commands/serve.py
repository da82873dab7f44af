"""``serve``: build the demo store when the store is empty, then start the dashboard.

``python -m core serve [--db PATH] [--port N] [--no-demo]`` prints the demo build's progress
(controlled-200 and the embedded baseline reader on the four conditions, through
:func:`core.runs.build_demo`), then runs ``streamlit run app.py`` bound to 127.0.0.1.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from core.commands import Groups, add_db, open_store
from core.runs import build_demo

__all__ = ["register", "streamlit_command"]

_ROOT = Path(__file__).resolve().parents[2]


def streamlit_command(port: int, address: str = "127.0.0.1") -> list[str]:
    """The argv that starts the dashboard on ``address:port`` (headless, no usage stats)."""
    return [
        sys.executable, "-m", "streamlit", "run", str(_ROOT / "app.py"),
        "--server.address", address, "--server.port", str(int(port)),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
    ]  # fmt: skip


def _cmd_serve(args: argparse.Namespace) -> int:
    store = open_store(args)
    if not args.no_demo and not store.list_datasets():
        last = [-1]

        def show(frac: float, text: str) -> None:
            pct = int(frac * 100)
            if pct // 10 != last[0] // 10 or frac >= 1.0:
                print(f"[{pct:3d}%] {text}", flush=True)
                last[0] = pct

        print(f"empty store {store.path}: building the demo ...", flush=True)
        info = build_demo(store, progress=show)
        s = info["summary"]
        print(f"demo ready: run '{info['run']}' on '{info['dataset']}', {s['planned']} "
              f"predictions in {s['seconds']:.1f} s", flush=True)  # fmt: skip
    if not 1 <= args.port <= 65535:
        raise ValueError(f"port {args.port} must be in [1, 65535]")
    env = dict(os.environ, EVIDENCE_DB=str(store.path.resolve()))
    print(f"dashboard: http://127.0.0.1:{args.port}  (Ctrl+C stops it)", flush=True)
    try:
        return subprocess.call(streamlit_command(args.port), cwd=_ROOT, env=env)
    except KeyboardInterrupt:
        return 0


def register(groups: Groups) -> None:
    """Add ``serve``."""
    p = groups.top.add_parser("serve", help="start the dashboard (builds the demo store if empty)")
    p.add_argument("--port", type=int, default=8501, help="local port (default 8501)")
    p.add_argument("--no-demo", action="store_true", help="do not build the demo when empty")
    add_db(p)
    p.set_defaults(handler=_cmd_serve)
