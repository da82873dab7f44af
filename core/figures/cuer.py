"""Figures and tables of CUE-R interventions (SPEC §7; seed 004 §6, App. A, C).

Every function takes the CUE-R frames of the selection (the dict of
:func:`core.views.cuer.cuer_result`: ``predictions``, ``pairs``, ``profile``, ``deltas``,
``roles``, ``combinations``, ``synergy``, ``correctness_axis``) and draws or arranges them;
numbers come from :mod:`core.cuer` only. Options (declared below, read by the view): ``eps``
(0.05) and ``tau`` (0.5), the role thresholds (negligible change, large divergence);
``correctness_axis`` (``soft``; ``strict`` = normalized exact match); ``synergy_metric``
(``answer_f1``), the axis of the two-support drops; ``n_resamples`` (5,000), bootstrap
resamples (SPEC §6.6; seed 42). :data:`COLUMN_HELP` holds each column's definition and paper
section, the tooltips of the tables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.cuer.coverage import NOT_APPLICABLE_HELP
from core.cuer.interventions import (
    DUPLICATE_POSITIONS,
    EPS,
    REPLACE_HARDNESS,
    SYNERGY_METRIC,
    TAU,
)
from core.cuer.metrics import (
    CORRECTNESS_AXIS,
    METRICS,
    PRIMARY_ROLE_ORDER,
    PROFILE_METRICS,
    ROLE_FLAGS,
)
from core.figures import (
    BLACK,
    ORANGE,
    PURPLE,
    REFERENCE_COLOR,
    SKY_BLUE,
    VERMILLION,
    color_for,
    empty_figure,
    steady_axes,
    titled,
)

__all__ = [
    "COLUMN_HELP",
    "CORRECTNESS_AXIS",
    "EPS",
    "SECTION",
    "SYNERGY_METRIC",
    "TAU",
    "comparison_label",
    "divergence_figure",
    "duplicate_positions_figure",
    "duplicate_positions_table",
    "hardness_figure",
    "hardness_table",
    "paired_delta_table",
    "paired_heatmap_figure",
    "role_combinations_table",
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
    "evidence_divergence": "Evid. div.",
}
_ROLE_COLORS = {
    "constructive": VERMILLION,
    "redundant": BLACK,
    "distractive": PURPLE,
    "confidence_distorting": ORANGE,
    "unassigned": REFERENCE_COLOR,
    "several_flags": SKY_BLUE,
}
_CI = "95% percentile bootstrap interval (5,000 resamples, seed 42; CUE-R §5.9, App. A)"
_DELTA = (
    "Δ = U(original) - U(intervened) (CUE-R eq. 7, §3.3); positive: the original was "
    "better (for confidence error: the intervened run erred less)"
)
_FLAGS_OVERLAP = "Flags overlap: an item can carry several (CUE-R §3.5)."
#: Definition and paper section of every column of the CUE-R tables (the page's tooltips).
COLUMN_HELP: dict[str, str] = {
    "correctness_axis": "Which correctness ran: soft (1 if normalized match, same yes/no, same "
    "number, or token F1 >= 0.8; App. B) or strict (normalized exact match; §4.6).",
    "n": "Pairs with both the base and the intervened call answered (CUE-R §5.9; SPEC §7).",
    "missing": "Pairs left out because the base or the intervened call failed (error set): "
    "missing, not wrong. A parse error is an answer: it stays in n, scored 0 (SPEC §7).",
    "not_applicable": NOT_APPLICABLE_HELP,
    "correctness": "Correctness on the chosen axis: soft (App. B) or strict normalized "
    "exact match (CUE-R §3.3, §4.6, §5.8).",
    "answer_f1": "Answer F1: token F1 = 2PR/(P+R) after normalization (CUE-R §5.8, App. B).",
    "grounding": "Grounding G = |{u in U: title(u) in S}| / |U|, U the cited passage ids "
    "(the model cites passages; the paper's chunks are HotpotQA paragraphs), S the gold "
    "support titles, 0 when U is empty (CUE-R eq. 11, §5.8).",
    "confidence_error": "Confidence error CE = |c - 1[correct]|, c the self-reported "
    "confidence clamped to [0, 1], correct on the chosen axis (CUE-R §5.8, App. B).",
    "trace_divergence": "Trace divergence D = 0.5 d_Jaccard(E, E') + 0.3 1[y != y'] + 0.2 "
    "|c - c'| (CUE-R §3.4 eq. 9); 0 for the original.",
    "evidence_divergence": "Evidence divergence d_Jaccard(E, E') = 1 - |E ∩ E'| / |E ∪ "
    "E'|, E and E' the cited (used) passage ids of the original and the intervened run, 0 when "
    "both are empty (CUE-R §3.4 eq. 9, App. B; App. C Table 13 'Evid. Div.').",
    "answers_changed": "Answered pairs whose answer differs from the original's after relaxed "
    "normalization: 1[y != y'] of CUE-R §3.4 eq. 9.",
    "pct_answer_changed": "% of n whose answer changed (relaxed-normalized y != y'; CUE-R §3.4 "
    "eq. 9, App. C).",
    "correctness_changed": "Answered pairs whose correctness label flipped, either way "
    "(CUE-R App. C).",
    "pct_correctness_changed": "% of n whose correctness label flipped, either way (CUE-R "
    "App. C: 'correctness changed in at most 5% of examples for front').",
    "constructive": "Items with Δcorr > 0 or Δgrnd > 0: perturbing the item harms correctness "
    "or grounding (CUE-R §3.5). " + _FLAGS_OVERLAP,
    "redundant": "Items with |Δcorr|, |Δgrnd|, |Δcal| <= eps and D <= eps: negligible utility "
    "change and trace divergence (CUE-R §3.5). " + _FLAGS_OVERLAP,
    "distractive": "Items with D >= tau and Δcorr > 0 or Δgrnd > 0: large trace change and a "
    "correctness or grounding loss (CUE-R §3.5); so every distractive item is also "
    "constructive. " + _FLAGS_OVERLAP,
    "confidence_distorting": "Items with |Δcal| > eps and |Δcorr| <= eps: confidence error "
    "changes without a correctness change (CUE-R §3.5). " + _FLAGS_OVERLAP,
    "unassigned": "Items carrying no role flag (CUE-R §3.5).",
    "several_flags": "Items carrying two or more role flags, e.g. constructive and "
    "distractive (CUE-R §3.5).",
    "flags": "Every role flag the item carries, joined by + ('unassigned': none; CUE-R §3.5).",
    "n_flags": "How many role flags the item carries (CUE-R §3.5).",
    "primary_role": "One label per item for colouring and filtering only: the first flag that "
    "holds in the order " + " > ".join(PRIMARY_ROLE_ORDER) + ", else unassigned. Counts are "
    "per flag (CUE-R §3.5).",
    "delta_corr": "Δcorr: " + _DELTA,
    "delta_f1": "ΔF1: " + _DELTA + "; F1 is no role axis.",
    "delta_grnd": "Δgrnd: " + _DELTA,
    "delta_cal": "Δcal (confidence error): " + _DELTA,
    "delta": "Mean paired difference original - intervention over the pairs scored on both "
    "sides (CUE-R Table 3, §5.9).",
    "ci_low": "Lower end of the " + _CI,
    "ci_high": "Upper end of the " + _CI,
    "p": "Two-sided bootstrap p = 2 min(P(δ* >= 0), P(δ* <= 0)) (CUE-R §5.9).",
    "stars": "* p < .05, ** p < .01, *** p < .001 (CUE-R §6.3, Figure 3).",
    "mean_drop_1": "Mean drop original - (support 1 removed) on the synergy axis (CUE-R §6.8, "
    "Table 9).",
    "mean_drop_2": "Mean drop original - (support 2 removed) (CUE-R §6.8, Table 9).",
    "mean_drop_both": "Mean drop original - (both supports removed) (CUE-R §6.8, Table 9).",
    "mean_synergy": "Mean of joint drop - max single drop (CUE-R §6.8, Table 9).",
    "pct_positive_synergy": "% of n whose synergy > 0 (CUE-R §6.8, Table 9).",
    "pct_strong_complementary": "% of n where both single drops <= eps and the joint drop > "
    "eps (CUE-R §6.8, Table 9).",
}
for _m in PROFILE_METRICS:
    COLUMN_HELP[f"{_m}_ci_low"] = f"{_m}: lower end of the {_CI}."
    COLUMN_HELP[f"{_m}_ci_high"] = f"{_m}: upper end of the {_CI}."
for _f in ROLE_FLAGS:
    COLUMN_HELP[f"is_{_f}"] = f"Whether the item carries the {_f} flag. " + COLUMN_HELP[_f]
for _a in ("correctness", "answer_f1", "grounding", "confidence_error"):
    COLUMN_HELP[f"{_a}_orig"] = "Of the original (base) run. " + COLUMN_HELP[_a]


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


def _comparison_colors(result: Mapping[str, Any]) -> dict[str, str]:
    """Palette colour of every comparison label of ``result`` (``original`` included).

    One pool for the profile and the divergence boxes, so an intervention has the same colour
    in both (:func:`core.figures.color_for`, kind ``intervention``).
    """
    pairs = result["pairs"].rename(columns={"variant": "variant_id", "param": "variant"})
    originals = pd.DataFrame(
        {"run": list(dict.fromkeys(pairs["run"])), "operator": "original", "variant": ""}
    )
    both = pd.concat([pairs[["run", "operator", "variant"]], originals], ignore_index=True)
    labels = list(_label_runs(both.fillna({"variant": ""}))["comparison"])
    return {label: color_for(label, "intervention", labels) for label in labels}


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
    colors = _comparison_colors(result)
    for i, row in agg.iterrows():
        means = [row[m] for m in METRICS]
        fig.add_bar(
            name=row["comparison"],
            x=[_METRIC_TITLES[m] for m in METRICS],
            y=means,
            marker_color=colors.get(row["comparison"]) or color_for(row["comparison"]),
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [row[f"{m}_ci_high"] - row[m] for m in METRICS],
                "arrayminus": [row[m] - row[f"{m}_ci_low"] for m in METRICS],
            },
            customdata=[i] * len(METRICS),
            hovertemplate="%{x}: %{y:.3f}<extra>" + row["comparison"] + f" ({_n(row)})</extra>",
        )
    fig.update_layout(barmode="group", yaxis_title="mean (95% CI)", legend_title="intervention")
    titled(fig, "metric")
    return fig, agg


def _n(row: Mapping[str, Any]) -> str:
    """``n=12``, with ``missing=3`` (failed calls) and ``not applicable=1`` when there are any."""
    missing = int(row.get("missing", 0) or 0)
    na = int(row.get("not_applicable", 0) or 0)
    return (
        f"n={row['n']}"
        + (f", missing={missing}" if missing else "")
        + (f", not applicable={na}" if na else "")
    )


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
    text = agg.assign(
        t=[
            f"{d:+.3f}{s}" if not math.isnan(d) else ""
            for d, s in zip(agg["delta"], agg["stars"], strict=True)
        ]
    )
    counts = agg.assign(t=[_n(r) for r in agg.to_dict("records")])
    hover = counts.pivot_table(
        index="comparison", columns="metric", values="t", aggfunc="first", sort=False
    )
    hover = hover.reindex(index=rows, columns=list(METRICS))
    t = text.pivot_table(
        index="comparison", columns="metric", values="t", aggfunc="first", sort=False
    ).reindex(index=rows, columns=list(METRICS))
    bound = float(max(abs(z.min().min()), abs(z.max().max()), 1e-9))
    fig = go.Figure(
        go.Heatmap(
            z=z.to_numpy(),
            x=[_METRIC_TITLES[m] for m in METRICS],
            y=rows,
            text=t.fillna("").to_numpy(),
            texttemplate="%{text}",
            colorscale="RdBu_r",
            zmin=-bound,
            zmax=bound,
            colorbar={"title": "Δ"},
            customdata=hover.fillna("").to_numpy(),
            hovertemplate="%{y} · %{x}: Δ %{z:+.3f} (%{customdata})<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed")
    titled(fig, "metric", "intervention", legend_below=False)
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
        [
            "run",
            "dataset",
            "instance_id",
            "operator",
            "variant",
            "comparison",
            "trace_divergence",
            "correctness_orig",
            "correctness",
        ]
    ]
    fig = go.Figure()
    colors = _comparison_colors(result)
    # boxes in a canonical order (run, operator as planned, parameter) and each box's points
    # (and the CSV rows) in instance order, not the order the pairs happen to be stored in:
    # the same store gives the same figure
    rank = {op: i for i, op in enumerate(("remove", "replace", "duplicate", "move"))}
    first = data.drop_duplicates("comparison")
    order = sorted(
        zip(first["comparison"], first["run"], first["operator"], first["variant"], strict=True),
        key=lambda r: (str(r[1]), rank.get(str(r[2]), len(rank)), str(r[2]), str(r[3])),
    )
    box = {label: i for i, (label, *_) in enumerate(order)}
    data = (
        data.assign(_box=data["comparison"].map(box), _iid=data["instance_id"].astype(str))
        .sort_values(["_box", "_iid"], kind="stable")
        .drop(columns=["_box", "_iid"])
        .reset_index(drop=True)
    )
    groups = dict(list(data.groupby("comparison", sort=False)))
    for label in box:
        grp = groups[label]
        color = colors.get(str(label)) or color_for(label)
        m = int(gone.get(label, 0))
        fig.add_box(
            y=grp["trace_divergence"],
            name=label,
            boxpoints="all",
            jitter=0.4,
            hovertext=f"{label}: n={len(grp)}" + (f", missing={m}" if m else ""),
            pointpos=0,
            customdata=grp.index.to_numpy(),
            marker={"size": 3},
            marker_color=color,
            line_color=color,
        )
    fig.update_layout(yaxis_title="divergence D", showlegend=False)  # the trace divergence
    fig.update_yaxes(range=[-0.02, 1.02])
    titled(fig, "intervention", legend_below=False)
    return fig, data


# ------------------------------------------------------------------------ roles


def role_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Role flag counts per (run, operator, variant) (seed 004 §3.5).

    One column per flag (items carrying it; the flags overlap, so they can sum to more than
    ``n``), ``unassigned`` (no flag), ``several_flags`` (two or more), ``n`` (items with both
    calls answered) and ``missing`` (items without a role because a call failed).
    """
    return result["roles"].aggregate.copy()


