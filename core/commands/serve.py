"""``serve``: build the demo store when the store is empty, then start the dashboard.

``python -m core serve [--db PATH] [--port N] [--no-demo]`` prints the demo build's progress
(controlled-200 and the embedded baseline reader on the four conditions, through
:func:`core.execution.runs.build_demo`), then runs ``streamlit run app.py`` bound to 127.0.0.1.

The dashboard (Streamlit) runs in its own process group. SIGTERM, SIGINT (Ctrl+C) or SIGHUP to
``serve`` stop that group, first with SIGTERM, then, after :data:`STOP_GRACE_S`, with SIGKILL;
``serve`` exits once Streamlit is gone, so no dashboard keeps serving behind a stopped
``serve`` (issue 18). A ``serve`` killed with SIGKILL (no handler runs) takes the dashboard
with it too: on Linux the child asks the kernel for SIGKILL when its parent dies
(``PR_SET_PDEATHSIG``) before it becomes Streamlit (issue 35).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from core.commands import Groups, add_db, open_store
from core.execution.runs import build_demo

__all__ = ["register", "streamlit_command"]

_ROOT = Path(__file__).resolve().parents[2]

#: Seconds the dashboard's process group gets to end after SIGTERM before SIGKILL.
STOP_GRACE_S = 10.0


def streamlit_command(port: int, address: str = "127.0.0.1") -> list[str]:
    """The argv that starts the dashboard on ``address:port`` (headless, no usage stats)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(_ROOT / "app.py"),
        "--server.address",
        address,
        "--server.port",
        str(int(port)),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
    ]


#: Run by the child before it becomes the dashboard: on Linux, ask the kernel to SIGKILL it
#: when ``serve`` dies (``PR_SET_PDEATHSIG``, kept across ``exec``), so a ``serve`` killed
#: with SIGKILL (no handler runs) does not leave the dashboard serving (issue 35); then exec.
#: ``argv[1]`` is serve's pid (a serve already gone: exit), the rest the dashboard's argv.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "try:\n"
    "    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)\n"
    "except (AttributeError, OSError):\n"
    "    pass  # not Linux: the signal handlers below still stop it\n"
    "if os.getppid() != int(sys.argv[1]):\n"
    "    os._exit(1)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)


def _dying_with_us(argv: list[str]) -> list[str]:
    """``argv`` run so that the process ends when this one dies (:data:`_DIE_WITH_PARENT`)."""
    return [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *argv]


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pgid``; nothing when the group is gone."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def run_dashboard(argv: list[str], env: dict[str, str]) -> int:
    """Run ``argv`` (the dashboard) in its own process group until it ends or we are stopped.

    SIGTERM, SIGINT and SIGHUP send SIGTERM to the group, SIGKILL follows after
    :data:`STOP_GRACE_S` if the dashboard is still there; once it has ended, what is left of
    its group gets SIGTERM too. Returns the child's exit status, or 0 when a signal stopped it.
    """
    child = subprocess.Popen(_dying_with_us(argv), cwd=_ROOT, env=env, start_new_session=True)
    stopped: list[float] = []  # when the first stop signal came

    def stop(_signum: int, _frame: FrameType | None) -> None:
        if not stopped:
            stopped.append(time.monotonic())
            _signal_group(child.pid, signal.SIGTERM)

    old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    try:
        while True:
            try:
                code = child.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                if stopped and time.monotonic() - stopped[0] > STOP_GRACE_S:
                    _signal_group(child.pid, signal.SIGKILL)
    finally:
        if child.poll() is None:  # an exception of our own: take the dashboard down with us
            _signal_group(child.pid, signal.SIGKILL)
            child.wait()
        for s, handler in old.items():
            signal.signal(s, handler)
    if stopped:  # the dashboard is gone; so is anything left in its group
        _signal_group(child.pid, signal.SIGTERM)
        return 0
    return code


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
        print(
            f"demo ready: run '{info['run']}' on '{info['dataset']}', {s['planned']} "
            f"predictions in {s['seconds']:.1f} s",
            flush=True,
        )
    if not 1 <= args.port <= 65535:
        raise ValueError(f"port {args.port} must be in [1, 65535]")
    env = dict(os.environ, EVIDENCE_DB=str(store.path.resolve()))
    print(f"dashboard: http://127.0.0.1:{args.port}  (Ctrl+C stops it)", flush=True)
    return run_dashboard(streamlit_command(args.port), env)


def register(groups: Groups) -> None:
    """Add ``serve``."""
    p = groups.top.add_parser("serve", help="start the dashboard (builds the demo store if empty)")
    p.add_argument("--port", type=int, default=8501, help="local port (default 8501)")
    p.add_argument("--no-demo", action="store_true", help="do not build the demo when empty")
    add_db(p)
    p.set_defaults(handler=_cmd_serve)
