"""Run every benchmark of ``bench/`` and check each figure against its bound (SPEC §12).

Each ``bench/bench_NAME.py`` exposes ``results(repeats: int = 5) -> list[dict]``, one dict per
figure::

    {"name": str, "value": float (median of runs), "unit": str,
     "bound": float | None (None: informational), "better": "lower" | "higher",
     "ok": bool (True when bound is None), "runs": list[float], "script": str}

A figure with a bound passes when ``value < bound`` (``better == "lower"``) or
``value >= bound`` (``better == "higher"``). Every script runs in its own subprocess
(``run_all.py --one NAME``), so CPU pinning, BLAS thread settings and imported state do not leak
from one benchmark into the next. The runner prints one table (figure | median | bound | ok |
runs), can write it as Markdown, and exits 1 when a bound is missed or a script fails.

Usage::

    .venv/bin/python bench/run_all.py [--repeats 5] [--only scoring,engine,...]
                                      [--markdown PATH] [--json PATH] [--timeout 1800]

This module only uses the standard library at import time (the children set their BLAS thread
variables before numpy loads); the bench scripts import :func:`figure`, :func:`timed`,
:func:`print_figures` and :func:`exit_status` from it.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import importlib
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
#: Run order (cheap and bounded first); scripts found on disk but not listed run last.
ORDER = (
    "scoring",
    "embedded",
    "engine",
    "backends",
    "dolce",
    "dashboard",
    "browser",
    "cuer",
    "fanin",
    "crux",
    "bm25",
    "attribution",
    "import",
    "export",
    "batch_import",
    "study",
)
#: Scripts of ``bench/`` that are measuring tools, not benchmarks (no ``results()``, no bound):
#: ``bench_store_writes.py`` times one engine write by part, for the engine's figures.
TOOLS = ("store_writes",)
LOGS = Path(tempfile.gettempdir()) / "evidence_bench_logs"
KEYS = ("name", "value", "unit", "bound", "better", "ok", "runs", "script")


# ---------------------------------------------------------------------------- figures
def figure(
    name: str,
    runs: Iterable[float],
    unit: str,
    script: str,
    bound: float | None = None,
    better: str = "lower",
    value: float | None = None,
) -> dict:
    """One benchmark figure: the median of ``runs`` checked against ``bound``.

    Args:
        name: what was measured, with its workload (shown in the table).
        runs: one measurement per repeat.
        unit: unit of ``value`` and ``runs``.
        script: the script's file name (``bench_scoring.py``).
        bound: the bound the figure must meet, or ``None`` for an informational figure.
        better: ``"lower"`` (passes when ``value < bound``) or ``"higher"`` (``value >= bound``).
        value: the reported value when it is not the median of ``runs``.
    """
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', got {better!r}")
    runs = [float(r) for r in runs]
    if value is None:
        value = statistics.median(runs) if runs else math.nan
    return {
        "name": name,
        "value": float(value),
        "unit": unit,
        "bound": None if bound is None else float(bound),
        "better": better,
        "ok": passes(float(value), bound, better),
        "runs": runs,
        "script": script,
    }


def passes(value: float, bound: float | None, better: str) -> bool:
    """Whether ``value`` meets ``bound`` (always True without a bound; never for NaN)."""
    if bound is None:
        return True
    if math.isnan(value):
        return False
    return value < bound if better == "lower" else value >= bound


def timed(fn: Callable[[], object], repeats: int) -> list[float]:
    """Wall seconds of ``repeats`` calls of ``fn``."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


@contextlib.contextmanager
def one_core():
    """Pin this process to its first allowed CPU for the block, then restore the CPU set."""
    if not hasattr(os, "sched_setaffinity"):
        yield
        return
    cpus = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cpus)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)


def bound_text(fig: dict) -> str:
    """``< 2`` / ``>= 200`` / ``-`` (informational)."""
    if fig.get("bound") is None:
        return "-"
    return f"{'<' if fig.get('better') == 'lower' else '>='} {fig['bound']:,g}"


