"""Figures and tables of CUE-R interventions (SPEC §7; seed 004 §6, App. A, C).

Every function takes the CUE-R frames of the selection (the dict of
:func:`core.views.cuer.cuer_result`: ``predictions``, ``pairs``, ``profile``, ``deltas``,
``roles``, ``synergy``) and draws or arranges them; numbers come from :mod:`core.cuer` only.
Options (declared below, read by the view): ``eps`` (0.05) and ``tau`` (0.5), the role
thresholds (negligible change, large divergence); ``synergy_metric`` (``answer_f1``), the axis
of the two-support drops; ``n_resamples`` (5,000), bootstrap resamples (SPEC §6.6; seed 42).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.cuer import METRICS, ROLES
from core.figures import empty_figure
from core.interventions import (
    DUPLICATE_POSITIONS,
    EPS,
    REPLACE_HARDNESS,
    SYNERGY_METRIC,
    TAU,
)

__all__ = [
    "EPS",
    "SECTION",
    "SYNERGY_METRIC",
    "TAU",
    "comparison_label",
    "divergence_figure",
    "duplicate_positions_figure",
    "hardness_figure",
    "paired_delta_table",
    "paired_heatmap_figure",
    "role_examples",
    "role_table",
    "roles_figure",
    "synergy_table",
    "utility_profile_figure",
    "utility_profile_table",
]

#: Where the definitions come from (shown with every figure).
SECTION = "SPEC §7; CUE-R (seed 004)"
_METRIC_TITLES = {
    "correctness": "Correctness ↑",
    "answer_f1": "Answer F1 ↑",
    "grounding": "Grounding ↑",
    "confidence_error": "Conf. error ↓",
    "trace_divergence": "Trace div. ↓",
}
_ROLE_COLORS = {
    "constructive": "#d62728", "redundant": "#7f7f7f", "distractive": "#9467bd",
    "confidence_distorting": "#ff7f0e", "unassigned": "#c7c7c7",
}  # fmt: skip


def comparison_label(operator: str, variant: str) -> str:
    """``remove``, ``replace:hard``, ``duplicate:end`` ... (``variant`` empty: the operator)."""
    return operator if not variant else f"{operator}:{variant}"


def _label_runs(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    many = out["run"].nunique() > 1 if len(out) else False
    out["comparison"] = [
        comparison_label(o, v) + (f" [{r}]" if many else "")
        for o, v, r in zip(out["operator"], out["variant"], out["run"], strict=True)
    ]
    return out


# ------------------------------------------------------------------------ utility profile


def utility_profile_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Means with 95% bootstrap CIs per (run, operator, variant) (seed 004 Table 2 / App. A).

    ``n`` counts the answered pairs behind the means, ``missing`` those left out because the
    base or the intervention call failed.
    """
    return result["profile"].aggregate.copy()



def utility_profile_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Grouped bars of the five metrics per intervention with CI error bars."""
    agg = _label_runs(utility_profile_table(result))
    fig = go.Figure()
    for i, row in agg.iterrows():
        means = [row[m] for m in METRICS]
        fig.add_bar(
            name=row["comparison"], x=[_METRIC_TITLES[m] for m in METRICS], y=means,
            error_y={"type": "data", "symmetric": False,
                     "array": [row[f"{m}_ci_high"] - row[m] for m in METRICS],
                     "arrayminus": [row[m] - row[f"{m}_ci_low"] for m in METRICS]},
            customdata=[i] * len(METRICS),
            hovertemplate="%{x}: %{y:.3f}<extra>" + row["comparison"] + f" ({_n(row)})</extra>",
        )  # fmt: skip
    fig.update_layout(barmode="group", yaxis_title="mean (95% CI)", legend_title="intervention")
    return fig, agg


def _n(row: Mapping[str, Any]) -> str:
    """``n=12`` or ``n=12, missing=3`` (failed calls left out of the aggregate)."""
    missing = int(row.get("missing", 0) or 0)
    return f"n={row['n']}" + (f", missing={missing}" if missing else "")


# ------------------------------------------------------------------------ paired deltas


def paired_delta_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Paired bootstrap deltas original - intervention per metric (seed 004 Table 3).

    ``n`` counts the pairs with both sides scored, ``missing`` the pairs whose base or
    intervention call failed.
    """
    agg = result["deltas"].aggregate.copy()
    agg["stars"] = [_stars(p) for p in agg["p"]]
    return agg


