"""Benchmark: a study's work on 10,000,000 stored predictions (issue 38 item 2).

The store (built once, cached at ``/tmp/bench_study_10m.duckdb``; a file built by another
version of this script, told by its dataset's builder tag :data:`BUILD_TAG`, is rebuilt;
``--rebuild`` forces it) holds one dataset, ``bench-10m``: 625,000 instances made as the 1M
dashboard store's (``bench/bench_dashboard.py``: 4 lengths x 10 decile positions x 4 distractor
settings x 4 reasoning types x fan-in 1..8, one gold passage per fan-in unit plus a
distractor: 3.4M passages) with gold answers drawn as the 1M re-score store's
(``bench/bench_scoring.py::build_store``: numbers, yes/no, entities with and without numeric
suffixes, upper-case aliases), and four runs (``study-m1`` .. ``study-m4``, one per model) of
the four conditions: 10,000,000 predictions whose answers, citations, parse errors and
confidences are drawn as ``bench_scoring._predict`` draws them. The store is written with
DuckDB SQL (``INSERT ... SELECT ... FROM range(n)``, every draw a ``hash`` of the row's
numbers and a salt, so deterministic) into a store made by :class:`core.store.Store` (its
own schema and migrations), its fingerprint and data versions set as the product sets them,
then scored by the product (``score_runs``, untimed) and checked with the product's readers
(the runs' prediction counts, and a few rows scored again by the per-row reference equal to
the stored scores). The CUE-R and DOLCE runs of the dashboard bench (``bench-probes``) are
added, so the dashboard's DOLCE and Interventions pages have data. The two 5M stores for the
merge (``/tmp/bench_study_5m_a.duckdb``: the dataset, runs m1 and m2; ``..._b``: the same
dataset, runs m3 and m4) are copied from it by SQL (same rows).

Figures, each measurement in a fresh process (2 cores, not pinned; the peak RSS is the
child's own ``VmHWM``, as ``bench_scoring._rescore_child`` reads it):

* **re-score every row after a scorer change** (``core.datasets.results.score_runs`` over the
  four runs; every stored ``f1_relaxed`` set to -1 first, untimed, as
  ``bench_scoring._make_stale`` does, so every row is read, scored, compared and rewritten):
  < 30 s, peak RSS < 4 GB;
* **ONCU summary + sample means with CIs** for ``f1_relaxed`` over all runs, aggregated in
  the store as the library and ``report oncu`` compute them at study scale
  (``core.oncu.cells.store_oncu_summary`` -> ``store_sample_means(ci=True)``; the frame path,
  ``Store.analysis_frame`` -> ``oncu_summary``, took 24.5 s and 11.7 GB): < 10 s (peak RSS
  informational);
* **store merge** of the two 5M stores into a new file (``core.store.merge.merge_stores``):
  < 60 s;
* every dashboard page's first load in a fresh process < 3 s and a changed selection < 1.5 s
  on this store, measured by ``bench/bench_dashboard.py``'s own child (``--page NAME`` with
  ``EVIDENCE_DB`` set): in ``run_all.py``'s run (``results(dashboard=True)``, the default),
  and from the command line with ``--dashboard``.

Usage: ``python bench/bench_study.py [--repeats 3] [--rebuild] [--only rescore,oncu,merge]
[--dashboard] [--profile rescore|oncu|merge]``; exit status 1 when a figure misses its bound
(``--profile``: one child under cProfile, the top 25 by cumulative time printed). Building the
stores takes about 3 minutes on 2 cores (printed); disk: the 10M store 3.1 GB, the 5M stores
1.75 GB each, the merge's target (removed after) about 3 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, print_figures  # noqa: E402

DB = Path("/tmp/bench_study_10m.duckdb")
HALVES = (Path("/tmp/bench_study_5m_a.duckdb"), Path("/tmp/bench_study_5m_b.duckdb"))
MERGED = Path("/tmp/bench_study_merged.duckdb")
DATASET = "bench-10m"
#: Bumped whenever :func:`build` changes: a cached store with another tag is rebuilt.
BUILD_TAG = "bench-study-v1"
N_INSTANCES = 625_000
RUNS = ("study-m1", "study-m2", "study-m3", "study-m4")
MODELS = ("qwen2.5:14b", "qwen3:14b", "gemma3:12b", "llama3.1:8b")
CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")
SKILL = {"no_evidence": 0.05, "full_context": 0.55, "retrieved": 0.8, "oracle": 0.9}
ENTITIES = (
    "Model Alpha",
    "Zurich",
    "São Paulo",
    "Café Müller",
    "New York City",
    "The Beatles",
    "Marie Curie",
    "Ernest Hemingway",
    "Lake Geneva",
    "Mount Kilimanjaro",
)
WRONG = (
    "",
    "None",
    "unknown",
    "Lake Geneva",
    "yes",
    "no",
    "1,000",
    "the answer is unclear",
)
RESCORE_BOUND_S, RESCORE_PEAK_GB = 30.0, 4.0
ONCU_BOUND_S = 10.0
MERGE_BOUND_S = 60.0
FIRST_LOAD_S, CHANGED_S = 3.0, 1.5
SCORE_FIELD = "f1_relaxed"


# --------------------------------------------------------------------------- the store
def _u(salt: int, *parts: str) -> str:
    """SQL for a uniform draw in [0, 1) from the hash of ``parts`` and ``salt``."""
    return f"((hash({', '.join(parts)}, {salt}) % 1000000007) / 1000000007.0)"


def _sql_list(values: tuple[str, ...]) -> str:
    return "[" + ", ".join("'" + v.replace("'", "''") + "'" for v in values) + "]"


def _instances_sql(n: int) -> str:
    """``instances`` rows of :data:`DATASET` (metadata as the 1M dashboard store's, gold
    answers drawn as ``bench_scoring.build_store`` draws them)."""
    kind = "(hash(i, 1) % 10)"
    ent = f"{_sql_list(ENTITIES)}[1 + (hash(i, 2) % {len(ENTITIES)})::BIGINT]"
    return f"""
    WITH base AS (
        SELECT range AS i, ['single_hop', 'multi_hop', 'comparison', 'arithmetic'][1 + range % 4]
               AS rtype FROM range({n})
    ), gold AS (
        SELECT i, rtype, CASE
            WHEN rtype = 'arithmetic' OR {kind} < 2
                THEN format('{{:,}}', 1 + (hash(i, 3) % 4999)::BIGINT)
            WHEN {kind} < 3 THEN ['yes', 'no'][1 + (hash(i, 4) % 2)::BIGINT]
            WHEN {kind} < 7 THEN {ent} || ' ' || lpad(((i % 100000))::VARCHAR, 5, '0')
            ELSE {ent} END AS gold,
            CASE WHEN rtype = 'arithmetic' OR {kind} < 2 THEN 'number'
                 WHEN {kind} < 3 THEN 'yes_no' ELSE 'entity' END AS atype
        FROM base
    )
    SELECT '{DATASET}', 'b' || lpad(i::VARCHAR, 7, '0'), i,
           'What is the answer for item ' || lpad(i::VARCHAR, 7, '0') || '?', gold,
           CASE WHEN {_u(5, "i")} < 0.2 THEN [upper(gold)] ELSE []::VARCHAR[] END,
           atype, rtype, [4000, 8000, 16000, 32000][1 + (i // 4) % 4],
           'pos_' || lpad(((i // 16) % 10)::VARCHAR, 2, '0'),
           ['none', 'low', 'high', 'conflicting'][1 + (i // 160) % 4], 'low',
           (i // 640) % 8 + 1, true, 'bench', '{{}}', (i // 640) % 8 + 1
    FROM gold
    """


def _passages_sql(n: int) -> str:
    """``passages`` rows: ``fan_in`` gold passages p0001.. and the distractor p0099."""
    return f"""
    WITH inst AS (SELECT range AS i, (range // 640) % 8 + 1 AS fan FROM range({n})),
    ps AS (SELECT i, fan, unnest(range(1, fan + 2)) AS j FROM inst)
    SELECT '{DATASET}', 'b' || lpad(i::VARCHAR, 7, '0'),
           CASE WHEN j <= fan THEN 'p' || lpad(j::VARCHAR, 4, '0') ELSE 'p0099' END,
           j - 1,
           CASE WHEN j <= fan THEN 'Item ' || i || ' part ' || j ELSE 'Item ' || (i + 1) END,
           CASE WHEN j <= fan THEN 'Part ' || j || ' of code ' || i || '.'
                ELSE 'A distractor passage.' END,
           CASE WHEN j <= fan THEN 'd' || i || '.' || j ELSE 'e' || i END,
           CASE WHEN j <= fan THEN 'gold' ELSE 'distractor' END, j <= fan, NULL
    FROM ps
    """


def _predictions_sql(run_no: int, run: str, cond_no: int, cond: str) -> str:
    """One run's predictions of one condition, drawn as ``bench_scoring._predict`` draws."""
    skill = SKILL[cond]
    s = f"{run_no * 10 + cond_no} * 100"  # the salt base of this (run, condition)

    def u(k: int) -> str:
        return _u(0, "i.ord", f"{s} + {k}")

    pick = f"{_sql_list(WRONG)}[1 + (hash(i.ord, {s} + 9) % 9)::BIGINT]"
    ent = f"{_sql_list(ENTITIES)}[1 + (hash(i.ord, {s} + 10) % {len(ENTITIES)})::BIGINT]"
    wrong = f"coalesce({pick}, {ent})"  # the ninth choice: a random entity
    other = f"'p' || lpad((41 + hash(i.ord, {s} + 11) % 19)::VARCHAR, 4, '0')"
    if cond == "no_evidence":
        cited = "[]::VARCHAR[]"
        shown = "[]::VARCHAR[]"
    else:
        good = (
            f"CASE WHEN {u(4)} < 0.7 THEN gold_ids ELSE gold_ids[1:1] END"
            f" || CASE WHEN {u(5)} < 0.2 THEN [{other}] ELSE []::VARCHAR[] END"
        )
        cited = (
            f"CASE WHEN {u(3)} < {skill} THEN {good} "
            f"WHEN {u(6)} < 0.5 THEN [{other}] ELSE []::VARCHAR[] END"
        )
        shown = "gold_ids" if cond == "oracle" else "list_append(gold_ids, 'p0099')"
    # a normal draw (Box-Muller) for the confidence, clipped to [0, 1]
    normal = f"sqrt(-2 * ln(1 - {u(7)})) * cos(2 * pi() * {u(8)})"
    return f"""
    WITH src AS (
        SELECT i.instance_id, i.ord, i.gold_answer AS gold,
               list_transform(range(1, i.fan_in + 1),
                              lambda j: 'p' || lpad(j::VARCHAR, 4, '0')) AS gold_ids
        FROM instances i WHERE i.dataset_id = '{DATASET}'
    )
    SELECT '{run}', instance_id, '{cond}', '',
           {shown},
           CASE WHEN {u(1)} < {skill * 0.6} THEN gold
                WHEN {u(1)} < {skill} THEN CASE WHEN contains(gold, ' ')
                    THEN regexp_replace(gold, ' [^ ]*$', '') || '!' ELSE lower(gold) || '.0' END
                ELSE {wrong} END,
           {cited},
           CASE WHEN {u(12)} < 0.9 THEN greatest(0, least(1, 0.7 + 0.2 * {normal})) END,
           CASE WHEN {u(2)} < 0.003 THEN 'invalid JSON' END,
           200 + 800 * {u(13)}
    FROM src i ORDER BY ord
    """


_PRED_COLUMNS = (
    "run_id, instance_id, condition, variant, input_passage_ids, answer, cited_ids, "
    "confidence, parse_error, latency_ms"
)


def build(path: Path = DB, n: int = N_INSTANCES) -> None:
    """Write the 10M store at ``path`` (see the module docstring), score it, check it."""
    from core.store import Store
    from core.store.schema import DATASET_FINGERPRINT, INSTANCE_COLUMNS, bump_data_version

    for p in (path, Path(f"{path}.wal")):
        p.unlink(missing_ok=True)
    store = Store(path)
    t0 = time.perf_counter()
    with store.transaction() as con:
        con.execute("SET enable_progress_bar = false")
        con.execute(
            "INSERT INTO datasets (dataset_id, name, source, builder, builder_params, "
            "n_instances) VALUES (?, ?, 'bench', ?, ?, ?)",
            [DATASET, DATASET, BUILD_TAG, json.dumps({"n": n}), n],
        )
        cols = ", ".join((*INSTANCE_COLUMNS, "n_gold"))
        con.execute(f"INSERT INTO instances ({cols}) {_instances_sql(n)}")
        con.execute(f"INSERT INTO passages {_passages_sql(n)}")
        con.execute(
            f"UPDATE datasets SET fingerprint = ({DATASET_FINGERPRINT}) WHERE dataset_id = ?",
            [DATASET] * 3,
        )
        bump_data_version(con, datasets=[DATASET])
    print(f"  instances and passages: {time.perf_counter() - t0:.1f} s", flush=True)
    for r, (run, model) in enumerate(zip(RUNS, MODELS, strict=True)):
        t = time.perf_counter()
        with store.transaction() as con:
            con.execute("SET enable_progress_bar = false")
            store.insert_run(
                con,
                {
                    "run_id": run,
                    "dataset_id": DATASET,
                    "backend": "imported",
                    "model": model,
                    "status": "done",
                    "n_planned": 4 * n,
                    "n_done": 4 * n,
                    "kind": "imported",
                    "n_errors": 0,
                },
            )
            for c, cond in enumerate(CONDITIONS):
                sql = _predictions_sql(r + 1, run, c + 1, cond)
                con.execute(f"INSERT INTO predictions ({_PRED_COLUMNS}) {sql}")
            bump_data_version(con, runs=[run])
        print(f"  {run}: {4 * n:,} predictions in {time.perf_counter() - t:.1f} s", flush=True)
    for run in RUNS:  # scored by the product, in a fresh process each (untimed)
        t = time.perf_counter()
        _child("score", run, str(path))
        print(f"  {run} scored in {time.perf_counter() - t:.1f} s", flush=True)
    t = time.perf_counter()
    _small_runs(path)
    print(f"  CUE-R and DOLCE runs: {time.perf_counter() - t:.1f} s", flush=True)
    check(path, n)


def _small_runs(path: Path) -> None:
    """The dashboard bench's CUE-R and DOLCE runs (``bench-probes``)."""
    import bench_dashboard

    from core.store import Store

    bench_dashboard._small_runs(Store(path))


def check(path: Path, n: int = N_INSTANCES) -> None:
    """The product reads the store as valid: every run's prediction count, and a few rows
    scored again by the per-row reference (``score_frame``) equal to the stored scores."""
    from core.scoring.rows import SCORE_COLUMNS, score_frame
    from core.store import Store

    store = Store(path)
    runs = store.runs_frame(live=False).set_index("run_id")
    for run in RUNS:
        got = int(runs.loc[run, "n_predictions"])
        if got != 4 * n:
            raise RuntimeError(f"{run}: {got:,} predictions, expected {4 * n:,}")
    ids = [f"b{i:07d}" for i in sorted({0, 1, 7, 641, 5000, n - 1}) if i < n]
    frame = store.scoring_frame(list(RUNS), instance_ids=ids)
    mine = score_frame(frame)
    with store.connect(read_only=True) as con:
        stored = con.execute(
            "SELECT * FROM scores WHERE list_contains(?, instance_id) "
            "ORDER BY run_id, instance_id, condition, variant",
            [ids],
        ).df()
    keyed = frame[["run_id", "instance_id", "condition", "variant"]].join(mine)
    keyed = keyed.sort_values(["run_id", "instance_id", "condition", "variant"])
    if len(keyed) != len(stored) or len(stored) != 4 * 4 * len(ids):
        raise RuntimeError(f"check: {len(keyed)} rows scored, {len(stored)} stored")
    for c in SCORE_COLUMNS:
        a, b = keyed[c].reset_index(drop=True), stored[c]
        same = (a.isna() & b.isna()) | (a == b)
        if not same.all():
            raise RuntimeError(f"check: stored {c} differs from the reference")
    print(f"  check: {len(RUNS)} runs of {4 * n:,} predictions; {len(stored)} rows re-scored ok")


def _tag(path: Path) -> str | None:
    if not path.exists():
        return None
    import duckdb

    try:
        con = duckdb.connect(str(path), read_only=True)
    except duckdb.Error:
        return None
    try:
        row = con.execute("SELECT builder FROM datasets WHERE name = ?", [DATASET]).fetchone()
    except duckdb.Error:
        return None
    finally:
        con.close()
    return None if row is None else row[0]


def build_halves(big: Path = DB) -> None:
    """The two 5M stores: the dataset and half of the runs each, copied from ``big``."""
    import duckdb

    from core.store import Store
    from core.store.schema import bump_data_version

    for half, runs in zip(HALVES, (RUNS[:2], RUNS[2:]), strict=True):
        for p in (half, Path(f"{half}.wal")):
            p.unlink(missing_ok=True)
        with Store(half).connect():  # the product's schema and migrations
            pass
        con = duckdb.connect(str(half))
        try:
            con.execute("SET enable_progress_bar = false")
            con.execute(f"ATTACH '{big}' AS big (READ_ONLY)")
            con.execute("BEGIN")
            for table in ("datasets", "instances", "passages"):
                con.execute(
                    f"INSERT INTO {table} SELECT * FROM big.{table} WHERE dataset_id = ?",
                    [DATASET],
                )
            for table in ("runs", "predictions", "scores"):
                con.execute(
                    f"INSERT INTO {table} SELECT * FROM big.{table} WHERE list_contains(?, run_id)",
                    [list(runs)],
                )
            bump_data_version(con, datasets=[DATASET], runs=list(runs))
            con.execute("COMMIT")
            con.execute("DETACH big")
        finally:
            con.close()


def ensure_stores(rebuild: bool = False, halves: bool = True) -> None:
    """Build the 10M store (and the 5M halves) unless current ones are cached."""
    if rebuild or _tag(DB) != BUILD_TAG:
        print(f"building {DB} ({4 * len(RUNS) * N_INSTANCES:,} predictions) ...", flush=True)
        t = time.perf_counter()
        build(DB)
        print(f"built {DB} in {time.perf_counter() - t:.0f} s", flush=True)
        for p in HALVES:
            p.unlink(missing_ok=True)
    if halves and (rebuild or not all(_tag(p) == BUILD_TAG for p in HALVES)):
        t = time.perf_counter()
        build_halves(DB)
        print(f"built {HALVES[0]} and {HALVES[1]} in {time.perf_counter() - t:.0f} s")


# --------------------------------------------------------------------------- children
_MARK = "bench_study result: "


def _peak_gb() -> float:
    status = Path("/proc/self/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.M).group(1)) * 1024 / 1e9


def _work(kind: str, arg: str, db: str) -> None:
    """In a child process: one measurement; prints a JSON line (seconds, peak GB, ...)."""
    if kind == "score":
        from core.datasets.results import score_runs
        from core.store import Store

        t0 = time.perf_counter()
        n = score_runs(Store(db), arg.split(","))
        out = {"s": time.perf_counter() - t0, "rows": n}
    elif kind == "oncu":
        from core.oncu.cells import store_oncu_summary, store_sample_means
        from core.store import Store

        store = Store(db)
        t0 = time.perf_counter()
        summary = store_oncu_summary(store, arg.split(","), SCORE_FIELD)
        t1 = time.perf_counter()
        means = store_sample_means(store, arg.split(","), ci=True)
        t2 = time.perf_counter()
        out = {
            "s": t2 - t0,
            "oncu": t1 - t0,
            "means": t2 - t1,
            "rows": int(means["n"].sum()),
            "summary_rows": len(summary),
            "means_rows": len(means),
            "headline": summary["oncu_clipped"].round(4).tolist(),
        }
    elif kind == "merge":
        from core.store.merge import merge_stores

        target = Path(db)
        for p in (target, Path(f"{target}.wal")):
            p.unlink(missing_ok=True)
        t0 = time.perf_counter()
        merge_stores([Path(p) for p in arg.split(",")], target)
        out = {"s": time.perf_counter() - t0}
    else:
        raise ValueError(kind)
    out["peak_gb"] = _peak_gb()
    print("\n" + _MARK + json.dumps(out), flush=True)


def _child(kind: str, arg: str, db: str, profile: Path | None = None) -> dict:
    """Run :func:`_work` in a fresh interpreter (optionally under cProfile); its JSON."""
    code = (
        f"import sys; sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'bench')!r}]; "
        f"import bench_study as b; b._work({kind!r}, {arg!r}, {db!r})"
    )
    cmd = [sys.executable, "-c", code]
    if profile is not None:
        prof = (
            "import cProfile, pstats, sys; "
            f"sys.path[:0] = [{str(ROOT)!r}, {str(ROOT / 'bench')!r}]; "
            "import bench_study as b; p = cProfile.Profile(); "
            f"p.runcall(b._work, {kind!r}, {arg!r}, {db!r}); "
            f"pstats.Stats(p, stream=sys.stderr).sort_stats('cumulative').print_stats(25)"
        )
        cmd = [sys.executable, "-c", prof]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if profile is not None:
        profile.write_text(proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} child failed: {proc.stderr.strip()[-2000:]}")
    # the last marked line (DuckDB's progress bar may share stdout, ending in a carriage return)
    return json.loads(proc.stdout.rsplit(_MARK, 1)[1].splitlines()[0])


def _make_stale(runs: tuple[str, ...] = RUNS) -> None:
    """Every stored ``f1_relaxed`` of the runs set to -1 (untimed), as
    ``bench_scoring._make_stale`` does: the next re-score rewrites every row."""
    import duckdb

    con = duckdb.connect(str(DB))
    try:
        for run in runs:
            con.execute("UPDATE scores SET f1_relaxed = -1 WHERE run_id = ?", [run])
    finally:
        con.close()


# --------------------------------------------------------------------------- figures
def rescore_results(repeats: int) -> list[dict]:
    """Re-score of the 10M predictions after a scorer change: seconds and peak RSS."""
    outs = []
    for _ in range(repeats):
        _make_stale()
        out = _child("score", ",".join(RUNS), str(DB))
        if out["rows"] != 4 * len(RUNS) * N_INSTANCES:
            raise RuntimeError(f"re-scored {out['rows']:,} rows")
        print(f"re-score: {out['s']:.2f} s, peak RSS {out['peak_gb']:.2f} GB", flush=True)
        outs.append(out)
    script = Path(__file__).name
    return [
        figure(
            "re-score 10,000,000 stored predictions after a scorer change (score_runs: every "
            "row read, scored, rewritten), fresh process, 2 cores",
            [o["s"] for o in outs],
            "s",
            script,
            bound=RESCORE_BOUND_S,
        ),
        figure(
            "peak RSS of that re-score (the process's own VmHWM)",
            [o["peak_gb"] for o in outs],
            "GB",
            script,
            bound=RESCORE_PEAK_GB,
        ),
    ]


def oncu_results(repeats: int) -> list[dict]:
    """ONCU summary + sample means with CIs over the 10M predictions, read from the store."""
    outs = []
    for _ in range(repeats):
        out = _child("oncu", ",".join(RUNS), str(DB))
        print(
            f"ONCU path: {out['s']:.2f} s (store_oncu_summary {out['oncu']:.2f}, "
            f"store_sample_means {out['means']:.2f}), {out['rows']:,} rows, "
            f"peak RSS {out['peak_gb']:.2f} GB; headline {out['headline']}",
            flush=True,
        )
        outs.append(out)
    script = Path(__file__).name
    return [
        figure(
            f"ONCU summary + sample means with CIs ({SCORE_FIELD}), 10,000,000 stored "
            "predictions, aggregated in the store (core.oncu.cells), fresh process, 2 cores",
            [o["s"] for o in outs],
            "s",
            script,
            bound=ONCU_BOUND_S,
        ),
        figure(
            "  of which the ONCU summary (store_oncu_summary)",
            [o["oncu"] for o in outs],
            "s",
            script,
        ),
        figure(
            "  peak RSS of the ONCU path (VmHWM)",
            [o["peak_gb"] for o in outs],
            "GB",
            script,
        ),
    ]


def merge_results(repeats: int) -> list[dict]:
    """``store merge`` of the two 5M stores into a new file."""
    outs = []
    inputs = ",".join(str(p) for p in HALVES)
    for _ in range(repeats):
        out = _child("merge", inputs, str(MERGED))
        print(f"merge: {out['s']:.2f} s, peak RSS {out['peak_gb']:.2f} GB", flush=True)
        outs.append(out)
    for p in (MERGED, Path(f"{MERGED}.wal")):
        p.unlink(missing_ok=True)
    script = Path(__file__).name
    return [
        figure(
            "store merge of two 5,000,000-prediction stores (same dataset, two runs each) "
            "into a new file, fresh process, 2 cores",
            [o["s"] for o in outs],
            "s",
            script,
            bound=MERGE_BOUND_S,
        ),
        figure("  peak RSS of the merge (VmHWM)", [o["peak_gb"] for o in outs], "GB", script),
    ]


def dashboard_results(repeats: int) -> list[dict]:
    """Every dashboard page on the 10M store, by ``bench_dashboard``'s own child process."""
    import bench_dashboard as bd

    env = dict(os.environ, EVIDENCE_DB=str(DB), EVIDENCE_NO_DEMO="1")
    script = Path(__file__).name
    figs = []
    for name in bd.PAGES:
        outs = [bd._child(name, 0, env) for _ in range(max(1, repeats))]
        errors = [e for o in outs for e in o["errors"]]
        first = figure(
            f"dashboard {bd.PAGES[name][0]} on 10M, first load (fresh process)",
            [o["first"] for o in outs],
            "s",
            script,
            bound=FIRST_LOAD_S,
        )
        changed = figure(
            f"dashboard {bd.PAGES[name][0]} on 10M, changed selection ({outs[0]['change']})",
            [o["changed"] for o in outs],
            "s",
            script,
            bound=CHANGED_S,
        )
        for fig in (first, changed):
            if errors:
                fig.update(ok=False, error=f"exception: {errors[0][:200]}")
            elif fig["value"] != fig["value"]:
                fig.update(ok=False, error=f"no changed selection: {outs[0]['change']}")
        print(
            f"{name:16} first {first['value']:6.2f} s | changed {changed['value']:6.2f} s"
            + (f"  EXCEPTION {errors[0][:80]}" if errors else ""),
            flush=True,
        )
        figs += [first, changed]
    return figs


PARTS = ("rescore", "oncu", "merge")


def results(
    repeats: int = 3,
    rebuild: bool = False,
    only: tuple[str, ...] = PARTS,
    dashboard: bool = True,
) -> list[dict]:
    """The figures of :data:`PARTS` and, with ``dashboard`` (``run_all.py``'s run), every
    dashboard page on the 10M store; the stores are built first when not cached. Each figure
    is the median of ``repeats`` fresh processes."""
    ensure_stores(rebuild, halves="merge" in only)
    figs: list[dict] = []
    if "rescore" in only:
        figs += rescore_results(repeats)
    if "oncu" in only:
        figs += oncu_results(repeats)
    if "merge" in only:
        figs += merge_results(repeats)
    if dashboard:
        figs += dashboard_results(repeats)
    return figs


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when one misses its bound."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="fresh processes per figure (3)")
    ap.add_argument("--rebuild", action="store_true", help="build the stores again")
    ap.add_argument("--only", default=",".join(PARTS), help=f"subset of {','.join(PARTS)}")
    ap.add_argument(
        "--dashboard",
        action="store_true",
        help="also every dashboard page (run_all.py's run has them)",
    )
    ap.add_argument("--profile", help="cProfile one child (rescore|oncu|merge) to stderr")
    args = ap.parse_args(argv)
    if args.profile:
        ensure_stores(halves=args.profile == "merge")
        if args.profile == "rescore":
            _make_stale()
        kind, arg, db = {
            "rescore": ("score", ",".join(RUNS), str(DB)),
            "oncu": ("oncu", ",".join(RUNS), str(DB)),
            "merge": ("merge", ",".join(str(p) for p in HALVES), str(MERGED)),
        }[args.profile]
        out = Path(f"/tmp/bench_study_profile_{args.profile}.txt")
        print(_child(kind, arg, db, profile=out))
        print(out.read_text())
        return 0
    only = tuple(p for p in args.only.split(",") if p)
    unknown = [p for p in only if p not in PARTS]
    if unknown:
        print(f"error: --only: unknown part(s) {unknown}; choose from {list(PARTS)}")
        return 1
    return print_figures(results(args.repeats, args.rebuild, only, args.dashboard))


if __name__ == "__main__":
    sys.exit(main())
