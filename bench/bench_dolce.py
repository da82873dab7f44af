"""Benchmark: DOLCE EM on 1,000 problems x 50 observations over the full candidate grid.

SPEC §12: < 10 s on one core, for each scenario. Synthetic outcomes are drawn from the COW /
PIG models themselves (``tests/test_dolce_em.py`` has the simulator); the timed part is
:func:`core.dolce.fit_cow` (Algorithm 1, 10 steps) and :func:`core.dolce.fit_pig` with the
default PIG estimator (``likelihood``: the per-observation likelihood that identifies lambda,
10 steps; issue 16), with the process pinned to one core. The published Algorithm 2 (5 steps)
is timed too, as an informational figure. ``results(repeats)`` returns the median of
``repeats`` runs per fit as figures for ``bench/run_all.py``; every run is timed, the first
one included.

Usage: ``python bench/bench_dolce.py [--repeats 5] [--problems 1000] [--obs 50] [--seed 7]``
(exit status 1 when a bound is missed).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, set before numpy loads its BLAS

import argparse  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

from run_all import figure, one_core, print_figures, timed  # noqa: E402
from test_dolce_em import simulate  # noqa: E402

from core.dolce import fit_cow, fit_pig  # noqa: E402

BOUND_S = 10.0


def results(repeats: int = 5, *, problems: int = 1000, obs: int = 50, seed: int = 7) -> list[dict]:
    """Seconds of COW and PIG EM fits on ``problems`` x ``obs`` simulated observations.

    Args:
        repeats: timed fits per scenario (the figure is their median).
        problems: simulated problems (L uniform in [200, 1000) units).
        obs: observations per problem, spread over the exponential ladder.
        seed: simulation seed.

    Returns:
        COW and PIG (default estimator) with the bound 10 s (lower is better), and the
        published PIG Algorithm 2 as an informational figure.
    """
    figs = []
    fits = (
        ("COW", "COW", fit_cow, BOUND_S),
        ("PIG", "PIG likelihood (default)", fit_pig, BOUND_S),
        ("PIG", "PIG published Algorithm 2", lambda f: fit_pig(f, estimator="published"), None),
    )
    for scenario, label, fit, bound in fits:
        frame, _ = simulate(problems, scenario=scenario, obs=obs, seed=seed)
        with one_core():
            runs = timed(lambda fit=fit, frame=frame: fit(frame), repeats)
        name = f"DOLCE EM {label}, {problems:,} problems x {obs} obs"
        figs.append(figure(name, runs, "s", Path(__file__).name, bound=bound))
    return figs


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when one misses its bound."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--problems", type=int, default=1000)
    ap.add_argument("--obs", type=int, default=50, help="observations per problem")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    figs = results(args.repeats, problems=args.problems, obs=args.obs, seed=args.seed)
    return print_figures(figs)


if __name__ == "__main__":
    sys.exit(main())
