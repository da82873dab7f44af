"""Figures and tables of attribution runs (issue 40; ContextCite, Cohen-Wang et al., NeurIPS 2024).

Every function takes the dict of :func:`core.views.attribution.attribution_result` (the
report of :func:`core.attribution.report.attribution_report` with ``instances`` and
``passages`` as frames) and draws or arranges it; numbers come from :mod:`core.attribution`
and :mod:`core.attribution.report` only. :data:`HELP` holds the definitions shown as
tooltips on the Attribution page and in the guide.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import plotly.graph_objects as go

from core.attribution.metrics import GROUPS
from core.figures import BLUE, GREEN, ORANGE, PURPLE, REFERENCE_COLOR, empty_figure, titled

__all__ = [
    "HELP",
    "cited_causal_table",
    "gold_reliance_figure",
    "gold_reliance_table",
    "lds_figure",
    "weights_figure",
]

#: Definitions (tooltips, the guide).
HELP = {
    "retention": "Target 'retention' (this tool's default): the answer F1 (SQuAD, strict "
    "normalization) of an ablated call's answer against the unablated call's answer. 1: the "
    "ablation left the answer as it was; 0: it changed it completely. It needs no gold answer "
    "and no log-probabilities, so every backend has it. It measures whether the answer "
    "depends on a passage, not whether the answer is right (target 'correct' scores against "
    "gold; ContextCite's own target, the log-probability of the unablated answer, needs a "
    "backend that scores a forced continuation, which none here does).",
    "weight": "The passage's weight in the sparse linear surrogate (ContextCite): a Lasso of "
    "the target on the ablation masks (1 = passage kept), alpha chosen by 5-fold "
    "cross-validation over the masks. Roughly: how much the target rises when this passage is "
    "kept, the others as they were.",
    "ci": "95% percentile bootstrap interval of the weight: the Lasso refitted at the chosen "
    "alpha on resamples of the masks (with replacement).",
    "causal": "Causal: the weight's bootstrap CI lies above 0. Empty (undetermined): every "
    "answered mask kept (or dropped) the passage, so the masks say nothing about it.",
    "lds": "Linear datamodeling score (ContextCite): Spearman's rank correlation between the "
    "surrogate's predictions and the observed targets on masks it was not fitted on (each "
    "mask predicted by the cross-validation fold that left it out). Near 1: the weights "
    "explain the ablations; below 0.3: read the weights with care.",
    "topk": "Top-k drop: the unablated target minus the target observed when the k passages "
    "of highest weight are removed (one extra call each, k = 1, 2).",
    "cited": "Cited: the unablated answer cited the passage (its evidence ids).",
    "gold_reliance": "Gold reliance: per instance, the share of the total positive weight "
    "that lies on gold passages (undefined, and counted, when no weight is positive); mean "
    "per cell with a 95% percentile bootstrap CI.",
    "agreement": "Agreement with CUE-R remove: Spearman between a passage's attribution "
    "weight and the answer-F1 drop when CUE-R removed it (original - removed), over the "
    "passages both runs cover.",
}


def cited_causal_table(result: dict[str, Any]) -> pd.DataFrame:
    """The cited-vs-causal 2x2 (rows cited / not cited; columns causal / not causal / n)."""
    c = result["cited_vs_causal"]["cells"]
    return pd.DataFrame(
        {
            "": ["cited", "not cited"],
            "causal": [c["cited_causal"], c["not_cited_causal"]],
            "not causal": [c["cited_not_causal"], c["not_cited_not_causal"]],
        }
    ).assign(n=lambda d: d["causal"] + d["not causal"])


def gold_reliance_table(result: dict[str, Any]) -> pd.DataFrame:
    """Gold reliance per cell: group, value, mean, CI, n, undefined (overall first)."""
    gr = result["gold_reliance"]
    o = gr["overall"]
    rows = [
        {
            "group": "all",
            "value": "all",
            "mean": o["mean"],
            "ci_low": o["ci_low"],
            "ci_high": o["ci_high"],
            "n": o["n"],
            "undefined": gr["undefined"],
        }
    ]
    for group, cells in gr["groups"].items():
        rows += [
            {
                "group": group,
                **{k: r[k] for k in ("value", "mean", "ci_low", "ci_high", "n", "undefined")},
            }
            for r in cells
        ]
    out = pd.DataFrame(rows)
    out["value"] = out["value"].astype(str)  # a column of one type (4000 and "front" are cells)
    return out


def gold_reliance_figure(result: dict[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Bars of gold reliance per cell of each metadata group, with 95% bootstrap CIs."""
    data = gold_reliance_table(result)
    if data["n"].sum() == 0:
        return empty_figure("no instance has a positive weight"), data
    fig = go.Figure()
    colors = dict(zip(GROUPS, (BLUE, ORANGE, GREEN), strict=True))
    for group, grp in data[data["group"] != "all"].groupby("group", sort=False):
        mean = grp["mean"].astype(float)
        fig.add_bar(
            y=[str(v) for v in grp["value"]],
            x=mean,
            name=str(group).replace("_", " "),
            orientation="h",
            marker_color=colors.get(group, PURPLE),
            error_x={
                "type": "data",
                "array": grp["ci_high"].astype(float) - mean,
                "arrayminus": mean - grp["ci_low"].astype(float),
            },
            hovertext=[
                f"n={n}, undefined={u}" for n, u in zip(grp["n"], grp["undefined"], strict=True)
            ],
        )
    fig.add_vline(x=float(data["mean"].iloc[0]), line_dash="dot", line_color=REFERENCE_COLOR)
    fig.update_xaxes(range=[0, 1.05])
    fig.update_yaxes(autorange="reversed", type="category")  # 4000 is a cell, not a number
    return titled(fig, "share of positive weight on gold", "cell"), data


