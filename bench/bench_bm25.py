"""Benchmark: the lexical retriever's BM25 beside ``rank_bm25`` and ``bm25s`` (issue 38).

What the retriever does for every instance it plans: index the instance's passages and score
them against its question. The work: the 200 instances of ``controlled-200`` (seed 42; 21-24
passages an instance, about 3,900 tokens), each passage and question tokenized once, before
the clock, by :func:`core.retrieval.chunks.lexical_tokens`; then per instance, for each tool,
one index of the passages and one query's scores of every passage:

* the tool: :func:`core.retrieval.bm25.bm25_okapi_scores` (k1 1.5, b 0.75, epsilon 0.25);
* ``rank_bm25.BM25Okapi(corpus).get_scores(query)``, the reference (the tool's scores are
  checked equal to its, bit for bit, before timing);
* ``bm25s.BM25(k1=1.5, b=0.75).index(corpus)`` then ``get_scores(query)`` (its own default
  idf, Lucene's, and float32 scores: not the same numbers; timed for the same work).

Beside these, the retriever's whole path from the texts (its byte tokenizer,
:func:`core.retrieval.bm25.chunk_tokens`, then the scores) against ``rank_bm25`` after the
regular-expression tokenizer a user of it would run (:func:`lexical_tokens`): the same scores;
and against ``bm25s`` after that tokenizer.

Timed in alternating pairs on one core (which goes first alternates), one untimed pass of
each first; a figure is the median of the per-pair ratios tool / peer of CPU seconds (wall
time beside it), so a loaded machine stretches both sides alike. Informational: the issue
states no bound for BM25 (it measured 0.30x ``bm25s`` and 0.52x ``rank_bm25``); the figures
are the ratios a side-by-side check should find.

``bm25s`` is not a dependency of the tool: install it for the bench only, e.g.
``.venv/bin/pip install --no-deps --target /tmp/bm25s_pkg bm25s`` and pass ``--bm25s
/tmp/bm25s_pkg`` (or set ``BM25S_PATH``); without it only the ``rank_bm25`` figures are made.

Usage: ``python bench/bench_bm25.py [--repeats 5] [--bm25s PATH]``.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")  # one core, set before numpy loads its BLAS

import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_crux import alternating, load_peer, peer_main  # noqa: E402
from run_all import figure, one_core  # noqa: E402

from core.datasets.controlled import build_controlled  # noqa: E402
from core.retrieval.bm25 import bm25_okapi_scores, chunk_tokens  # noqa: E402
from core.retrieval.chunks import TOKEN_RE, lexical_tokens, search_text  # noqa: E402

SCRIPT = Path(__file__).name


def texts() -> list[tuple[list[str], str]]:
    """Per instance of ``controlled-200``: its passages' texts and its question."""
    data = build_controlled("controlled-200", seed=42)
    return [([p.text for p in inst.passages], inst.question) for inst in data.instances]


def workload(raw: list[tuple[list[str], str]]) -> list[tuple[list[list[str]], list[str]]]:
    """The texts tokenized as the reference's users would (:func:`lexical_tokens`)."""
    return [([lexical_tokens(t) for t in docs], lexical_tokens(q)) for docs, q in raw]


def ours_from_text(raw) -> list[np.ndarray]:
    """The retriever's whole path: its tokenizer (:func:`chunk_tokens`), then the scores."""
    return [
        bm25_okapi_scores(
            [chunk_tokens(search_text(t), TOKEN_RE) for t in docs],
            chunk_tokens(search_text(q), TOKEN_RE),
        )
        for docs, q in raw
    ]


def load_bm25s(path: str | None):
    """bm25s, from ``path`` / ``BM25S_PATH`` when given; None when not installed."""
    return load_peer("bm25s", path, "BM25S_PATH")


def ours(work) -> list[np.ndarray]:
    """The tool's scores of every instance."""
    return [bm25_okapi_scores(corpus, query) for corpus, query in work]


