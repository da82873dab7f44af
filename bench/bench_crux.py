"""Benchmark: alpha-nDCG at 5, 10 and 20 on 400 topics with pools of 40, beside pyndeval.

Issue 38 item 1: the tool's alpha-nDCG (:func:`core.crux.metrics.alpha_ndcg_topics`, computed as
ndeval computes it) must take at most 1.0x the time of pyndeval (ndeval's C code behind a
Python interface, the implementation ir-measures uses) on the same work: 400 topics, each a
pool of 40 judged documents over 6 subtopics (each document relevant to each subtopic with
probability 0.15, so ties are common) and a run ranking the whole pool; alpha-nDCG@5, @10
and @20 of every topic (1,200 values).

Each tool starts from its own natural input, built before the clock starts: pyndeval from
qrels tuples ``(qid, subtopic, docno, 0/1)`` and run tuples ``(qid, docno, score)`` (its
call converts them, as a user's would); the tool from per-topic lists of subtopic sets and
docnos. The two are timed in alternating runs on one core (which goes first alternates), one
untimed call of each first; the figure is the median of the per-pair ratios tool / pyndeval
of CPU seconds, bound 1.0 (CPU time: the shared machine's other processes stretch the wall
time of either run by chance; the wall-time ratio is shown beside it). Before timing, the
bench checks that the 1,200 values equal pyndeval's bit for bit.

pyndeval is not a dependency of the tool: install it for the bench only, e.g.
``.venv/bin/pip install --target /tmp/pyndeval pyndeval`` and pass ``--pyndeval /tmp/pyndeval``
(or set ``PYNDEVAL_PATH``). Without it the bound is pyndeval's CPU time recorded on the machine
of docs/BENCHMARKS.md (:data:`PYNDEVAL_RECORDED_S`), and the figure is the tool's CPU seconds.
Informational figures: both times, and the one-topic path (:func:`core.crux.metrics.alpha_ndcg`
called once per topic and cut-off, 1,200 calls).

Usage: ``python bench/bench_crux.py [--repeats 5] [--pyndeval PATH]`` (exit status 1 when a
bound is missed).
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, set before numpy loads its BLAS

import argparse  # noqa: E402
import importlib  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_all import figure, one_core, print_figures  # noqa: E402

from core.crux.metrics import alpha_ndcg, alpha_ndcg_topics  # noqa: E402

TOPICS, POOL, SUBTOPICS, P_REL = 400, 40, 6, 0.15
CUTS = (5, 10, 20)
MEASURES = [f"alpha-nDCG@{k}" for k in CUTS]
#: Bound on the ratio tool / pyndeval (issue 38: at most pyndeval's time).
BOUND_RATIO = 1.0
#: pyndeval 0.0.8's median CPU seconds on this workload, measured on the machine of
#: docs/BENCHMARKS.md (2026-11-28, loaded); the bound when pyndeval is not installed.
PYNDEVAL_RECORDED_S = 0.025
SCRIPT = Path(__file__).name


def workload(seed: int = 7) -> tuple[dict, list, list]:
    """The topics in both tools' inputs: the tool's, pyndeval's qrels and run."""
    rng = random.Random(seed)
    rankings, pools, ids, qrels, run = [], [], [], [], []
    for t in range(TOPICS):
        qid = f"q{t}"
        docs = list(dict.fromkeys(f"d{rng.randrange(10**6)}" for _ in range(POOL)))
        sets = [frozenset(s for s in range(SUBTOPICS) if rng.random() < P_REL) for _ in docs]
        for d, st in zip(docs, sets, strict=True):  # a document with no subtopic: judged 0
            qrels += [(qid, str(s), d, int(s in st)) for s in (sorted(st) or [0])]
        order = rng.sample(range(len(docs)), len(docs))
        run += [(qid, docs[i], float(len(order) - r)) for r, i in enumerate(order)]
        rankings.append([sets[i] for i in order])
        pools.append(sets)
        ids.append(docs)
    return {"rankings": rankings, "pools": pools, "pool_ids": ids}, qrels, run


def load_peer(module: str, path: str | None, env: str):
    """A peer installed for the bench only: ``module`` from ``path`` / ``$env`` when given;
    None when not installed."""
    path = path or os.environ.get(env)
    if path:
        sys.path.insert(0, path)
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def load_pyndeval(path: str | None):
    """pyndeval, from ``path`` / ``PYNDEVAL_PATH`` when given; None when not installed."""
    return load_peer("pyndeval", path, "PYNDEVAL_PATH")


def ours(tool_input: dict) -> np.ndarray:
    """The tool's 1,200 values (topics x cut-offs)."""
    return alpha_ndcg_topics(depths=CUTS, alpha=0.5, **tool_input)


