"""The fan-in page's fast path (issue 17 items 6, 7): DuckDB summaries, bootstrap over cells.

The reference is computed here from the paper's definitions over the per-instance rows
(:func:`core.fanin.metrics.per_instance`, seed 003 eq. 1 and §3): every point estimate of the fast
path (means, counts, relative degradation, Jaccard, Pearson r) must equal it to 1e-12.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import build_release_store

from core.fanin.metrics import BUCKETS, fanin_analysis, fanin_store, pearson, per_instance
from core.fanin.stats import STRATA, summary_bootstrap
from core.selection import Selection
from core.stats.inference import bootstrap_means
from core.store import Store
from core.store.fanin_rows import _SCORES, _match_scores
from core.types import Dataset, Instance, Passage
from core.views.common import clear_cache, keep_filtered_instances, pair_runs
from core.views.fanin import fanin_result

TOL = 1e-12
CONDS = ("no_evidence", "full_context", "retrieved", "oracle")


def _bucket(f: int) -> str:
    return "single" if f == 1 else ("low" if f <= 3 else "high")


def _reference(rows: pd.DataFrame) -> dict:
    """Point estimates from the definitions, over per-instance rows (pandas only)."""
    per = rows[rows["fan_in"] > 0].copy()
    ok = per[~per["missing"]]
    ref = {"fan_in": {}, "bucket": {}, "rel": {}, "fails": {}}
    for (system, f), g in ok.groupby(["system", "fan_in"]):
        ref["fan_in"][(system, int(f))] = (len(g), g["ac"].mean(), g["er"].mean(), g["ep"].mean())
    ok = ok.assign(bucket=[_bucket(int(f)) for f in ok["fan_in"]])
    for (system, b), g in ok.groupby(["system", "bucket"]):
        ref["bucket"][(system, b)] = (len(g), g["ac"].mean(), g["er"].mean(), g["ep"].mean())
    for system, g in ok.groupby("system"):
        ref["bucket"][(system, "all")] = (len(g), g["ac"].mean(), g["er"].mean(), g["ep"].mean())
        s = g.loc[g["bucket"] == "single", "ac"].mean()
        h = g.loc[g["bucket"] == "high", "ac"].mean()
        ref["rel"][system] = (h - s) / s if s else math.nan
        ref["fails"][system] = set(g.loc[g["ac"] < 33, "instance_id"])
    ref["scored"] = {s: set(g["instance_id"]) for s, g in ok.groupby("system")}
    return ref


def _close(a: float, b: float) -> bool:
    if a is None or b is None:
        return a is b
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return abs(a - b) <= TOL * max(1.0, abs(b))


def _check(res, rows: pd.DataFrame) -> None:
    ref = _reference(rows)
    f = res.by_fan_in
    assert len(f[f["n"] > 0]) == len(ref["fan_in"])
    for r in f[f["n"] > 0].to_dict("records"):
        n, ac, er, ep = ref["fan_in"][(r["system"], r["fan_in"])]
        assert r["n"] == n
        assert _close(r["ac"], ac) and _close(r["er"], er) and _close(r["ep"], ep), r
    b = res.by_bucket
    for r in b[b["n"] > 0].to_dict("records"):
        n, ac, er, ep = ref["bucket"][(r["system"], r["bucket"])]
        assert r["n"] == n
        assert _close(r["ac"], ac) and _close(r["er"], er) and _close(r["ep"], ep), r
    for r in res.degradation.to_dict("records"):
        assert _close(r["rel_degradation"], ref["rel"][r["system"]])
    for r in res.overlap.to_dict("records"):
        a, c = r["system_a"], r["system_b"]
        common = ref["scored"][a] & ref["scored"][c]
        fa, fc = ref["fails"][a] & common, ref["fails"][c] & common
        assert r["n_common"] == len(common)
        want = len(fa & fc) / len(fa | fc) if fa | fc else math.nan
        assert _close(r["jaccard"], want)
    pts = b[(b["condition"] == "retrieved") & (b["bucket"] != "all")]
    want = pearson(pts["er"], pts["ac"], n_resamples=10)["r"]
    assert _close(res.correlation["er_ac"]["r"], want)


def _random_store(path, seed: int = 3, n: int = 120, runs: int = 2) -> Store:
    """Instances with fan-in 0..6, packs with duplicates, failed calls and unscored rows."""
    rng = np.random.default_rng(seed)
    store = Store(path)
    instances = []
    for i in range(n):
        f = int(rng.integers(0, 7))
        ps = [
            Passage(f"p{j}", j, "", "g", f"d{i}-{j // 2 if j % 3 == 0 else j}", "gold", True)
            for j in range(f)
        ]
        ps += [
            Passage(f"p{f + j}", f + j, "", "x", f"x{i}-{j}", "distractor", False) for j in range(3)
        ]
        instances.append(Instance(f"i{i:03d}", f"q{i}", "a", tuple(ps), fan_in=f))
    store.write_dataset(Dataset("rand", "t", "t", {}, tuple(instances)))
    for k in range(runs):
        preds, scores = [], []
        for inst in instances:
            if k and rng.random() < 0.05:
                continue  # an instance the second run lacks: pairing drops it
            ids = [p.passage_id for p in inst.passages]
            for cond in CONDS:
                pack = list(rng.choice(ids, size=int(rng.integers(0, 5))))
                err = "HTTP 500" if rng.random() < 0.04 else (" " if rng.random() < 0.03 else None)
                preds.append(
                    {
                        "run_id": f"run{k}",
                        "instance_id": inst.instance_id,
                        "condition": cond,
                        "variant": "",
                        "input_passage_ids": pack,
                        "cited_ids": pack[:2],
                        "error": err,
                    }
                )
                f1 = float(rng.choice([0.0, 0.25, 1.0, rng.random()]))
                if rng.random() > 0.03:
                    scores.append(
                        {
                            "run_id": f"run{k}",
                            "instance_id": inst.instance_id,
                            "condition": cond,
                            "variant": "",
                            "f1_relaxed": f1,
                            "em_strict": float(f1 == 1.0),
                        }
                    )
        with store.transaction() as con:
            store.insert_run(
                con,
                {
                    "run_id": f"run{k}",
                    "dataset_id": "rand",
                    "backend": "imported",
                    "model": f"m{k}",
                    "status": "done",
                },
            )
            store.write_predictions(con, pd.DataFrame(preds), replace=False)
            store.write_scores(con, pd.DataFrame(scores), replace=False)
    return store


@pytest.mark.parametrize("field", ["f1_relaxed", "em_strict"])
def test_store_path_equals_the_definitions_on_a_random_store(tmp_path, field):
    store = _random_store(tmp_path / "r.duckdb")
    res = fanin_store(store, ["run0", "run1"], field, n_resamples=200)
    rows = per_instance(store.fanin_frame(["run0", "run1"]), field)
    _check(res, rows)
    assert res.n_no_gold == int((rows["fan_in"] == 0).sum()) > 0
    # the frame path gives the same tables (CIs included: same summaries, same draws)
    frame = fanin_analysis(store.fanin_frame(["run0", "run1"]), field, n_resamples=200)
    for name in ("by_fan_in", "by_bucket", "degradation"):
        a, b = getattr(res, name), getattr(frame, name)
        assert list(a["system"]) == list(b["system"])
        num = a.select_dtypes("number").columns
        np.testing.assert_allclose(
            a[num].to_numpy(float), b[num].to_numpy(float), rtol=1e-9, atol=1e-9
        )
    pd.testing.assert_frame_equal(res.attribution, frame.attribution, check_dtype=False)
    pd.testing.assert_frame_equal(
        res.overlap.drop(columns=["crossovers"]),
        frame.overlap.drop(columns=["crossovers"]),
        check_dtype=False,
    )


def test_view_pairs_and_filters_like_the_frame_path(tmp_path):
    store = _random_store(tmp_path / "v.duckdb")
    clear_cache()
    res = fanin_result(store, Selection(dataset="rand", options={"n_resamples": 100}))
    frame = store.fanin_frame(["run0", "run1"])
    common = set(frame[frame["run"] == "run0"]["instance_id"]) & set(
        frame[frame["run"] == "run1"]["instance_id"]
    )
    assert len(common) < frame["instance_id"].nunique()  # pairing drops something
    _check(res, per_instance(frame[frame["instance_id"].isin(common)], "f1_relaxed"))
    flt = fanin_result(
        store, Selection(dataset="rand", filters={"fan_in": (2, 3)}, options={"n_resamples": 100})
    )
    # the old view's frame path: filter the instances, then pair the runs
    old = pair_runs(keep_filtered_instances(store, frame, {"fan_in": (2, 3)}))
    _check(flt, per_instance(old, "f1_relaxed"))
    assert (
        0
        < flt.by_bucket.loc[flt.by_bucket["bucket"] == "all", "n"].sum()
        < (res.by_bucket.loc[res.by_bucket["bucket"] == "all", "n"].sum())
    )


def test_release_fixture_fast_path_equals_the_definitions(tmp_path):
    store = build_release_store(tmp_path / "rel.duckdb")
    runs = store.resolve_runs()
    res = fanin_store(store, runs, "f1_relaxed", n_resamples=200)
    _check(res, per_instance(store.fanin_frame(runs), "f1_relaxed"))
    assert res.by_bucket["n"].sum() > 0


def _frame(seed: int = 0, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        f = int(rng.integers(1, 8))
        gold = [f"g{j}" for j in range(f)]
        for cond in CONDS:
            pack = [g for g in gold if rng.random() < 0.6] + ["x"] * int(rng.integers(0, 3))
            rows.append(
                {
                    "run": "r",
                    "model": "m",
                    "dataset": "d",
                    "instance_id": f"i{i}",
                    "condition": cond,
                    "input_passage_ids": pack,
                    "cited_ids": pack[:1],
                    "gold_ids": gold,
                    "fan_in": f,
                    "f1_relaxed": float(rng.choice([1.0, rng.random()])),
                }
            )
    return pd.DataFrame(rows)


def test_cis_do_not_depend_on_row_order_or_fan_in_dtype():
    frame = _frame()
    a = fanin_analysis(frame, n_resamples=300)
    shuffled = frame.sample(frac=1.0, random_state=7).reset_index(drop=True)
    shuffled["fan_in"] = shuffled["fan_in"].astype(float)
    b = fanin_analysis(shuffled, n_resamples=300)
    for name, key in (
        ("by_fan_in", ["system", "fan_in"]),
        ("by_bucket", ["system", "bucket"]),
        ("degradation", ["system"]),
    ):
        x = getattr(a, name).set_index(key).sort_index()
        y = getattr(b, name).set_index(key).sort_index()
        num = x.select_dtypes("number").columns
        np.testing.assert_allclose(
            x[num].to_numpy(float), y[num].to_numpy(float), rtol=1e-12, atol=1e-12
        )
    assert a.correlation["er_ac"]["ci_low"] == pytest.approx(b.correlation["er_ac"]["ci_low"])


def test_the_tables_bootstraps_on_two_threads_equal_those_made_one_by_one(monkeypatch):
    # fanin_from_summaries draws every cell's bootstrap up front on two threads (issue 38);
    # each is a function of its items, resamples and seed, so the tables are bit for bit
    # those of the draws made one at a time, as each table asks
    from core.fanin.cells import CellStats

    frame = _frame(seed=5)
    two = fanin_analysis(frame, n_resamples=300)
    monkeypatch.setattr(CellStats, "prefetch_tables", lambda self: None)
    one = fanin_analysis(frame, n_resamples=300)
    for name in ("by_fan_in", "by_bucket", "degradation"):
        pd.testing.assert_frame_equal(getattr(two, name), getattr(one, name), check_exact=True)
    assert two.correlation == one.correlation


def _items(values: np.ndarray, scale: float = 1.0) -> dict:
    from core.fanin.stats import item_bins

    bins = item_bins(values, scale)
    df = pd.DataFrame({"bin": bins, "v": values})
    g = df.groupby("bin", sort=True)["v"]
    return {
        "bin": np.array(sorted(set(bins))),
        "count": g.size().to_numpy(float),
        "sum": g.sum().to_numpy(float),
        "sumsq": g.apply(lambda s: (s**2).sum()).to_numpy(),
        "vmin": g.min().to_numpy(float),
        "vmax": g.max().to_numpy(float),
    }


def test_exact_bootstrap_of_binary_values_has_the_binomial_distribution():
    v = np.array([1.0] * 30 + [0.0] * 70)
    mean, draws, how = summary_bootstrap(_items(v), 20000, 42)
    assert how == "exact" and mean == pytest.approx(0.3, abs=1e-15)
    # resampled mean ~ Binomial(100, 0.3) / 100: mean 0.3, sd sqrt(0.21 / 100)
    assert draws.mean() == pytest.approx(0.3, abs=0.002)
    assert draws.std() == pytest.approx(math.sqrt(0.21 / 100), rel=0.03)
    assert set(np.round(draws * 100, 9)) <= {float(k) for k in range(101)}


def test_stratified_bootstrap_matches_row_resampling():
    rng = np.random.default_rng(1)
    v = np.concatenate([np.ones(400), rng.random(1600) * 0.5])  # continuous: > STRATA values
    mean, draws, how = summary_bootstrap(_items(v), 20000, 42)
    assert how == "stratified" and len(set(v)) > STRATA
    assert mean == pytest.approx(v.mean(), abs=1e-12)
    rows = bootstrap_means(v, 20000, 7)
    # same distribution: quantiles agree within Monte Carlo error (sd of the mean ~0.0065)
    for q in (2.5, 50, 97.5):
        assert np.percentile(draws, q) == pytest.approx(np.percentile(rows, q), abs=0.0015)
    assert draws.std() == pytest.approx(rows.std(), rel=0.03)


def test_every_bucket_and_pair_is_listed():
    res = fanin_analysis(_frame(n=80), n_resamples=100)
    assert set(res.by_bucket["bucket"]) == {*BUCKETS, "all"}
    systems = list(dict.fromkeys(res.by_bucket["system"]))
    assert list(zip(res.overlap["system_a"], res.overlap["system_b"], strict=True)) == list(
        combinations(systems, 2)
    )


def test_one_cached_entry_serves_every_score_field(tmp_path):
    """The view reads the store once per (runs, filters); each field equals its own path."""
    store = _random_store(tmp_path / "f.duckdb")
    clear_cache()
    for field in ("em_strict", "f1_relaxed", "soft_correct"):
        res = fanin_result(
            store, Selection(dataset="rand", score_field=field, options={"n_resamples": 100})
        )
        direct = fanin_store(store, ["run0", "run1"], field, pair=True, n_resamples=100)
        for name in ("by_fan_in", "by_bucket", "degradation", "attribution"):
            pd.testing.assert_frame_equal(
                getattr(res, name), getattr(direct, name), check_dtype=False
            )
    # soft_correct is never written here: every row is missing, none answered
    assert res.by_bucket["n"].sum() == 0 and res.by_bucket["missing"].sum() > 0
    from core.views import common

    assert sum(k[0] == "fanin_summaries" for k in common._CACHE) == 1
    # one run: pairing keeps every instance (the query skips it)
    one = fanin_store(store, ["run1"], pair=True, n_resamples=50)
    _check(one, per_instance(store.fanin_frame(["run1"]), "f1_relaxed"))


def test_group_sums_do_not_drift_with_row_order():
    from core.fanin.stats import _sum_by

    rng = np.random.default_rng(5)
    v = rng.choice([1 / 3, 0.1, 2 / 7, 0.0, 1.0], size=200_000)
    group = rng.integers(0, 3, size=v.size)
    got = _sum_by(group, v, 3)
    for g in range(3):
        want = math.fsum(v[group == g])  # correctly rounded
        assert abs(got[g] - want) <= 2 * np.spacing(want)
        perm = rng.permutation(v.size)
        assert _sum_by(group[perm], v[perm], 3)[g] == pytest.approx(got[g], rel=1e-15, abs=0)
    assert _sum_by(np.array([0, 0]), np.array([0.1, 0.2]), 1)[0] == 0.1 + 0.2


@pytest.mark.parametrize("big", [False, True])
def test_fanin_rows_match_scores_by_run_instance_and_condition(big):
    # the stored scores are matched to the rows by (run, instance rowid, condition): a
    # dense table for small keys, sorted keys for sparse ones; NULL and no row read as NaN
    off = 10**9 if big else 0
    rows = {
        "run_no": np.array([0, 0, 1, 0]),
        "inst_row": np.array([5, 5, 5, 7]) + off,
        "cond": np.array([2, 3, 2, 0], dtype=np.int8),
    }
    scores = pa.table(
        {
            "run_no": [1, 0, 0, 0],
            "inst_row": pa.array([5, 5, 7, 5]) + off,
            "cond": pa.array([2, 3, 1, 2], pa.int8()),
            **{k: [0.25, None, 0.5, 1.0] for k in _SCORES},
        }
    )
    got = _match_scores(rows, scores)
    for k in _SCORES:  # rows: (0,5,oracle) 1.0; (0,5,retrieved) NULL; (1,5,oracle) 0.25;
        np.testing.assert_array_equal(got[k], [1.0, np.nan, 0.25, np.nan])  # (0,7,fc) none
