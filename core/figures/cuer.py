"""Figures and tables of CUE-R interventions (SPEC §7; seed 004 §6, App. A, C).

Numbers come from :mod:`core.cuer` only; this module selects the data and draws it. The runs
are ``selection.runs`` (else every run of ``selection.dataset``, else every run) that hold
intervention predictions; each run is shown against its own base trace. The selection's
metadata filters restrict the instances. Options read from ``selection.options``:

- ``eps`` (0.05) and ``tau`` (0.5): role thresholds (negligible change, large divergence);
- ``synergy_metric`` (``answer_f1``): axis of the two-support drops;
- ``n_resamples`` (5,000): bootstrap resamples (SPEC §6.6; seed 42).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import pandas as pd

from core.figures import Selection, register_figure, register_table

__all__ = ["SECTION", "comparison_label", "cuer_result"]

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
_MEMO: OrderedDict[tuple, Any] = OrderedDict()
_MEMO_LOCK = threading.Lock()


def comparison_label(operator: str, variant: str) -> str:
    """``remove``, ``replace:hard``, ``duplicate:end`` ... (``variant`` empty: the operator)."""
    return operator if not variant else f"{operator}:{variant}"


def _memo(key: tuple, build: Any) -> Any:
    with _MEMO_LOCK:
        if key in _MEMO:
            _MEMO.move_to_end(key)
            return _MEMO[key]
    value = build()
    with _MEMO_LOCK:
        _MEMO[key] = value
        while len(_MEMO) > 8:
            _MEMO.popitem(last=False)
    return value


def _runs(store: Any, selection: Selection) -> list[str]:
    runs = store.runs_frame()
    if runs.empty:
        raise ValueError(f"no runs in {store.path}")
    if selection.runs:
        runs = runs[runs["run_id"].isin(selection.runs)]
    elif selection.dataset:
        runs = runs[runs["dataset_id"] == selection.dataset]
    keep = [
        r for r, conds in zip(runs["run_id"], runs["conditions"], strict=True)
        if isinstance(conds, str) and "intervention" in conds
    ]  # fmt: skip
    if not keep:
        raise ValueError(
            "no intervention run selected; start one with: python -m core run-interventions "
            "--dataset NAME --backend embedded --name RUN"
        )
    return sorted(keep)


def cuer_result(store: Any, selection: Selection) -> dict[str, Any]:
    """Every CUE-R frame of the selection (memoized per store version and selection).

    Returns:
        ``{"predictions", "pairs", "profile", "deltas", "roles", "synergy"}``: the prediction
        rows (with ``dataset``), :func:`core.cuer.intervention_pairs` (with ``dataset``) and
        the :class:`core.cuer.CuerResult` of the profile, paired deltas, roles and synergy.

    Raises:
        ValueError: no intervention run in the selection.
    """
    from core.views import selection_to_json, store_version

    def build() -> dict[str, Any]:
        from core.cuer import (
            intervention_pairs, load_pairs, paired_deltas, role_counts, synergy,
            utility_profile,
        )  # fmt: skip
        from core.views import apply_filters

        runs = _runs(store, selection)
        preds = load_pairs(store, runs)
        datasets = {r: (store.run_row(r) or {}).get("dataset_id") for r in runs}
        preds["dataset"] = preds["run"].map(datasets)
        if selection.filters:
            keep = pd.Series(False, index=preds.index)
            for name in {d for d in datasets.values() if d}:
                allowed = apply_filters(store.instances_frame(name), selection.filters)
                keep |= (preds["dataset"] == name) & preds["instance_id"].isin(
                    set(allowed["instance_id"])
                )
            preds = preds[keep].reset_index(drop=True)
        opts = selection.options
        eps = float(opts.get("eps", 0.05))
        tau = float(opts.get("tau", 0.5))
        n = int(opts.get("n_resamples", 5000))
        pairs = intervention_pairs(preds, eps, tau)
        pairs.insert(1, "dataset", pairs["run"].map(datasets))
        return {
            "predictions": preds,
            "pairs": pairs,
            "profile": utility_profile(preds, pairs, n_resamples=n),
            "deltas": paired_deltas(pairs, n_resamples=n),
            "roles": role_counts(pairs),
            "synergy": synergy(pairs, str(opts.get("synergy_metric", "answer_f1")), eps),
        }

    key = ("cuer", str(store.path), store_version(store), selection_to_json(selection))
    return _memo(key, build)


def _label_runs(df: pd.DataFrame) -> pd.DataFrame:
    out = df.copy()
    many = out["run"].nunique() > 1 if len(out) else False
    out["comparison"] = [
        comparison_label(o, v) + (f" [{r}]" if many else "")
        for o, v, r in zip(out["operator"], out["variant"], out["run"], strict=True)
    ]
    return out


def _empty_fig(message: str) -> Any:
    import plotly.graph_objects as go

    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


# ------------------------------------------------------------------------ utility profile


def utility_profile_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Means with 95% bootstrap CIs per (run, operator, variant) (seed 004 Table 2 / App. A)."""
    return cuer_result(store, selection)["profile"].aggregate.copy()


