"""Figures and tables of fan-in degradation (AuthTrace) and retrieval-context coverage (CRUX).

Numbers come from :mod:`core.fanin` and :mod:`core.crux` only; this module selects the data
and draws it. Fan-in views use ``selection.runs`` (else every run of ``selection.dataset``,
else every run), several runs of one dataset restricted to their common instances (paired),
and the selection's metadata filters. Options read from ``selection.options``:

- ``n_resamples``: bootstrap resamples (default 5,000, SPEC §6.6);
- ``points``: Pearson points per exact ``fan_in`` (default) or per ``bucket``;
- CRUX: ``crux_retrievers`` (else ``retrievers``; default lexical, oracle), ``crux_ks`` (else
  ``ks``; default 1, 3, 5), ``chunk_size`` (220), ``overlap`` (40), ``judge`` (None).
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pandas as pd

from core.figures import Selection, register_figure, register_table

__all__ = [
    "CRUX_DEFAULT_KS",
    "CRUX_DEFAULT_RETRIEVERS",
    "crux_result",
    "fanin_result",
]

#: Retrievers of the CRUX views when the selection names none (dense loads a model).
CRUX_DEFAULT_RETRIEVERS = ("lexical", "oracle")
#: Context sizes of the CRUX views when the selection names none.
CRUX_DEFAULT_KS = (1, 3, 5)

_COLORS = {"no_evidence": "#9e9e9e", "full_context": "#1f77b4", "retrieved": "#ff7f0e",
           "oracle": "#2ca02c"}  # fmt: skip
_DASH = ("solid", "dash", "dot", "dashdot", "longdash")
_MEMO: OrderedDict[tuple, Any] = OrderedDict()
_MEMO_LOCK = threading.Lock()


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


def _key(store: Any, selection: Selection, what: str) -> tuple:
    from core.views import selection_to_json, store_version

    return (what, str(store.path), store_version(store), selection_to_json(selection))


def _runs(store: Any, selection: Selection) -> list[str]:
    if selection.runs:
        return list(selection.runs)
    return store.resolve_runs(selection.dataset) if selection.dataset else store.resolve_runs()


def fanin_result(store: Any, selection: Selection) -> Any:
    """:class:`core.fanin.FaninResult` of the selection (memoized per store version).

    Raises:
        ValueError: no runs, or no plain-condition predictions in them.
    """

    def build() -> Any:
        from core.fanin import fanin_analysis
        from core.views import apply_filters

        frame = store.fanin_frame(_runs(store, selection))
        if frame.empty:
            raise ValueError("the selected runs hold no predictions of the four conditions")
        if selection.filters:
            keep = []
            for name in frame["dataset"].unique():
                allowed = apply_filters(store.instances_frame(name), selection.filters)
                keep.append((frame["dataset"] == name) & frame["instance_id"].isin(
                    set(allowed["instance_id"])))  # fmt: skip
            frame = frame[np.logical_or.reduce(keep)]
        if frame["run"].nunique() > 1 and frame["dataset"].nunique() == 1:
            common = set.intersection(*frame.groupby("run")["instance_id"].agg(set).tolist())
            frame = frame[frame["instance_id"].isin(common)]
        opts = selection.options
        return fanin_analysis(
            frame.reset_index(drop=True),
            selection.score_field,
            points=str(opts.get("points", "fan_in")),
            n_resamples=int(opts.get("n_resamples", 5000)),
        )

    return _memo(_key(store, selection, "fanin"), build)


def crux_result(store: Any, selection: Selection) -> Any:
    """:class:`core.crux.CruxResult` of the selection's dataset (memoized per store version).

    Raises:
        ValueError: no dataset, unknown retriever, bad k.
    """

    def build() -> Any:
        from core.crux import crux_report
        from core.views import apply_filters

        name = selection.dataset
        if not name and selection.runs:
            row = store.run_row(selection.runs[0])
            name = None if row is None else row.get("dataset_id")
        if not name:
            raise ValueError("choose a dataset for the CRUX coverage views")
        opts = selection.options
        rets = tuple(opts.get("crux_retrievers") or opts.get("retrievers")
                     or CRUX_DEFAULT_RETRIEVERS)  # fmt: skip
        ks = tuple(int(k) for k in (opts.get("crux_ks") or opts.get("ks") or CRUX_DEFAULT_KS))
        kw = {
            "chunk_size": int(opts.get("chunk_size", 220)),
            "overlap": int(opts.get("overlap", 40)),
            "n_resamples": int(opts.get("n_resamples", 5000)),
        }
        allowed = None
        if selection.filters:
            frame = apply_filters(store.instances_frame(name), selection.filters)
            allowed = list(frame["instance_id"])
        return crux_report(store, name, rets, ks, judge=opts.get("judge"),
                           instance_ids=allowed, **kw)  # fmt: skip

    return _memo(_key(store, selection, "crux"), build)


def _label(system: str, n_runs: int) -> str:
    run, _, cond = system.rpartition(":")
    return cond if n_runs == 1 else f"{run} · {cond}"


# ------------------------------------------------------------------------------ fan-in


@register_figure(
    "fanin_degradation",
    title="Fan-in degradation curves",
    description="Answer correctness AC = 100 x the score field (default relaxed F1) against "
    "fan-in, the number of distinct source documents among the gold evidence; one line per "
    "run and condition with 95% bootstrap bands. Click a point to list its instances.",
    reference="SPEC §9; seed 003 §2-3, Fig. 2, Table 5",
)
def fanin_degradation_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """AC vs exact fan-in per system, with CI bands."""
    import plotly.graph_objects as go

    res = fanin_result(store, selection)
    data = res.by_fan_in.reset_index(drop=True)
    n_runs = data["run"].nunique() if len(data) else 0
    runs = list(dict.fromkeys(data["run"]))
    fig = go.Figure()
    for system, d in data.groupby("system", sort=False):
        cond = str(d["condition"].iloc[0])
        color = _COLORS.get(cond, "#8c564b")
        dash = _DASH[runs.index(d["run"].iloc[0]) % len(_DASH)]
        label = _label(str(system), n_runs)
        fig.add_trace(go.Scatter(
            x=np.concatenate([d["fan_in"], d["fan_in"][::-1]]),
            y=np.concatenate([d["ac_ci_high"], d["ac_ci_low"][::-1]]),
            fill="toself", fillcolor=color, opacity=0.15, line={"width": 0},
            hoverinfo="skip", showlegend=False, legendgroup=label,
        ))  # fmt: skip
        fig.add_trace(go.Scatter(
            x=d["fan_in"], y=d["ac"], mode="lines+markers", name=label, legendgroup=label,
            line={"color": color, "dash": dash}, customdata=d.index.to_numpy(),
            text=[f"n={n}, ER={_pct(e)}, EP={_pct(p)}" for n, e, p in
                  zip(d["n"], d["er"], d["ep"], strict=True)],
            hovertemplate="fan-in %{x}: AC %{y:.1f} (%{text})<extra>" + label + "</extra>",
        ))  # fmt: skip
    fig.update_xaxes(title_text="fan-in (distinct gold documents)", dtick=1)
    fig.update_yaxes(title_text=f"AC (100 x {selection.score_field})", range=[0, 102])
    fig.update_layout(legend_title_text="system", margin={"t": 30})
    return fig, data


def _pct(v: float) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{100 * v:.0f}%"


@register_figure(
    "fanin_scatter",
    title="ER-AC and EP-AC scatter",
    description="Each point is one (run, condition) at one fan-in: mean evidence recall ER "
    "(left) or evidence precision EP (right) of the evidence pack against mean AC, with "
    "Pearson r (95% bootstrap CI over points) and the least-squares line. Packs: shown "
    "passages (retrieved, oracle), cited passages (full context).",
    reference="SPEC §9; seed 003 §3, §6.1, Fig. 3",
)
def fanin_scatter_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """ER-AC and EP-AC scatter panels with r and the regression line."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    res = fanin_result(store, selection)
    corr = res.correlation
    pts = pd.DataFrame(corr["points"], columns=["system", corr["points_level"], "ac", "er",
                                                "ep"])  # fmt: skip
    titles = []
    for key, name in (("er_ac", "ER"), ("ep_ac", "EP")):
        c = corr[key]
        titles.append(f"{name}-AC: r = {_num(c['r'])} [{_num(c['ci_low'])}, {_num(c['ci_high'])}]"
                      f", {c['n']} points")  # fmt: skip
    fig = make_subplots(rows=1, cols=2, subplot_titles=titles, shared_yaxes=True)
    n_runs = len({s.rpartition(":")[0] for s in pts["system"]})
    for col, (key, metric) in enumerate((("er_ac", "er"), ("ep_ac", "ep")), start=1):
        for system, d in pts.groupby("system", sort=False):
            cond = str(system).rpartition(":")[2]
            fig.add_trace(go.Scatter(
                x=100 * d[metric], y=d["ac"], mode="markers+text", name=_label(system, n_runs),
                legendgroup=str(system), showlegend=col == 1,
                marker={"color": _COLORS.get(cond, "#8c564b"), "size": 9},
                text=[str(v) for v in d[corr["points_level"]]], textposition="top center",
                hovertemplate=metric.upper() + " %{x:.1f}%, AC %{y:.1f}<extra>%{text}</extra>",
            ), row=1, col=col)  # fmt: skip
        c = corr[key]
        if not math.isnan(c["slope"]):
            xs = np.array([pts[metric].min(), pts[metric].max()])
            fig.add_trace(go.Scatter(
                x=100 * xs, y=c["intercept"] + c["slope"] * xs, mode="lines",
                line={"color": "#444", "dash": "dash"}, showlegend=False, hoverinfo="skip",
            ), row=1, col=col)  # fmt: skip
        fig.update_xaxes(title_text=f"{metric.upper()} (%)", range=[-2, 102], row=1, col=col)
    fig.update_yaxes(title_text="AC", range=[0, 102], row=1, col=1)
    fig.update_layout(legend_title_text="system", margin={"t": 50})
    return fig, pts


