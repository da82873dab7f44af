"""The faster Conditions & ONCU / Length & position page paths (issue 17 item 6).

What changed, each checked here against the previous code (written out below as the
reference), bit for bit, on a random frame with missing scores, missing key cells, repeated
values and error texts, on a shuffled copy and on the released ONCU outputs:

- paired contrasts: each unit's instances with both conditions scored come from a score-free
  layout computed once per shared frame (:func:`core.oncu.share.paired_columns`), not from a
  pivot per score field;
- calibration: one computation per shared frame and score field for the table and the
  figure, no Python float per confidence;
- sample-level means with CIs: each cell's rows taken in instance order (by integer codes of
  the instance ids), without reordering the whole frame;
- the run resolution of the ONCU views is cached per selection and store version;
- Holm's adjustment and the scaling OLS without statsmodels (statsmodels is the reference).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import build_release_store

from core.figures.oncu import calibration_figure, calibration_table, contrasts_table
from core.oncu.metrics import (
    _error_mask,
    condition_contrast,
    failure_breakdown,
    sample_level_means,
    share_frame,
)
from core.oncu.share import cell_ids, paired_columns
from core.scoring.rows import ANSWER_SCORES, EVIDENCE_SCORES, FAILURE_LABELS
from core.selection import Selection
from core.stats.inference import calibration, mcnemar_exact, multinomial_means, paired_contrast
from core.views.oncu import plain_predictions

_CONDS = ("no_evidence", "full_context", "retrieved", "oracle")


def _frame(seed: int = 5, n_inst: int = 300, missing_id: bool = True) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_inst):
        for run in ("a", "b"):
            for cond in _CONDS:
                f1 = float(
                    rng.choice([0.0, 1.0, 0.5, 1 / 3, np.nan], p=[0.4, 0.35, 0.1, 0.1, 0.05])
                )
                rows.append(
                    {
                        "run": run,
                        "model": "m",
                        "dataset": "d",
                        "instance_id": None
                        if (missing_id and i == 7 and run == "b")
                        else f"i{i:04d}",
                        "condition": cond,
                        "f1_relaxed": f1,
                        "em_strict": float(f1 == 1.0),
                        "ev_f1": float(rng.random()),
                        "confidence": float(rng.random()) if rng.random() > 0.1 else np.nan,
                        "logprob_confidence": np.nan,
                        "error": rng.choice([None, None, "timeout", "  "]),
                        "parse_error": rng.choice([None, "bad json"], p=[0.9, 0.1]),
                    }
                )
    return pd.DataFrame(rows).sample(frac=1.0, random_state=seed).reset_index(drop=True)


# ------------------------------------------------------------------ the previous code
def _old_contrast(df: pd.DataFrame, a: str, b: str, field: str, n: int, method: str) -> list:
    unit = ["run", "model", "dataset"]
    wide = df[[*unit, "instance_id", "condition", field]].pivot_table(
        index=[*unit, "instance_id"], columns="condition", values=field, aggfunc="mean"
    )
    if a not in wide.columns or b not in wide.columns:
        return []
    wide = wide.dropna(subset=[a, b])
    out = []
    for key, w in wide.groupby(level=unit, sort=True):
        x, y = w[a].to_numpy(dtype=float), w[b].to_numpy(dtype=float)
        out.append({**dict(zip(unit, key, strict=True)), **paired_contrast(x, y, n, method=method)})
    return out


def _old_means_order(df: pd.DataFrame) -> dict:
    """Each (unit, condition) cell's score block in frame order (the import order: issue 34
    item 4; the instance-id order of issue 17 item 7 before)."""
    keys = ["run", "model", "dataset", "condition"]
    srt = df
    vals = srt[[c for c in (*ANSWER_SCORES, *EVIDENCE_SCORES) if c in df]].to_numpy(dtype=float)
    return {k: vals[i] for k, i in srt[keys].groupby(keys, dropna=False, sort=True).indices.items()}


def _old_calibration(df: pd.DataFrame, field: str) -> list[dict]:
    rows = []
    for (run, cond), d in df.groupby(["run", "condition"], sort=False):
        correct = (pd.to_numeric(d[field], errors="coerce") >= 0.5).astype(float)
        correct[pd.to_numeric(d[field], errors="coerce").isna()] = np.nan
        conf = pd.to_numeric(d["confidence"], errors="coerce")
        c = calibration(list(conf.to_numpy(float)), list(correct.to_numpy(float)))
        rows.append(
            {"run": run, "condition": cond, "n": c["n"], "brier": c["brier"], "ece": c["ece"]}
        )
    return rows


def _old_failure_breakdown(df: pd.DataFrame) -> pd.DataFrame:
    keys = ["run", "model", "dataset", "condition"]
    lab = df[keys + ["failure_label"]]
    lab = lab[lab["failure_label"].notna()]
    counts = lab.groupby(keys + ["failure_label"], dropna=False).size().unstack("failure_label")
    counts = counts.reindex(columns=list(FAILURE_LABELS), fill_value=0).fillna(0)
    n = counts.sum(axis=1)
    pct = counts.div(n, axis=0) * 100.0
    pct.insert(0, "n", n.astype(int))
    failed = df.loc[_error_mask(df["error"]), keys].groupby(keys, dropna=False).size()
    pct.insert(1, "missing", failed.reindex(pct.index, fill_value=0).astype(int))
    pct.columns.name = None
    return pct.reset_index()


# ------------------------------------------------------------------------------ tests
def test_failure_breakdown_equals_the_previous_groupby():
    df = _frame()
    rng = np.random.default_rng(1)
    df["failure_label"] = np.where(
        df["condition"] == "no_evidence",
        None,
        rng.choice(["success", "localization", "parse", "integration"], len(df)),
    )
    df.loc[df.index[:5], "run"] = None  # a missing unit cell is a cell of its own
    df.loc[df.index[5:9], "failure_label"] = "not a label"  # dropped, as before
    want = _old_failure_breakdown(df)
    pd.testing.assert_frame_equal(failure_breakdown(share_frame(df.copy())), want, check_exact=True)
    pd.testing.assert_frame_equal(failure_breakdown(df), want, check_exact=True)
    # hand-checked: run a, oracle: the share of 'success' among its rows with a known label
    d = df[(df["run"] == "a") & (df["condition"] == "oracle")]
    row = want[(want["run"] == "a") & (want["condition"] == "oracle")].iloc[0]
    known = d["failure_label"].isin(FAILURE_LABELS)
    assert row["n"] == known.sum() and row["missing"] == _error_mask(d["error"]).sum()
    assert row["success"] == pytest.approx(
        100 * (d["failure_label"] == "success").sum() / known.sum(), abs=1e-12
    )


@pytest.mark.parametrize("field", ["f1_relaxed", "em_strict"])
def test_contrasts_equal_the_previous_pivot_bit_for_bit(field):
    df = _frame()
    shared = share_frame(df.copy())
    for a, b in (("retrieved", "full_context"), ("full_context", "no_evidence")):
        for method in ("resample", "multinomial"):
            want = _old_contrast(df, a, b, field, 400, method)
            got = condition_contrast(shared, a, b, field, n_resamples=400, ci_method=method)
            assert len(got) == len(want) == 2
            for g, w in zip(got.to_dict("records"), want, strict=True):
                for k, v in w.items():
                    assert g[k] == v or (v != v and g[k] != g[k]), (k, g[k], v)


def test_paired_columns_leave_out_missing_keys_and_unscored_sides():
    df = _frame()
    got = paired_columns(df, ["run", "model", "dataset"], "f1_relaxed", "oracle", "retrieved")
    assert [k for k, _, _ in got] == [("a", "m", "d"), ("b", "m", "d")]
    for key, a, b in got:
        sub = df[(df["run"] == key[0]) & df["instance_id"].notna()]
        wide = sub.pivot_table(index="instance_id", columns="condition", values="f1_relaxed")
        wide = wide.dropna(subset=["oracle", "retrieved"])
        assert np.array_equal(a, wide["oracle"].to_numpy()) and len(a) < 300
        assert np.array_equal(b, wide["retrieved"].to_numpy())
    # a condition without any scored value: no contrast at all (the pivot drops its column)
    none = df.assign(f1_relaxed=np.where(df["condition"] == "oracle", np.nan, df["f1_relaxed"]))
    assert paired_columns(none, ["run"], "f1_relaxed", "oracle", "retrieved") == []
    # an instance with two rows of one condition: the caller pivots (averaging them)
    twice = pd.concat([df, df.head(1)], ignore_index=True)
    assert paired_columns(twice, ["run"], "f1_relaxed", "oracle", "retrieved") is None
    c = condition_contrast(twice, "retrieved", "full_context")
    assert list(c["n"]) == list(condition_contrast(df, "retrieved", "full_context")["n"])


def test_contrast_hand_checked():
    rows = [
        {"run": "r", "instance_id": f"i{i}", "condition": c, "em_strict": v}
        for i, (x, y) in enumerate([(1.0, 0.0), (0.0, 0.0), (1.0, 1.0)])
        for c, v in (("retrieved", x), ("full_context", y))
    ]
    df = share_frame(pd.DataFrame(rows))
    row = condition_contrast(df, "retrieved", "full_context", "em_strict").iloc[0]
    # differences 1, 0, 0: mean 1/3, sd 1/sqrt(3) (ddof 1), effect 1/sqrt(3); one discordant
    assert row["n"] == 3 and row["mean"] == pytest.approx(1 / 3, abs=1e-15)
    assert row["effect"] == pytest.approx(1 / math.sqrt(3), abs=1e-12)
    assert row["p_mcnemar"] == 1.0


def test_sample_level_cells_keep_the_previous_canonical_order():
    df = _frame(missing_id=False)
    old = _old_means_order(df)
    new = sample_level_means(df, ci=True, n_resamples=200)
    assert [
        tuple(r[k] for k in ("run", "model", "dataset", "condition"))
        for r in new.to_dict("records")
    ] == list(old)  # sorted cells, as the groupby
    for r in new.to_dict("records"):
        vals = old[(r["run"], r["model"], r["dataset"], r["condition"])]
        assert r["n"] == len(vals)
        want = np.nansum(vals, axis=0) / np.isfinite(vals).sum(axis=0)
        assert [r[c] for c in ("em_strict", "f1_relaxed", "ev_f1")] == want.tolist()
    # the multinomial CIs equal a recomputation on shuffled rows (to the last bits of the
    # binned sums, taken in frame order; index resampling follows the import order, issue
    # 34 item 4: tests/test_oncu_canonical.py)
    shuffled = df.sample(frac=1.0, random_state=2).reset_index(drop=True)
    a = sample_level_means(df, ci=True, n_resamples=200, ci_method="multinomial")
    b = sample_level_means(shuffled, ci=True, n_resamples=200, ci_method="multinomial")
    pd.testing.assert_frame_equal(a, b, rtol=1e-12)


def test_multinomial_counts_equal_np_unique():
    rng = np.random.default_rng(0)
    v = np.concatenate([rng.choice([0.0, -0.0, 1.0, 0.5, np.nan], 5000), rng.random(10)])
    boot, label = multinomial_means(v, 300, 7)
    # the previous implementation, written out: np.unique of the finite values
    x = v + 0.0
    fin = x[np.isfinite(x)]
    cats, counts = np.unique(fin, return_counts=True)
    probs = np.append(counts, x.size - fin.size).astype(float) / x.size
    drawn = np.random.default_rng(7).multinomial(x.size, probs, size=300)[:, : cats.size]
    want = (drawn.astype(float) @ cats) / drawn.sum(axis=1)
    assert label == "multinomial" and np.array_equal(boot, want)


def test_calibration_equals_the_previous_code_and_is_shared():
    df = _frame()
    table = calibration_table(df, score_field="f1_relaxed")
    want = _old_calibration(df, "f1_relaxed")
    got = table[table["confidence"] == "self_reported"]
    assert len(got) == len(want) == 8
    key = {(w["run"], w["condition"]): w for w in want}
    for r in got.to_dict("records"):
        w = key[(r["run"], r["condition"])]
        assert (r["n"], r["brier"], r["ece"]) == (w["n"], w["brier"], w["ece"])
    # hand-checked: confidences 0.9, 0.2 for outcomes 1, 0 -> Brier (0.01 + 0.04) / 2
    c = calibration(np.array([0.9, 0.2]), np.array([1.0, 0.0]))
    assert c["brier"] == pytest.approx(0.025, abs=1e-15) and c["n"] == 2
    assert mcnemar_exact(np.array([1.0, 1.0, 0.0]), np.array([0.0, 1.0, 1.0]))["p"] == 1.0
    shared = share_frame(df.copy())
    fig, bins = calibration_figure(shared, score_field="f1_relaxed")
    bins["count"] = -1  # a copy: the shared memo is intact
    pd.testing.assert_frame_equal(calibration_table(shared, score_field="f1_relaxed"), table)
    assert (calibration_figure(shared, score_field="f1_relaxed")[1]["count"] >= 0).all()


def test_cell_ids_order_missing_values_last():
    df = pd.DataFrame({"a": ["y", None, "x", "y"], "b": [2, 1, 1, 2]})
    ids, index = cell_ids(df, ["a", "b"])
    assert ids.tolist() == [1, 2, 0, 1]
    assert index.get_level_values("a").tolist()[:2] == ["x", "y"]


@pytest.mark.parametrize(
    "values", [["x"] * 4, [""] * 3, ["x", "x", None], ["b", "a", "b"], ["x"], []]
)
def test_sorted_codes_of_one_text_value_equal_the_factorize(values):
    """A column holding one value (checked without hashing it) gets the factorize's codes."""
    from core.oncu.share import _sorted_codes

    for col in (
        pd.Series(values, dtype="str"),
        pd.concat([pd.Series(values, dtype="str")] * 3, ignore_index=True),
    ):
        codes, uniques = pd.factorize(col, sort=True, use_na_sentinel=True)
        want = np.where(codes < 0, len(uniques), codes).astype(np.int64)
        got, size = _sorted_codes(col)
        assert size == len(uniques) + 1 and got.dtype == np.int64
        assert np.array_equal(got, want), (values, got, want)


