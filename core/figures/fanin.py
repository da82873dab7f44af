"""Figures and tables of fan-in degradation (AuthTrace) and retrieval-context coverage (CRUX).

Fan-in functions take the :class:`core.fanin.metrics.FaninResult` of the selection
(:func:`core.views.fanin.fanin_result`), CRUX functions its :class:`core.crux.metrics.CruxResult`
(:func:`core.views.fanin.crux_result`); numbers come from :mod:`core.fanin` and
:mod:`core.crux` only, this module draws them. Options (declared below, read by the views):

- ``n_resamples``: bootstrap resamples (default 5,000, SPEC §6.6);
- ``points``: Pearson points per (system, ``bucket``) as seed 003 Fig. 3 (default) or per exact
  ``fan_in``; ``r_include_oracle`` / ``r_include_full_context`` (both off: Fig. 3 has neither,
  see :mod:`core.fanin`);
- CRUX: ``crux_retrievers`` (else ``retrievers``; default lexical, oracle), ``crux_ks`` (else
  ``ks``; default 1, 3, 5), ``crux_k_required`` (also k = |Z*|), ``eta`` (3), ``chunk_size``
  (220), ``overlap`` (40), ``judge`` (None).

Every CRUX figure and table says where answerability came from, with counts: derived from gold
evidence (not judged; eta does not apply) or judged (:func:`core.crux.metrics.answerability_note`).
"""

from __future__ import annotations

import html
import math
import textwrap
from dataclasses import replace

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.crux.metrics import ETA as CRUX_ETA
from core.crux.metrics import K_REQUIRED, CruxResult
from core.fanin.metrics import FaninResult, correlation_note
from core.figures import REFERENCE_COLOR, SCORE_FIELD, color_for, drill, titled
from core.params import Param
from core.retrieval.retrievers import TOP_K, retriever_param

__all__ = [
    "CRUX_DEFAULT_KS",
    "CRUX_DEFAULT_RETRIEVERS",
    "CRUX_KS",
    "CRUX_K_REQUIRED",
    "CRUX_RETRIEVERS",
    "ETA",
    "JUDGE",
    "POINTS",
    "R_INCLUDE_FULL_CONTEXT",
    "R_INCLUDE_ORACLE",
    "SCORE_SOURCE",
    "crux_coverage_figure",
    "crux_table",
    "fanin_buckets_table",
    "fanin_degradation_figure",
    "fanin_degradation_table",
    "fanin_pairs_table",
    "fanin_scatter_figure",
]