def role_combinations_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """How many items carry each combination of flags per comparison (most frequent first)."""
    return result["combinations"].aggregate.copy()


def role_examples(result: Mapping[str, Any]) -> pd.DataFrame:
    """Every item intervention with its flags: the instances behind the flag counts."""
    pairs = result["roles"].per_instance
    cols = [
        "run",
        "dataset",
        "instance_id",
        "operator",
        "param",
        "target",
        "rule",
        "flags",
        "n_flags",
        *[f"is_{f}" for f in ROLE_FLAGS],
        "primary_role",
        "answer_orig",
        "answer",
        "delta_corr",
        "delta_grnd",
        "delta_cal",
        "trace_divergence",
        "evidence_divergence",
        "missing",
    ]
    return pairs[cols].rename(columns={"param": "variant"}).reset_index(drop=True)


def roles_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Grouped bars: items carrying each role flag per intervention (flags overlap).

    Bars are side by side, not stacked: an item can carry several flags, so the bars of one
    intervention can add up to more than its items. ``several flags`` counts the items with
    two or more; each hover gives n and missing.
    """
    agg = _label_runs(role_table(result))
    fig = go.Figure()
    for col in (*ROLE_FLAGS, "unassigned", "several_flags"):
        name = "several flags" if col == "several_flags" else col
        fig.add_bar(
            name=name,
            x=agg["comparison"],
            y=agg[col],
            customdata=agg.index.to_numpy(),
            marker_color=_ROLE_COLORS[col],
            marker_pattern_shape="/" if col == "several_flags" else "",
            text=[
                f"{name}: {v} of {n}" + (f" (missing: {m})" if m else "")
                for v, n, m in zip(agg[col], agg["n"], agg["missing"], strict=True)
            ],
            textposition="none",
            hovertemplate="%{x}: %{text}<extra></extra>",
        )
    fig.update_layout(
        barmode="group",
        yaxis_title="items carrying the flag",
        legend_title="role flag (overlapping)",
    )
    titled(fig, "intervention")
    return fig, agg


# ------------------------------------------------------------------------ synergy


def synergy_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Seed 004 Table 9 per run (one row per run; ``missing``: instances with a failed call)."""
    return result["synergy"].aggregate.copy()


