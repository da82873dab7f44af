"""Length-position scaling statistics of ONCU (SPEC §6.7; seed 000 §8.11, Tables 10, 29, 30).

Everything here works on ONCU groups (:func:`core.oncu.metrics.oncu_groups`) or on the length x
position cells derived from them; :func:`core.oncu.metrics.scaling_report` runs the whole chain on
scored predictions and every public name is re-exported by :mod:`core.oncu`.

- **Cell**: mean clipped ONCU over the valid groups of one (unit, condition, context length,
  evidence position); NaN when the cell has no valid group (seed 000 Table 11).
- **Per-length ONCU**: mean clipped ONCU over the valid groups of one length (Table 10).
- **Paired contrasts** over matched cells (Table 29), with
:func:`core.stats.inference.paired_contrast`:
  normal-approximation p (§7.6; ``p_test="bootstrap"`` the bootstrap p), Holm within the
  family of the table (:func:`core.oncu.metrics.scaling_report`: every unit's contrasts together, as
  Table 29's scaling family across the three models).
- **Scaling OLS** over the cells (Table 30), with :func:`core.stats.inference.ols`
  (statsmodels' OLS arithmetic): normal-approximation p (``p_test="t"`` the t-test p) and
  Benjamini-Hochberg adjustment across the rows of the table.

Where the data cannot support a number, the number is NaN and a ``note`` column says in one
line what is missing; cells left out of a statistic are counted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from core.stats.inference import (
    OLS_P_TESTS,
    P_TESTS,
    benjamini_hochberg,
    holm,
    normal_p,
    ols,
    paired_contrast,
)

__all__ = [
    "CONTRAST_COLUMNS",
    "EARLY_DECILES",
    "FINAL_DECILE",
    "PUBLISHED_SCALING_TERMS",
    "REGRESSION_COLUMNS",
    "SCALING_CONTRASTS",
    "SCALING_DEFINITIONS",
    "SCALING_DISTANCES",
    "SCALING_LONG",
    "SCALING_SHORT",
    "SCALING_TERMS",
    "length_label",
    "position_fraction",
    "scaling_by_length",
    "scaling_cells",
    "scaling_contrasts",
    "scaling_length_wide",
    "scaling_regression",
]

#: Columns that name an evaluation unit: the same as :data:`core.oncu.metrics.UNIT_KEYS` (which
#: imports this module, so it cannot be imported here; a test pins the two equal).
_UNIT_KEYS = ("run", "model", "dataset")
#: Contextual conditions of the per-length table by default
# (:data:`core.oncu.metrics.ONCU_CONDITIONS`).
_CONDITIONS = ("full_context", "retrieved")


#: Short and long context length of the scaling contrasts, in tokens (seed 000 Table 29:
#: 4K - 32K; K = 1000 as in the generated presets).
SCALING_SHORT = 4000
#: See :data:`SCALING_SHORT`.
SCALING_LONG = 32000
#: The final evidence decile of the scaling grid.
FINAL_DECILE = "pos_09"
#: The early and middle deciles the final decile is contrasted with (seed 000 Table 29).
EARLY_DECILES = tuple(f"pos_{d:02d}" for d in range(8))
#: Terms of :func:`scaling_regression` (``distance="middle"``, the default).
SCALING_TERMS = (
    "intercept",
    "log2_context_length_centered",
    "position_fraction_centered",
    "distance_from_middle_centered",
)
#: Terms of the published specification (seed 000 Table 30, ``distance="end"``).
PUBLISHED_SCALING_TERMS = (
    "intercept",
    "log2_context_length_centered",
    "position_fraction_centered",
    "distance_from_end_centered",
)
#: Distance terms :func:`scaling_regression` offers: from the middle, or from the end.
SCALING_DISTANCES = ("middle", "end")
#: The scaling contrasts in their family order: id -> (analysis, contrast) templates.
SCALING_CONTRASTS = {
    "length": (
        "Scaling: {short} minus {long} full-context ONCU",
        "{short} - {long} full-context ONCU",
    ),
    "final_decile": (
        "Scaling: {long} final decile minus early/middle deciles",
        "pos_09 - mean(pos_00..pos_07) at {long}",
    ),
    "retrieved_full": (
        "Scaling: {long} retrieved minus full-context ONCU",
        "retrieved - full at {long}",
    ),
}
#: Definitions of every scaling number (tooltips, CLI help, docs); paper sections included.
SCALING_DEFINITIONS = {
    "cell": "Length x position cell: mean clipped ONCU over the valid ONCU groups of one "
    "(run, condition, context length, evidence position); NaN when the cell has no valid "
    "group. SPEC §6.7; seed 000 §8.11, Table 11.",
    "by_length": "Mean clipped ONCU over the valid groups of one context length (the ONCU "
    "headline restricted to that length; on a balanced grid the mean of its position cells). "
    "SPEC §6.7; seed 000 §8.11, Table 10.",
    "position_fraction": "Midpoint of the evidence region as a fraction of the context: "
    "pos_0d -> (d + 0.5) / 10, front / middle / end -> 1/6, 1/2, 5/6; scattered and unknown "
    "positions have none (their cells are left out of the regression and counted).",
    "log2_context_length_centered": "log2(context length in tokens) minus its mean over the "
    "regression's cells: the change in ONCU per doubling of the context. Seed 000 Table 30.",
    "position_fraction_centered": "Position fraction minus its mean over the cells: the "
    "change in ONCU from the start to the end of the context. Seed 000 Table 30.",
    "distance_from_middle_centered": "|position fraction - 0.5| minus its mean over the cells: "
    "a U-shaped (lost-in-the-middle) term beside the linear position trend. Issue 16 item 6.",
    "distance_from_end_centered": "(1 - position fraction) minus its mean over the cells, as "
    "published (seed 000 Table 30): it is minus position_fraction_centered, so the fit is "
    "rank-deficient and statsmodels' pseudo-inverse splits the position slope evenly between "
    "the two terms (each coefficient is half the position-only model's; t and p equal). SE "
    "with the released script's n - 4 residual degrees of freedom (it counts the 4 design "
    "columns; statsmodels the rank, 3).",
    "regression": "OLS over the length x position cells (seed 000 Table 30): ONCU ~ "
    "log2_context_length_centered + position_fraction_centered + distance term, with "
    "classical SE (statsmodels) and the two-sided normal-approximation p of coef / SE "
    "(seed 000 §7.6; option: the t-test p). SPEC §6.6-6.7.",
    "contrast": "Paired over matched length x position cells (seed 000 Table 29): d = cell "
    "differences, estimate = mean(d), 95% percentile bootstrap CI over the cells (5,000 "
    "resamples, seed 42), effect = mean(d) / sd(d) (ddof 1), two-sided normal-approximation "
    "p of z = mean(d) / (sd(d) / sqrt n) (seed 000 §7.6; option: the bootstrap p); Holm "
    "adjustment across every run's scaling contrasts in the table. SPEC §6.6-6.7.",
    "p_contrast": "Two-sided p of the contrast: normal approximation erfc(|z| / sqrt 2), "
    "z = mean(d) / (sd(d) / sqrt n), sd(d) = 0 gives 0 (1 when mean(d) = 0) (seed 000 §7.6), "
    "or, as an option, the bootstrap p = 2 min(P(d* >= 0), P(d* <= 0)). p_test names it.",
    "p_ols": "Two-sided p of a coefficient: normal approximation erfc(|coef / SE| / sqrt 2) "
    "(seed 000 Table 30), or, as an option, Student's t over n - rank degrees of freedom. "
    "p_test names it.",
    "p_bh": "Benjamini-Hochberg adjusted p across every row of the regression table with a p "
    "(every run, condition and term, the intercepts included), as seed 000 Table 30 adjusts "
    "its regression rows (an FDR control for exploratory diagnostics, §7.6).",
    "length": "4K - 32K: d = full-context cell ONCU at 4K minus at 32K, matched by evidence "
    "position. Seed 000 Table 29.",
    "final_decile": "pos_09 - mean(pos_00..pos_07) at 32K: d_i = full-context cell ONCU at "
    "pos_09 minus at pos_i, i = 0..7, all at 32K. Seed 000 Table 29.",
    "retrieved_full": "retrieved - full at 32K: d = retrieved minus full-context cell ONCU at "
    "32K, matched by evidence position. Seed 000 Table 29.",
    "p_holm": "Holm step-down adjusted p across the scaling contrasts of every run in the table "
    "(those with a p): seed 000 Table 29's family is the scaling contrasts of all models "
    "shown, not one run's three. SPEC §6.6.",
    "left_out": "Cells left out of the regression: no valid ONCU group (NaN ONCU), or no "
    "numeric length or position fraction (scattered, unknown).",
}
_MIDPOINTS = {"front": 1 / 6, "middle": 0.5, "end": 5 / 6}
#: Columns of :func:`scaling_regression`.
REGRESSION_COLUMNS = (
    "term",
    "coefficient",
    "se",
    "t",
    "p",
    "p_test",
    "p_bh",
    "r_squared",
    "n",
    "left_out",
    "note",
)
#: Columns of :func:`scaling_contrasts`.
CONTRAST_COLUMNS = (
    "contrast",
    "analysis",
    "label",
    "mean",
    "ci_low",
    "ci_high",
    "effect",
    "p",
    "p_test",
    "p_holm",
    "n",
    "note",
)


def length_label(tokens: object) -> str:
    """``4000`` -> ``"4K"`` (K = 1000); other values as text (``4096`` -> ``"4096"``)."""
    try:
        v = float(tokens)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(tokens)
    if math.isfinite(v) and v > 0 and v % 1000 == 0:
        return f"{int(v) // 1000}K"
    return f"{v:g}" if math.isfinite(v) else str(tokens)


def position_fraction(labels: Sequence[object] | pd.Series | np.ndarray) -> np.ndarray:
    """Position fraction of each evidence-position label (float array; NaN: none).

    ``pos_0d`` (decile d of the scaling grid) -> (d + 0.5) / 10; ``front`` / ``middle`` /
    ``end`` (thirds) -> 1/6, 1/2, 5/6: the midpoints of the regions of
    :func:`core.datasets.controlled.position_region`. A number in [0, 1] is kept as given;
    ``scattered``, ``unknown`` and anything else -> NaN.
    """
    out = np.full(len(labels), np.nan)
    for i, lab in enumerate(np.asarray(labels, dtype=object)):
        text = str(lab).strip()
        if text in _MIDPOINTS:
            out[i] = _MIDPOINTS[text]
        elif len(text) == 6 and text.startswith("pos_") and text[4:].isdigit():
            out[i] = (int(text[4:]) + 0.5) / 10 if int(text[4:]) < 10 else np.nan
        else:
            try:
                v = float(text)
            except ValueError:
                continue
            out[i] = v if 0.0 <= v <= 1.0 else np.nan
    return out


def scaling_cells(groups: pd.DataFrame) -> pd.DataFrame:
    """Length x position cells from per-group ONCU (:func:`core.oncu.metrics.oncu_groups`'s frame).

    Returns:
        One row per (unit keys, ``condition``, ``context_length``, ``evidence_position``):
        ``oncu`` (mean clipped ONCU over the cell's valid groups; NaN when none is valid),
        ``valid_groups``, ``total_groups``, ``context_length`` as a number (NaN when not
        numeric) and ``position_fraction`` (:func:`position_fraction`).

    Raises:
        ValueError: the groups have no ``context_length`` or ``evidence_position`` (the group
            key must keep both cells).
    """
    need = [c for c in ("context_length", "evidence_position") if c not in groups.columns]
    if need:
        raise ValueError(
            f"the ONCU groups have no {need} cell(s): keep context_length and "
            "evidence_position in the group key for the scaling statistics"
        )
    unit = [k for k in _UNIT_KEYS if k in groups.columns]
    keys = unit + ["condition", "context_length", "evidence_position"]
    g = groups.assign(_v=groups["oncu_clipped"].where(groups["valid"].astype(bool)))
    agg = g.groupby(keys, dropna=False, sort=True).agg(
        oncu=("_v", "mean"), valid_groups=("valid", "sum"), total_groups=("valid", "size")
    )
    out = agg.reset_index()
    out["valid_groups"] = out["valid_groups"].astype(int)
    out["total_groups"] = out["total_groups"].astype(int)
    out["context_length"] = pd.to_numeric(out["context_length"], errors="coerce")
    out["position_fraction"] = position_fraction(out["evidence_position"])
    return out


def scaling_by_length(
    groups: pd.DataFrame, conditions: Sequence[str] = _CONDITIONS
) -> pd.DataFrame:
    """Mean clipped ONCU per context length (seed 000 Table 10), from ONCU groups.

    Returns:
        One row per (unit keys, ``condition``, ``context_length``): ``oncu`` (mean clipped
        ONCU over the length's valid groups; NaN when none is valid), ``valid_groups``,
        ``total_groups`` and ``note`` (a one-line reason where ``oncu`` is NaN, else None).
    """
    if "context_length" not in groups.columns:
        raise ValueError("the ONCU groups have no context_length cell: keep it in the group key")
    unit = [k for k in _UNIT_KEYS if k in groups.columns]
    keys = unit + ["condition", "context_length"]
    g = groups[groups["condition"].isin(list(conditions))]
    g = g.assign(
        _v=g["oncu_clipped"].where(g["valid"].astype(bool)),
        context_length=pd.to_numeric(g["context_length"], errors="coerce"),
    )
    agg = g.groupby(keys, dropna=False, sort=True).agg(
        oncu=("_v", "mean"), valid_groups=("valid", "sum"), total_groups=("valid", "size")
    )
    out = agg.reset_index()
    out["valid_groups"] = out["valid_groups"].astype(int)
    out["total_groups"] = out["total_groups"].astype(int)
    out["note"] = [
        None if v > 0 else f"no valid ONCU group at {length_label(n)} ({t} groups, all invalid)"
        for v, n, t in zip(
            out["valid_groups"], out["context_length"], out["total_groups"], strict=True
        )
    ]
    return out


def scaling_length_wide(by_length: pd.DataFrame) -> pd.DataFrame:
    """Seed 000 Table 10 layout: one row per unit, a column per (condition, length).

    Columns: the unit keys, then ``"<condition> <length>"`` (``full_context 4K`` ...) over
    every condition and length of ``by_length`` (:func:`scaling_by_length`), lengths
    ascending; NaN where a unit has no valid group at that length. ``note`` lists, in one
    line, the (condition, length) cells that are missing or have no valid group.
    """
    unit = [k for k in _UNIT_KEYS if k in by_length.columns]
    conds = [c for c in ("full_context", "retrieved") if c in set(by_length["condition"])]
    conds += sorted(set(by_length["condition"]) - set(conds))
    lengths = sorted(set(by_length["context_length"].dropna()))
    cols = [f"{c} {length_label(n)}" for c in conds for n in lengths]
    rows = []
    parts = by_length.groupby(unit, dropna=False, sort=True) if unit else [((), by_length)]
    for key, d in parts:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, object] = dict(zip(unit, key, strict=True))
        gaps = []
        for c in conds:
            for n in lengths:
                hit = d[(d["condition"] == c) & (d["context_length"] == n)]
                v = float(hit["oncu"].iloc[0]) if len(hit) else math.nan
                row[f"{c} {length_label(n)}"] = v
                if not math.isfinite(v):
                    gaps.append(f"{c} {length_label(n)}")
        row["note"] = f"no valid ONCU group for: {', '.join(gaps)}" if gaps else None
        rows.append(row)
    return pd.DataFrame(rows, columns=unit + cols + ["note"])


def _support_reason(
    n: int, lengths: np.ndarray, fractions: np.ndarray, design: np.ndarray, distance: str
) -> str | None:
    """Why the scaling OLS cannot be fit on these cells (None when it can)."""
    if n == 0:
        return "no cell with ONCU and a length and position fraction"
    uniq_len = np.unique(lengths)
    if uniq_len.size < 2:
        return (
            f"needs cells at 2 or more context lengths, got only "
            f"{', '.join(length_label(v) for v in uniq_len)}"
        )
    need_pos = 3 if distance == "middle" else 2
    uniq_pos = np.unique(np.round(fractions, 12))
    if uniq_pos.size < need_pos:
        return (
            f"needs {need_pos} or more distinct evidence positions, got "
            f"{uniq_pos.size} ({', '.join(f'{v:.3g}' for v in uniq_pos)})"
        )
    rank = int(np.linalg.matrix_rank(design))
    want = design.shape[1] if distance == "middle" else design.shape[1] - 1
    if n < want + 1:
        return (
            f"needs at least {want + 1} cells ({want} estimated terms + 1 residual degree "
            f"of freedom), got {n}"
        )
    if rank < want:
        return (
            "distance_from_middle is collinear with the position fraction on these cells "
            "(all positions on one side of the middle, or mirror pairs only)"
        )
    return None


def scaling_regression(
    cells: pd.DataFrame, distance: str = "middle", p_test: str = "normal"
) -> pd.DataFrame:
    """OLS of ONCU over length x position cells (seed 000 §8.11, Table 30; SPEC §6.6-6.7).

    ``ONCU = b0 + b1 log2_context_length_centered + b2 position_fraction_centered +
    b3 distance_centered + e`` over the cells, each predictor centered on its mean over the
    cells used; fit by OLS as statsmodels fits it (pseudo-inverse), classical SE, two-sided
    p of ``p_test``: ``normal`` (default; seed 000 Table 30: erfc(|coef / SE| / sqrt 2)) or
    ``t`` (Student's t over n - rank degrees of freedom, statsmodels'), and ``p_bh``, the
    Benjamini-Hochberg adjustment across this table's rows (:func:`core.oncu.metrics.scaling_report`
    adjusts across every run's and condition's rows instead).

    Args:
        cells: one row per length x position cell with ``context_length`` (tokens),
            ``position_fraction`` (in [0, 1]; :func:`position_fraction`) and ``oncu``.
            Cells with a NaN ``oncu`` or no positive length / fraction are left out and
            counted (``left_out``).
        distance: ``middle`` (default; issue 16): distance_from_middle =
            |position_fraction - 0.5|, identifiable beside the linear trend, so the
            coefficients are a U-shape and a slope. ``end``: the published Table 30
            specification, distance_from_end = 1 - position_fraction; it is collinear with
            the position term, and the pseudo-inverse splits the position slope evenly
            between the two (each coefficient is half the position-only model's) -- kept so
            the published table can be reproduced, with the released script's residual
            degrees of freedom, n - 4 (it counts the 4 design columns; statsmodels counts
            the rank, 3), so each SE is half the position-only model's times
            sqrt((n - 3) / (n - 4)).

    Returns:
        One row per term (:data:`SCALING_TERMS`, or :data:`PUBLISHED_SCALING_TERMS` for
        ``end``): ``term``, ``coefficient``, ``se``, ``t``, ``p``, ``p_test``, ``p_bh``,
        ``r_squared``, ``n``
        (cells used), ``left_out`` (cells left out) and ``note`` (one line: why nothing
        was fit, and which cells were left out; None when every cell was used). Where the
        cells cannot support the fit (fewer than 2 lengths, too few positions or cells, a
        collinear distance term) the numbers are NaN and ``note`` says what is missing.
    """
    if distance not in SCALING_DISTANCES:
        raise ValueError(
            f"unknown distance {distance!r}; choose one of: {', '.join(SCALING_DISTANCES)}"
        )
    if p_test not in OLS_P_TESTS:
        raise ValueError(f"unknown p test {p_test!r}; choose one of: {', '.join(OLS_P_TESTS)}")
    need = [c for c in ("context_length", "position_fraction", "oncu") if c not in cells.columns]
    if need:
        raise ValueError(f"scaling cells need column(s) {need}; columns: {sorted(cells.columns)}")
    length = pd.to_numeric(cells["context_length"], errors="coerce").to_numpy(dtype=float)
    frac = pd.to_numeric(cells["position_fraction"], errors="coerce").to_numpy(dtype=float)
    y = pd.to_numeric(cells["oncu"], errors="coerce").to_numpy(dtype=float)
    placed = np.isfinite(length) & (length > 0) & np.isfinite(frac)
    keep = placed & np.isfinite(y)
    n, total = int(keep.sum()), len(cells)
    left = total - n
    l2 = np.log2(length[keep])
    pf = frac[keep]
    dist = np.abs(pf - 0.5) if distance == "middle" else 1.0 - pf
    terms = SCALING_TERMS if distance == "middle" else PUBLISHED_SCALING_TERMS
    x = {
        terms[1]: l2 - l2.mean() if n else l2,
        terms[2]: pf - pf.mean() if n else pf,
        terms[3]: dist - dist.mean() if n else dist,
    }
    design = np.column_stack([np.ones(n), *x.values()]) if n else np.empty((0, 4))
    reason = _support_reason(n, length[keep], pf, design, distance)
    if reason is None and np.ptp(y[keep]) == 0:
        reason = f"ONCU is {y[keep][0]:.3f} in every cell: no variation to regress"
    notes = []
    if reason:
        notes.append(f"scaling OLS not fit: {reason}")
    if left:
        no_oncu = int((placed & ~np.isfinite(y)).sum())
        notes.append(
            f"left out {left} of {total} cells ({no_oncu} without a valid ONCU group, "
            f"{left - no_oncu} without a numeric length or position fraction)"
        )
    note = "; ".join(notes) or None
    if reason:
        table = pd.DataFrame({"term": list(terms)})
        for c in ("coefficient", "se", "t", "p"):
            table[c] = math.nan
        r2 = math.nan
    else:
        # distance="end" is rank-deficient by construction (see the docstring): the
        # minimum-norm fit, as statsmodels' pinv gives it (core.stats.inference.ols warns of
        # nothing)
        # the released script's residual df counts the design's columns (it is rank-deficient
        # here by construction): its SE is sqrt((n - 3) / (n - 4)) times statsmodels'
        fit = ols(y[keep], x, df_resid=max(n - 4, 1) if distance == "end" else None)
        table = fit["table"].rename(columns={"coef": "coefficient"})
        r2 = fit["r_squared"]
        resid = y[keep] - design @ np.nan_to_num(table["coefficient"].to_numpy(dtype=float))
        if float(np.sum(resid**2)) <= 1e-20 * max(1.0, float(np.sum(y[keep] ** 2))):
            # an exact fit has no residual variance: SE, t and p are 0/0, not numbers
            table[["se", "t", "p"]] = math.nan
            note = "; ".join(
                [*notes, "the fit is exact (no residual variance): SE and p undefined"]
            )
        if p_test == "normal":
            table["p"] = normal_p(table["t"].to_numpy(dtype=float))
    table["p_test"] = p_test
    table["p_bh"] = benjamini_hochberg(table["p"].to_numpy(dtype=float))
    table["r_squared"] = r2
    table["n"] = n
    table["left_out"] = left
    table["note"] = note
    return table[list(REGRESSION_COLUMNS)]


def _cell_values(cells: pd.DataFrame, condition: str, length: float) -> dict[str, float]:
    """{evidence_position: finite oncu} of one (condition, length) in a unit's cells."""
    sub = cells[(cells["condition"] == condition) & (cells["_len"] == length)]
    dup = sub["evidence_position"].astype(str).duplicated()
    if dup.any():
        raise ValueError(
            f"more than one {condition} cell at {length_label(length)} for position(s) "
            f"{sorted(set(sub['evidence_position'].astype(str)[dup]))}: pass one unit's cells"
        )
    vals = pd.to_numeric(sub["oncu"], errors="coerce")
    return {
        str(p): float(v)
        for p, v in zip(sub["evidence_position"], vals, strict=True)
        if math.isfinite(v)
    }


def _matched(
    a: dict[str, float], b: dict[str, float], name_a: str, name_b: str
) -> tuple[list[str], str | None]:
    """Positions with a finite cell on both sides, and a note naming the unmatched ones."""
    both = sorted(set(a) & set(b))
    lone = [f"{name_a} {p}" for p in sorted(set(a) - set(b))]
    lone += [f"{name_b} {p}" for p in sorted(set(b) - set(a))]
    note = (
        f"{len(lone)} cell(s) without a matched partner left out ({', '.join(lone)})"
        if lone
        else None
    )
    return both, note


def scaling_contrasts(
    cells: pd.DataFrame,
    short: int = SCALING_SHORT,
    long: int = SCALING_LONG,
    n_resamples: int = 5000,
    seed: int = 42,
    level: float = 0.95,
    p_test: str = "normal",
) -> pd.DataFrame:
    """The paired scaling contrasts of one unit (seed 000 Table 29; SPEC §6.7), Holm-adjusted.

    Paired over matched length x position cells (cell = mean clipped ONCU over its valid
    groups), with :func:`core.stats.inference.paired_contrast` on the cell differences d:

    - ``length``: d_p = full-context ONCU(short, p) - ONCU(long, p) over the positions p
      with a cell at both lengths;
    - ``final_decile``: d_i = full-context ONCU(long, pos_09) - ONCU(long, pos_i) over the
      early/middle deciles i = 0..7 present (mean(d) = pos_09 - mean(pos_00..pos_07));
    - ``retrieved_full``: d_p = retrieved ONCU(long, p) - full-context ONCU(long, p).

    These reproduce Table 29 from the published cells: Qwen2.5-14B at 32K (Table 11, with
    retrieved at 1.000) gives retrieved - full 0.837, effect 2.606 and final decile 0.975.

    Args:
        cells: one unit's cells (:func:`scaling_cells`): ``condition``, ``context_length``,
            ``evidence_position``, ``oncu``.
        short: the short length in tokens (default 4000).
        long: the long length in tokens (default 32000).
        n_resamples: bootstrap resamples.
        seed: bootstrap seed.
        level: interval level.
        p_test: ``normal`` (default, seed 000 §7.6) or ``bootstrap``
            (:data:`core.stats.inference.P_TESTS`).

    Returns:
        Three rows (:data:`SCALING_CONTRASTS` order): ``contrast`` (id), ``analysis`` and
        ``label`` (the paper's wording), ``mean``, ``ci_low``, ``ci_high``, ``effect``,
        ``p``, ``p_test``, ``p_holm`` (Holm over these rows with a p; the table of every
        unit, :func:`core.oncu.metrics.scaling_report`, adjusts across all its rows), ``n``
        (matched cell pairs) and ``note`` (one line: what is missing, or which cells were
        left out; None when nothing). A contrast with fewer than 2 matched pairs is NaN
        with its note.
    """
    if p_test not in P_TESTS:
        raise ValueError(f"unknown p test {p_test!r}; choose one of: {', '.join(P_TESTS)}")
    need = [
        c
        for c in ("condition", "context_length", "evidence_position", "oncu")
        if c not in cells.columns
    ]
    if need:
        raise ValueError(f"scaling cells need column(s) {need}; columns: {sorted(cells.columns)}")
    c = cells.assign(_len=pd.to_numeric(cells["context_length"], errors="coerce"))
    s_lab, l_lab = length_label(short), length_label(long)
    present = sorted({length_label(v) for v in c["_len"].dropna()})
    full_s = _cell_values(c, "full_context", short)
    full_l = _cell_values(c, "full_context", long)
    ret_l = _cell_values(c, "retrieved", long)

    def missing(cond: str, lab: str, tokens: int) -> str:
        return (
            f"no {cond} cell with ONCU at {lab} ({tokens} tokens); lengths present: "
            f"{', '.join(present) or 'none'}"
        )

    pairs: dict[str, tuple[list[float], list[float], str | None]] = {}
    absent = set()  # contrasts whose note already says which cells are missing altogether
    # 4K - 32K, matched by position
    if not full_s or not full_l:
        absent.add("length")
        gone = [
            missing("full_context", lab, t)
            for lab, t, v in ((s_lab, short, full_s), (l_lab, long, full_l))
            if not v
        ]
        pairs["length"] = ([], [], "; ".join(gone))
    else:
        both, note = _matched(full_s, full_l, s_lab, l_lab)
        pairs["length"] = ([full_s[p] for p in both], [full_l[p] for p in both], note)
    # final decile vs pos_00..pos_07 at 32K
    if not full_l or FINAL_DECILE not in full_l:
        absent.add("final_decile")
    if not full_l:
        pairs["final_decile"] = ([], [], missing("full_context", l_lab, long))
    elif FINAL_DECILE not in full_l:
        pairs["final_decile"] = (
            [],
            [],
            (
                f"no {FINAL_DECILE} full_context cell with ONCU at {l_lab}; positions there: "
                f"{', '.join(sorted(full_l))}"
            ),
        )
    else:
        early = [p for p in EARLY_DECILES if p in full_l]
        gone = [p for p in EARLY_DECILES if p not in full_l]
        note = (
            f"{', '.join(gone)} missing at {l_lab}: paired over {len(early)} of "
            f"{len(EARLY_DECILES)} early/middle deciles"
            if gone
            else None
        )
        pairs["final_decile"] = (
            [full_l[FINAL_DECILE]] * len(early),
            [full_l[p] for p in early],
            note,
        )
    # retrieved - full at 32K, matched by position
    if not ret_l or not full_l:
        absent.add("retrieved_full")
        gone = [
            missing(cond, l_lab, long)
            for cond, v in (("retrieved", ret_l), ("full_context", full_l))
            if not v
        ]
        pairs["retrieved_full"] = ([], [], "; ".join(gone))
    else:
        both, note = _matched(ret_l, full_l, "retrieved", "full_context")
        pairs["retrieved_full"] = ([ret_l[p] for p in both], [full_l[p] for p in both], note)

    rows = []
    for cid, (analysis, label) in SCALING_CONTRASTS.items():
        a, b, note = pairs[cid]
        row = {
            "contrast": cid,
            "analysis": analysis.format(short=s_lab, long=l_lab),
            "label": label.format(short=s_lab, long=l_lab),
        }
        if len(a) < 2:
            if cid not in absent:
                few = f"needs 2 or more matched cells, got {len(a)}"
                note = f"{few}; {note}" if note else few
            res = dict.fromkeys(("mean", "ci_low", "ci_high", "effect", "p"), math.nan)
            res["n"] = len(a)
        else:
            res = paired_contrast(
                np.asarray(a), np.asarray(b), n_resamples, seed, level, p_test=p_test
            )
        res["p_test"] = p_test
        row.update(res)
        row["note"] = note
        rows.append(row)
    out = pd.DataFrame(rows)
    out["p_holm"] = holm(out["p"].to_numpy(dtype=float))
    out["n"] = out["n"].astype(int)
    return out[list(CONTRAST_COLUMNS)]