def _num(v: float) -> str:
    return "-" if v is None or math.isnan(v) else f"{v:.2f}"


@register_table(
    "fanin_degradation",
    title="Relative degradation and construction loss",
    description="Per run and condition: AC at single (fan-in 1) and high (>= 4) fan-in, "
    "relative degradation (AC_high - AC_single) / AC_single in % with a bootstrap CI, the "
    "oracle's drop (synthesis-difficulty baseline), construction loss = system drop minus "
    "oracle drop (pp; negative = loss beyond synthesis), and failure attribution: failures "
    "(AC < 33) and the share of them with ER < 50%.",
    reference="SPEC §9; seed 003 §6.1, §6.3, Table 8",
)
def fanin_degradation_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Degradation, construction loss and failure attribution per system."""
    res = fanin_result(store, selection)
    d = res.degradation.merge(
        res.attribution[["system", "n_failures", "n_low_er", "share"]], on="system", how="left"
    )
    out = pd.DataFrame({
        "run": d["run"], "condition": d["condition"], "model": d["model"],
        "AC single": d["ac_single"].round(1), "AC high": d["ac_high"].round(1),
        "rel. drop %": (100 * d["rel_degradation"]).round(1),
        "CI low %": (100 * d["rel_ci_low"]).round(1),
        "CI high %": (100 * d["rel_ci_high"]).round(1),
        "oracle drop %": (100 * d["oracle_rel_degradation"]).round(1),
        "construction loss pp": d["construction_loss_pp"].round(1),
        "failures (AC<33)": d["n_failures"],
        "with ER<50% %": (100 * d["share"]).round(1),
    })  # fmt: skip
    return out


@register_table(
    "fanin_buckets",
    title="AC, ER and EP per fan-in bucket",
    description="Means with 95% bootstrap CIs per run, condition and fan-in bucket (single = "
    "1, low = 2-3, high >= 4, all). ER = |pack ∩ gold| / |gold|, EP = |pack ∩ gold| / |pack| "
    "over passage-id sets (an id listed twice counts once); no pack for no-evidence.",
    reference="SPEC §9; seed 003 §2-3, Table 4",
)
def fanin_buckets_table(store: Any, selection: Selection) -> pd.DataFrame:
    """AC / ER / EP per (system, bucket) with CIs."""
    b = fanin_result(store, selection).by_bucket
    out = b[["run", "condition", "bucket", "n"]].copy()
    for m, scale in (("ac", 1.0), ("er", 100.0), ("ep", 100.0)):
        name = m.upper() if m == "ac" else f"{m.upper()} %"
        out[name] = (scale * b[m]).round(1)
        out[f"{name} CI"] = [
            "-" if math.isnan(lo) else f"[{scale * lo:.1f}, {scale * hi:.1f}]"
            for lo, hi in zip(b[f"{m}_ci_low"], b[f"{m}_ci_high"], strict=True)
        ]
    return out


@register_table(
    "fanin_pairs",
    title="Failure overlap and crossover between systems",
    description="Per pair of (run, condition): Jaccard overlap of their failure sets (AC < "
    "33) over common instances, and the crossover fan-in where the leader in AC changes.",
    reference="SPEC §9; seed 003 §6.3-6.4, Table 5",
)
def fanin_pairs_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Jaccard of failure sets and crossover fan-in per system pair."""
    o = fanin_result(store, selection).overlap.copy()
    o["jaccard"] = o["jaccard"].round(3)
    o["leader at lowest fan-in"] = [
        a if lead == "a" else (b if lead == "b" else None)
        for a, b, lead in zip(o["system_a"], o["system_b"], o["leader_first"], strict=True)
    ]
    return o.drop(columns=["leader_first"])