#: Retrievers of the CRUX views when the selection names none (dense loads a model).
CRUX_DEFAULT_RETRIEVERS = ("lexical", "oracle")
#: Context sizes of the CRUX views when the selection names none.
CRUX_DEFAULT_KS = (1, 3, 5)
#: Pearson points: one per (system, fan-in bucket) as seed 003 Fig. 3, or per exact fan-in.
POINTS = Param(
    "points",
    str,
    "bucket",
    "Pearson r points: one per (system, fan-in bucket) as the paper's Figure 3 "
    "('method-fan-in pairs'), or per (system, exact fan_in)",
    choices=("bucket", "fan_in"),
    section="seed 003 §6.1, Fig. 3",
)
#: Add the oracle's points to Pearson r (off: ER = EP = 1 by construction, not in Fig. 3).
R_INCLUDE_ORACLE = Param(
    "r_include_oracle",
    bool,
    False,
    "include the oracle condition's points in Pearson r (its pack is the gold evidence: "
    "ER = EP = 1 by construction; Figure 3 leaves it out)",
    section="seed 003 Fig. 3, Table 4",
)
#: Add full-context points (pack = cited passages) to Pearson r (off: not in Fig. 3).
R_INCLUDE_FULL_CONTEXT = Param(
    "r_include_full_context",
    bool,
    False,
    "include full-context points in Pearson r (pack = cited passages; Figure 3 has no "
    "long-context points: that baseline has no compact evidence pack)",
    section="seed 003 §5, Fig. 3, Table 4",
)
#: Where AC / ER / EP come from: the proxies (default) or AuthTrace's judges (issue 20 item 2).
SCORE_SOURCE = Param(
    "score_source",
    str,
    "proxy",
    "where AC, ER and EP come from: 'proxy' (AC = 100 x the score field, ER / EP over passage "
    "ids) or 'judged' (AC = 0-3 claim rubric / 3 x 100, ER / EP from segment judgments of the "
    "authtrace-correctness and authtrace-evidence judge runs; a prediction without a judged AC "
    "is counted in missing)",
    choices=("proxy", "judged"),
    section="seed 003 §3, App. K",
)
#: Retriever families of the CRUX views (the option ``retrievers`` when this one is unset).
CRUX_RETRIEVERS = replace(
    retriever_param().many(CRUX_DEFAULT_RETRIEVERS, "retriever families of the CRUX views"),
    name="crux_retrievers",
)
#: Context sizes k of the CRUX views (the option ``ks`` when this one is unset).
CRUX_KS = replace(TOP_K.many(CRUX_DEFAULT_KS, "context sizes k of the CRUX views"), name="crux_ks")
#: Whose stored 0-5 answerability ratings CRUX uses (None: derived from gold).
JUDGE = Param(
    "judge", str, None, "judge whose answerability ratings CRUX uses", section="seed 002 §3.1"
)
#: CRUX answerability threshold on the 0-5 rating scale.
ETA = Param(
    "eta",
    int,
    CRUX_ETA,
    "CRUX answerability threshold eta: a passage answers a sub-question when its judged 0-5 "
    "rating is >= eta (the paper's default 3; its §4.4 repeats the analysis at 5); no effect "
    "on answerability derived from gold evidence",
    choices=(1, 2, 3, 4, 5),
    section="seed 002 eq. 2, fn. 3, §4.4",
)
#: Also score CRUX contexts of k = |Z*| chunks per instance.
CRUX_K_REQUIRED = Param(
    "crux_k_required",
    bool,
    False,
    "also score the context of k = |Z*| chunks per instance: top-k set to the size of the "
    "required subset Z* (greedy set cover of the answerable sub-questions by gold passages)",
    section="seed 002 §4.2, §4.4",
)

_DASH = ("solid", "dash", "dot", "dashdot", "longdash")


def _label(system: str, n_runs: int) -> str:
    run, _, cond = system.rpartition(":")
    return cond if n_runs == 1 else f"{run} · {cond}"


# ------------------------------------------------------------------------------ fan-in


def fanin_degradation_figure(
    res: FaninResult, *, score_field: str = SCORE_FIELD.default
) -> tuple[go.Figure, pd.DataFrame]:
    """AC vs exact fan-in per system, with CI bands."""
    data = res.by_fan_in.reset_index(drop=True)
    n_runs = data["run"].nunique() if len(data) else 0
    runs = list(dict.fromkeys(data["run"]))
    fig = go.Figure()
    for system, d in data.groupby("system", sort=False):
        cond = str(d["condition"].iloc[0])
        color = color_for(cond, "condition")
        dash = _DASH[runs.index(d["run"].iloc[0]) % len(_DASH)]
        label = _label(str(system), n_runs)
        fig.add_trace(
            go.Scatter(
                x=np.concatenate([d["fan_in"], d["fan_in"][::-1]]),
                y=np.concatenate([d["ac_ci_high"], d["ac_ci_low"][::-1]]),
                fill="toself",
                fillcolor=color,
                opacity=0.15,
                line={"width": 0},
                hoverinfo="skip",
                showlegend=False,
                legendgroup=label,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=d["fan_in"],
                y=d["ac"],
                mode="lines+markers",
                name=label,
                legendgroup=label,
                line={"color": color, "dash": dash},
                customdata=drill.customdata(d, _FANIN_KEYS, "n"),
                text=[
                    f"n={n}{_gone(m)}, ER={_pct(e)}, EP={_pct(p)}"
                    for n, m, e, p in zip(d["n"], d["missing"], d["er"], d["ep"], strict=True)
                ],
                hovertemplate="fan-in %{x}: AC %{y:.1f} (%{text})<extra>" + label + "</extra>",
            )
        )
    fig.update_xaxes(title_text="fan-in (distinct gold documents)", dtick=1)
    fig.update_yaxes(title_text=_ac_title(res, score_field), range=[0, 102])
    fig.update_layout(legend_title_text="system", margin={"t": 30})
    titled(fig)
    drill.declare(fig, _FANIN_KEYS, frame="fanin")
    return fig, data


