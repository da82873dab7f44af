"""Figures and tables of the four-condition protocol and ONCU (SPEC §6; seed 000).

Every function takes the plain-condition predictions of the selection (the frame of
:func:`core.views.oncu.plain_predictions`) and the options below as keywords, and returns the
page's figure with the data behind it (or a table). Numbers come from :mod:`core.oncu` and
:mod:`core.stats` only; this module arranges and draws them. Options (declared below):

- ``conditions``: contextual conditions of the ONCU views (default full_context, retrieved);
- ``contrasts``: ``[[a, b], ...]`` paired contrasts (default retrieved - full_context,
  full_context - no_evidence, oracle - retrieved);
- ``n_resamples``: bootstrap resamples (default 5,000, SPEC §6.6);
- ``group_key``: the metadata cells of an ONCU group (default :data:`DEFAULT_GROUP_KEY`, whose
  ``context_length`` is the auto length cell: exact lengths on a small grid, else the length
  bucket; ``context_length_exact`` / ``length_bucket`` force one rule, ``instance_id`` alone
  gives per-instance ONCU; see :mod:`core.oncu`);
- ``ci``: the per-example bootstrap CIs of the condition matrix and the paired contrasts:
  ``auto`` (default) or ``true``: computed, by index resampling for cells up to
  :data:`core.stats.inference.RESAMPLE_MAX` examples and by multinomial counts of the distinct
  values
  above (the same distribution of the resampled mean, cost resamples x distinct values:
  :mod:`core.stats`); ``resample``: index resampling for every cell (the published
  estimator; resamples x examples, minutes at 250,000 examples a cell); ``multinomial``: the
  count estimator for every cell; ``false``: none (CI and p columns NaN; means and effects
  are exact either way). Each row names its estimator in ``ci_method``. ONCU CIs resample
  valid groups (index resampling) and are always computed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures import (
    BLACK,
    CONDITION_COLORS,
    GREEN,
    N_RESAMPLES,
    ORANGE,
    PURPLE,
    REFERENCE_COLOR,
    SCORE_FIELD,
    SKY_BLUE,
    VERMILLION,
    color_for,
    drill,
    empty_figure,
    titled,
)
from core.figures.length_position import (
    CONDITION_LABELS,
    CONDITIONS_OPTION,
    GROUP_KEY,
    PLAIN,
    SCALING_DISTANCE,
    condition_order,
    length_position_table,
    oncu_groups_table,
    oncu_heatmap_figure,
    oncu_length_curves_figure,
    scaling_contrasts_table,
    scaling_length_table,
    scaling_regression_table,
)
from core.oncu.metrics import (
    condition_contrast,
    failure_breakdown,
    oncu_summary,
    sample_level_means,
)
from core.oncu.share import frame_memo
from core.params import Param
from core.scoring.rows import ANSWER_SCORES, EVIDENCE_SCORES, FAILURE_LABELS
from core.stats.inference import (
    OLS_P_TESTS,
    P_TESTS,
    RESAMPLE_MAX,
    calibration,
    holm,
    paired_contrast,
)
from core.types import CONDITIONS

__all__ = [
    "CI",
    "CONDITIONS_OPTION",
    "CONDITION_LABELS",
    "CONTRASTS",
    "DEFAULT_CONTRASTS",
    "GROUP_KEY",
    "MATRIX_SCORES",
    "OLS_P_TEST",
    "P_TEST",
    "SCALING_DISTANCE",
    "audit_points",
    "calibration_figure",
    "calibration_table",
    "condition_matrix_figure",
    "condition_matrix_table",
    "contrasts_table",
    "failure_figure",
    "failure_table",
    "length_position_table",
    "oncu_audit_figure",
    "oncu_groups_table",
    "oncu_heatmap_figure",
    "oncu_length_curves_figure",
    "oncu_summary_table",
    "scaling_contrasts_table",
    "scaling_length_table",
    "scaling_regression_table",
]

#: Paired condition contrasts shown by default (a - b).
DEFAULT_CONTRASTS = (
    ("retrieved", "full_context"),
    ("full_context", "no_evidence"),
    ("oracle", "retrieved"),
)


def _contrast(value: Any) -> tuple[str, str]:
    """One contrast ``(a, b)`` from a pair or from text ``a-b``."""
    parts = value.split("-", 1) if isinstance(value, str) else list(value)
    if len(parts) != 2 or any(p not in CONDITIONS for p in parts):
        raise ValueError(f"a contrast is a pair of conditions from {', '.join(CONDITIONS)}")
    return (str(parts[0]), str(parts[1]))


_contrast.__name__ = "contrast"

#: Paired condition contrasts (a - b).
CONTRASTS = Param(
    "contrasts",
    _contrast,
    DEFAULT_CONTRASTS,  # type: ignore[arg-type]
    "paired contrasts a - b (pairs, or a-b text)",
    multiple=True,
    section="SPEC §6.6",
)
#: Per-example bootstrap CIs and their estimator: auto, true, resample, multinomial, false.
CI = Param(
    "ci",
    str,
    "auto",
    "per-example bootstrap CIs: auto/true (index resampling up to "
    f"{RESAMPLE_MAX:,} examples a cell, multinomial counts of distinct values above: the same "
    "distribution), resample (index resampling everywhere, the published estimator), "
    "multinomial, or false",
    section="SPEC §6.6; issue 17 item 6",
    validate=lambda v: _ci_mode(v),
)
#: The p of a paired contrast (issue 34 item 4).
P_TEST = Param(
    "p_test",
    str,
    "normal",
    "p of a paired contrast: normal = erfc(|z| / sqrt 2), z = mean(d) "
    "/ (sd(d) / sqrt n), as published (default); bootstrap = 2 min(P(d* >= 0), P(d* <= 0)) "
    "over the resampled mean differences. Holm adjusted across the table's family",
    choices=P_TESTS,
    section="SPEC §6.6; seed 000 §7.6, Table 29; issue 34 item 4",
)
#: The p of an OLS term (issue 34 item 4).
OLS_P_TEST = Param(
    "ols_p_test",
    str,
    "normal",
    "p of an OLS term: normal = erfc(|coef / SE| / sqrt 2), as "
    "published (default); t = Student's t over n - rank degrees of freedom (statsmodels). "
    "Benjamini-Hochberg adjusted across the regression table's rows",
    choices=OLS_P_TESTS,
    section="SPEC §6.6; seed 000 §7.6, Table 30; issue 34 item 4",
)
_COLORS = CONDITION_COLORS
_LABEL_COLORS = {
    "success": GREEN,
    "conversion": ORANGE,
    "integration": PURPLE,
    "selection": SKY_BLUE,
    "localization": VERMILLION,
    "parse": BLACK,
}
_SCORE_NAMES = {
    "em_strict": "strict EM",
    "f1_strict": "strict F1",
    "em_relaxed": "relaxed EM",
    "f1_relaxed": "relaxed F1",
    "soft_correct": "soft correctness",
    "ev_precision": "evidence precision",
    "ev_recall": "evidence recall",
    "ev_f1": "evidence F1",
    "citation_grounding": "citation grounding",
    "title_grounding": "title grounding",
}


def _ci_mode(value: Any) -> str | None:
    """The ``ci`` option's estimator (:data:`core.stats.inference.CI_METHODS`), None for no CIs."""
    text = str(value).strip().lower()
    if text in ("auto", "true", "1", "yes"):
        return "auto"
    if text in ("resample", "multinomial"):
        return text
    if text in ("false", "0", "no", "none", ""):
        return None
    raise ValueError(f"{value!r} is not one of auto, true, resample, multinomial, false")