def reference(work) -> list[np.ndarray]:
    """``rank_bm25``'s scores of every instance."""
    from rank_bm25 import BM25Okapi

    return [BM25Okapi(corpus).get_scores(query) for corpus, query in work]


def with_bm25s(bm25s, work) -> list[np.ndarray]:
    """``bm25s``'s scores of every instance (an index per instance, as the retriever needs)."""
    out = []
    for corpus, query in work:
        index = bm25s.BM25(k1=1.5, b=0.75)
        index.index(corpus, show_progress=False)
        out.append(index.get_scores(query))
    return out


def check_equal(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    """Raise unless the tool's scores are ``rank_bm25``'s, bit for bit."""
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if not np.array_equal(a, b):
            raise SystemExit(f"BM25 differs from rank_bm25 on instance {k}")


def _ratios(t: dict) -> tuple[list[float], list[float]]:
    cpu = [a / b for a, b in zip(t["cpu_a"], t["cpu_b"], strict=True)]
    wall = [a / b for a, b in zip(t["wall_a"], t["wall_b"], strict=True)]
    return cpu, wall


def results(repeats: int = 5, bm25s_path: str | None = None) -> list[dict]:
    """Tool / peer ratios of CPU time (informational) and the times themselves."""
    raw = texts()
    work = workload(raw)
    bm25s = load_bm25s(bm25s_path)
    what = f"BM25 index + scores, {len(work)} instances of controlled-200, one core"
    whole = f"BM25 tokenize + index + scores, {len(work)} instances of controlled-200, one core"
    figs = []
    with one_core():
        reference_scores = reference(work)
        check_equal(ours(work), reference_scores)
        check_equal(ours_from_text(raw), reference_scores)
        t = alternating(lambda: ours_from_text(raw), lambda: reference(workload(raw)), repeats)
        cpu, _ = _ratios(t)
        figs.append(
            figure(
                f"{whole}: the retriever's path / rank_bm25 after the regular-expression "
                "tokenizer, CPU time",
                cpu,
                "x",
                SCRIPT,
            )
        )
        t = alternating(lambda: ours(work), lambda: reference(work), repeats)
        cpu, wall = _ratios(t)
        figs += [
            figure(f"{what}: tool / rank_bm25 (scores bit for bit), CPU time", cpu, "x", SCRIPT),
            figure(f"{what}: tool / rank_bm25, wall time", wall, "x", SCRIPT),
            figure(f"{what}: tool, CPU", t["cpu_a"], "s", SCRIPT),
            figure(f"{what}: rank_bm25, CPU", t["cpu_b"], "s", SCRIPT),
        ]
        if bm25s is not None:
            with_bm25s(bm25s, work)  # untimed: imports, first calls
            t = alternating(
                lambda: ours_from_text(raw), lambda: with_bm25s(bm25s, workload(raw)), repeats
            )
            figs.append(
                figure(
                    f"{whole}: the retriever's path / bm25s {getattr(bm25s, '__version__', '?')} "
                    "after the regular-expression tokenizer, CPU time",
                    _ratios(t)[0],
                    "x",
                    SCRIPT,
                )
            )
            t = alternating(lambda: ours(work), lambda: with_bm25s(bm25s, work), repeats)
            cpu, wall = _ratios(t)
            version = getattr(bm25s, "__version__", "?")
            figs += [
                figure(f"{what}: tool / bm25s {version}, CPU time", cpu, "x", SCRIPT),
                figure(f"{what}: tool / bm25s {version}, wall time", wall, "x", SCRIPT),
                figure(f"{what}: bm25s {version}, CPU", t["cpu_b"], "s", SCRIPT),
            ]
    return figs


def main(argv: list[str] | None = None) -> int:
    """Print the figures."""
    return peer_main(argv, results, "bm25s", __doc__)


if __name__ == "__main__":
    sys.exit(main())