# ------------------------------------------------------------------------ sweeps

#: Columns of the sweep tables (seed 004 Table 8 / Table 13 and the changed shares of App. C).
_SWEEP_COLUMNS = (
    "run",
    "operator",
    "variant",
    "correctness_axis",
    "n",
    "missing",
    "not_applicable",
    *PROFILE_METRICS,
    "answers_changed",
    "pct_answer_changed",
    "correctness_changed",
    "pct_correctness_changed",
)


def _sweep_rows(result: Mapping[str, Any], operator: str, levels: tuple[str, ...]) -> pd.DataFrame:
    """The original and the ``operator`` rows of the profile, levels in ``levels`` order."""
    agg = utility_profile_table(result)
    data = agg[(agg["operator"] == operator) | (agg["operator"] == "original")].copy()
    rank = {v: i for i, v in enumerate(levels)}
    data["_k"] = [
        -1 if o == "original" else rank.get(v, len(levels))
        for o, v in zip(data["operator"], data["variant"], strict=True)
    ]
    return data.sort_values(["run", "_k"], kind="stable").drop(columns="_k").reset_index(drop=True)


def _sweep_table(result: Mapping[str, Any], operator: str, levels: tuple[str, ...]) -> pd.DataFrame:
    """The sweep rows; empty (the figure says why) when the runs hold no ``operator`` rows."""
    data = _sweep_rows(result, operator, levels)[list(_SWEEP_COLUMNS)]
    return data if (data["operator"] == operator).any() else data.iloc[:0]


