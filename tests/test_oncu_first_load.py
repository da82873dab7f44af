"""The Conditions & ONCU page's first load with fewer copies (issue 17 item 6), same numbers.

``sample_level_means`` no longer gathers a (rows x scores) block per (unit, condition) cell:
each score column is gathered once in cell order, the cell sums come from one ``bincount``
(the same row-by-row accumulation as the nansum down a block's columns, so the same bits),
and the multinomial CIs take each cell's column as a contiguous slice, drawing columns with
identical values once. The ONCU audit's hover text is joined without a row-wise ``agg``.
Each is checked here against the previous code, written out below, bit for bit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.figures.oncu import oncu_audit_figure
from core.oncu.cis import add_mean_cis, add_multinomial_cis
from core.oncu.metrics import _error_mask, sample_level_means, share_frame
from core.oncu.share import cell_ids
from core.scoring.rows import ANSWER_SCORES, EVIDENCE_SCORES
from core.stats.inference import ci_method as stats_ci_method
from core.stats.inference import multinomial_means, percentiles

_CONDS = ("no_evidence", "full_context", "retrieved", "oracle")


def _frame(n_inst: int, seed: int = 5, scores: tuple[str, ...] | None = None) -> pd.DataFrame:
    """Two runs x four conditions; missing scores, errors, repeated and continuous values."""
    rng = np.random.default_rng(seed)
    n = 2 * len(_CONDS) * n_inst
    f1 = rng.choice([0.0, 1.0, 0.5, 1 / 3, np.nan], size=n, p=[0.4, 0.35, 0.1, 0.1, 0.05])
    df = pd.DataFrame(
        {
            "run": np.repeat(["b", "a"], n // 2),
            "model": "m",
            "dataset": "d",
            "instance_id": np.tile([f"i{i:05d}" for i in rng.permutation(n_inst)], 2 * len(_CONDS)),
            "condition": np.tile(np.repeat(_CONDS, n_inst), 2),
            "em_strict": (f1 == 1.0).astype(float),
            "em_relaxed": (f1 == 1.0).astype(float),  # the same values as em_strict
            "f1_relaxed": f1,
            "ev_f1": rng.random(n),  # continuous: the binned multinomial estimator
            "citation_grounding": np.where(rng.random(n) < 0.2, np.nan, 1.0),
            "error": rng.choice([None, None, "timeout", "  "], size=n),
            "parse_error": rng.choice([None, "bad json"], size=n, p=[0.9, 0.1]),
        }
    )
    if scores is not None:
        df = df.drop(
            columns=[
                c
                for c in ("em_strict", "em_relaxed", "f1_relaxed", "ev_f1", "citation_grounding")
                if c not in scores
            ]
        )
    return df


def _old_multinomial_cis(row, block, scores, n_resamples, seed, level) -> None:
    """The previous ``core.oncu.cis.add_multinomial_cis`` (a cell's block, every column drawn),
    at exactly [2.5, 97.5] (issue 34: ``percentiles(0.95)``, not 2.500000000000002)."""
    q = percentiles(level)
    used = set()
    for c, name in enumerate(scores):
        col = block[:, c]
        lo = hi = math.nan
        if np.isfinite(col).any():
            boot, label = multinomial_means(col, n_resamples, seed)
            used.add(label)
            boot = boot[np.isfinite(boot)]
            if boot.size:
                lo, hi = (float(x) for x in np.percentile(boot, q))
        row[f"{name}_ci_low"], row[f"{name}_ci_high"] = lo, hi
    row["ci_method"] = "multinomial-binned" if "multinomial-binned" in used else "multinomial"


def _old_sample_level_means(
    df: pd.DataFrame,
    ci: bool,
    n_resamples: int,
    ci_method: str,
    seed: int = 42,
    level: float = 0.95,
) -> pd.DataFrame:
    """The previous ``core.oncu.metrics._sample_level_means``: one row-major block per cell, each
    cell's rows in frame (import) order (issue 34 item 4; instance-id order before)."""
    keys = [k for k in ("run", "model", "dataset") if k in df.columns] + ["condition"]
    scores = [c for c in (*ANSWER_SCORES, *EVIDENCE_SCORES, "confidence_error") if c in df.columns]
    rows, blocks = [], []
    cols = [pd.to_numeric(df[c], errors="coerce").to_numpy(dtype=float) for c in scores]
    perr = _error_mask(df["parse_error"]) if "parse_error" in df.columns else None
    failed = _error_mask(df["error"]) if "error" in df.columns else None
    ids, index = cell_ids(df, keys)
    by_cell = np.argsort(ids, kind="stable")
    bounds = np.searchsorted(ids[by_cell], np.arange(len(index) + 1))
    for g, key in enumerate(index):
        idx = by_cell[bounds[g] : bounds[g + 1]]
        key = key if isinstance(key, tuple) else (key,)
        block = np.empty((len(idx), len(cols)))
        for j, col in enumerate(cols):
            block[:, j] = col[idx]
        row = dict(zip(keys, key, strict=True))
        row["n"] = int(len(idx))
        if failed is not None:
            row["missing"] = int(failed[idx].sum())
        if perr is not None:
            row["n_parse_error"] = int(perr[idx].sum())
        counts = np.isfinite(block).sum(axis=0)
        with np.errstate(invalid="ignore"):
            means = np.where(counts > 0, np.nansum(block, axis=0) / np.maximum(counts, 1), np.nan)
        row.update(dict(zip(scores, means.tolist(), strict=True)))
        rows.append(row)
        blocks.append(block)
    if ci and rows:
        fast = {i for i, b in enumerate(blocks) if stats_ci_method(ci_method, len(b)) != "resample"}
        slow = [i for i in range(len(blocks)) if i not in fast]
        add_mean_cis(
            [rows[i] for i in slow], [blocks[i] for i in slow], scores, n_resamples, seed, level
        )
        for i in slow:
            rows[i]["ci_method"] = "resample"
        for i in sorted(fast):
            _old_multinomial_cis(rows[i], blocks[i], scores, n_resamples, seed, level)
    return pd.DataFrame(rows)


@pytest.mark.parametrize(
    "ci,method", [(False, "auto"), (True, "resample"), (True, "multinomial"), (True, "auto")]
)
@pytest.mark.parametrize("scores", [None, ("f1_relaxed",), ("em_strict", "ev_f1")])
def test_sample_level_means_equal_the_previous_blocks_bit_for_bit(ci, method, scores):
    """Several score columns (sums down a block) and one (a pairwise sum), every estimator."""
    df = _frame(60, scores=scores)
    new = sample_level_means(df, ci=ci, n_resamples=300, ci_method=method)
    old = _old_sample_level_means(df, ci, 300, method)
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    # shared (memoized) frames give the same table
    shared = share_frame(df.copy())
    pd.testing.assert_frame_equal(
        sample_level_means(shared, ci=ci, n_resamples=300, ci_method=method), old, check_exact=True
    )


def test_large_cells_take_the_multinomial_estimator_with_the_previous_numbers():
    """Cells above RESAMPLE_MAX under ``auto``: contiguous slices, equal columns drawn once."""
    df = _frame(2_100, seed=9)
    new = sample_level_means(df, ci=True, n_resamples=400)
    old = _old_sample_level_means(df, True, 400, "auto")
    assert set(new["ci_method"]) == {"multinomial-binned"}  # ev_f1 is continuous
    pd.testing.assert_frame_equal(new, old, check_exact=True)
    # em_relaxed repeats em_strict: the same interval, drawn once
    assert (new["em_relaxed_ci_low"] == new["em_strict_ci_low"]).all()
    assert (new["em_relaxed_ci_high"] == new["em_strict_ci_high"]).all()


def test_multinomial_cis_draw_equal_columns_once_and_keep_the_rest():
    """Hand-checkable: two equal binary columns share one interval; an all-NaN one has none."""
    a = np.array([1.0, 0.0] * 500)
    row: dict = {}
    columns = [a, a.copy(), np.full(1000, np.nan), a[::-1].copy()]
    names = ["em_strict", "em_relaxed", "ev_f1", "soft_correct"]
    add_multinomial_cis(row, columns, names, 2000, 42, 0.95)
    assert (row["em_strict_ci_low"], row["em_strict_ci_high"]) == (
        row["em_relaxed_ci_low"],
        row["em_relaxed_ci_high"],
    )
    assert math.isnan(row["ev_f1_ci_low"]) and math.isnan(row["ev_f1_ci_high"])
    # the same multiset in another order: the same counts, so the same draws
    assert row["soft_correct_ci_low"] == row["em_strict_ci_low"]
    # mean 0.5 of 1000 coin flips: 95% interval about 0.5 -+ 1.96 * sqrt(0.25 / 1000) = 0.031
    assert 0.46 < row["em_strict_ci_low"] < 0.48 and 0.52 < row["em_strict_ci_high"] < 0.54
    assert row["ci_method"] == "multinomial"


def test_audit_hover_text_is_the_row_wise_join():
    df = _frame(40)
    df["source"], df["reasoning_type"], df["context_length"] = "s", "bridge", 4000
    df["evidence_position"] = np.where(df.index % 3 == 0, "front", "end")
    df["evidence_density"], df["distractor_similarity"] = "low", "high"
    df["oracle_applicable"], df["n_gold"] = True, 1
    fig, pts = oncu_audit_figure(df)
    texts = [t for trace in fig.data[1:] for t in trace.text]
    # the hover line: the point's key cells in the points' column order, joined by " | "
    cols = [
        c
        for c in pts.columns
        if c
        in (
            "run",
            "reasoning_type",
            "context_length",
            "evidence_position",
            "distractor_similarity",
            "evidence_density",
        )
    ]
    want = [
        " | ".join(r)
        for cond in ("full_context", "retrieved")
        for r in pts.loc[pts["condition"] == cond, cols].astype(str).itertuples(index=False)
    ]
    assert texts == want and len(texts) == len(pts) > 0
    assert len(cols) == 6 and all(t.split(" | ")[2] == "4000" for t in texts)