def _num(x: float | None) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    ax = abs(x)
    if ax >= 100:
        return f"{x:,.0f}"
    if ax >= 10:
        return f"{x:.1f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def verdict(fig: dict) -> str:
    """``ok`` / ``MISSED`` / ``info`` / ``ERROR``."""
    if fig.get("error"):
        return "ERROR"
    if fig.get("bound") is None:
        return "info"
    return "ok" if fig.get("ok") else "MISSED"


def _row(fig: dict) -> list[str]:
    unit = fig.get("unit") or ""
    runs = ", ".join(_num(r) for r in fig.get("runs") or [])
    bound = bound_text(fig)
    return [
        fig.get("name", "?"),
        f"{_num(fig.get('value'))} {unit}".strip(),
        f"{bound} {unit}".strip() if bound != "-" else "-",
        verdict(fig),
        runs,
        fig.get("script", ""),
    ]


HEADER = ["figure", "median", "bound", "ok", "runs", "script"]


def table(figs: list[dict]) -> str:
    """A plain-text table of ``figs`` (one line each)."""
    rows = [HEADER] + [_row(f) for f in figs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


MD_HEADER = ["what", "script", "bound", "measured (median)", "runs", "ok"]


def markdown(figs: list[dict]) -> str:
    """A Markdown table of ``figs`` in the layout of ``docs/BENCHMARKS.md``."""
    out = ["| " + " | ".join(MD_HEADER) + " |", "|" + "---|" * len(MD_HEADER)]
    for f in figs:
        name, median, bound, ok, runs, script = _row(f)
        cells = [name, f"`bench/{script}`" if script else "", bound, median, runs, ok]
        out.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(out)


def exit_status(figs: list[dict]) -> int:
    """0 when every figure meets its bound and no script failed, else 1."""
    return 0 if figs and all(f.get("ok") and not f.get("error") for f in figs) else 1


def print_figures(figs: list[dict]) -> int:
    """Print ``figs`` as a table and a verdict line; return :func:`exit_status`."""
    print(table(figs))
    missed = [f["name"] for f in figs if not f.get("ok") or f.get("error")]
    if missed:
        print(
            f"FAIL: {len(missed)} figure(s) missed a bound or failed: {'; '.join(missed)}",
            file=sys.stderr,
        )
    return exit_status(figs)


# ---------------------------------------------------------------------------- runner
def discover() -> list[str]:
    """Names of the bench scripts (``bench_NAME.py`` -> ``NAME``), in :data:`ORDER`.

    :data:`TOOLS` are left out: measuring tools with no figure of their own.
    """
    found = {p.stem.removeprefix("bench_") for p in BENCH.glob("bench_*.py")} - set(TOOLS)
    return [n for n in ORDER if n in found] + sorted(found - set(ORDER))


def _error(name: str, message: str) -> dict:
    return {
        "name": f"{name}: {message}",
        "value": math.nan,
        "unit": "",
        "bound": None,
        "better": "lower",
        "ok": False,
        "runs": [],
        "script": f"bench_{name}.py",
        "error": message,
    }


def validate(name: str, figs: object) -> list[dict]:
    """Check a script's ``results()`` against the contract; problems become error rows."""
    if not isinstance(figs, list) or not figs:
        return [_error(name, "results() returned no figures")]
    out = []
    for fig in figs:
        missing = [k for k in KEYS if not isinstance(fig, dict) or k not in fig]
        if missing:
            out.append(_error(name, f"figure without {', '.join(missing)}"))
            continue
        fig = dict(fig)
        # the runner re-checks the bound rather than trusting the script's own ok flag
        fig["ok"] = bool(fig["ok"]) and passes(float(fig["value"]), fig["bound"], fig["better"])
        out.append(fig)
    return out


def run_one_inprocess(name: str, repeats: int) -> list[dict]:
    """Import ``bench_NAME`` and call its ``results(repeats)`` (stdout goes to stderr)."""
    sys.path.insert(0, str(BENCH))
    with contextlib.redirect_stdout(sys.stderr):
        module = importlib.import_module(f"bench_{name}")
        if not hasattr(module, "results"):
            return [_error(name, "no results() function")]
        return validate(name, module.results(repeats=repeats))


def run_one(name: str, repeats: int, timeout: float, log: Path | None = None) -> list[dict]:
    """Run one script's ``results()`` in a fresh interpreter; failures become error rows.

    The script's own output goes to ``log`` (or through to stderr when ``log`` is None); the
    last lines of the log are echoed when the script fails.
    """
    cmd = [sys.executable, str(Path(__file__).resolve()), "--one", name, "--repeats", str(repeats)]
    with contextlib.ExitStack() as stack:
        err = stack.enter_context(log.open("w")) if log else None
        try:
            proc = subprocess.run(
                cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=err, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return [_error(name, f"timed out after {timeout:.0f} s")]
    try:
        figs = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        if log:
            tail = log.read_text(errors="replace").splitlines()[-15:]
            print("\n".join(f"   | {line}" for line in tail), file=sys.stderr)
        return [_error(name, f"exit status {proc.returncode}, no results")]
    return validate(name, figs)


def machine() -> str:
    """One line describing this machine (CPU model, cores, memory, Python, OS)."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    mem = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        kb = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        mem = f", {kb / 2**20:.0f} GiB"
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"{cpu}, {cores} cores{mem}, Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the selected benchmarks, print the table; exit status 1 when a bound is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per figure (5)")
    ap.add_argument("--only", default="", help=f"comma-separated subset of: {','.join(ORDER)}")
    ap.add_argument("--markdown", type=Path, help="also write the table as Markdown here")
    ap.add_argument("--json", type=Path, help="also write all figures as JSON here")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per script (1800)")
    ap.add_argument("--logs", type=Path, default=LOGS, help=f"scripts' own output ({LOGS})")
    ap.add_argument("--verbose", action="store_true", help="show the scripts' output live")
    ap.add_argument("--one", help=argparse.SUPPRESS)  # internal: run one script, print JSON
    args = ap.parse_args(argv)
    if args.repeats < 1:
        ap.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.one:
        figs = run_one_inprocess(args.one, args.repeats)
        print(json.dumps(figs))
        return 0
    names = discover()
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = sorted(set(wanted) - set(names))
        if unknown:
            ap.error(f"unknown benchmark(s) {', '.join(unknown)}; allowed: {', '.join(names)}")
        names = [n for n in names if n in wanted]
    started = _dt.datetime.now().astimezone()
    t_all = time.perf_counter()
    figs: list[dict] = []
    if not args.verbose:
        args.logs.mkdir(parents=True, exist_ok=True)
    for name in names:
        log = None if args.verbose else args.logs / f"bench_{name}.log"
        where = f", output in {log}" if log else ""
        print(f"== bench_{name}.py (repeats {args.repeats}){where}", file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        got = run_one(name, args.repeats, args.timeout, log)
        bad = sum(not f.get("ok") for f in got)
        note = f", {bad} missed or failed" if bad else ""
        took = time.perf_counter() - t0
        print(f"   done in {took:.0f} s: {len(got)} figures{note}", file=sys.stderr, flush=True)
        figs.extend(got)
    wall = time.perf_counter() - t_all
    header = (
        f"machine: {machine()}\ndate: {started:%Y-%m-%d %H:%M %Z}; repeats {args.repeats}; "
        f"suite wall time {wall:.0f} s"
    )
    print(header)
    status = print_figures(figs)
    n_bound = sum(f.get("bound") is not None for f in figs)
    n_missed = sum(not f.get("ok") for f in figs)
    print(f"{len(figs)} figures, {n_bound} with a bound, {n_missed} missed or failed")
    if args.markdown:
        args.markdown.write_text(
            "\n".join(f"{line}  " for line in header.splitlines()) + "\n\n" + markdown(figs) + "\n"
        )
    if args.json:
        meta = {
            "machine": machine(),
            "date": started.isoformat(),
            "repeats": args.repeats,
            "wall_s": wall,
        }
        args.json.write_text(json.dumps({**meta, "figures": figs}, indent=1) + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
