"""CPU of one engine write batch by part (issue 38 item 4): 1-, 16- and 256-row batches.

Each write is :func:`core.execution.write.write_rows` as the engine's writer makes it (attach,
predictions, cache entries, scoring, scores, the run's progress, commit, detach) on a store in
a temporary folder; ``time.process_time`` is taken around each part. Per batch size: a fresh
run, ``writes`` batches of new keys; the figure is the median over the batches of one round,
and the median of 5 rounds is reported (with min-max of the rounds).

    .venv/bin/python bench/bench_store_writes.py [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import core.execution.write as ew
from core.backends import EmbeddedReader
from core.backends.base import Reply
from core.datasets.controlled import build_controlled
from core.execution.runs import RunSpec, start_run
from core.oncu.conditions import plan_conditions
from core.store import Store

SIZES = {1: 20, 16: 20, 256: 3}  # batch size -> writes a round
CONDS = ("no_evidence", "full_context", "oracle", "retrieved")


class Clock:
    """CPU seconds by part of the current write."""

    def __init__(self) -> None:
        self.parts: dict[str, float] = defaultdict(float)

    def wrap(self, name: str, fn):
        def timed(*a, **kw):
            t = time.process_time()
            try:
                return fn(*a, **kw)
            finally:
                self.parts[name] += time.process_time() - t

        return timed

    def wrap_cm(self, name_in: str, name_out: str, cm_fn):
        @contextmanager
        def timed(*a, **kw):
            t = time.process_time()
            cm = cm_fn(*a, **kw)
            value = cm.__enter__()
            self.parts[name_in] += time.process_time() - t
            try:
                yield value
            except BaseException:
                if not cm.__exit__(*sys.exc_info()):
                    raise
            else:
                t = time.process_time()
                cm.__exit__(None, None, None)
                self.parts[name_out] += time.process_time() - t

        return timed


def _rows(ctx, calls):
    reply = Reply(
        text='{"answer": "a", "evidence_ids": [], "confidence": 0.5}',
        total_duration_ns=1000,
        prompt_tokens=10,
        completion_tokens=3,
    )
    return [ew.prediction_row(ctx, c, reply, False, 5.0) for c in calls]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    full = build_controlled(preset="controlled-200", seed=42, name="bench")
    reader = EmbeddedReader(workers=False)
    results: dict[int, list[dict[str, float]]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.duckdb")
        store.write_dataset(full)
        calls = plan_conditions(full.instances, CONDS)
        clock = Clock()
        for name in ("write_predictions", "write_cache", "write_scores", "record_progress"):
            setattr(store, name, clock.wrap(name, getattr(store, name)))
        store.write_batch = clock.wrap_cm("attach", "commit_detach", store.write_batch)
        scoring = ew.batch_scores
        ew.batch_scores = clock.wrap("scoring", scoring)
        inputs_get = ew.ScoringInputs.get
        ew.ScoringInputs.get = clock.wrap("scoring_inputs", inputs_get)
        try:
            n = 0
            for rnd in range(args.rounds):
                for size, writes in SIZES.items():
                    n += 1
                    run = f"bench-{n}"
                    spec = RunSpec(run, "bench", reader.name, reader.model, {}, {}, CONDS)
                    start_run(store, spec, reader)
                    ctx = ew.WriteContext.of(store, run)
                    inputs = ew.ScoringInputs(ctx.dataset)
                    rows = _rows(ctx, calls[: size * writes])
                    per: list[dict[str, float]] = []
                    for i in range(writes):
                        clock.parts.clear()
                        t = time.process_time()
                        ew.write_rows(
                            store,
                            ctx,
                            rows[i * size : (i + 1) * size],
                            1.0,
                            replace=set(),
                            inputs=inputs,
                        )
                        parts = dict(clock.parts)
                        parts["total"] = time.process_time() - t
                        per.append(parts)
                    keys = {k for p in per for k in p}
                    results[size].append(
                        {k: statistics.median(p.get(k, 0.0) for p in per) for k in keys}
                    )
                print(f"round {rnd + 1} done", file=sys.stderr)
        finally:
            ew.batch_scores = scoring
            ew.ScoringInputs.get = inputs_get
    report = {}
    order = [
        "attach",
        "write_predictions",
        "write_cache",
        "scoring_inputs",
        "scoring",
        "write_scores",
        "record_progress",
        "commit_detach",
        "total",
    ]
    print(f"{'rows':>5} " + " ".join(f"{k[:14]:>14}" for k in order))
    for size, rounds in results.items():
        med = {k: statistics.median(r.get(k, 0.0) for r in rounds) * 1e3 for k in order}
        spread = [min(r["total"] for r in rounds) * 1e3, max(r["total"] for r in rounds) * 1e3]
        report[size] = {"median_ms": med, "total_min_max_ms": spread}
        print(
            f"{size:>5} "
            + " ".join(f"{med[k]:>14.2f}" for k in order)
            + f"   (total {spread[0]:.1f}-{spread[1]:.1f})"
        )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
