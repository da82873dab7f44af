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

from core.crux.metrics import crux_evaluate  # noqa: E402
from core.datasets.controlled import build_controlled  # noqa: E402
from core.fanin.metrics import fanin_analysis  # noqa: E402

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
            rows.append(
                {
                    "run": "bench",
                    "model": "m",
                    "dataset": "d",
                    "instance_id": f"i{i}",
                    "condition": cond,
                    "input_passage_ids": shown,
                    "cited_ids": cited,
                    "gold_ids": gold,
                    "fan_in": f,
                    "f1_relaxed": f1,
                }
            )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ 1,000,000-prediction store

#: The fan-in store: 250,000 instances x the four conditions, cached here between runs.
STORE_1M = Path("/tmp/h7_fanin_1m.duckdb")
N_STORE_INSTANCES = 250_000
STORE_DATASET = "fanin-1m"
STORE_RUN = "fanin-1m-run"


def build_store(path: Path = STORE_1M, n: int = N_STORE_INSTANCES, seed: int = 0) -> None:
    """A store of ``n`` instances with fan-in 1..8 and 4 x ``n`` scored predictions.

    Instance i has fan-in 1..8 (gold passages from distinct documents; 1% have no gold
    evidence, fan-in 0) and three distractors. Retrieved packs hold each gold passage with a
    probability falling with fan-in plus 1-4 distractors; oracle packs are the gold passages;
    full context cites a subset of the gold and one distractor. Relaxed F1 mixes exact values
    (1, 0, 0.4, 0.5, 0.667) with continuous ones (a uniform on [0, 0.5) for 30% of wrong
    answers), so both bootstrap regimes of :mod:`core.fanin.stats` are exercised; 0.5% of
    calls failed (error set, no scores).
    """
    from core.store import Store
    from core.types import Dataset, Instance, Passage

    rng = np.random.default_rng(seed)
    fan = rng.integers(1, 9, size=n)
    fan[rng.random(n) < 0.01] = 0
    instances, gold_ids, all_ids = [], [], []
    for i in range(n):
        f = int(fan[i])
        passages = [
            Passage(f"p{j + 1:04d}", j, "", f"gold {j} of {i}", f"g{i}-{j}", "gold", True)
            for j in range(f)
        ]
        passages += [
            Passage(
                f"p{f + j + 1:04d}", f + j, "", f"distractor {j}", f"x{i}-{j}", "distractor", False
            )
            for j in range(3)
        ]
        instances.append(
            Instance(
                instance_id=f"f{i:07d}",
                question=f"Q{i}?",
                gold_answer=f"a{i}",
                passages=tuple(passages),
                reasoning_type=("single_hop", "multi_hop")[f > 1],
                context_length=(4000, 8000)[i % 2],
                fan_in=f,
                oracle_applicable=f > 0,
                source="bench",
            )
        )
        gold_ids.append([p.passage_id for p in passages[:f]])
        all_ids.append([p.passage_id for p in passages])
    store = Store(path)
    store.write_dataset(
        Dataset(STORE_DATASET, "bench", "bench", {"n": n}, tuple(instances)), replace=True
    )
    ids = np.array([x.instance_id for x in instances])
    acc = {"no_evidence": 0.05, "full_context": 0.6, "retrieved": 0.7, "oracle": 0.85}
    preds, scores = [], []
    for cond in CONDITIONS:
        shown, cited = [], []
        for i in range(n):
            g, others = gold_ids[i], all_ids[i][len(gold_ids[i]) :]
            hit = [x for x in g if rng.random() < 1.0 / (1 + 0.15 * len(g))]
            if cond == "retrieved":
                shown.append(hit + others[: int(rng.integers(1, 4))])
                cited.append(hit[:2])
            elif cond == "oracle":
                shown.append(list(g))
                cited.append(list(g[:2]))
            elif cond == "full_context":
                shown.append(list(all_ids[i]))
                cited.append(hit[:3] + others[:1])
            else:
                shown.append([])
                cited.append([])
        correct = rng.random(n) < acc[cond] * (1 - 0.05 * fan)
        wrong = np.where(
            rng.random(n) < 0.3,
            rng.random(n) * 0.5,
            rng.choice([0.0, 0.0, 0.4, 0.5, 2 / 3], size=n),
        )
        f1 = np.where(correct, 1.0, wrong)
        failed = rng.random(n) < 0.005
        preds.append(
            pd.DataFrame(
                {
                    "run_id": STORE_RUN,
                    "instance_id": ids,
                    "condition": cond,
                    "variant": "",
                    "input_passage_ids": shown,
                    "cited_ids": cited,
                    "answer": "x",
                    "error": np.where(failed, "HTTP 500", None),
                }
            )
        )
        em = correct.astype(float)
        sc = pd.DataFrame(
            {
                "run_id": STORE_RUN,
                "instance_id": ids,
                "condition": cond,
                "variant": "",
                "em_strict": em,
                "f1_strict": f1,
                "em_relaxed": em,
                "f1_relaxed": f1,
                "soft_correct": em,
            }
        )
        scores.append(sc[~failed])
    with store.transaction() as con:
        store.insert_run(
            con,
            {
                "run_id": STORE_RUN,
                "dataset_id": STORE_DATASET,
                "backend": "imported",
                "model": "synthetic",
                "status": "done",
                "n_planned": 4 * n,
                "n_done": 4 * n,
            },
        )
        store.write_predictions(con, pd.concat(preds, ignore_index=True), replace=False)
        store.write_scores(con, pd.concat(scores, ignore_index=True), replace=False)


def store_1m(rebuild: bool = False) -> Path:
    """The cached 1,000,000-prediction fan-in store (built on first use, about a minute)."""
    if rebuild or not STORE_1M.exists():
        STORE_1M.unlink(missing_ok=True)
        build_store(STORE_1M)
    return STORE_1M


def results(repeats: int = N_RUNS) -> list[dict]:
    """Seconds of ``fanin_analysis`` and ``crux_evaluate`` on one core (informational)."""
    frame = build_frame()
    grid = build_controlled("fanin-grid", seed=42).instances
    with one_core():
        fanin = timed(lambda: fanin_analysis(frame), repeats)
        crux = timed(lambda: crux_evaluate(grid, ["lexical", "oracle"], [1, 3, 5]), repeats)
    script = Path(__file__).name
    return [
        figure(
            f"fanin_analysis with CIs, {len(frame):,} predictions, one core", fanin, "s", script
        ),
        figure(
            f"crux_evaluate, fanin-grid ({len(grid)} instances) x lexical/oracle x k 1,3,5, "
            "one core",
            crux,
            "s",
            script,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures (informational: exit status 0 unless a script error)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=N_RUNS, help="timed runs (5)")
    args = ap.parse_args(argv)
    return print_figures(results(args.repeats))


if __name__ == "__main__":
    sys.exit(main())