def test_release_store_page_tables_match_the_previous_code(tmp_path):
    store = build_release_store(tmp_path / "release.duckdb", hotpotqa=True)
    frame = plain_predictions(store, Selection())
    assert plain_predictions(store, Selection()) is frame  # one cached frame
    fresh = frame.copy()  # not shared
    for a, b in (("retrieved", "full_context"), ("oracle", "retrieved")):
        want = _old_contrast(fresh, a, b, "f1_relaxed", 300, "auto")
        got = condition_contrast(frame, a, b, "f1_relaxed", n_resamples=300)
        assert len(got) == len(want) > 0
        for g, w in zip(got.to_dict("records"), want, strict=True):
            assert all(g[k] == v or (v != v and g[k] != g[k]) for k, v in w.items())
    pd.testing.assert_frame_equal(
        contrasts_table(frame, n_resamples=300), contrasts_table(fresh, n_resamples=300)
    )


def test_holm_is_statsmodels_holm_without_the_import():
    from statsmodels.stats.multitest import multipletests

    from core.stats.inference import holm

    # hand-checked: sorted 0.01 x 3 = 0.03, 0.03 x 2 = 0.06, 0.04 x 1 -> running max 0.06
    assert holm([0.01, 0.04, 0.03]).tolist() == pytest.approx([0.03, 0.06, 0.06], abs=1e-15)
    assert np.isnan(holm([np.nan, 0.2])[0]) and holm([np.nan, 0.2])[1] == 0.2
    rng = np.random.default_rng(3)
    for n in (1, 2, 5, 13):
        for p in (rng.random(n) ** 3, rng.choice([0.01, 0.5, 1.0, 0.049], n)):
            assert np.array_equal(holm(p), multipletests(p, method="holm")[1])