@register_table(
    "cuer_profile",
    title="CUE-R utility profile (means, 95% CIs)",
    description="Per intervention: mean soft correctness, relaxed answer F1, title grounding, "
    "confidence error |c - 1[correct]| and trace divergence over the instances, with 95% "
    "percentile bootstrap intervals (5,000 resamples, seed 42). Original = the retrieved base "
    "trace (BM25 top-5).",
    reference="SPEC §7, §6.6; CUE-R Table 2 and App. A",
)
def _profile_table(store: Any, selection: Selection) -> pd.DataFrame:
    return utility_profile_table(store, selection)


@register_figure(
    "cuer_profile",
    title="Utility profile per intervention",
    description="Grouped bars: each metric's mean per intervention with 95% bootstrap CIs. "
    "Remove and replace lower correctness and grounding; duplicate is mild; trace divergence "
    "is 0 for the original by definition.",
    reference="SPEC §7; CUE-R §6.1, Figure 2",
)
def utility_profile_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Grouped bars of the five metrics per intervention with CI error bars."""
    import plotly.graph_objects as go

    from core.cuer import METRICS

    agg = _label_runs(utility_profile_table(store, selection))
    fig = go.Figure()
    for i, row in agg.iterrows():
        means = [row[m] for m in METRICS]
        fig.add_bar(
            name=row["comparison"], x=[_METRIC_TITLES[m] for m in METRICS], y=means,
            error_y={"type": "data", "symmetric": False,
                     "array": [row[f"{m}_ci_high"] - row[m] for m in METRICS],
                     "arrayminus": [row[m] - row[f"{m}_ci_low"] for m in METRICS]},
            customdata=[i] * len(METRICS),
            hovertemplate="%{x}: %{y:.3f}<extra>" + row["comparison"] + f" (n={row['n']})</extra>",
        )  # fmt: skip
    fig.update_layout(barmode="group", yaxis_title="mean (95% CI)", legend_title="intervention")
    return fig, agg


# ------------------------------------------------------------------------ paired deltas


def paired_delta_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Paired bootstrap deltas original - intervention per metric (seed 004 Table 3)."""
    agg = cuer_result(store, selection)["deltas"].aggregate.copy()
    agg["stars"] = [_stars(p) for p in agg["p"]]
    return agg


def _stars(p: float) -> str:
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return ""
    return "***" if p < 0.001 else "**" if p < 0.01 else "*" if p < 0.05 else ""


@register_table(
    "cuer_paired",
    title="CUE-R paired deltas (original - intervention)",
    description="Mean paired difference original minus intervention per metric, 95% paired "
    "bootstrap CI and two-sided bootstrap p = 2 min(P(d* >= 0), P(d* <= 0)); positive: the "
    "original is higher (for confidence error and trace divergence, lower is better).",
    reference="SPEC §7, §6.6; CUE-R Table 3",
)
def _paired_table(store: Any, selection: Selection) -> pd.DataFrame:
    return paired_delta_table(store, selection)


