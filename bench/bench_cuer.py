"""Benchmark: CUE-R planning, a full intervention run, and the report (median of N runs).

Three measurements on the controlled-200 preset (seed 42) with the embedded reader:

1. planning: :func:`core.cuer.interventions.plan_interventions` for all 200 instances (BM25 top-5
   base retrieval, remove, replace easy/medium/hard, duplicate front/after/end, two-support,
   zero retrieval), given the gold ids as the cited ids (no model call);
2. run: :func:`core.execution.runs.run_interventions` into a fresh store (base traces + ~2,000
   intervention calls through the engine, written to DuckDB), wall seconds and calls/s;
3. report: :func:`core.cuer.metrics.intervention_report` (profile with bootstrap CIs, paired deltas
   with 5,000 resamples for 8 comparisons x 5 metrics, roles, synergy) on that run.

SPEC §12 sets no bound on these; ``results(repeats)`` returns them as informational figures for
``bench/run_all.py``.

Usage: ``python bench/bench_cuer.py [--runs 5]``
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, print_figures  # noqa: E402

from core.backends import EmbeddedReader  # noqa: E402
from core.cuer.interventions import DUPLICATE_POSITIONS, plan_interventions  # noqa: E402
from core.cuer.metrics import intervention_report  # noqa: E402
from core.datasets.controlled import build_controlled  # noqa: E402
from core.execution.runs import run_interventions  # noqa: E402
from core.store import Store  # noqa: E402


def results(repeats: int = 5) -> list[dict]:
    """Planning, intervention-run and report seconds and the run's calls/s (informational)."""
    dataset = build_controlled(preset="controlled-200", seed=42, name="c200")
    plan_s, run_s, report_s, calls, n = [], [], [], 0, 0
    for _ in range(repeats):
        t = time.perf_counter()
        n = sum(
            len(plan_interventions(i, list(i.gold_ids[:1]), positions=DUPLICATE_POSITIONS))
            for i in dataset.instances
        )
        plan_s.append(time.perf_counter() - t)
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "s.duckdb")
            store.write_dataset(dataset)
            t = time.perf_counter()
            summary = run_interventions(
                store, "c200", EmbeddedReader(), name="b", positions=DUPLICATE_POSITIONS
            )
            run_s.append(time.perf_counter() - t)
            calls = summary.planned
            t = time.perf_counter()
            intervention_report(store, "b")
            report_s.append(time.perf_counter() - t)
    script = Path(__file__).name
    return [
        figure(f"CUE-R planning, {n} intervention calls for 200 instances", plan_s, "s", script),
        figure(f"CUE-R run, {calls} calls (embedded reader, DuckDB)", run_s, "s", script),
        figure(
            "CUE-R run throughput", [calls / t for t in run_s], "calls/s", script, better="higher"
        ),
        figure("CUE-R report (profile, paired deltas, roles, synergy)", report_s, "s", script),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures (informational: exit status 0 unless a script error)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    return print_figures(results(args.runs))


if __name__ == "__main__":
    sys.exit(main())
