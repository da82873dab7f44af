"""The fan-in rows' queries against the previous implementation (issue 17 item 6).

:func:`core.store.fanin_rows.fanin_rows` reads the answer scores by position when the score
rows pair up with the predictions row by row (every pair's key checked), else by key. The
reference below is the previous implementation written out: its query, and its score rows
keyed by (run, instance rowid, condition) matched with a pandas merge. Every column of every
row must be equal (NaN where a score is NULL or has no row), on stores whose score rows pair
up by position and on stores where they do not (missing, reordered). One change of meaning since
(issue 36.1): a retrieved / oracle prediction without stored ``input_passage_ids`` has no pack
(ER / EP missing), where the previous query measured an empty pack (ER = EP = 0); the reference
carries that change.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import build_release_store
from test_fanin_fast import _random_store

from core.fanin.metrics import fanin_store
from core.fanin.stats import METRIC_SCALE, StoreSummaries, _group_items, _pack_items
from core.store import Store
from core.store.fanin_rows import (
    _SCORES,
    _WHITESPACE,
    CONDITION_CODES,
    _read_scores,
    fanin_rows,
)
from core.types import Dataset, Instance, Passage

CONDS = ("no_evidence", "full_context", "retrieved", "oracle")

# The previous query (core/store/fanin_rows.py before the scores were read by position).
_OLD_SQL = """
WITH sel AS (
    SELECT run_id, dataset_id, list_position($runs, run_id) - 1 AS run_no FROM runs
    WHERE list_contains($runs, run_id)
),
gold AS (
    SELECT dataset_id, instance_id, gold_ids,
           len(list_filter(docs, lambda x, i: list_position(docs, x) = i)) AS fan_in
    FROM (SELECT dataset_id, instance_id, list(passage_id) AS gold_ids, list(doc_id) AS docs
          FROM passages WHERE is_gold AND dataset_id IN (SELECT dataset_id FROM sel)
          GROUP BY ALL)
),
inst AS (
    SELECT i.dataset_id, i.instance_id, i.ord, i.rowid AS inst_row,
           dense_rank() OVER (ORDER BY i.instance_id) - 1 AS code,
           coalesce(g.gold_ids, []) AS gold_ids, coalesce(g.fan_in, 0) AS fan_in
    FROM instances i LEFT JOIN gold g USING (dataset_id, instance_id)
    WHERE i.dataset_id IN (SELECT dataset_id FROM sel){only}
),
pred AS {materialized} (
    SELECT r.run_no, r.dataset_id AS dataset, i.code, i.ord, i.inst_row, i.fan_in, i.gold_ids,
           p.condition, p.input_passage_ids, p.cited_ids, p.error
    FROM predictions p
    JOIN sel r USING (run_id)
    JOIN inst i ON i.dataset_id = r.dataset_id AND i.instance_id = p.instance_id
    WHERE p.variant = ''
),
paired AS ({paired}),
packed AS (
    SELECT *,
           CASE WHEN condition IN ('retrieved', 'oracle') THEN input_passage_ids
                WHEN condition = 'full_context' THEN coalesce(cited_ids, [])
           END AS pack
    FROM paired
    WHERE condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')
)
SELECT run_no,
       CASE condition WHEN 'full_context' THEN 0 WHEN 'no_evidence' THEN 1
                      WHEN 'oracle' THEN 2 ELSE 3 END::TINYINT AS cond,
       code::INTEGER AS code, ord, inst_row, fan_in::INTEGER AS fan_in,
       (error IS NOT NULL AND length(trim(error, $ws)) > 0) AS err,
       pack IS NOT NULL AND len(gold_ids) > 0 AS has_pack,
       coalesce(len(list_filter(gold_ids, lambda g: list_contains(pack, g))), 0)::INTEGER
           AS n_hits,
       len(gold_ids)::INTEGER AS n_gold,
       coalesce(len(list_filter(pack, lambda x, i: list_position(pack, x) = i)), 0)::INTEGER
           AS n_pack