# ------------------------------------------------------------------- condition matrix
#: What identifies a bar of the condition matrix (drill-down keys).
_MATRIX_KEYS = ("run", "condition")


def condition_matrix_table(
    df: pd.DataFrame, *, ci: Any = CI.default, n_resamples: int = N_RESAMPLES.default
) -> pd.DataFrame:
    """Sample-level means of every answer and evidence score per (run, condition) with CIs.

    Over ALL predictions of the condition (seed 000 Table 6; parse errors score 0); failed
    calls are missing (``missing`` beside ``n``), not 0; bootstrap CIs resample examples
    within (run, condition), 5,000 resamples, seed 42, by the estimator of the ``ci`` option
    (named in ``ci_method``).
    """
    if df.empty:
        return pd.DataFrame(columns=["run", "model", "dataset", "condition", "n"])
    method = _ci_mode(ci)
    ci = method is not None
    out = sample_level_means(df, ci=ci, n_resamples=n_resamples, ci_method=method or "auto")
    if not ci:
        counts = (
            "run",
            "model",
            "dataset",
            "condition",
            "n",
            "missing",
            "n_parse_error",
            "ci_method",
        )
        for col in [c for c in out.columns if c not in counts]:
            out[f"{col}_ci_low"] = np.nan
            out[f"{col}_ci_high"] = np.nan
    if not isinstance(df, pd.DataFrame) and not out.empty:  # rows left in the store
        scored = df.scored_counts("title_grounding")
        out["title_grounding_n"] = [
            scored.get((r, c), 0) for r, c in zip(out["run"], out["condition"], strict=True)
        ]
    elif "title_grounding" in df.columns and not out.empty:  # NaN without gold titles: counted
        keys = [k for k in ("run", "condition") if k in df.columns and k in out.columns]
        scored = df["title_grounding"].notna().groupby([df[k] for k in keys]).sum()
        out["title_grounding_n"] = [
            int(scored.get(tuple(r) if len(keys) > 1 else r[0], 0))
            for r in out[keys].itertuples(index=False)
        ]
    return condition_order(out)