@register_figure(
    "cuer_paired_heatmap",
    title="Paired-delta heatmap",
    description="Cell = mean paired delta original - intervention; red: the original is "
    "higher, blue: lower. Stars: * p < .05, ** p < .01, *** p < .001 (two-sided bootstrap).",
    reference="SPEC §7; CUE-R §6.3, Figure 3",
)
def paired_heatmap_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Heatmap of paired deltas (rows: interventions, columns: metrics) with stars."""
    import plotly.graph_objects as go

    from core.cuer import METRICS

    agg = _label_runs(paired_delta_table(store, selection))
    if agg.empty:
        return _empty_fig("no interventions in the selected runs"), agg
    rows = list(dict.fromkeys(agg["comparison"]))
    z = agg.pivot_table(index="comparison", columns="metric", values="delta", sort=False)
    z = z.reindex(index=rows, columns=list(METRICS))
    text = agg.assign(t=[f"{d:+.3f}{s}" if not math.isnan(d) else "" for d, s in
                         zip(agg["delta"], agg["stars"], strict=True)])  # fmt: skip
    t = text.pivot_table(index="comparison", columns="metric", values="t", aggfunc="first",
                         sort=False).reindex(index=rows, columns=list(METRICS))  # fmt: skip
    bound = float(max(abs(z.min().min()), abs(z.max().max()), 1e-9))
    fig = go.Figure(
        go.Heatmap(
            z=z.to_numpy(), x=[_METRIC_TITLES[m] for m in METRICS], y=rows,
            text=t.fillna("").to_numpy(), texttemplate="%{text}", colorscale="RdBu_r",
            zmin=-bound, zmax=bound, colorbar={"title": "Δ"},
        )
    )  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    return fig, agg


# ------------------------------------------------------------------------ trace divergence


@register_figure(
    "cuer_divergence",
    title="Trace-divergence distributions",
    description="Per intervention, the distribution of D = 0.5 (1 - Jaccard of cited ids) + "
    "0.3 [answer changed] + 0.2 |c - c'| over instances (box: quartiles; points: "
    "instances). Answer-preserving interventions with D > 0 changed the evidence use.",
    reference="SPEC §7; CUE-R §3.4 eq. 9, §6.2",
)
def divergence_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Box plots of per-instance trace divergence per intervention."""
    import plotly.graph_objects as go

    pairs = cuer_result(store, selection)["pairs"]
    single = pairs[pairs["operator"] != "two_support"].rename(
        columns={"variant": "variant_id", "param": "variant"}
    )
    data = _label_runs(single)[
        ["run", "dataset", "instance_id", "operator", "variant", "comparison",
         "trace_divergence", "correctness_orig", "correctness"]
    ].reset_index(drop=True)  # fmt: skip
    fig = go.Figure()
    for label, grp in data.groupby("comparison", sort=False):
        fig.add_box(y=grp["trace_divergence"], name=label, boxpoints="all", jitter=0.4,
                    pointpos=0, customdata=grp.index.to_numpy(), marker={"size": 3})
    fig.update_layout(yaxis_title="trace divergence D", showlegend=False)
    fig.update_yaxes(range=[-0.02, 1.02])
    return fig, data


# ------------------------------------------------------------------------ roles


