"""Figures and tables of DOLCE: the lambda-k map, categories per task, outcome curves (SPEC §8).

Numbers come from :func:`core.dolce.fit_dolce` (via :func:`core.commands.dolce`-style
selection of probe runs) only; this module selects the probe predictions and draws them.
Runs: ``selection.runs``, else every run of ``selection.dataset`` (else every run) that holds
probe predictions; metadata filters apply to the probed instances. Options read from
``selection.options``:

- ``lam_p``, ``k_p``, ``lam_q``: category thresholds (default: per problem, seed §4);
- ``scenario``: ``auto`` (dip test, default), ``COW`` or ``PIG``;
- ``threshold``: COW binarization of relaxed F1 (0.5);
- ``task_by``: column defining tasks (``dataset``);
- ``problem``: the problem whose outcome curve is drawn (default: the first).

On the log axes, lambda = 0 and k = 0 (and C = 0) are drawn at 0.5 and labelled 0.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pandas as pd

from core.figures import Selection, register_figure, register_table

__all__ = ["CATEGORY_COLORS", "dolce_result"]

#: Colour of each focus category (Figure 1 of the seed).
CATEGORY_COLORS = {
    "I": "#7f7f7f",
    "II": "#2ca02c",
    "III": "#1f77b4",
    "IV": "#ff7f0e",
    "V": "#d62728",
}
_REFERENCE = "SPEC §8; seed dolce_lambda_k §3, App. A-C, Figure 1"
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


def _opt(selection: Selection, name: str, default: Any = None) -> Any:
    value = selection.options.get(name, default)
    return default if value is None or value == "" else value


def dolce_result(store: Any, selection: Selection) -> Any:
    """:class:`core.dolce.DolceFit` of the selection's probe runs (memoized per store version).

    Raises:
        ValueError: no probe predictions in the selected runs, or bad options.
    """
    from core.views import apply_filters, selection_to_json, store_version

    fit_keys = ("lam_p", "k_p", "lam_q", "scenario", "threshold", "task_by")
    fit_sel = Selection(
        dataset=selection.dataset,
        runs=selection.runs,
        filters=selection.filters,
        options={k: selection.options.get(k) for k in fit_keys},
    )
    key = ("dolce", str(store.path), store_version(store), selection_to_json(fit_sel))

    def build() -> Any:
        from core.dolce import Thresholds, fit_dolce, outcomes_from_probes

        if selection.runs:
            runs = list(selection.runs)
        else:
            runs = store.resolve_runs(selection.dataset) if selection.dataset else (
                store.resolve_runs()
            )  # fmt: skip
        frame = store.probe_frame(runs)
        if frame.empty:
            raise ValueError(
                "the selected runs hold no DOLCE probes; run: python -m core run-probes "
                "--dataset NAME --backend embedded --name RUN"
            )
        if selection.filters:
            keep = []
            for name in frame["dataset"].unique():
                allowed = apply_filters(store.instances_frame(name), selection.filters)
                keep.append(
                    (frame["dataset"] == name) & frame["instance_id"].isin(allowed["instance_id"])
                )
            frame = frame[np.logical_or.reduce(keep)]
            if frame.empty:
                raise ValueError("no probed instance passes the filters")
        outcomes = outcomes_from_probes(frame, task_by=str(_opt(selection, "task_by", "dataset")))
        th = Thresholds(
            lam_p=_num(_opt(selection, "lam_p")),
            k_p=_num(_opt(selection, "k_p")),
            lam_q=_num(_opt(selection, "lam_q")),
        )
        return fit_dolce(
            outcomes,
            scenario=str(_opt(selection, "scenario", "auto")),
            threshold=float(_opt(selection, "threshold", 0.5)),
            thresholds=th,
        )

    return _memo(key, build)


def _num(value: Any) -> float | None:
    return None if value is None else float(value)


def _log_pos(values: pd.Series) -> np.ndarray:
    """Values for a log axis: 0 is drawn at 0.5."""
    v = values.to_numpy(dtype=float)
    return np.where(v <= 0, 0.5, v)


def _jitter(keys: pd.Series) -> np.ndarray:
    """A small deterministic multiplicative jitter per problem, so equal points stay visible."""
    out = []
    for k in keys.astype(str):
        h = int.from_bytes(hashlib.sha256(k.encode()).digest()[:4], "big") / 2**32
        out.append(1.0 + 0.16 * (h - 0.5))
    return np.asarray(out)


def _log_ticks(max_value: float) -> tuple[list[float], list[str]]:
    vals, text = [0.5], ["0"]
    scale = 1
    while scale <= max(max_value, 1) * 1.01:
        for base in (1, 2, 5):
            v = base * scale
            if v <= max(max_value, 1) * 1.01:
                vals.append(float(v))
                text.append(f"{v:,}")
        scale *= 10
    return vals, text


@register_figure(
    "dolce_lambda_k_map",
    title="DOLCE lambda-k map",
    description=(
        "One point per problem: complexity lambda (length in units of the shortest sufficient "
        "span, COW; number of aspects, PIG) against redundancy k (its copies), both on log "
        "axes (0 drawn at 0.5). Colour = focus category: I closed-book (lambda = 0), II easy "
        "(lambda <= lambda_p, k > k_p), III retrieval (lambda <= lambda_p, k <= k_p), IV "
        "balanced (lambda_p < lambda <= lambda_q), V holistic (lambda > lambda_q). Dashed "
        "lines: the thresholds (median over problems when they differ). Hover shows the "
        "question; click a point to list its probes."
    ),
    reference=_REFERENCE,
)
def lambda_k_map(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Scatter of (lambda, k) per problem coloured by category, with threshold lines."""
    import plotly.graph_objects as go

    from core.dolce import CATEGORIES, CATEGORY_NAMES

    p = dolce_result(store, selection).problems.copy()
    p["x"] = _log_pos(p["lam"]) * _jitter(p["problem"])
    p["y"] = _log_pos(p["k"]) * _jitter(p["problem"].astype(str) + "k")
    fig = go.Figure()
    question = p["question"] if "question" in p.columns else pd.Series([""] * len(p))
    for cat in CATEGORIES:
        sub = p[p["category"] == cat]
        if sub.empty:
            continue
        q = question.loc[sub.index].astype(str).str.slice(0, 120)
        fig.add_trace(
            go.Scatter(
                x=sub["x"], y=sub["y"], mode="markers", name=f"{cat}: {CATEGORY_NAMES[cat]}",
                marker={"color": CATEGORY_COLORS[cat], "size": 9, "opacity": 0.8,
                        "line": {"width": 0.5, "color": "white"}},
                customdata=sub.index.to_numpy(),
                text=[f"{pid}<br>{qq}<br>task {t} · {s} · L={L} · P(oracle)={po:.2f}"
                      for pid, qq, t, s, L, po in zip(sub["problem"], q, sub["task"],
                                                      sub["scenario"], sub["L"],
                                                      sub["p_oracle"], strict=True)],
                hovertemplate="%{text}<extra></extra>",
            )
        )  # fmt: skip
    lam_p, k_p, lam_q = (float(p[c].median()) for c in ("lam_p", "k_p", "lam_q"))
    top = float(max(p["lam"].max(), p["k"].max(), lam_q, 1)) * 1.5
    for x in (lam_p, lam_q):
        fig.add_vline(x=max(x, 0.5), line_dash="dash", line_color="#555")
    fig.add_shape(type="line", x0=0.5, x1=max(lam_p, 0.5), y0=max(k_p, 0.5), y1=max(k_p, 0.5),
                  line={"dash": "dash", "color": "#555"})  # fmt: skip
    ticks, labels = _log_ticks(top)
    fig.update_layout(
        xaxis={"type": "log", "title": "lambda (complexity)", "tickvals": ticks,
               "ticktext": labels, "range": [np.log10(0.4), np.log10(top)]},
        yaxis={"type": "log", "title": "k (redundancy)", "tickvals": ticks, "ticktext": labels,
               "range": [np.log10(0.4), np.log10(top)]},
        legend={"title": "category"}, margin={"t": 30},
    )  # fmt: skip
    fig.add_annotation(x=np.log10(max(lam_p, 0.5)), y=np.log10(top), xref="x", yref="y",
                       text=f"lambda_p={lam_p:g}", showarrow=False, yanchor="top")  # fmt: skip
    fig.add_annotation(x=np.log10(max(lam_q, 0.5)), y=np.log10(top), xref="x", yref="y",
                       text=f"lambda_q={lam_q:g}", showarrow=False, yanchor="top")  # fmt: skip
    data = p.drop(columns=["x", "y"])
    if "run" not in data.columns:
        data["run"] = None
    return fig, data