FROM packed
"""

_OLD_SCORES_SQL = """
SELECT list_position($runs, s.run_id) - 1 AS run_no, i.rowid AS inst_row,
       CASE s.condition WHEN 'full_context' THEN 0 WHEN 'no_evidence' THEN 1
                        WHEN 'oracle' THEN 2 ELSE 3 END::TINYINT AS cond,
       s.em_strict, s.f1_strict, s.em_relaxed, s.f1_relaxed, s.soft_correct
FROM scores s
JOIN runs r ON r.run_id = s.run_id
JOIN instances i ON i.dataset_id = r.dataset_id AND i.instance_id = s.instance_id
WHERE list_contains($runs, s.run_id) AND s.variant = ''
      AND s.condition IN ('no_evidence', 'full_context', 'retrieved', 'oracle')
"""

_OLD_PAIRED = """
    SELECT * FROM pred
    WHERE (SELECT count(DISTINCT dataset) FROM pred) <> 1
       OR code IN (SELECT code FROM pred GROUP BY code
                   HAVING count(DISTINCT run_no) = (SELECT count(DISTINCT run_no) FROM pred))
"""


def _previous(store: Store, run_ids, allowed=None, pair=False) -> pd.DataFrame:
    """The previous implementation's rows, scores matched by key (a pandas merge)."""
    only = (
        ""
        if allowed is None
        else (" AND (i.dataset_id, i.instance_id) IN (SELECT (unnest($ok_ds), unnest($ok_ids)))")
    )
    ids = list(dict.fromkeys(run_ids))
    params = {"runs": ids, "ws": _WHITESPACE}
    if allowed is not None:
        params["ok_ds"] = list(allowed["dataset"])
        params["ok_ids"] = list(allowed["instance_id"])
    with store.connect(read_only=True) as con:
        n_runs = con.execute(
            "SELECT count(*) FROM runs WHERE list_contains(?, run_id)", [ids]
        ).fetchall()[0][0]
        pair = pair and n_runs > 1
        sql = _OLD_SQL.format(
            only=only,
            materialized="MATERIALIZED" if pair else "",
            paired=_OLD_PAIRED if pair else "SELECT * FROM pred",
        )
        rows = con.sql(sql, params=params).df()
        scores = con.sql(_OLD_SCORES_SQL, params={"runs": ids}).df()
    out = rows.merge(scores, on=["run_no", "inst_row", "cond"], how="left", validate="1:1")
    return _sorted(out.drop(columns=["inst_row"]))


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    return df.sort_values(["run_no", "code", "cond"]).reset_index(drop=True)


def _current(store: Store, run_ids, allowed=None, pair=False) -> pd.DataFrame:
    raw = fanin_rows(store, run_ids, allowed=allowed, pair=pair)
    return _sorted(pd.DataFrame({**raw["rows"], **raw["scores"]}))


def _assert_same(store: Store, run_ids, allowed=None, pair=False) -> pd.DataFrame:
    want = _previous(store, run_ids, allowed, pair)
    got = _current(store, run_ids, allowed, pair)
    assert sorted(got.columns) == sorted(want.columns)
    assert len(got) == len(want) > 0
    for col in want.columns:
        a, b = got[col].to_numpy(), want[col].to_numpy()
        if col in _SCORES:
            np.testing.assert_array_equal(a.astype(float), b.astype(float), err_msg=col)
        else:
            np.testing.assert_array_equal(a.astype(np.int64), b.astype(np.int64), err_msg=col)
    return got


