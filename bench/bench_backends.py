"""Benchmark: the server backends' own cost, and how calls overlap (stub model server).

Two measurements, each the median of 5 runs, against ``tests/model_stub.py`` (which answers
with the embedded reader, so the stub's own work is the same for every backend):

1. client overhead per call: ``N`` sequential calls with zero model latency through the Ollama
   backend (official ``ollama`` client) and the OpenAI-compatible backend (``httpx``), minus
   the embedded reader's own time on the same prompts (what the stub spends answering). This
   is the HTTP + JSON + validation cost a real server run adds per call on this machine.
2. concurrency: ``N`` calls with a fixed model latency (default 50 ms) through the Ollama
   backend from 1 and from 8 worker threads; speed-up = time(1) / time(8). The ideal is 8;
   the engine's ``--concurrency 8`` target is >= 6. The stub runs as its own process here, as
   a model server does, so client and server do not share one interpreter lock.

Prompts: the retrieved-condition prompts (lexical top-3) of the controlled-200 preset, seed 42,
cycled to ``N`` calls.

``results(repeats)`` returns the figures for ``bench/run_all.py``: the reader's ms/call and each
backend's overhead in ms/call (informational: SPEC §12 bounds the engine's overhead, measured by
``bench_engine.py``) and the speed-up (bound >= 6); a run's speed-up is time(1) / time(8) of
that run, the figure their median.

Usage: ``python bench/bench_backends.py [--calls 200] [--latency 0.05] [--runs 5]``
(exit status 1 when the 8-thread speed-up is below 6).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import cycle, islice
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from model_stub import ModelStub  # noqa: E402
from run_all import figure, print_figures  # noqa: E402

from core.backends import EmbeddedReader, RetryPolicy, make_backend  # noqa: E402
from core.datasets.controlled import build_controlled  # noqa: E402
from core.execution.prompts import build_messages  # noqa: E402
from core.retrieval.retrievers import retrieve  # noqa: E402

TARGET_SPEEDUP = 6.0
SCRIPT = Path(__file__).name


def _prompts(n: int) -> list:
    ds = build_controlled("controlled-200", seed=42)
    base = [build_messages(i, "retrieved", retrieve(i, "lexical", k=3)) for i in ds.instances]
    return list(islice(cycle(base), n))


def _timed(fn, runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def _fmt(xs: list[float], scale: float = 1.0, unit: str = "s") -> str:
    return ", ".join(f"{x * scale:.3f}{unit}" for x in xs)


def overhead(prompts: list, runs: int) -> list[dict]:
    """Per-call client overhead of each server backend (ms): the reader's and each backend's."""
    n = len(prompts)
    reader = EmbeddedReader()
    base = _timed(lambda: [reader.generate(p) for p in prompts], runs)
    ref = statistics.median(base) / n
    print(f"embedded reader alone: median {ref * 1e3:.3f} ms/call (runs {_fmt(base)})")
    figs = [
        figure(
            f"embedded reader alone, {n} retrieved prompts",
            [t / n * 1e3 for t in base],
            "ms/call",
            SCRIPT,
        )
    ]
    with ModelStub() as stub:
        for kind, kw in (("ollama", {"hosts": [stub.url]}), ("openai", {"base_url": stub.url})):
            backend = make_backend(kind, "stub-model", options={"retries": 1}, **kw)
            assert backend.generate(prompts[0]).ok  # warm: setup requests, connection
            times = _timed(lambda b=backend: [b.generate(p) for p in prompts], runs)
            per = statistics.median(times) / len(prompts)
            print(
                f"{kind:>6} backend via stub: median {per * 1e3:.3f} ms/call, overhead "
                f"{(per - ref) * 1e3:.3f} ms/call over the reader (runs {_fmt(times)})"
            )
            extra = [(t / n - ref) * 1e3 for t in times]
            name = f"{kind} backend client overhead over the reader, stub server"
            figs.append(figure(name, extra, "ms/call", SCRIPT))
    return figs


def concurrency(prompts: list, latency_s: float, runs: int) -> dict:
    """Speed-up of 8 worker threads over 1 at a fixed model latency (bound >= 6)."""
    cmd = [sys.executable, str(ROOT / "tests" / "model_stub.py"), "--latency", str(latency_s)]
    with subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as server:
        try:
            url = server.stdout.readline().strip()
            backend = make_backend("ollama", "stub-model", hosts=[url])
            backend.retry = RetryPolicy(attempts=1)
            assert backend.generate(prompts[0]).ok

            def run(workers: int) -> None:
                with ThreadPoolExecutor(workers) as pool:
                    replies = list(pool.map(backend.generate, prompts))
                assert all(r.ok for r in replies), [r.error for r in replies if not r.ok][:1]

            seq = _timed(lambda: run(1), runs)
            par = _timed(lambda: run(8), runs)
        finally:
            server.stdin.close()  # the stub stops when its stdin closes
            server.wait(timeout=10)
    t1, t8 = statistics.median(seq), statistics.median(par)
    ratios = [a / b for a, b in zip(seq, par, strict=True)]
    print(
        f"{len(prompts)} calls at {latency_s * 1e3:.0f} ms latency: 1 thread median {t1:.2f}s "
        f"(runs {_fmt(seq)}), 8 threads median {t8:.2f}s (runs {_fmt(par)}); "
        f"speed-up {statistics.median(ratios):.2f}x (target >= {TARGET_SPEEDUP:.0f}x)"
    )
    return figure(
        f"ollama backend speed-up, 8 threads vs 1, {len(prompts)} calls at "
        f"{latency_s * 1e3:.0f} ms stub latency",
        ratios,
        "x",
        SCRIPT,
        bound=TARGET_SPEEDUP,
        better="higher",
    )


def results(repeats: int = 5, calls: int = 200, latency_s: float = 0.05) -> list[dict]:
    """Client overhead per backend (informational) and the 8-thread speed-up (>= 6)."""
    prompts = _prompts(calls)
    return [*overhead(prompts, repeats), concurrency(prompts, latency_s, repeats)]


def main(argv: list[str] | None = None) -> int:
    """Run both measurements; exit status 1 when the speed-up is below target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="calls per run (200)")
    parser.add_argument("--latency", type=float, default=0.05, help="model latency, s (0.05)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per number (5)")
    args = parser.parse_args(argv)
    return print_figures(results(args.runs, calls=args.calls, latency_s=args.latency))


if __name__ == "__main__":
    sys.exit(main())