def role_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Role counts per (run, operator, variant, role)."""
    return cuer_result(store, selection)["roles"].aggregate.copy()


def role_examples(store: Any, selection: Selection) -> pd.DataFrame:
    """Every item intervention with its role: the instances behind the role counts."""
    pairs = cuer_result(store, selection)["roles"].per_instance
    cols = ["run", "dataset", "instance_id", "operator", "param", "target", "rule", "role",
            "answer_orig", "answer", "delta_corr", "delta_grnd", "delta_cal",
            "trace_divergence"]  # fmt: skip
    return pairs[cols].rename(columns={"param": "variant"}).reset_index(drop=True)


@register_table(
    "cuer_roles",
    title="Evidence-role counts",
    description="Per intervention, how many target items got each role: constructive "
    "(Δcorr > 0 or Δgrnd > 0), redundant (all |Δ| <= eps and D <= eps), distractive (D >= "
    "tau and a utility worsens), confidence-distorting (|Δcal| > eps and |Δcorr| <= eps); the "
    "first rule that holds, in that order.",
    reference="SPEC §7; CUE-R §3.5",
)
def _role_table(store: Any, selection: Selection) -> pd.DataFrame:
    return role_table(store, selection)


@register_table(
    "cuer_role_examples",
    title="Role examples",
    description="Each item intervention with its role, the original and perturbed answers, "
    "the deltas and the trace divergence; select one to open the instance in the Case view.",
    reference="SPEC §7; CUE-R §3.5, §6.9",
)
def _role_examples(store: Any, selection: Selection) -> pd.DataFrame:
    return role_examples(store, selection)


@register_figure(
    "cuer_roles",
    title="Evidence roles per intervention",
    description="Stacked counts of the role each intervened item got (thresholds eps and tau "
    "in the page settings).",
    reference="SPEC §7; CUE-R §3.5",
)
def roles_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Stacked bars of role counts per intervention."""
    import plotly.graph_objects as go

    from core.cuer import ROLES

    agg = _label_runs(role_table(store, selection))
    fig = go.Figure()
    for role in ROLES:
        sub = agg[agg["role"] == role]
        fig.add_bar(name=role, x=sub["comparison"], y=sub["n"], customdata=sub.index.to_numpy(),
                    marker_color=_ROLE_COLORS[role])  # fmt: skip
    fig.update_layout(barmode="stack", yaxis_title="items", legend_title="role")
    return fig, agg


# ------------------------------------------------------------------------ synergy


@register_table(
    "cuer_synergy",
    title="Two-support synergy",
    description="Instances with >= 2 gold passages shown: mean drop (original - ablation) "
    "removing support 1, support 2 and both; mean synergy = joint drop - max single drop; % "
    "positive synergy; % strong complementary (both single drops <= eps, joint > eps).",
    reference="SPEC §7; CUE-R §6.8, Table 9",
)
def synergy_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Seed 004 Table 9 per run (one row per run)."""
    return cuer_result(store, selection)["synergy"].aggregate.copy()


# ------------------------------------------------------------------------ sweeps


def _sweep(store: Any, selection: Selection, operator: str, levels: tuple[str, ...],
           title: str) -> tuple[Any, pd.DataFrame]:  # fmt: skip
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from core.cuer import METRICS

    agg = utility_profile_table(store, selection)
    data = agg[(agg["operator"] == operator) | (agg["operator"] == "original")]
    data = data.reset_index(drop=True)
    if not (data["operator"] == operator).any():
        return _empty_fig(f"no {operator} interventions in the selected runs"), data
    fig = make_subplots(rows=1, cols=len(METRICS),
                        subplot_titles=[_METRIC_TITLES[m] for m in METRICS])  # fmt: skip
    for r_i, (run, grp) in enumerate(data.groupby("run", sort=False)):
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


@register_figure(
    "cuer_hardness",
    title="Replacement-hardness sweep",
    description="Each metric per replacement hardness: easy (seeded random non-support unit), "
    "medium (highest BM25 vs the question), hard (highest BM25 vs the target text); dashed: "
    "the original.",
    reference="SPEC §7; CUE-R §5.6, §6.7, Figure 6",
)
def hardness_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Metrics vs replacement hardness with the original as a dashed line."""
    from core.interventions import REPLACE_HARDNESS

    return _sweep(store, selection, "replace", REPLACE_HARDNESS, "Replacement hardness")


@register_figure(
    "cuer_duplicate_positions",
    title="Duplicate-position sweep",
    description="Each metric per duplicate insertion position: front (before all evidence), "
    "after (right after the original), end (after all evidence, the default); dashed: the "
    "original.",
    reference="SPEC §7; CUE-R App. C, Table 13",
)
def duplicate_positions_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Metrics vs duplicate position with the original as a dashed line."""
    from core.interventions import DUPLICATE_POSITIONS

    return _sweep(store, selection, "duplicate", DUPLICATE_POSITIONS, "Duplicate position")