def _store(path, *, seed: int = 5, n: int = 80, drop: float = 0.0, shuffle: bool = False):
    """Two runs of one dataset: failed and blank-error calls, NULL scores, duplicate ids.

    Args:
        drop: share of predictions without a score row.
        shuffle: write the score rows in another order than the predictions.
    """
    rng = np.random.default_rng(seed)
    store = Store(path)
    instances = []
    for i in range(n):
        f = int(rng.integers(0, 6))
        ps = [Passage(f"p{j}", j, "", "g", f"d{i}-{j % 3}", "gold", True) for j in range(f)]
        ps += [Passage(f"x{j}", f + j, "", "x", f"e{i}", "distractor", False) for j in range(2)]
        instances.append(Instance(f"i{i:03d}", f"q{i}", "a", tuple(ps), fan_in=f))
    store.write_dataset(Dataset("ds", "t", "t", {}, tuple(instances)))
    for k in range(2):
        preds, scores = [], []
        for inst in instances:
            ids = [p.passage_id for p in inst.passages]
            for cond in CONDS:
                pack = [str(v) for v in rng.choice(ids, size=int(rng.integers(0, 6)))]
                err = rng.choice([None, None, None, "HTTP 500", " \t"])
                preds.append(
                    {
                        "run_id": f"run{k}",
                        "instance_id": inst.instance_id,
                        "condition": cond,
                        "variant": "",
                        "input_passage_ids": pack,
                        "cited_ids": pack[:2] + pack[:2],
                        "error": err,
                    }
                )
                if rng.random() >= drop:
                    f1 = rng.choice([None, 0.0, 0.5, 1.0, float(rng.random())])
                    scores.append(
                        {
                            "run_id": f"run{k}",
                            "instance_id": inst.instance_id,
                            "condition": cond,
                            "variant": "",
                            "f1_relaxed": f1,
                            "em_strict": None if f1 is None else float(f1 == 1.0),
                            "soft_correct": float(rng.random() < 0.5),
                        }
                    )
        frame = pd.DataFrame(scores)
        if shuffle:
            frame = frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        with store.transaction() as con:
            store.insert_run(
                con,
                {
                    "run_id": f"run{k}",
                    "dataset_id": "ds",
                    "backend": "imported",
                    "model": f"m{k}",
                    "status": "done",
                },
            )
            store.write_predictions(con, pd.DataFrame(preds), replace=False)
            store.write_scores(con, frame, replace=False)
    return store


def _by_position(store: Store, run_ids) -> bool:
    with store.connect(read_only=True) as con:
        con.execute("SELECT count(*) FROM runs").fetchall()  # the open's check is fetched
        return "prow" in _read_scores(con, list(run_ids)).column_names


@pytest.mark.parametrize(
    ("drop", "shuffle", "positional"),
    [(0.0, False, True), (0.1, False, False), (0.0, True, False)],
)
def test_rows_equal_the_previous_query(tmp_path, drop, shuffle, positional):
    store = _store(tmp_path / "s.duckdb", drop=drop, shuffle=shuffle)
    assert _by_position(store, ["run0", "run1"]) is positional
    assert _by_position(store, ["run1"]) is positional
    got = _assert_same(store, ["run0", "run1"], pair=True)
    _assert_same(store, ["run1"])
    _assert_same(store, ["run1", "run0", "run1"])
    allowed = pd.DataFrame({"dataset": ["ds"] * 3, "instance_id": ["i001", "i004", "i007"]})
    _assert_same(store, ["run0", "run1"], allowed=allowed, pair=True)
    # the cases the comparison is meant to cover are there
    assert got["err"].any() and (~got["err"]).any()
    assert got["f1_relaxed"].isna().any() and (got["fan_in"] == 0).any()
    assert (got["n_hits"] > 0).any() and got["has_pack"].any() and (~got["has_pack"]).any()


def test_positional_scores_are_those_of_the_same_prediction(tmp_path):
    # one stored row looked up by its key: the score read by position is that row's
    store = _store(tmp_path / "h.duckdb")
    assert _by_position(store, ["run1"])
    with store.connect(read_only=True) as con:
        inst, cond, want = con.execute(
            "SELECT instance_id, condition, f1_relaxed FROM scores WHERE run_id = 'run1' "
            "AND f1_relaxed NOT IN (0.0, 0.5, 1.0) ORDER BY instance_id, condition LIMIT 1"
        ).fetchall()[0]
        code = con.execute(
            "SELECT count(DISTINCT instance_id) FROM instances WHERE instance_id < ?", [inst]
        ).fetchall()[0][0]
    raw = fanin_rows(store, ["run1"])
    rows = raw["rows"]
    at = np.flatnonzero((rows["code"] == code) & (rows["cond"] == CONDITION_CODES.index(cond)))
    assert len(at) == 1 and 0.0 < want < 1.0
    assert raw["scores"]["f1_relaxed"][at[0]] == want


