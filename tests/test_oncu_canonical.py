"""Canonical bootstrap order (issue 17 item 7): one seed, one set of numbers, whatever the
dtype of the group labels and the order of the rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from core.oncu.metrics import (
    condition_contrast,
    oncu_summary,
    sample_level_means,
    scaling_report,
)
from core.stats.inference import bootstrap_means, canonical_order, canonical_rows

CONDS = ("no_evidence", "full_context", "retrieved", "oracle")
LENGTHS = (4000, 8000, 16000, 32000)
POSITIONS = tuple(f"pos_{i:02d}" for i in range(10))


def _frame(per_cell: int = 3, seed: int = 5) -> pd.DataFrame:
    """Predictions of a 4 x 10 length x position grid, ``per_cell`` instances a cell."""
    rng = np.random.default_rng(seed)
    rows = []
    for length in LENGTHS:
        for pos in POSITIONS:
            for k in range(per_cell):
                iid = f"i{length}_{pos}_{k}"
                base = {
                    "no_evidence": 0.1,
                    "full_context": 0.5 - length / 1e5,
                    "retrieved": 0.7,
                    "oracle": 0.9,
                }
                for cond in CONDS:
                    f1 = float(np.clip(base[cond] + rng.normal(0, 0.2), 0, 1))
                    rows.append(
                        {
                            "run": "r1",
                            "model": "m",
                            "dataset": "d",
                            "instance_id": iid,
                            "condition": cond,
                            "source": "s",
                            "reasoning_type": "multi_hop",
                            "context_length": length,
                            "evidence_position": pos,
                            "evidence_density": "low",
                            "distractor_similarity": "none",
                            "oracle_applicable": True,
                            "n_gold": 1,
                            "f1_relaxed": f1,
                            "em_relaxed": float(f1 > 0.5),
                        }
                    )
    return pd.DataFrame(rows)


def _variants(df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    text = df.assign(context_length=df["context_length"].astype(str))
    shuffled = df.sample(frac=1.0, random_state=11).reset_index(drop=True)
    return {
        "int": df,
        "text": text,
        "shuffled": shuffled,
        "text+shuffled": text.sample(frac=1.0, random_state=3).reset_index(drop=True),
    }


def test_text_lengths_sort_the_groups_differently():
    # the premise: as text, "16000" < "4000", so a resample over groups in frame order would
    # draw other groups for the same seed
    df = _frame()
    assert sorted(df["context_length"].astype(str).unique())[0] == "16000"
    assert sorted(df["context_length"].unique())[0] == 4000


def test_oncu_ci_is_the_same_for_int_text_and_shuffled_rows():
    out = {
        name: oncu_summary(f, group_key=("context_length", "evidence_position")).set_index(
            "condition"
        )[["oncu_clipped", "oncu_ci_low", "oncu_ci_high"]]
        for name, f in _variants(_frame()).items()
    }
    ref = out["int"]
    assert ref["oncu_ci_low"].notna().all() and (ref["oncu_ci_low"] < ref["oncu_ci_high"]).all()
    for name, got in out.items():
        pd.testing.assert_frame_equal(got, ref, check_exact=True, obj=name)


def test_per_example_cis_are_the_same_for_shuffled_rows_by_multinomial_counts():
    out = {
        name: sample_level_means(f, ci=True, ci_method="multinomial").set_index("condition")
        for name, f in _variants(_frame()).items()
    }
    ref = out["int"]
    assert ref["f1_relaxed_ci_low"].notna().all()
    bounds = [c for c in ref.columns if c.endswith(("_ci_low", "_ci_high"))]
    for name, got in out.items():
        # the CIs exactly; the means to rounding (a sum in another order)
        pd.testing.assert_frame_equal(got[bounds], ref[bounds], check_exact=True, obj=name)
        pd.testing.assert_frame_equal(got, ref, rtol=1e-12, obj=name)


def test_per_example_cis_by_index_resampling_follow_the_import_order():
    """issue 34 item 4: index resampling draws the examples of a cell in frame order (the
    store lists them in import order, ``instances.ord``), as the released script resamples
    its file's rows: a reference written out from that script's arithmetic, per order."""
    for name, f in _variants(_frame()).items():
        got = sample_level_means(f, ci=True, ci_method="resample").set_index("condition")
        for cond in CONDS:
            x = f.loc[f["condition"] == cond, "f1_relaxed"].to_numpy(float)  # frame order
            idx = np.random.default_rng(42).integers(0, len(x), size=(5000, len(x)))
            lo, hi = np.percentile(x[idx].mean(axis=1), [2.5, 97.5])
            assert got.loc[cond, "f1_relaxed_ci_low"] == lo, (name, cond)
            assert got.loc[cond, "f1_relaxed_ci_high"] == hi, (name, cond)


@pytest.mark.parametrize("method", ["resample", "multinomial"])
def test_paired_contrast_is_the_same_for_shuffled_rows(method):
    out = {
        name: condition_contrast(f, "retrieved", "full_context", ci_method=method)
        for name, f in _variants(_frame()).items()
    }
    ref = out["int"]
    assert ref["ci_method"].iloc[0] == method
    for name, got in out.items():
        pd.testing.assert_frame_equal(got, ref, check_exact=True, obj=name)


def test_scaling_contrasts_are_the_same_for_shuffled_rows_and_text_lengths():
    key = ("context_length", "evidence_position")
    out = {}
    for name, f in _variants(_frame()).items():
        rep = scaling_report(f, group_key=key)
        out[name] = rep["contrasts"][["contrast", "mean", "ci_low", "ci_high", "effect", "p"]]
        reg = rep["regression"][["condition", "term", "coefficient", "p"]]
        out[name + ".reg"] = reg.reset_index(drop=True)
    assert out["int"]["ci_low"].notna().any()
    for name in ("text", "shuffled", "text+shuffled"):
        pd.testing.assert_frame_equal(out[name], out["int"], check_exact=True, obj=name)
        pd.testing.assert_frame_equal(
            out[name + ".reg"], out["int.reg"], rtol=1e-12, obj=name + ".reg"
        )


def test_canonical_rows_sorts_by_value_nan_last_and_makes_resamples_order_free():
    x = np.array([[3.0, 1.0], [np.nan, 0.0], [1.0, 2.0], [1.0, -0.0], [3.0, 0.5]])
    assert canonical_order([x[:, 0], x[:, 1]]).tolist() == [3, 2, 4, 0, 1]
    got = canonical_rows(x)
    assert np.array_equal(got[:4], x[[3, 2, 4, 0]]) and np.isnan(got[4, 0])
    perm = x[[4, 1, 0, 3, 2]]
    assert not np.array_equal(
        bootstrap_means(perm, 500, 1), bootstrap_means(x, 500, 1), equal_nan=True
    )  # index resampling depends on the order ...
    np.testing.assert_array_equal(
        bootstrap_means(canonical_rows(perm), 500, 1), bootstrap_means(canonical_rows(x), 500, 1)
    )  # ... not here


def test_crux_cis_do_not_depend_on_the_row_order():
    """CRUX's per-(retriever, k) bootstrap resamples instances in instance-id order."""
    from core.crux.metrics import _aggregate

    rng = np.random.default_rng(3)
    n = 60
    per = pd.DataFrame(
        {
            "instance_id": [f"q{i:03d}" for i in range(n)],
            "retriever": "bm25",
            "k": 5,
            "k_size": 5,
            "answerability_source": "gold",
            "tokens": rng.integers(100, 900, n),
            "coverage": rng.random(n),
            "alpha_ndcg": rng.random(n),
            "density": rng.random(n),
        }
    )
    a = _aggregate(per, ["bm25"], [5], 500, 42)
    b = _aggregate(per.sample(frac=1.0, random_state=7), ["bm25"], [5], 500, 42)
    pd.testing.assert_frame_equal(a, b)
    assert a.loc[0, "coverage"] == pytest.approx(per["coverage"].mean(), abs=1e-12)
