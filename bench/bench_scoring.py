"""Benchmark: scoring + ONCU + bootstrap CIs over 18,000 predictions (SPEC §12: < 2 s, one core).

Builds a deterministic synthetic matrix: 4,500 instances in three datasets (controlled-style
synthetic entities with numeric suffixes, HotpotQA-style entities / yes-no / numbers, and
2Wiki-style), the four conditions each, one model per dataset, answers drawn from a realistic
mix (exact, suffix dropped, partial, accented, wrong, empty, "None", yes/no and number variants,
parse errors) and citations drawn around the gold ids. Then times, on one core, the median of 5
runs of::

    score_frame -> oncu_summary (5,000-resample CIs over valid groups)
                -> sample_level_means (5,000-resample CIs for every score)

``results(repeats)`` returns that figure (bound < 2 s) and ``score_frame`` alone (informational)
for ``bench/run_all.py``; the process is pinned to one CPU while timing.

Usage: ``python bench/bench_scoring.py [--repeats 5]`` (exit status 1 above the 2.0 s budget).
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

from core.oncu import oncu_summary, sample_level_means  # noqa: E402
from core.scoring import score_frame  # noqa: E402

BUDGET_S = 2.0
N_RUNS = 5
CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")
DATASETS = (("controlled", 2000, "qwen2.5:14b"), ("hotpotqa", 1500, "qwen3:14b"),
            ("twowiki", 1000, "gemma3:12b"))  # fmt: skip
ENTITIES = ("Model Alpha", "Zurich", "São Paulo", "Café Müller", "New York City", "The Beatles",
            "Marie Curie", "Ernest Hemingway", "Lake Geneva", "Mount Kilimanjaro")  # fmt: skip
REASONING = ("single_hop", "multi_hop", "comparison", "arithmetic")
LENGTHS = ("4000", "8000", "16000")
POSITIONS = ("front", "middle", "end", "scattered")
DENSITY = ("low", "medium")
DISTRACTORS = ("none", "low", "high", "conflicting")
# probability of a good answer / good citations per condition
SKILL = {"no_evidence": 0.05, "full_context": 0.55, "retrieved": 0.8, "oracle": 0.9}


def build(seed: int = 0) -> pd.DataFrame:
    """18,000 synthetic predictions joined with their instances (deterministic)."""
    rng = np.random.default_rng(seed)
    rows = []
    for source, n_inst, model in DATASETS:
        for i in range(n_inst):
            rtype = REASONING[rng.integers(4)]
            if source != "controlled" and rtype == "arithmetic":
                rtype = "multi_hop"
            kind = rng.integers(10)
            if rtype == "arithmetic" or kind == 0:
                gold, atype = f"{rng.integers(1, 5000):,}", "number"
            elif source != "controlled" and kind == 1:
                gold, atype = ("yes", "no")[rng.integers(2)], "yes_no"
            else:
                base = ENTITIES[rng.integers(len(ENTITIES))]
                gold = f"{base} {i:05d}" if source == "controlled" else base
                atype = "entity"
            n_gold = 1 if rtype == "single_hop" else int(rng.integers(2, 4))
            gold_ids = [f"p{j:04d}" for j in sorted(rng.choice(40, n_gold, replace=False) + 1)]
            aliases = [gold.upper()] if rng.random() < 0.2 else []
            meta = {
                "run": f"run-{source}",
                "model": model,
                "dataset": source,
                "instance_id": f"{source}_{i:06d}",
                "source": source,
                "reasoning_type": rtype,
                "answer_type": atype,
                "context_length": LENGTHS[rng.integers(3)],
                "evidence_position": POSITIONS[rng.integers(4)],
                "evidence_density": DENSITY[rng.integers(2)],
                "distractor_similarity": DISTRACTORS[rng.integers(4)]
                if source == "controlled"
                else "unknown",
                "gold_answer": gold,
                "answer_aliases": aliases,
                "gold_ids": gold_ids,
                "oracle_applicable": True,
            }
            for cond in CONDITIONS:
                rows.append({**meta, "condition": cond, **_predict(rng, cond, gold, gold_ids)})
    return pd.DataFrame(rows)


def _predict(rng: np.random.Generator, cond: str, gold: str, gold_ids: list[str]) -> dict:
    skill = SKILL[cond]
    u = rng.random()
    if u < skill * 0.6:
        answer = gold
    elif u < skill:
        answer = (gold.rsplit(" ", 1)[0] + "!") if " " in gold else gold.lower() + ".0"
    else:
        answer = (
            "", "None", "unknown", "Lake Geneva", "yes", "no", "1,000", "the answer is unclear",
            ENTITIES[rng.integers(len(ENTITIES))],
        )[rng.integers(9)]  # fmt: skip
    parse_error = "invalid JSON" if rng.random() < 0.003 else None
    if cond == "no_evidence":
        cited: list[str] = []
    elif rng.random() < skill:
        cited = list(gold_ids) if rng.random() < 0.7 else gold_ids[:1]
        if rng.random() < 0.2:
            cited = cited + [f"p{int(rng.integers(41, 60)):04d}"]
    elif rng.random() < 0.5:
        cited = [f"p{int(rng.integers(41, 60)):04d}"]
    else:
        cited = []
    confidence = float(np.clip(rng.normal(0.7, 0.2), 0, 1)) if rng.random() < 0.9 else None
    return {
        "answer": answer,
        "cited_ids": cited,
        "parse_error": parse_error,
        "confidence": confidence,
    }


def pipeline(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The timed work: score, ONCU with CIs, sample means with CIs."""
    scored = df.join(score_frame(df))
    summary = oncu_summary(scored)
    means = sample_level_means(scored, ci=True)
    return scored, summary, means


def results(repeats: int = N_RUNS) -> list[dict]:
    """The pipeline's median seconds on one core (bound < 2 s) and ``score_frame`` alone."""
    df = build()
    if len(df) != 18_000:
        raise RuntimeError(f"expected 18,000 predictions, built {len(df):,}")
    last: dict = {}
    with one_core():
        runs = timed(lambda: last.update(out=pipeline(df)), repeats)
        score_runs = timed(lambda: score_frame(df), repeats)
    summary = last["out"][1]
    print(f"predictions: {len(df):,}  instances: {df['instance_id'].nunique():,}")
    print(
        summary[["dataset", "condition", "valid_groups", "total_groups", "oncu_clipped",
                 "oncu_ci_low", "oncu_ci_high"]].round(3).to_string(index=False)
    )  # fmt: skip
    script = Path(__file__).name
    return [
        figure("scoring + ONCU + bootstrap CIs, 18,000 predictions, one core", runs, "s", script,
               bound=BUDGET_S),  # fmt: skip
        figure("score_frame alone, 18,000 predictions, one core", score_runs, "s", script),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 above the budget."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=N_RUNS, help="timed runs (5)")
    args = ap.parse_args(argv)
    return print_figures(results(args.repeats))


if __name__ == "__main__":
    sys.exit(main())