def test_random_store_of_the_fast_path_tests(tmp_path):
    # errors, unscored rows (score rows keyed, not by position), duplicate packs, pairing
    store = _random_store(tmp_path / "r.duckdb")
    assert not _by_position(store, ["run0", "run1"])
    _assert_same(store, ["run0", "run1"], pair=True)
    _assert_same(store, ["run0", "run1"])


def test_release_fixture_rows_and_results_equal_the_previous_query(tmp_path):
    store = build_release_store(tmp_path / "rel.duckdb")
    runs = store.resolve_runs()
    _assert_same(store, runs, pair=True)
    res = fanin_store(store, runs, "f1_relaxed", n_resamples=200)
    assert res.by_bucket["n"].sum() > 0


def _raw(seed: int, n: int, wide: bool) -> dict:
    """Fan-in rows as :func:`fanin_rows` returns them: random counts, errors, NaN scores."""
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 8, n)
    hits = np.minimum(rng.integers(0, 8, n), gold)
    pack = hits + rng.integers(0, 10**6 if wide else 5, n)
    score = np.where(rng.random(n) < 0.1, np.nan, rng.choice([0.0, 1.0, 1 / 3, 0.7], n))
    rows = {
        "run_no": rng.integers(0, 2, n),
        "cond": rng.integers(0, 4, n).astype(np.int8),
        "code": rng.integers(0, n // 3, n),
        "ord": rng.integers(0, n, n),
        "fan_in": np.where(gold > 0, rng.integers(1, 7, n), 0),
        "err": rng.random(n) < 0.05,
        "has_pack": (gold > 0) & (rng.random(n) < 0.8),
        "n_hits": hits,
        "n_gold": gold,
        "n_pack": pack,
        "f1_relaxed": score,
    }
    runs = pd.DataFrame(
        {"run_no": [0, 1], "run_id": ["a", "b"], "model": ["m", "m"], "dataset_id": ["d", "d"]}
    )
    return {"runs": runs, "rows": rows}


@pytest.mark.parametrize("wide", [False, True])
def test_pack_items_by_distinct_counts_equal_the_per_row_items(wide):
    summ = StoreSummaries(_raw(11, 20_000, wide), ["f1_relaxed"])
    arr = summ._arrays
    missing = np.isnan(summ._score("f1_relaxed")) | arr["err"]
    ok = ~missing
    assert bool(_pack_items(arr, ok, summ.n_fan)) is not wide  # wide counts: per row
    items = summ["f1_relaxed"].items
    # the previous code: ER and EP per row, every metric grouped per row
    hits = np.asarray(arr["n_hits"], dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        er = np.where(arr["has_pack"], hits / arr["n_gold"], np.nan)
        ep = np.where(
            arr["has_pack"], np.where(arr["n_pack"] == 0, 0.0, hits / arr["n_pack"]), np.nan
        )
    for m, v in (("ep", ep), ("er", er)):
        want = _group_items(arr["cell"][ok], v[ok], m, METRIC_SCALE[m], summ.n_fan)
        want = want.sort_values(["sys", "fan_in", "bin"]).reset_index(drop=True)
        got = items[items["metric"] == m].reset_index(drop=True)
        assert len(got) == len(want) > 10 and (got["bin"] == -1).any()
        exact = ["sys", "fan_in", "bin", "count", "vmin", "vmax"]
        pd.testing.assert_frame_equal(got[exact], want[exact], check_dtype=False)
        for col in ("sum", "sumsq"):
            np.testing.assert_allclose(got[col], want[col], rtol=1e-14, atol=0)


def test_the_written_out_white_space_is_every_character_isspace_calls_white_space():
    # a failed call is one with a non-blank error; blank is what str.isspace says
    assert _WHITESPACE == "".join(chr(c) for c in range(0x110000) if chr(c).isspace())
