"""The faster ONCU page paths (issue 17) give the numbers of the previous pandas code.

``oncu_groups`` now groups the key columns once (integer group ids) and reorders only the
scores; ``sample_level_means``, ``failure_breakdown`` and the length-grid test are computed
once per shared frame; the error flags are read from the present cells only. Each is checked
here against the previous implementation (written out below as the reference) on a random
frame with missing scores, missing key cells and error texts, and on the ONCU release store.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import build_release_store

from core.figures.oncu import calibration_table, contrasts_table
from core.oncu.metrics import (
    DEFAULT_GROUP_KEY,
    _error_mask,
    _is_error,
    failure_breakdown,
    oncu_groups,
    oncu_summary,
    sample_level_means,
    share_frame,
)
from core.selection import Selection
from core.views.oncu import plain_predictions

_CONDS = ("no_evidence", "full_context", "retrieved", "oracle")


def _random_frame(seed: int = 3, n_inst: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_inst):
        meta = {
            "source": "s",
            "model": "m",
            "reasoning_type": rng.choice(["bridge", "comparison", None]),
            "context_length": int(rng.choice([4000, 8000, 16000])),
            "evidence_position": rng.choice(["pos_00", "pos_05", "pos_09"]),
            "evidence_density": "low",
            "distractor_similarity": rng.choice(["low", "high"]),
            "oracle_applicable": bool(rng.random() > 0.03),
            "n_gold": int(rng.integers(0, 3)),
        }
        for run in ("a", "b"):
            for cond in _CONDS:
                f1 = float(
                    rng.choice([0.0, 1.0, 0.5, 1 / 3, np.nan], p=[0.4, 0.35, 0.1, 0.1, 0.05])
                )
                err = rng.choice([None, None, None, "timeout", "  ", ""])
                rows.append(
                    {
                        "run": run,
                        "dataset": "d",
                        "instance_id": f"i{i:04d}",
                        "condition": cond,
                        **meta,
                        "f1_relaxed": f1,
                        "em_strict": float(f1 == 1.0),
                        "ev_f1": float(rng.random()),
                        "confidence": float(rng.random()),
                        "error": err,
                        "parse_error": rng.choice([None, "bad json"], p=[0.9, 0.1]),
                        "failure_label": None
                        if cond == "no_evidence"
                        else rng.choice(["success", "localization", "parse"]),
                    }
                )
    return pd.DataFrame(rows)


def _reference_group_stats(df: pd.DataFrame, field: str, key: list[str]) -> pd.DataFrame:
    """The previous code: the whole key frame reordered by score, grouped in pandas."""
    cols = ["run", "model", "dataset", *[k for k in key if k != "model"]]
    work = df[cols + ["condition"]].copy()
    work["_s"] = pd.to_numeric(df[field], errors="coerce").astype(float)
    work["_inst"] = df["instance_id"]
    work = work.iloc[np.argsort(work["_s"].to_numpy(), kind="stable")]
    gb = work.groupby(cols + ["condition"], dropna=False, sort=True)["_s"]
    out = pd.DataFrame({"mean": gb.mean(), "scored": gb.count(), "rows": gb.size()})
    sizes = work.groupby(cols, dropna=False, sort=True)["_inst"].nunique()
    return out.join(sizes.rename("n_instances"), on=cols)


def _check_groups_match_reference(df: pd.DataFrame, field: str) -> None:
    key = list(DEFAULT_GROUP_KEY)
    groups = oncu_groups(df, field, key)
    ref = _reference_group_stats(df, field, key)
    assert len(groups) > 0
    checked = 0
    for g in groups.to_dict("records"):
        cols = ["run", "model", "dataset", *[k for k in key if k != "model"]]
        idx = tuple(g[c] for c in cols)

        def ref_row(cond: str, idx: tuple = idx) -> pd.Series | None:
            mask = np.ones(len(ref), dtype=bool)
            for level, v in zip(ref.index.names, (*idx, cond), strict=True):
                vals = ref.index.get_level_values(level)
                mask &= pd.isna(vals) if v is None or v != v else (vals == v)
            hit = ref[mask]
            return None if hit.empty else hit.iloc[0]

        c = ref_row(g["condition"])
        assert c is not None
        # bit-identical means (same summation order), identical counts
        assert (g["s_c"] == c["mean"]) or (math.isnan(g["s_c"]) and math.isnan(c["mean"]))
        assert g["n"] == c["rows"] and g["missing"] == c["rows"] - c["scored"]
        assert g["n_instances"] == c["n_instances"]
        for cond, col in (("no_evidence", "s_none"), ("oracle", "s_oracle")):
            r = ref_row(cond)
            want = math.nan if r is None else r["mean"]
            assert (g[col] == want) or (math.isnan(g[col]) and math.isnan(want))
        checked += 1
    assert checked == len(groups)


def test_groups_equal_the_previous_pandas_grouping_on_a_random_frame():
    df = _random_frame()
    _check_groups_match_reference(df, "f1_relaxed")
    # shuffled input: the same numbers to the last bit (canonical order kept)
    shuffled = df.sample(frac=1.0, random_state=1).reset_index(drop=True)
    a = oncu_groups(df, "f1_relaxed")
    b = oncu_groups(shuffled, "f1_relaxed")
    pd.testing.assert_frame_equal(a, b, check_exact=True)


def test_error_mask_is_the_cellwise_rule():
    col = pd.Series([None, "", "  ", "timeout", math.nan, pd.NA, True, 0, "x "], dtype=object)
    assert _error_mask(col).tolist() == [_is_error(x) for x in col]
    assert _error_mask(col).tolist() == [False, False, False, True, False, False, True, False, True]


def test_shared_frame_memos_give_the_same_tables_as_a_fresh_computation():
    df = _random_frame(seed=5, n_inst=150)
    plain = df.copy()
    shared = share_frame(df.copy())
    for kw in (
        {"ci": False},
        {"ci": True, "n_resamples": 300},
        {"ci": True, "n_resamples": 300, "ci_method": "multinomial"},
    ):
        first = sample_level_means(shared, **kw)
        pd.testing.assert_frame_equal(first, sample_level_means(plain, **kw), check_exact=True)
        first["n"] = -1  # a caller modifying its copy does not change the memo
        pd.testing.assert_frame_equal(
            sample_level_means(shared, **kw), sample_level_means(plain, **kw), check_exact=True
        )
    pd.testing.assert_frame_equal(
        failure_breakdown(shared), failure_breakdown(plain), check_exact=True
    )
    for field in ("f1_relaxed", "em_strict"):  # one memoized pivot serves every contrast
        for _ in range(2):
            pd.testing.assert_frame_equal(
                contrasts_table(shared, score_field=field, n_resamples=200),
                contrasts_table(plain, score_field=field, n_resamples=200),
                check_exact=True,
            )
    # one memoized grouping per key serves every score field
    for key in (DEFAULT_GROUP_KEY, ("reasoning_type", "length_bucket"), ("instance_id",)):
        for field in ("f1_relaxed", "em_strict", "f1_relaxed"):
            pd.testing.assert_frame_equal(
                oncu_groups(shared, field, key), oncu_groups(plain, field, key), check_exact=True
            )
    pd.testing.assert_frame_equal(
        oncu_summary(shared, n_resamples=200),
        oncu_summary(plain, n_resamples=200),
        check_exact=True,
    )
    # hand-checked: missing = failed calls (error text not blank) per (run, condition)
    fb = failure_breakdown(plain).set_index(["run", "dataset", "condition"])
    for (run, cond), d in plain[plain["condition"] != "no_evidence"].groupby(["run", "condition"]):
        want = int(sum(isinstance(e, str) and e.strip() != "" for e in d["error"]))
        assert fb.loc[(run, "d", cond), "missing"] == want
    # sample means are the nan-means of each cell; n_parse_error counts "bad json"
    means = sample_level_means(plain)
    for r in means.to_dict("records"):
        d = plain[(plain["run"] == r["run"]) & (plain["condition"] == r["condition"])]
        assert r["f1_relaxed"] == pytest.approx(np.nanmean(d["f1_relaxed"]), abs=1e-12)
        assert r["n_parse_error"] == int((d["parse_error"] == "bad json").sum())


def test_contrasts_and_calibration_read_only_the_columns_they_need():
    df = _random_frame(seed=7, n_inst=120)
    wide = df.assign(question="q" * 50, answer="a")  # text columns the tables never read
    pd.testing.assert_frame_equal(
        contrasts_table(df, n_resamples=200),
        contrasts_table(wide, n_resamples=200),
        check_exact=True,
    )
    cal = calibration_table(df)
    assert set(cal["condition"]) == set(_CONDS)
    d = df[(df["run"] == "a") & (df["condition"] == "oracle")]
    ok = d["f1_relaxed"].notna()
    correct = (d["f1_relaxed"][ok] >= 0.5).astype(float)
    brier = float(np.mean((d["confidence"][ok] - correct) ** 2))
    row = cal[(cal["run"] == "a") & (cal["condition"] == "oracle")].iloc[0]
    assert row["brier"] == pytest.approx(brier, abs=1e-12)


def test_release_store_page_frame_matches_the_previous_grouping(tmp_path):
    store = build_release_store(tmp_path / "release.duckdb", hotpotqa=True)
    frame = plain_predictions(store, Selection())
    assert len(frame) > 0
    _check_groups_match_reference(frame, "f1_relaxed")
    fresh = frame.copy()  # not shared: every table computed anew
    pd.testing.assert_frame_equal(
        sample_level_means(frame), sample_level_means(fresh), check_exact=True
    )
    pd.testing.assert_frame_equal(
        failure_breakdown(frame), failure_breakdown(fresh), check_exact=True
    )