# ------------------------------------------------------------------------------ CRUX


@register_figure(
    "crux_coverage",
    title="CRUX coverage, ranked coverage and density",
    description="Per retriever and top-k: Cov = share of answerable sub-questions the context "
    "answers (rating >= 3), alpha-nDCG (alpha 0.5) with sub-questions as subtopics, and "
    "density ((Cov/tokens) / (Cov(Z*)/tokens(Z*)))^0.5 against the required subset Z*; 95% "
    "bootstrap CIs. Without stored judge ratings each gold passage answers its own "
    "sub-question (answerability derived from gold).",
    reference="SPEC §9; seed 002 §3.1-3.3",
)
def crux_coverage_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Three panels (Cov, alpha-nDCG, density) against k per retriever."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    res = crux_result(store, selection)
    agg = res.aggregate
    panels = (("coverage", "Cov"), ("alpha_ndcg", "alpha-nDCG"), ("density", "density"))
    fig = make_subplots(rows=1, cols=3, subplot_titles=[t for _, t in panels])
    palette = {"lexical": "#1f77b4", "dense": "#9467bd", "hybrid": "#ff7f0e",
               "iterative": "#8c564b", "oracle": "#2ca02c"}  # fmt: skip
    for name, d in agg.groupby("retriever", sort=False):
        for col, (metric, _) in enumerate(panels, start=1):
            fig.add_trace(go.Scatter(
                x=d["k"], y=d[metric], mode="lines+markers", name=str(name),
                legendgroup=str(name), showlegend=col == 1,
                line={"color": palette.get(str(name)),
                      "dash": "dot" if name == "oracle" else "solid"},
                error_y={"type": "data", "symmetric": False,
                         "array": d[f"{metric}_ci_high"] - d[metric],
                         "arrayminus": d[metric] - d[f"{metric}_ci_low"]},
                hovertemplate="k=%{x}: %{y:.3f}<extra>" + str(name) + "</extra>",
            ), row=1, col=col)  # fmt: skip
    fig.update_xaxes(title_text="k (chunks)")
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(legend_title_text=f"retriever (answerability: {res.answerability_source})",
                      margin={"t": 40})  # fmt: skip
    return fig, agg


@register_table(
    "crux_table",
    title="CRUX per retriever and k",
    description="Mean Cov, alpha-nDCG and density with 95% bootstrap CIs and the mean context "
    "tokens, per retriever and top-k; n = instances with answerable sub-questions.",
    reference="SPEC §9; seed 002 §3.3",
)
def crux_table(store: Any, selection: Selection) -> pd.DataFrame:
    """The CRUX aggregate, rounded for display."""
    agg = crux_result(store, selection).aggregate.copy()
    for col in agg.columns:
        if agg[col].dtype.kind == "f":
            agg[col] = agg[col].round(1 if col == "tokens" else 3)
    return agg