def lds_figure(result: dict[str, Any]) -> tuple[go.Figure, pd.DataFrame]:
    """Histogram of the per-instance LDS with the low-LDS threshold."""
    inst = result["instances"]
    data = inst[["instance_id", "lds"]] if len(inst) else pd.DataFrame(columns=["lds"])
    lds = data["lds"].astype(float).dropna() if len(data) else pd.Series(dtype=float)
    if lds.empty:
        return empty_figure("no instance has a defined LDS"), data
    fig = go.Figure(
        go.Histogram(
            x=lds,
            xbins={"start": -1, "end": 1.0001, "size": 0.05},
            marker_color=BLUE,
            name="instances",
        )
    )
    thr = result["lds"]["threshold"]
    fig.add_vline(
        x=thr,
        line_dash="dot",
        line_color=REFERENCE_COLOR,
        annotation_text=f"{thr:g}: {result['lds']['below']} below",
    )
    return titled(fig, "LDS (held-out Spearman)", "instances", legend_below=False), data


def weights_figure(passages: pd.DataFrame) -> tuple[go.Figure, pd.DataFrame]:
    """One instance's weights with their CIs, in shown order; gold passages in orange."""
    if passages is None or not len(passages):
        return empty_figure("no attribution for this instance"), pd.DataFrame()
    data = passages.sort_values("position")
    w = data["weight"].astype(float)
    color = [
        ORANGE if g else (BLUE if c else REFERENCE_COLOR)
        for g, c in zip(data["gold"], data["cited"], strict=True)
    ]
    fig = go.Figure(
        go.Bar(
            x=data["passage_id"],
            y=w,
            marker_color=color,
            error_y={
                "type": "data",
                "array": data["ci_high"].astype(float) - w,
                "arrayminus": w - data["ci_low"].astype(float),
            },
            hovertext=[
                f"position {p}; gold: {g}; cited: {c}; {n}"
                for p, g, c, n in zip(
                    data["position"], data["gold"], data["cited"], data["note"], strict=True
                )
            ],
        )
    )
    fig.add_hline(y=0, line_color=REFERENCE_COLOR)
    return titled(
        fig, "passage (shown order; orange = gold, blue = cited)", "weight", legend_below=False
    ), data