def _statsmodels_ols(y: np.ndarray, x: pd.DataFrame) -> dict:
    """The previous :func:`core.stats.inference.ols`: statsmodels' OLS with an added intercept."""
    import warnings

    from statsmodels.regression.linear_model import OLS
    from statsmodels.tools.tools import add_constant

    yv = pd.Series(np.asarray(y, dtype=float))
    x = x.astype(float).reset_index(drop=True)
    keep = yv.notna() & x.notna().all(axis=1)
    design = add_constant(x[keep], has_constant="add").rename(columns={"const": "intercept"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit = OLS(yv[keep], design).fit()
        return {
            "term": list(design.columns),
            "coef": fit.params.to_numpy(),
            "se": fit.bse.to_numpy(),
            "t": fit.tvalues.to_numpy(),
            "p": fit.pvalues.to_numpy(),
            "r_squared": float(fit.rsquared),
        }


def test_ols_is_statsmodels_ols_without_the_import():
    """Full-rank, rank-deficient (the published distance-from-end term), exactly fitted and
    saturated designs, with NaN rows: every number as statsmodels gives it (1e-12)."""
    from core.stats.inference import ols

    rng = np.random.default_rng(11)
    cases = []
    for n in (3, 4, 7, 40):
        x = pd.DataFrame({"a": rng.normal(size=n), "b": rng.integers(0, 3, n).astype(float)})
        y = 0.3 + 0.5 * x["a"].to_numpy() + rng.normal(scale=0.1, size=n)
        cases.append((y, x))
    pos = np.tile(np.linspace(0.05, 0.95, 10), 4)
    end = pd.DataFrame(
        {
            "length": np.repeat([0.0, 1, 2, 3], 10) - 1.5,
            "pos": pos - pos.mean(),
            "end": (1 - pos) - (1 - pos).mean(),
        }
    )
    cases.append((rng.random(40), end))  # rank-deficient: end = -pos
    cases.append((1.0 + 2.0 * end["length"].to_numpy(), end[["length"]]))  # exact fit
    y = rng.random(12)
    y[[2, 7]] = np.nan
    xs = pd.DataFrame({"a": rng.random(12)})
    xs.loc[4, "a"] = np.nan
    cases.append((y, xs))  # NaN rows dropped
    cases.append((np.array([1.0, 2.0]), pd.DataFrame({"a": [0.0, 1.0]})))  # saturated: df 0
    for y, x in cases:
        got, want = ols(y, x), _statsmodels_ols(y, x)
        table = got["table"]
        assert table["term"].tolist() == want["term"]
        for col in ("coef", "se", "t", "p"):
            np.testing.assert_allclose(
                table[col].to_numpy(), want[col], rtol=1e-12, atol=1e-12, equal_nan=True
            )
        np.testing.assert_allclose(
            got["r_squared"], want["r_squared"], rtol=1e-12, atol=1e-12, equal_nan=True
        )
        assert got["n"] == int((np.isfinite(y) & x.notna().all(axis=1).to_numpy()).sum())


def test_fetch_frame_reads_large_text_on_its_own_cursor_only():
    """The analysis frame's fetch asks DuckDB for ``large_string`` text (no copy into pandas'
    string columns) on its own cursor: the connection it was given keeps Arrow ``string``."""
    import duckdb
    import pyarrow as pa

    from core.store.frames import fetch_frame

    con = duckdb.connect()
    frame = fetch_frame(con, "SELECT 'a' || ? AS txt, NULL::VARCHAR AS empty", [1])
    assert frame["txt"].tolist() == ["a1"] and frame["empty"].tolist() == [None]
    assert frame["empty"].dtype == object  # all-NULL large_string text: None objects
    assert con.sql("SELECT 'a' AS x").to_arrow_table().schema.field("x").type == pa.string()
