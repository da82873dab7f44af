"""Benchmark: the embedded baseline reader on 8K-token contexts (SPEC §5.2: >= 200 calls/s).

Builds the full-context prompts of every 8K-token instance of the controlled benchmark
(``controlled-200``, seed 42: all four reasoning types and distractor settings, about 8,300
whitespace tokens per prompt), pins the process to one core, answers all of them once to warm
up, then times 5 runs over all prompts and reports the median rate (``results(repeats)`` returns
it as a figure with its bound for ``bench/run_all.py``).

With ``--accuracy`` it also prints the reader's relaxed exact match per reasoning type and
condition (no_evidence / full_context / retrieved lexical@3 / oracle) on the whole
``controlled-200`` preset and, when present, the 53-example HotpotQA sample.

Usage: ``python bench/bench_embedded.py [--repeats 5] [--accuracy]`` (exit status 1 below 200
calls/s).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, set before numpy loads its BLAS

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, one_core, print_figures  # noqa: E402

from core.backends.embedded import EmbeddedReader  # noqa: E402
from core.datasets.controlled import build_controlled  # noqa: E402
from core.execution.prompts import build_messages  # noqa: E402
from core.retrieval.retrievers import retrieve  # noqa: E402
from core.scoring.parsing import parse_reply  # noqa: E402
from core.scoring.rows import score_answer  # noqa: E402

TARGET = 200.0
N_RUNS = 5
CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")
HOTPOT = ROOT.parent / "shared" / "fixtures" / "hotpotqa" / "hotpot_dev_distractor_sample53.json"


def speed(repeats: int = N_RUNS) -> list[float]:
    """Calls/s of the reader over the 8K-token full-context prompts, one value per run."""
    ds = build_controlled("controlled-200", seed=42, subset={"context_length": [8000]})
    prompts = [build_messages(inst, "full_context") for inst in ds.instances]
    tokens = statistics.mean(sum(len(m["content"].split()) for m in p) for p in prompts)
    reader = EmbeddedReader()
    for p in prompts:
        reader.generate(p)
    rates = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for p in prompts:
            reader.generate(p)
        rates.append(len(prompts) / (time.perf_counter() - t0))
    print(
        f"embedded reader: {len(prompts)} prompts of {tokens:,.0f} whitespace tokens on average; "
        f"runs {', '.join(f'{r:.0f}' for r in rates)} calls/s; median "
        f"{statistics.median(rates):.0f} calls/s (target >= {TARGET:.0f})"
    )
    return rates


def results(repeats: int = N_RUNS) -> list[dict]:
    """The reader's median calls/s on 8K-token contexts, pinned to one core (bound >= 200)."""
    with one_core():
        rates = speed(repeats)
    return [
        figure(
            "embedded reader, 8K-token full-context prompts, one core",
            rates,
            "calls/s",
            Path(__file__).name,
            bound=TARGET,
            better="higher",
        ),
    ]


def accuracy(name: str, instances) -> None:
    """Print relaxed EM (and the share of unknown answers) per reasoning type and condition."""
    reader = EmbeddedReader()
    em: dict[tuple[str, str], list[float]] = defaultdict(list)
    unk: dict[tuple[str, str], list[float]] = defaultdict(list)
    for inst in instances:
        golds = (inst.gold_answer, *inst.answer_aliases)
        for cond in CONDITIONS:
            if cond == "oracle" and not inst.gold_ids:
                continue
            ev = retrieve(inst, "lexical", k=3) if cond == "retrieved" else None
            parsed = parse_reply(reader.generate(build_messages(inst, cond, ev)).text)
            score = score_answer(parsed.answer, golds, inst.answer_type, inst.reasoning_type)
            for key in (inst.reasoning_type, "all"):
                em[(key, cond)].append(score["em_relaxed"])
                unk[(key, cond)].append(float(parsed.answer in ("unknown", "unanswerable")))
    kinds = sorted({k for k, _ in em} - {"all"}) + ["all"]
    print(f"\n{name}: relaxed EM (unknown rate) per reasoning type")
    print(f"{'reasoning':<12} {'n':>4} " + " ".join(f"{c:>18}" for c in CONDITIONS))
    for kind in kinds:
        n = len(em[(kind, "full_context")])
        cells = [
            f"{statistics.mean(em[(kind, c)]):.3f} ({statistics.mean(unk[(kind, c)]):.2f})"
            if em[(kind, c)]
            else "-"
            for c in CONDITIONS
        ]
        print(f"{kind:<12} {n:>4} " + " ".join(f"{c:>18}" for c in cells))


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit status 1 below the target rate."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--accuracy", action="store_true", help="also print accuracy tables")
    parser.add_argument("--repeats", type=int, default=N_RUNS, help="timed runs (5)")
    args = parser.parse_args(argv)
    figs = results(args.repeats)
    if args.accuracy:
        accuracy("controlled-200 (seed 42)", build_controlled("controlled-200", seed=42).instances)
        if HOTPOT.exists():
            from core.datasets.importers import read_dataset

            hp = read_dataset(HOTPOT, fmt="hotpotqa", name="hotpotqa-53").dataset.instances
            accuracy("HotpotQA sample (53)", hp)
    return print_figures(figs)


if __name__ == "__main__":
    sys.exit(main())
