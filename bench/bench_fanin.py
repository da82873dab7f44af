"""Benchmark: fan-in analysis over 18,000 predictions and CRUX over the fanin-grid preset.

1. ``fanin_analysis`` (per-instance ER/EP/AC, 5,000-resample bootstrap CIs per system x
   fan-in and per bucket, degradation CIs, Pearson CIs, pairs) on a deterministic synthetic
   frame: 4,500 instances (fan-in 1..6) x the four conditions = 18,000 predictions (the size
   of SPEC §12's scoring bar; there is no separate bar for fan-in, the page recomputes it on
   a store-version change).
2. ``crux_evaluate`` on ``fanin-grid`` (144 instances, 4K/8K tokens): lexical and oracle
   retrievers x k in {1, 3, 5}, gold-derived answerability, 5,000-resample CIs.

Median of 5 runs each, one core. SPEC §12 sets no bound on these; ``results(repeats)`` returns
them as informational figures for ``bench/run_all.py``.

Usage: ``python bench/bench_fanin.py [--repeats 5]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, set before numpy loads its BLAS

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import figure, one_core, print_figures, timed  # noqa: E402

from core.crux import crux_evaluate  # noqa: E402
from core.datasets.controlled import build_controlled  # noqa: E402
from core.fanin import fanin_analysis  # noqa: E402

N_RUNS = 5
N_INSTANCES = 4500
CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")


def build_frame(seed: int = 0) -> pd.DataFrame:
    """18,000 synthetic plain-condition predictions with packs, gold ids and relaxed F1."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(N_INSTANCES):
        f = int(rng.integers(1, 7))
        gold = [f"p{j:04d}" for j in range(1, max(2, f) + 1)]
        others = [f"p{j:04d}" for j in range(20, 40)]
        for cond in CONDITIONS:
            if cond == "oracle":
                shown, cited = gold, gold
            else:
                hit = [g for g in gold if rng.random() < 1.0 / (1 + 0.3 * f)]
                shown = hit + list(rng.choice(others, 3, replace=False))
                cited = hit[:2]
            f1 = 0.0 if cond == "no_evidence" else float(rng.random() < 0.9 - 0.1 * f)
            rows.append({"run": "bench", "model": "m", "dataset": "d", "instance_id": f"i{i}",
                         "condition": cond, "input_passage_ids": shown, "cited_ids": cited,
                         "gold_ids": gold, "fan_in": f, "f1_relaxed": f1})  # fmt: skip
    return pd.DataFrame(rows)


def results(repeats: int = N_RUNS) -> list[dict]:
    """Seconds of ``fanin_analysis`` and ``crux_evaluate`` on one core (informational)."""
    frame = build_frame()
    grid = build_controlled("fanin-grid", seed=42).instances
    with one_core():
        fanin = timed(lambda: fanin_analysis(frame), repeats)
        crux = timed(lambda: crux_evaluate(grid, ["lexical", "oracle"], [1, 3, 5]), repeats)
    script = Path(__file__).name
    return [
        figure(f"fanin_analysis with CIs, {len(frame):,} predictions, one core", fanin, "s",
               script),  # fmt: skip
        figure(f"crux_evaluate, fanin-grid ({len(grid)} instances) x lexical/oracle x k 1,3,5, "
               "one core", crux, "s", script),  # fmt: skip
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures (informational: exit status 0 unless a script error)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=N_RUNS, help="timed runs (5)")
    args = ap.parse_args(argv)
    return print_figures(results(args.repeats))


if __name__ == "__main__":
    sys.exit(main())