def hardness_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Replacement-hardness sweep (seed 004 Table 8) with evidence divergence and % changed.

    The original first, then easy / medium / hard; empty without replace interventions.
    """
    return _sweep_table(result, "replace", REPLACE_HARDNESS)


def duplicate_positions_table(result: Mapping[str, Any]) -> pd.DataFrame:
    """Duplicate-position sweep (seed 004 App. C, Table 13), the original first.

    Per position: the metrics, the evidence divergence d_Jaccard (Evid. Div.), and the
    answers and correctness labels changed (count and % of ``n``); empty without duplicate
    interventions.
    """
    return _sweep_table(result, "duplicate", DUPLICATE_POSITIONS)


def _sweep(
    result: Mapping[str, Any], operator: str, levels: tuple[str, ...], title: str
) -> tuple[go.Figure, pd.DataFrame]:
    data = _sweep_rows(result, operator, levels)
    if not (data["operator"] == operator).any():
        return empty_figure(f"no {operator} interventions in the selected runs"), data
    # two rows of three: each panel keeps its level labels legible at a column's width
    ncols = 3
    nrows = -(-len(PROFILE_METRICS) // ncols)
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        shared_xaxes=True,
        vertical_spacing=0.2,
        horizontal_spacing=0.12,
        subplot_titles=[_METRIC_TITLES[m] for m in PROFILE_METRICS],
    )
    runs = list(data["run"].unique())
    for run, grp in data.groupby("run", sort=False):
        color = color_for(run, "run", runs)
        sub = grp[grp["operator"] == operator].set_index("variant").reindex(list(levels))
        orig = grp[grp["operator"] == "original"]
        for i, m in enumerate(PROFILE_METRICS):
            row, col = divmod(i, ncols)
            fig.add_scatter(
                x=list(levels),
                y=sub[m],
                mode="lines+markers",
                name=run,
                legendgroup=run,
                showlegend=i == 0,
                line_color=color,
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": sub[f"{m}_ci_high"] - sub[m],
                    "arrayminus": sub[m] - sub[f"{m}_ci_low"],
                },
                customdata=[
                    f"n={n}, missing={k}, not applicable={a:.0f}, answers changed {p:.1f}%"
                    if p == p
                    else f"n={n}, missing={k}"
                    for n, k, a, p in zip(
                        sub["n"],
                        sub["missing"],
                        sub["not_applicable"].fillna(0),
                        sub["pct_answer_changed"],
                        strict=True,
                    )
                ],
                hovertemplate="%{x}: %{y:.3f} (%{customdata})<extra>" + str(run) + "</extra>",
                row=row + 1,
                col=col + 1,
            )
            if len(orig) and m not in ("trace_divergence", "evidence_divergence"):
                fig.add_hline(
                    y=float(orig[m].iloc[0]),
                    line_dash="dash",
                    line_color=color,
                    opacity=0.6,
                    row=row + 1,
                    col=col + 1,
                )
    fig.update_layout(title=title, legend_title="run")
    # the shared x title under the bottom-left panel, the y title beside the top-left one
    fig.update_layout({f"xaxis{(nrows - 1) * ncols + 1}_title_text": title.lower()})
    titled(fig, None, "mean (95% CI)")
    return steady_axes(fig), data


def hardness_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Metrics vs replacement hardness with the original as a dashed line."""
    return _sweep(result, "replace", REPLACE_HARDNESS, "Replacement hardness")


def duplicate_positions_figure(result: Mapping[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Metrics vs duplicate position with the original as a dashed line."""
    return _sweep(result, "duplicate", DUPLICATE_POSITIONS, "Duplicate position")