def _stars(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""



def paired_heatmap_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Heatmap of paired deltas (rows: interventions, columns: metrics) with stars."""
    agg = _label_runs(paired_delta_table(result))
    if agg.empty:
        return empty_figure("no interventions in the selected runs"), agg
    rows = list(dict.fromkeys(agg["comparison"]))
    z = agg.pivot_table(index="comparison", columns="metric", values="delta", sort=False)
    z = z.reindex(index=rows, columns=list(METRICS))
    text = agg.assign(t=[f"{d:+.3f}{s}" if not math.isnan(d) else "" for d, s in
                         zip(agg["delta"], agg["stars"], strict=True)])  # fmt: skip
    counts = agg.assign(t=[_n(r) for r in agg.to_dict("records")])
    hover = counts.pivot_table(index="comparison", columns="metric", values="t",
                               aggfunc="first", sort=False)  # fmt: skip
    hover = hover.reindex(index=rows, columns=list(METRICS))
    t = text.pivot_table(index="comparison", columns="metric", values="t", aggfunc="first",
                         sort=False).reindex(index=rows, columns=list(METRICS))  # fmt: skip
    bound = float(max(abs(z.min().min()), abs(z.max().max()), 1e-9))
    fig = go.Figure(
        go.Heatmap(
            z=z.to_numpy(), x=[_METRIC_TITLES[m] for m in METRICS], y=rows,
            text=t.fillna("").to_numpy(), texttemplate="%{text}", colorscale="RdBu_r",
            zmin=-bound, zmax=bound, colorbar={"title": "Δ"},
            customdata=hover.fillna("").to_numpy(),
            hovertemplate="%{y} · %{x}: Δ %{z:+.3f} (%{customdata})<extra></extra>",
        )
    )  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    return fig, agg


# ------------------------------------------------------------------------ trace divergence


def divergence_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Box plots of per-instance trace divergence per intervention.

    Pairs whose call failed have no divergence: they are left out of the boxes, and each
    box's hover says how many (``missing``) beside ``n``.
    """
    pairs = result["pairs"]
    single = _label_runs(
        pairs[pairs["operator"] != "two_support"].rename(
            columns={"variant": "variant_id", "param": "variant"}
        )
    )
    missing = (
        single["missing"].fillna(False).astype(bool)
        if "missing" in single.columns
        else pd.Series(False, index=single.index)
    )
    gone = single.loc[missing, "comparison"].value_counts()
    data = single[~missing][
        ["run", "dataset", "instance_id", "operator", "variant", "comparison",
         "trace_divergence", "correctness_orig", "correctness"]
    ].reset_index(drop=True)  # fmt: skip
    fig = go.Figure()
    for label, grp in data.groupby("comparison", sort=False):
        m = int(gone.get(label, 0))
        fig.add_box(y=grp["trace_divergence"], name=label, boxpoints="all", jitter=0.4,
                    hovertext=f"{label}: n={len(grp)}" + (f", missing={m}" if m else ""),
                    pointpos=0, customdata=grp.index.to_numpy(), marker={"size": 3})
    fig.update_layout(yaxis_title="trace divergence D", showlegend=False)
    fig.update_yaxes(range=[-0.02, 1.02])
    return fig, data


# ------------------------------------------------------------------------ roles


def role_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Role counts per (run, operator, variant, role).

    ``missing`` (the same on each role row of a comparison) counts its item interventions
    without a role because the base or the intervention call failed.
    """
    return result["roles"].aggregate.copy()


def role_examples(result: Mapping[str, Any]) -> pd.DataFrame:
    """Every item intervention with its role: the instances behind the role counts."""
    pairs = result["roles"].per_instance
    cols = ["run", "dataset", "instance_id", "operator", "param", "target", "rule", "role",
            "answer_orig", "answer", "delta_corr", "delta_grnd", "delta_cal",
            "trace_divergence"]  # fmt: skip
    return pairs[cols].rename(columns={"param": "variant"}).reset_index(drop=True)




def roles_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Stacked bars of role counts per intervention."""
    agg = _label_runs(role_table(result))
    fig = go.Figure()
    for role in ROLES:
        sub = agg[agg["role"] == role]
        fig.add_bar(name=role, x=sub["comparison"], y=sub["n"], customdata=sub.index.to_numpy(),
                    marker_color=_ROLE_COLORS[role],
                    text=[f"{role}: {n}" + (f" (missing: {m})" if m else "") for n, m in
                          zip(sub["n"], sub["missing"], strict=True)],
                    textposition="none",
                    hovertemplate="%{x}: %{text}<extra></extra>")  # fmt: skip
    fig.update_layout(barmode="stack", yaxis_title="items", legend_title="role")
    return fig, agg


# ------------------------------------------------------------------------ synergy


def synergy_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Seed 004 Table 9 per run (one row per run; ``missing``: instances with a failed call)."""
    return result["synergy"].aggregate.copy()


# ------------------------------------------------------------------------ sweeps


def _sweep(result: Mapping[str, Any], operator: str, levels: tuple[str, ...],
           title: str) -> tuple[go.Figure, pd.DataFrame]:  # fmt: skip
    agg = utility_profile_table(result)
    data = agg[(agg["operator"] == operator) | (agg["operator"] == "original")]
    data = data.reset_index(drop=True)
    if not (data["operator"] == operator).any():
        return empty_figure(f"no {operator} interventions in the selected runs"), data
    fig = make_subplots(rows=1, cols=len(METRICS),
                        subplot_titles=[_METRIC_TITLES[m] for m in METRICS])  # fmt: skip
    for run, grp in data.groupby("run", sort=False):
        sub = grp[grp["operator"] == operator].set_index("variant").reindex(list(levels))
        orig = grp[grp["operator"] == "original"]
        for c, m in enumerate(METRICS, start=1):
            fig.add_scatter(
                x=list(levels), y=sub[m], mode="lines+markers", name=run, legendgroup=run,
                showlegend=c == 1,
                error_y={"type": "data", "symmetric": False,
                         "array": sub[f"{m}_ci_high"] - sub[m],
                         "arrayminus": sub[m] - sub[f"{m}_ci_low"]},
                row=1, col=c,
            )  # fmt: skip
            if len(orig) and m != "trace_divergence":
                fig.add_hline(y=float(orig[m].iloc[0]), line_dash="dash", line_color="#1f77b4",
                              opacity=0.6, row=1, col=c)  # fmt: skip
    fig.update_layout(title=title, legend_title="run")
    return fig, data


def hardness_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Metrics vs replacement hardness with the original as a dashed line."""
    return _sweep(result, "replace", REPLACE_HARDNESS, "Replacement hardness")


def duplicate_positions_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Metrics vs duplicate position with the original as a dashed line."""
    return _sweep(result, "duplicate", DUPLICATE_POSITIONS, "Duplicate position")