#: What identifies a point of the degradation curves (drill-down keys; fan-in counted from
#: the gold passages, as the fan-in frame does).
_FANIN_KEYS = ("run", "condition", "fan_in")


def _gone(missing: int) -> str:
    """``, missing=3`` beside an n (failed calls left out), nothing when none."""
    return f", missing={int(missing)}" if missing else ""


#: What each score field is, in an axis title (a proxy names what it plots).
_SCORE_NAMES = {
    "f1_relaxed": "answer F1",
    "f1_strict": "answer F1, strict",
    "em_relaxed": "answer EM",
    "em_strict": "answer EM, strict",
    "ev_f1": "evidence F1",
}


def _ac_title(res: FaninResult, score_field: str | None = None) -> str:
    """The AC axis title: a proxy says it is one and what it plots.

    100 x the score field for the proxy; the judged value keeps the paper's name (issue 34
    item 6).
    """
    if res.source == "judged":
        return "AC judged (0-3 rubric / 3 x 100)"
    field = score_field or getattr(res, "score_field", None) or "f1_relaxed"
    return f"100 x {_SCORE_NAMES.get(field, field)} (proxy for AC)"


def _er_title(metric: str, res: FaninResult) -> str:
    """ER / EP axis title: judged, or the proxy's passage-id overlap (issue 34 item 6)."""
    if res.source == "judged":
        return f"{metric.upper()} judged (%)"
    return f"{metric.upper()}, id overlap (%)"


def _pct(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.0f}%"


def fanin_scatter_figure(res: FaninResult) -> tuple[go.Figure, pd.DataFrame]:
    """ER-AC and EP-AC scatter panels with r and the regression line.

    The points are those Pearson r used (:attr:`core.fanin.metrics.FaninResult.correlation`); a note
    under the panels says how many, of which systems and buckets, and what was left out.
    """
    corr = res.correlation
    level = corr["points_level"]
    pts = pd.DataFrame(
        corr["points"], columns=["system", "run", "condition", level, "n", "ac", "er", "ep"]
    )
    what = "bucket" if level == "bucket" else "fan-in"
    titles = []
    for key, name in (("er_ac", "ER"), ("ep_ac", "EP")):
        c = corr[key]
        titles.append(
            f"{name}-AC: r = {_num(c['r'])} [{_num(c['ci_low'])}, {_num(c['ci_high'])}]"
            f",<br>{c['n']} (system, {what}) points"
        )
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, shared_yaxes=True)
    n_runs = len({s.rpartition(":")[0] for s in pts["system"]})
    for col, (key, metric) in enumerate((("er_ac", "er"), ("ep_ac", "ep")), start=1):
        for system, d in pts.groupby("system", sort=False):
            cond = str(system).rpartition(":")[2]
            fig.add_trace(
                go.Scatter(
                    x=100 * d[metric],
                    y=d["ac"],
                    mode="markers+text",
                    name=_label(system, n_runs),
                    legendgroup=str(system),
                    showlegend=col == 1,
                    marker={"color": color_for(cond, "condition"), "size": 9},
                    text=[str(v) for v in d[level]],
                    textposition="top center",
                    customdata=d["n"],
                    hovertemplate=_er_title(metric, res)
                    + " %{x:.1f}, "
                    + _ac_title(res)
                    + " %{y:.1f} (n=%{customdata})<extra>%{text}</extra>",
                ),
                row=1,
                col=col,
            )
        c = corr[key]
        if not math.isnan(c["slope"]):
            xs = np.array([pts[metric].min(), pts[metric].max()])
            fig.add_trace(
                go.Scatter(
                    x=100 * xs,
                    y=c["intercept"] + c["slope"] * xs,
                    mode="lines",
                    line={"color": REFERENCE_COLOR, "dash": "dash"},
                    showlegend=False,
                    hoverinfo="skip",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text=_er_title(metric, res), range=[-2, 102], row=1, col=col)
    fig.update_yaxes(title_text=_ac_title(res), range=[0, 102], row=1, col=1)
    _note(fig, correlation_note(corr))
    # the note sits under the panels, so the legend goes inside (top left of the ER panel)
    fig.update_layout(
        legend_title_text="system",
        margin={"t": 60},
        legend={
            "x": 0.01,
            "xanchor": "left",
            "y": 0.99,
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.7)",
        },
    )
    return fig, pts


