"""Figures and tables of DOLCE: the lambda-k map, categories per task, outcome curves (SPEC §8).

Every function takes the :class:`core.dolce.DolceFit` of the selection's probe runs (from
:func:`core.views.dolce.dolce_result`) and draws or arranges it; numbers come from
:func:`core.dolce.fit_dolce` only. Options (declared below; all but ``problem`` are read by the
view that fits):

- ``lam_p``, ``k_p``, ``lam_q``: category thresholds (default: per problem, seed §4);
- ``scenario``: ``auto`` (dip test, default), ``COW`` or ``PIG``;
- ``threshold``: COW binarization of relaxed F1 (0.5);
- ``task_by``: column defining tasks (``dataset``);
- ``problem``: the problem whose outcome curve is drawn (default: the first).

On the log axes, lambda = 0 and k = 0 (and C = 0) are drawn at 0.5 and labelled 0.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from core.dolce import CATEGORIES, CATEGORY_NAMES, DolceFit, mixture_curve
from core.figures import drill
from core.params import Param
from core.probes import K_P, LAM_P, LAM_Q, SCENARIO, TASK_BY, THRESHOLD

__all__ = [
    "CATEGORY_COLORS",
    "FIT_OPTIONS",
    "K_P",
    "LAM_P",
    "LAM_Q",
    "PROBLEM",
    "SCENARIO",
    "TASK_BY",
    "THRESHOLD",
    "category_bars",
    "lambda_k_map",
    "outcome_curve",
    "problems_table",
    "tasks_table",
]

#: Colour of each focus category (Figure 1 of the seed).
CATEGORY_COLORS = {
    "I": "#7f7f7f",
    "II": "#2ca02c",
    "III": "#1f77b4",
    "IV": "#ff7f0e",
    "V": "#d62728",
}
#: The problem whose outcome curve is drawn (default: the first).
PROBLEM = Param("problem", str, None, "problem of the outcome curve (default: the first)")
#: The options the fit depends on (the view's cache key).
FIT_OPTIONS = (LAM_P, K_P, LAM_Q, SCENARIO, THRESHOLD, TASK_BY)


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


def _col(frame: pd.DataFrame, name: str) -> pd.Series:
    """``frame[name]``, or zeros for a fit made before the column existed."""
    return frame[name] if name in frame.columns else pd.Series(0, index=frame.index)


def _probes(n: int, missing: int) -> str:
    """``n=12 probes`` or ``n=12 probes, missing=3`` (probes whose call failed)."""
    return f"n={int(n)} probes" + (f", missing={int(missing)}" if missing else "")


def lambda_k_map(fit: DolceFit) -> tuple[go.Figure, pd.DataFrame]:
    """Scatter of (lambda, k) per problem coloured by category, with threshold lines."""
    p = fit.problems.copy()
    p["x"] = _log_pos(p["lam"]) * _jitter(p["problem"])
    p["y"] = _log_pos(p["k"]) * _jitter(p["problem"].astype(str) + "k")
    fig = go.Figure()
    question = p["question"] if "question" in p.columns else pd.Series([""] * len(p))
    # a point is one problem: its probes are the probe predictions of (run,) dataset, instance
    keys = [k for k in ("run", "dataset", "instance_id") if k in p.columns]
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
                customdata=drill.customdata(sub, keys, "n_obs"),
                text=[f"{pid}<br>{qq}<br>task {t} · {s} · L={L} · P(oracle)={po:.2f}"
                      f"<br>{_probes(n, m)}"
                      for pid, qq, t, s, L, po, n, m in zip(
                          sub["problem"], q, sub["task"], sub["scenario"], sub["L"],
                          sub["p_oracle"], sub["n_obs"], _col(sub, "missing"), strict=True)],
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
    drill.declare(fig, keys, frame="probes")
    data = p.drop(columns=["x", "y"])
    if "run" not in data.columns:
        data["run"] = None
    return fig, data


def category_bars(fit: DolceFit) -> tuple[go.Figure, pd.DataFrame]:
    """Stacked horizontal bars of category shares per task."""
    tasks = fit.tasks
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


def outcome_curve(
    fit: DolceFit, *, problem: Any = PROBLEM.default
) -> tuple[go.Figure, pd.DataFrame]:
    """Observed vs fitted P(x | C) for ``problem`` (default: the first problem)."""
    if problem is None or problem == "":
        problem = fit.problems["problem"].iloc[0]
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
                                 hovertemplate="C=%{text}<extra></extra>",
                                 text=[f"{c}: {v:.2f} ({_probes(n, m)})" for c, v, n, m in
                                       zip(curve["C"], obs, curve["n"], _col(curve, "missing"),
                                           strict=True)]))  # fmt: skip
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


def problems_table(fit: DolceFit) -> pd.DataFrame:
    """The per-problem estimates (``n_obs`` answered probes, ``missing`` failed calls)."""
    return fit.problems


def tasks_table(fit: DolceFit) -> pd.DataFrame:
    """The per-task category distribution, with missing problems and probes beside n."""
    return fit.tasks