def one_topic_calls(tool_input: dict) -> None:
    """The one-topic path: one :func:`alpha_ndcg` call per topic and cut-off."""
    for ranking, pool, ids in zip(*tool_input.values(), strict=True):
        for k in CUTS:
            alpha_ndcg(ranking, pool, depth=k, pool_ids=ids)


def check_equal(got: np.ndarray, ref: dict) -> None:
    """Raise unless the tool's values are pyndeval's, bit for bit (NaN where it says 0)."""
    want = np.array([[ref[f"q{t}"][m] for m in MEASURES] for t in range(TOPICS)])
    same = (got == want) | (np.isnan(got) & (want == 0))
    if not same.all():
        t, c = np.argwhere(~same)[0]
        raise SystemExit(
            f"alpha-nDCG differs from pyndeval at topic {t}, @{CUTS[c]}: "
            f"{got[t, c]!r} vs {want[t, c]!r}"
        )


def alternating(fa, fb, repeats: int) -> dict[str, list[float]]:
    """Seconds of ``fa`` and ``fb`` in ``repeats`` pairs, which goes first alternating.

    Returns the CPU seconds (``cpu_a``, ``cpu_b``: this process's, the work itself, which
    other processes on a loaded machine do not stretch) and the wall seconds (``wall_a``,
    ``wall_b``) of every run.
    """
    out: dict[str, list[float]] = {k: [] for k in ("cpu_a", "cpu_b", "wall_a", "wall_b")}
    for i in range(repeats):
        for f, tag in ((fa, "a"), (fb, "b")) if i % 2 == 0 else ((fb, "b"), (fa, "a")):
            c0, t0 = time.process_time(), time.perf_counter()
            f()
            out[f"wall_{tag}"].append(time.perf_counter() - t0)
            out[f"cpu_{tag}"].append(time.process_time() - c0)
    return out


def results(repeats: int = 5, pyndeval_path: str | None = None) -> list[dict]:
    """The ratio (or the tool's seconds) with its bound, and informational timings."""
    tool_input, qrels, run = workload()
    pyndeval = load_pyndeval(pyndeval_path)
    work = f"{TOPICS} topics x {len(CUTS)} cut-offs, pools of {POOL}"
    figs = []
    with one_core():
        if pyndeval is not None:
            check_equal(ours(tool_input), pyndeval.ndeval(qrels, run, measures=MEASURES))
            ref = lambda: pyndeval.ndeval(qrels, run, measures=MEASURES)  # noqa: E731
            t = alternating(lambda: ours(tool_input), ref, repeats)
            ratios = [a / b for a, b in zip(t["cpu_a"], t["cpu_b"], strict=True)]
            walls = [a / b for a, b in zip(t["wall_a"], t["wall_b"], strict=True)]
            figs.append(
                figure(
                    f"alpha-nDCG, {work}: tool / pyndeval, CPU time",
                    ratios,
                    "x",
                    SCRIPT,
                    bound=BOUND_RATIO,
                )
            )
            figs.append(
                figure(f"alpha-nDCG, {work}: tool / pyndeval, wall time", walls, "x", SCRIPT)
            )
            figs.append(figure(f"alpha-nDCG, {work}: pyndeval 0.0.8, CPU", t["cpu_b"], "s", SCRIPT))
            figs.append(figure(f"alpha-nDCG, {work}: tool, CPU", t["cpu_a"], "s", SCRIPT))
        else:
            ours(tool_input)
            t = alternating(lambda: ours(tool_input), lambda: None, repeats)
            figs.append(
                figure(
                    f"alpha-nDCG, {work}: tool, CPU (pyndeval not installed; bound "
                    f"= its CPU time recorded, {PYNDEVAL_RECORDED_S} s)",
                    t["cpu_a"],
                    "s",
                    SCRIPT,
                    bound=PYNDEVAL_RECORDED_S,
                )
            )
        one_topic_calls(tool_input)
        t = alternating(lambda: one_topic_calls(tool_input), lambda: None, repeats)
    figs.append(
        figure(
            f"alpha-nDCG, {work}: one alpha_ndcg call per value (1,200 calls), CPU",
            t["cpu_a"],
            "s",
            SCRIPT,
        )
    )
    return figs


def peer_main(argv: list[str] | None, results_of, peer: str, doc: str) -> int:
    """A peer bench's command line: ``--repeats`` and ``--PEER`` (the peer's folder)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(f"--{peer}", help=f"folder holding {peer} (pip install --target)")
    args = ap.parse_args(argv)
    return print_figures(results_of(args.repeats, getattr(args, peer)))


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when one misses its bound."""
    return peer_main(argv, results, "pyndeval", __doc__)


if __name__ == "__main__":
    sys.exit(main())