def _note(fig: go.Figure, text: str, width: int = 110) -> None:
    """A wrapped note under the plot (kept in every export: it is part of the figure)."""
    lines = textwrap.wrap(html.escape(text), width)
    fig.add_annotation(
        text="<br>".join(lines),
        showarrow=False,
        xref="paper",
        yref="paper",
        x=0.0,
        y=-0.2,
        xanchor="left",
        yanchor="top",
        align="left",
        font={"size": 11},
    )
    fig.update_layout(margin={"b": 80 + 16 * len(lines)})


def _num(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.2f}"


def fanin_degradation_table(res: FaninResult) -> pd.DataFrame:
    """Degradation, construction loss and failure attribution per system.

    ``n`` beside each AC counts the answered predictions behind it, ``missing`` the failed
    calls left out.
    """
    d = res.degradation.merge(
        res.attribution[["system", "n", "missing", "n_failures", "n_low_er", "share"]],
        on="system",
        how="left",
    )
    out = pd.DataFrame(
        {
            "run": d["run"],
            "condition": d["condition"],
            "model": d["model"],
            "n": d["n"],
            "missing": d["missing"],
            "AC proxy single": d["ac_single"].round(1),
            "n single": d["n_single"],
            "missing single": d["missing_single"],
            "AC proxy high": d["ac_high"].round(1),
            "n high": d["n_high"],
            "missing high": d["missing_high"],
            "rel. drop %": (100 * d["rel_degradation"]).round(1),
            "CI low %": (100 * d["rel_ci_low"]).round(1),
            "CI high %": (100 * d["rel_ci_high"]).round(1),
            "oracle drop %": (100 * d["oracle_rel_degradation"]).round(1),
            "construction loss pp": d["construction_loss_pp"].round(1),
            "failures (AC<33)": d["n_failures"],
            "with ER id-overlap<50% %": (100 * d["share"]).round(1),
        }
    )
    if res.source == "judged":
        out = out.rename(
            columns={
                "AC proxy single": "AC judged single",
                "AC proxy high": "AC judged high",
                "with ER id-overlap<50% %": "with ER judged<50% %",
            }
        )
    return out


def fanin_buckets_table(res: FaninResult) -> pd.DataFrame:
    """AC / ER / EP per (system, bucket) with CIs (``missing``: failed calls left out)."""
    b = res.by_bucket
    out = b[["run", "condition", "bucket", "n", "missing"]].copy()
    judged = res.source == "judged"
    for m, scale in (("ac", 1.0), ("er", 100.0), ("ep", 100.0)):
        # a proxy says it is one: AC from the score field, ER / EP as passage-id overlap
        tag = " judged" if judged else " proxy" if m == "ac" else " id-overlap"
        name = f"{m.upper()}{tag}" if m == "ac" else f"{m.upper()}{tag} %"
        out[name] = (scale * b[m]).round(1)
        out[f"{name} CI"] = [
            "-" if math.isnan(lo) else f"[{scale * lo:.1f}, {scale * hi:.1f}]"
            for lo, hi in zip(b[f"{m}_ci_low"], b[f"{m}_ci_high"], strict=True)
        ]
    if "ci_method" in b.columns:
        out["CI method"] = b["ci_method"]
    if "no_pack" in b.columns and b["no_pack"].gt(0).any():
        # answered, but which passages the call showed is not stored: ER / EP not measured
        out.insert(5, "no pack (ER/EP missing)", b["no_pack"])
    return out


