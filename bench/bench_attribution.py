"""Benchmark: an attribution run of 200 instances x 32 ablations, and its report (issue 40).

On the controlled-200 preset (seed 42) with the embedded reader, full context:

1. run: :func:`core.execution.runs.run_attribution` into a fresh store: 200 unablated calls, 6,400
   ablated calls and the top-1 / top-2 drops (the surrogates fitted for them), written to
   DuckDB; wall seconds, bound 60 s (issue 40), and calls/s;
2. report: :func:`core.attribution.report.attribution_report` (200 surrogates with 200
   bootstrap resamples each, the run aggregates), informational.

The 1-minute load average before each run is reported beside them: this machine is shared,
and a loaded machine stretches every wall-clock figure.

Usage: ``python bench/bench_attribution.py [--runs 5]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, print_figures  # noqa: E402

from core.attribution.report import attribution_report  # noqa: E402
from core.backends import EmbeddedReader  # noqa: E402
from core.datasets.controlled import build_controlled  # noqa: E402
from core.execution.runs import run_attribution  # noqa: E402
from core.store import Store  # noqa: E402


def results(repeats: int = 5) -> list[dict]:
    """Run seconds (bound 60 s), calls/s, report seconds and the load before each run."""
    dataset = build_controlled(preset="controlled-200", seed=42, name="c200")
    run_s, cpu_s, report_s, load, calls = [], [], [], [], 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "s.duckdb")
            store.write_dataset(dataset)
            load.append(os.getloadavg()[0])
            t, c = time.perf_counter(), time.process_time()
            summary = run_attribution(store, "c200", EmbeddedReader(), name="b", ablations=32)
            run_s.append(time.perf_counter() - t)
            cpu_s.append(time.process_time() - c)
            calls = summary.planned
            t = time.perf_counter()
            attribution_report(store, "b")
            report_s.append(time.perf_counter() - t)
    script = Path(__file__).name
    return [
        figure(
            f"attribution run, 200 instances x 32 ablations ({calls} calls, embedded "
            "reader, DuckDB)",
            run_s,
            "s",
            script,
            bound=60.0,
        ),
        figure(
            "attribution run throughput",
            [calls / t for t in run_s],
            "calls/s",
            script,
            better="higher",
        ),
        figure(
            "attribution run, CPU of the run's own process (the reader works in a worker)",
            cpu_s,
            "s",
            script,
        ),
        figure(
            "attribution report (200 surrogates, 200 bootstrap resamples each)",
            report_s,
            "s",
            script,
        ),
        figure("load average (1 min) before each attribution run", load, "", script),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when the run misses its bound."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    return print_figures(results(args.runs))


if __name__ == "__main__":
    sys.exit(main())