def condition_matrix_figure(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    ci: Any = CI.default,
    n_resamples: int = N_RESAMPLES.default,
) -> tuple[go.Figure, pd.DataFrame]:
    """Grouped bars of the answer score and evidence F1 per condition, runs side by side."""
    field = score_field
    t = condition_matrix_table(df, ci=ci, n_resamples=n_resamples)
    cols = [
        "run",
        "condition",
        "n",
        field,
        f"{field}_ci_low",
        f"{field}_ci_high",
        "ev_f1",
        "ev_f1_ci_low",
        "ev_f1_ci_high",
    ]
    if t.empty or field not in t.columns:
        return empty_figure("No scored predictions for this selection"), pd.DataFrame(columns=cols)
    data = t[[c for c in cols if c in t.columns]].copy()
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=(_SCORE_NAMES[field], "evidence F1"),
        horizontal_spacing=0.1,
    )
    runs = list(dict.fromkeys(data["run"]))
    for run in runs:
        d = data[data["run"] == run]
        x = [CONDITION_LABELS.get(c, c) for c in d["condition"]]
        for col, metric in ((1, field), (2, "ev_f1")):
            if metric not in d.columns:
                continue
            y = d[metric].to_numpy(dtype=float)
            lo = d[f"{metric}_ci_low"].to_numpy(dtype=float)
            hi = d[f"{metric}_ci_high"].to_numpy(dtype=float)
            fig.add_trace(
                go.Bar(
                    x=x,
                    y=y,
                    name=str(run),
                    legendgroup=str(run),
                    showlegend=col == 1,
                    marker_color=color_for(run, "run", runs),
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": hi - y,
                        "arrayminus": y - lo,
                    },
                    customdata=drill.customdata(d, _MATRIX_KEYS, "n"),
                    # no passages shown: a citation cannot be of a shown gold passage
                    hovertext=[
                        " (0 by construction: no passages are shown)"
                        if metric == "ev_f1" and c == "no_evidence" and v == 0
                        else ""
                        for c, v in zip(d["condition"], y, strict=True)
                    ],
                    hovertemplate="%{x}: %{y:.3f}%{hovertext}<extra>" + str(run) + "</extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_yaxes(range=[0, 1.05])
    # two-word labels on two lines: four of them fit a column-wide panel unrotated
    labels = list(dict.fromkeys(CONDITION_LABELS.get(c, c) for c in data["condition"]))
    fig.update_xaxes(
        tickmode="array",
        tickvals=labels,
        tickangle=0,
        ticktext=[label.replace(" ", "<br>") for label in labels],
    )
    # one run: no one-entry legend taking space (its name is in the hover text and the data)
    fig.update_layout(
        barmode="group", legend_title_text="run", margin={"t": 40}, showlegend=len(runs) > 1
    )
    titled(fig, "condition", "mean score (95% CI)")
    drill.declare(fig, _MATRIX_KEYS, fixed=PLAIN)
    return fig, data


# ------------------------------------------------------------------------------ ONCU
def oncu_summary_table(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    conditions: Sequence[str] = CONDITIONS_OPTION.default,
    n_resamples: int = N_RESAMPLES.default,
    group_key: Sequence[str] = GROUP_KEY.default,
) -> pd.DataFrame:
    """ONCU per (run, contextual condition): clipped headline with CI, raw, weighted, audit.

    With the group-size guardrails of :func:`core.oncu.metrics.oncu_summary`: ``n`` and ``missing``
    (NaN-scored predictions, skipped), the key that ran (``group_key``, ``length_cell``), the
    valid groups' size distribution, ``small_group_warning`` and ``coarser_group_key``.
    """
    cols = [
        "run",
        "model",
        "dataset",
        "condition",
        "valid_groups",
        "total_groups",
        "oncu_clipped",
        "oncu_ci_low",
        "oncu_ci_high",
        "oncu_raw_mean",
        "oncu_weighted",
        "n_above_oracle",
        "n_below_baseline",
        "invalid_reasons",
        "s_none",
        "s_oracle",
        "s_c",
        "n",
        "missing",
        "group_key",
        "length_cell",
        "group_sizes",
        "median_group_size",
        "small_groups",
        "small_group_warning",
        "coarser_group_key",
    ]
    if df.empty:
        return pd.DataFrame(columns=cols)
    s = oncu_summary(
        df,
        score_field=score_field,
        conditions=tuple(conditions),
        n_resamples=n_resamples,
        group_key=tuple(group_key),
    )
    return condition_order(s[[c for c in cols if c in s.columns]])


def audit_points(df: pd.DataFrame, **options: Any) -> pd.DataFrame:
    """Valid groups as points of the raw-vs-clipped audit.

    Status in_band / above_oracle / below_baseline; ``options`` as for
    :func:`oncu_groups_table`.
    """
    g = oncu_groups_table(df, **options)
    if g.empty:
        return g
    return g[g["valid"]].reset_index(drop=True)


def oncu_audit_figure(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    conditions: Sequence[str] = CONDITIONS_OPTION.default,
    group_key: Sequence[str] = GROUP_KEY.default,
) -> tuple[go.Figure, pd.DataFrame]:
    """Scatter of raw vs clipped ONCU per valid group, colored by condition."""
    pts = audit_points(df, score_field=score_field, conditions=conditions, group_key=group_key)
    if pts.empty:
        return empty_figure("No valid ONCU groups for this selection"), pts
    fig = go.Figure()
    lo = float(min(-0.1, np.nanmin(pts["oncu_raw"]) - 0.05))
    hi = float(max(1.1, np.nanmax(pts["oncu_raw"]) + 0.05))
    fig.add_vrect(x0=0, x1=1, fillcolor=GREEN, opacity=0.08, line_width=0)
    fig.add_trace(
        go.Scatter(
            x=[lo, 0, 1, hi],
            y=[0, 0, 1, 1],
            mode="lines",
            name="clip(x, 0, 1)",
            line={"color": REFERENCE_COLOR, "dash": "dot"},
            hoverinfo="skip",
        )
    )
    key_cols = [
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
    symbols = {"in_band": "circle", "above_oracle": "triangle-up", "below_baseline": "x"}
    # a point is one group of one condition: run, condition and every group-key cell
    keys = drill.group_keys(pts, group_key)
    for cond in [c for c in CONDITIONS if c in set(pts["condition"])]:
        d = pts[pts["condition"] == cond]
        cells = d[key_cols].astype(str)  # one hover line per point, joined row by row
        lines = zip(*(cells[c].tolist() for c in key_cols), strict=True)
        text = (
            pd.Series([" | ".join(r) for r in lines], index=d.index, dtype=object)
            if (key_cols)
            else cells.agg(" | ".join, axis=1)
        )
        fig.add_trace(
            go.Scatter(
                x=d["oncu_raw"],
                y=d["oncu_clipped"],
                mode="markers",
                name=CONDITION_LABELS.get(cond, cond),
                marker={
                    "color": _COLORS.get(cond),
                    "size": 9,
                    "opacity": 0.75,
                    "symbol": [symbols[s] for s in d["status"]],
                },
                text=text,
                customdata=drill.customdata(d, keys, "n"),
                hovertemplate="raw %{x:.3f} -> clipped %{y:.3f}<br>%{text}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="raw ONCU", range=[lo, hi], zeroline=False)
    fig.update_yaxes(title_text="clipped ONCU", range=[-0.05, 1.05])
    fig.update_layout(legend_title_text="condition", margin={"t": 30})
    titled(fig)
    drill.declare(fig, keys, fixed=PLAIN | drill.length_fixed(pts))
    return fig, pts


# ---------------------------------------------------------------------- paired contrasts
def contrasts_table(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    contrasts: Sequence[Sequence[str]] = CONTRASTS.default,
    ci: Any = CI.default,
    n_resamples: int = N_RESAMPLES.default,
    p_test: str = P_TEST.default,
) -> pd.DataFrame:
    """Paired contrasts aligned by instance (SPEC §6.6; seed 000 §7.6, Table 29).

    Condition pairs per run, and, with several runs, run-vs-first-run per condition. ``p``
    is the two-sided p of ``p_test`` (``normal``, published, or ``bootstrap``); ``p_holm``
    is Holm across the table's family: every condition contrast of every run shown (the
    run-vs-first-run rows are a family of their own).
    """
    field = score_field
    cols = [
        "run",
        "contrast",
        "score_field",
        "n",
        "mean",
        "ci_low",
        "ci_high",
        "effect",
        "p",
        "p_test",
        "p_holm",
        "p_mcnemar",
        "ci_method",
    ]
    if df.empty:
        return pd.DataFrame(columns=cols)
    pairs = contrasts or DEFAULT_CONTRASTS
    method = _ci_mode(ci)
    ci = method is not None
    # without CIs one resample suffices for the exact mean and effect; CI and p are blanked
    n = n_resamples if ci else 1
    method = method or "multinomial"
    parts = []
    present = set(df["condition"].unique())  # not 1,000,000 Python strings
    for a, b in pairs:
        if a in present and b in present:
            parts.append(
                condition_contrast(
                    df, a, b, score_field=field, n_resamples=n, ci_method=method, p_test=p_test
                )
            )
    parts = [p for p in parts if not p.empty]
    if parts:  # one family: the table's condition contrasts (seed 000 Table 29)
        con = pd.concat(parts, ignore_index=True)
        con["p_holm"] = holm(con["p"].to_numpy(dtype=float))
        parts = [con]
    runs = list(dict.fromkeys(df["run"].unique()))  # order of first appearance
    if len(runs) > 1:
        vs = _run_contrasts(df, runs, field, n, method, p_test)
        if not vs.empty:
            vs["p_holm"] = holm(vs["p"].to_numpy(dtype=float))
            parts.append(vs)
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)
    if not ci:
        # without resamples: no CI, and no bootstrap p (the normal p needs none)
        blank = ["ci_low", "ci_high"] + (["p", "p_holm"] if p_test == "bootstrap" else [])
        out[blank] = np.nan
        out["ci_method"] = None
    return out[[c for c in cols if c in out.columns]]


def _run_contrasts(
    df: pd.DataFrame, runs: list[str], field: str, n: int, method: str, p_test: str
) -> pd.DataFrame:
    base = runs[0]
    rows = []
    for cond in [c for c in CONDITIONS if c in set(df["condition"].unique())]:
        sub = df.loc[(df["condition"] == cond).to_numpy(), ["instance_id", "run", field]]
        wide = sub.pivot_table(index="instance_id", columns="run", values=field, aggfunc="mean")
        for other in runs[1:]:
            if base not in wide or other not in wide:
                continue
            w = wide[[other, base]].dropna()
            r = paired_contrast(
                w[other].to_numpy(float), w[base].to_numpy(float), n, method=method, p_test=p_test
            )
            rows.append(
                {
                    "run": f"{other} vs {base}",
                    "contrast": f"{cond}: {other} - {base}",
                    "score_field": field,
                    "p_mcnemar": math.nan,
                }
                | r
            )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------ failure labels
def failure_table(df: pd.DataFrame) -> pd.DataFrame:
    """Failure-label percentages per (run, condition) (strict EM = correct)."""
    if df.empty:
        return pd.DataFrame(columns=["run", "condition", "n", *FAILURE_LABELS])
    return condition_order(failure_breakdown(df))


#: What identifies a bar segment of the failure figure (drill-down keys).
_FAILURE_KEYS = ("run", "condition", "failure_label")


def failure_figure(df: pd.DataFrame) -> tuple[go.Figure, pd.DataFrame]:
    """Stacked horizontal bars of failure-label percentages.

    A segment is one label of one (run, condition): customdata ``[run, condition,
    failure_label, n]``.
    """
    t = failure_table(df)
    if t.empty:
        return empty_figure("No failure labels for this selection"), t
    y = [
        f"{r} · {CONDITION_LABELS.get(c, c)}" for r, c in zip(t["run"], t["condition"], strict=True)
    ]
    fig = go.Figure()
    for label in FAILURE_LABELS:
        if label not in t.columns:
            continue
        fig.add_trace(
            go.Bar(
                y=y,
                x=t[label],
                name=label,
                orientation="h",
                marker_color=_LABEL_COLORS.get(label),
                customdata=drill.customdata(
                    t, _FAILURE_KEYS, np.rint(t[label] * t["n"] / 100.0), failure_label=label
                ),
                hovertemplate="%{y}: %{x:.1f}%<extra>" + label + "</extra>",
            )
        )
    fig.update_layout(
        barmode="stack", xaxis_title="% of predictions", margin={"t": 30}, legend_title_text="label"
    )
    fig.update_xaxes(range=[0, 100])
    titled(fig, y="run · condition")
    drill.declare(fig, _FAILURE_KEYS, fixed=PLAIN)
    return fig, t


# --------------------------------------------------------------------------- calibration
def calibration_table(df: pd.DataFrame, *, score_field: str = SCORE_FIELD.default) -> pd.DataFrame:
    """Brier score and ECE (10 equal-width bins) per (run, condition, confidence kind).

    ``correct`` is the selected score field binarized at 0.5 (EM fields are already 0/1).
    Kinds: ``self_reported`` (the model's confidence) and ``logprob`` (from token
    log-probabilities), each only where predictions carry it.
    """
    rows, _ = _calibration(df, score_field)
    return rows


def _calibration(df: pd.DataFrame, field: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(table, bins)`` of the calibration views, once per shared frame and score field."""
    table, bins = frame_memo(df, ("calibration", field), lambda: _calibration_of(df, field))
    return table.copy(), bins.copy()


def _calibration_of(df: pd.DataFrame, field: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`_calibration` computed: per (run, condition) in order of first appearance."""
    rows, bins = [], []
    score = pd.to_numeric(df[field], errors="coerce").to_numpy(dtype=float)
    with np.errstate(invalid="ignore"):
        correct = (score >= 0.5).astype(float)
    correct[np.isnan(score)] = np.nan
    kinds = [
        (kind, pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float))
        for kind, col in (("self_reported", "confidence"), ("logprob", "logprob_confidence"))
        if col in df.columns
    ]
    cells = df[["run", "condition"]].groupby(["run", "condition"], sort=False)
    ids = cells.ngroup().to_numpy()
    order = np.argsort(ids, kind="stable")
    starts = np.searchsorted(ids[order], np.arange(cells.ngroups + 1))
    for g, (run, cond) in enumerate(cells.size().index):
        idx = order[starts[g] : starts[g + 1]]
        for kind, conf_all in kinds:
            conf = conf_all[idx]
            if np.isnan(conf).all():
                continue
            c = calibration(conf, correct[idx])
            rows.append(
                {
                    "run": run,
                    "condition": cond,
                    "confidence": kind,
                    "n": c["n"],
                    "brier": c["brier"],
                    "ece": c["ece"],
                }
            )
            b = c["bins"].assign(run=run, condition=cond, confidence=kind)
            bins.append(b)
    cols = ["run", "condition", "confidence", "n", "brier", "ece"]
    table = condition_order(pd.DataFrame(rows, columns=cols))
    bins_df = pd.concat(bins, ignore_index=True) if bins else pd.DataFrame()
    return table, bins_df


def calibration_figure(
    df: pd.DataFrame, *, score_field: str = SCORE_FIELD.default
) -> tuple[go.Figure, pd.DataFrame]:
    """Reliability diagram of the self-reported confidence per condition (first run)."""
    _, bins = _calibration(df, score_field)
    if bins.empty:
        return empty_figure("No confidences in these predictions"), bins
    fig = go.Figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1],
            y=[0, 1],
            mode="lines",
            name="perfect",
            line={"color": REFERENCE_COLOR, "dash": "dot"},
        )
    )
    for (run, cond, kind), d in bins.groupby(["run", "condition", "confidence"], sort=False):
        d = d[d["count"] > 0]
        dash = "solid" if kind == "self_reported" else "dash"
        fig.add_trace(
            go.Scatter(
                x=d["mean_conf"],
                y=d["accuracy"],
                mode="lines+markers",
                name=f"{run} · {CONDITION_LABELS.get(cond, cond)} ({kind})",
                line={"color": _COLORS.get(cond), "dash": dash},
                marker={"size": 4 + 10 * np.sqrt(d["count"] / d["count"].max())},
                hovertemplate="conf %{x:.2f} -> acc %{y:.2f}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="mean confidence", range=[0, 1])
    fig.update_yaxes(title_text="accuracy", range=[0, 1.02])
    fig.update_layout(margin={"t": 30})
    titled(fig)
    return fig, bins


#: Scores offered for the matrix view (kept here so pages need not import scoring).
MATRIX_SCORES = ANSWER_SCORES + EVIDENCE_SCORES