@register_figure(
    "dolce_categories",
    title="DOLCE focus categories per task",
    description=(
        "Share of problems in each focus category I-V per task (a dataset, or a run | dataset "
        "when several runs are selected); the hover gives counts. Categories from the fitted "
        "lambda and k with the thresholds shown on the lambda-k map."
    ),
    reference=_REFERENCE,
)
def category_bars(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Stacked horizontal bars of category shares per task."""
    import plotly.graph_objects as go

    from core.dolce import CATEGORIES

    tasks = dolce_result(store, selection).tasks
    fig = go.Figure()
    for cat in CATEGORIES:
        fig.add_trace(
            go.Bar(
                y=tasks["task"], x=tasks[f"share_{cat}"], orientation="h", name=cat,
                marker_color=CATEGORY_COLORS[cat], customdata=tasks[f"n_{cat}"],
                hovertemplate=f"{cat}: %{{x:.0%}} (%{{customdata}} problems)<extra></extra>",
            )
        )  # fmt: skip
    fig.update_layout(barmode="stack", xaxis={"title": "share of problems", "tickformat": ".0%",
                      "range": [0, 1]}, yaxis={"title": "task"}, margin={"t": 30})  # fmt: skip
    return fig, tasks


@register_figure(
    "dolce_outcome_curve",
    title="DOLCE outcome curve P(x | C) with the fitted mixture",
    description=(
        "For one problem (option 'problem'): observed outcome shares by observation length C "
        "(markers; COW: correct, wrong, IDK; PIG: mean score) and what the fitted mixture of "
        "the background-noise and hybrid oracle components predicts (lines). C on a log axis, "
        "0 drawn at 0.5."
    ),
    reference="SPEC §8; seed dolce_lambda_k §3.2-3.4, Algorithms 1-2",
)
def outcome_curve(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Observed vs fitted P(x | C) for the chosen problem."""
    import plotly.graph_objects as go

    from core.dolce import mixture_curve

    fit = dolce_result(store, selection)
    problem = _opt(selection, "problem", fit.problems["problem"].iloc[0])
    curve = mixture_curve(fit, str(problem))
    row = fit.problems[fit.problems["problem"] == str(problem)].iloc[0]
    x = _log_pos(curve["C"])
    fig = go.Figure()
    if row["scenario"] == "COW":
        series = (("p1", "correct (1)", "#2ca02c"), ("p0", "wrong (0)", "#d62728"),
                  ("pidk", "IDK", "#7f7f7f"))  # fmt: skip
    else:
        series = (("s", "score", "#1f77b4"), ("pidk", "IDK", "#7f7f7f"))
    for col, label, color in series:
        obs = curve[f"obs_{col}"]
        fig.add_trace(go.Scatter(x=x, y=obs, mode="markers", name=f"observed {label}",
                                 marker={"color": color, "size": 9},
                                 customdata=curve["n"],
                                 hovertemplate="C=%{text}: %{y:.2f} (n=%{customdata})"
                                 "<extra></extra>", text=curve["C"]))  # fmt: skip
        fit_col = f"fit_{col}"
        if fit_col in curve and curve[fit_col].notna().any():
            fig.add_trace(
                go.Scatter(x=x, y=curve[fit_col], mode="lines", name=f"fitted {label}",
                           line={"color": color}, text=curve["C"],
                           hovertemplate="C=%{text}: %{y:.2f}<extra></extra>")
            )  # fmt: skip
    ticks, labels = _log_ticks(float(curve["C"].max()))
    fig.update_layout(
        title=f"{problem}: lambda={row['lam']}, k={row['k']}, category {row['category']} "
        f"({row['scenario']}, P(oracle)={row['p_oracle']:.2f})",
        xaxis={"type": "log", "title": "observation length C (units)", "tickvals": ticks,
               "ticktext": labels},
        yaxis={"title": "probability / score", "range": [0, 1.05]}, margin={"t": 50},
    )  # fmt: skip
    return fig, curve


@register_table(
    "dolce_problems",
    title="DOLCE estimates per problem",
    description=(
        "Per problem: scenario (dip test p-value), units L, observations, lambda, k, P(z = "
        "oracle), log-likelihood, thresholds and focus category."
    ),
    reference=_REFERENCE,
)
def problems_table(store: Any, selection: Selection) -> pd.DataFrame:
    """The per-problem estimates."""
    return dolce_result(store, selection).problems


@register_table(
    "dolce_tasks",
    title="DOLCE category distribution per task",
    description="Problems per task, COW / PIG split, count and share of each category I-V.",
    reference=_REFERENCE,
)
def tasks_table(store: Any, selection: Selection) -> pd.DataFrame:
    """The per-task category distribution."""
    return dolce_result(store, selection).tasks
