"""Benchmark: DOLCE EM on 1,000 problems x 50 observations over the full candidate grid.

SPEC §12 (< 10 s on one core). Synthetic outcomes are drawn from the COW / PIG models
themselves (``tests/test_dolce_em.py`` has the simulator); the timed part is
:func:`core.dolce.fit_cow` / :func:`core.dolce.fit_pig` (Algorithm 1, 10 steps; Algorithm 2,
5 steps). Prints the median of ``--repeats`` runs (default 5) per scenario.

Run: ``OMP_NUM_THREADS=1 .venv/bin/python bench/bench_dolce.py [--problems 1000] [--obs 50]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_dolce_em import simulate  # noqa: E402

from core.dolce import fit_cow, fit_pig  # noqa: E402


def main() -> int:
    """Time both EM variants and print the medians."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=50, help="observations per problem")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    for scenario, fit in (("COW", fit_cow), ("PIG", fit_pig)):
        frame, _ = simulate(args.problems, scenario=scenario, obs=args.obs, seed=args.seed)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            fit(frame)
            times.append(time.perf_counter() - t0)
        print(
            f"{scenario}: {args.problems} problems x {args.obs} observations ({len(frame)} rows): "
            f"median {statistics.median(times):.2f} s over {args.repeats} runs "
            f"(min {min(times):.2f}, max {max(times):.2f})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