def fanin_pairs_table(res: FaninResult) -> pd.DataFrame:
    """Jaccard of failure sets and crossover fan-in per system pair.

    ``n_common``: instances both systems answered; ``missing``: instances both hold where
    either call failed (left out).
    """
    o = res.overlap.copy()
    o["jaccard"] = o["jaccard"].round(3)
    o["leader at lowest fan-in"] = [
        a if lead == "a" else (b if lead == "b" else None)
        for a, b, lead in zip(o["system_a"], o["system_b"], o["leader_first"], strict=True)
    ]
    return o.drop(columns=["leader_first"])


# ------------------------------------------------------------------------------ CRUX


def crux_coverage_figure(res: CruxResult) -> tuple[go.Figure, pd.DataFrame]:
    """Three panels (Cov, alpha-nDCG, density) against k per retriever.

    ``k = |Z*|`` (when scored) is its own category after the fixed sizes. A note under the
    panels says whose answerability was used, with counts
    (:attr:`core.crux.metrics.CruxResult.note`).
    """
    agg = res.aggregate
    panels = (("coverage", "Cov"), ("alpha_ndcg", "alpha-nDCG"), ("density", "density"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels])
    categorical = bool(len(agg)) and (agg["k"] == K_REQUIRED).any()
    names = list(agg["retriever"].unique())
    for name, d in agg.groupby("retriever", sort=False):
        xs = [str(k) for k in d["k"]] if categorical else d["k"]
        for col, (metric, _) in enumerate(panels, start=1):
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=d[metric],
                    mode="lines+markers",
                    name=str(name),
                    legendgroup=str(name),
                    showlegend=col == 1,
                    line={
                        "color": color_for(name, "retriever", names),
                        "dash": "dot" if name == "oracle" else "solid",
                    },
                    error_y={
                        "type": "data",
                        "symmetric": False,
                        "array": d[f"{metric}_ci_high"] - d[metric],
                        "arrayminus": d[metric] - d[f"{metric}_ci_low"],
                    },
                    customdata=d["k_mean"],
                    hovertemplate="k=%{x} (mean %{customdata:.1f} chunks): %{y:.3f}<extra>"
                    + str(name)
                    + "</extra>",
                ),
                row=1,
                col=col,
            )
    if categorical:
        order = [str(k) for k in dict.fromkeys(agg["k"]) if k != K_REQUIRED] + [K_REQUIRED]
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    fig.update_xaxes(title_text="k (chunks)")
    fig.update_yaxes(rangemode="tozero")
    # the note under the panels names the answerability source; the legend goes inside
    fig.update_layout(
        legend_title_text=f"retriever (eta = {res.eta:g})",
        margin={"t": 40},
        legend={
            "x": 0.01,
            "xanchor": "left",
            "y": 0.99,
            "yanchor": "top",
            "bgcolor": "rgba(255,255,255,0.7)",
        },
    )
    titled(fig, y="mean score", legend_below=False)
    _note(fig, res.note, width=130)
    return fig, agg


def crux_table(res: CruxResult) -> pd.DataFrame:
    """The CRUX aggregate, rounded for display, with eta and where answerability came from.

    ``judged`` / ``gold_derived`` count the instances behind each row whose answerability was
    judged (ratings >= eta) or derived from gold evidence (binary; eta does not apply), and
    ``answerability`` says the same in words.
    """
    agg = res.aggregate.copy()
    for col in agg.columns:
        if agg[col].dtype.kind == "f":
            agg[col] = agg[col].round(1 if col in ("tokens", "k_mean") else 3)
    agg.insert(2, "eta", res.eta)
    if "k" in agg.columns:
        agg["k"] = [str(k) for k in agg["k"]] if (agg["k"] == K_REQUIRED).any() else agg["k"]
    return agg
