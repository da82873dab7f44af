"""Figures and tables of DOLCE: the lambda-k map, categories per task, outcome curves (SPEC §8).

Every function takes the :class:`core.dolce.DolceFit` of the selection's probe runs (from
:func:`core.views.dolce.dolce_result`) and draws or arranges it; numbers come from
:func:`core.dolce.fit_dolce` only. Options (declared below; all but ``problem`` are read by the
view that fits):

- ``lam_p``, ``k_p``, ``lam_q``: category thresholds (default: per problem, seed §4);
- ``scenario``: ``auto`` (dip test per problem, applied per task by App. H; default), ``COW``
  or ``PIG``;
- ``pig_estimator``: ``likelihood`` (default; identifies PIG lambda) or ``published``
  (Algorithm 2 as printed; its PIG lambda and categories are drawn as "not identified");
- ``threshold``: COW binarization of relaxed F1 (0.5);
- ``task_by``: column defining tasks (``dataset``);
- ``problem``: the problem whose outcome curve is drawn (default: the first).

On the log axes, lambda = 0 and k = 0 (and C = 0) are drawn at 0.5 and labelled 0.
"""

from __future__ import annotations

import hashlib
import html
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.dolce import CATEGORIES, CATEGORY_NAMES, NOT_COVERED, DolceFit, mixture_curve
from core.dolce.params import PIG_ESTIMATOR, THRESHOLD_RULE
from core.dolce.probes import K_P, LAM_P, LAM_Q, SCENARIO, TASK_BY, THRESHOLD
from core.figures import (
    BLACK,
    BLUE,
    GREEN,
    LEGEND_BELOW,
    ORANGE,
    REFERENCE_COLOR,
    VERMILLION,
    drill,
)
from core.params import Param

__all__ = [
    "CATEGORY_COLORS",
    "COLUMN_HELP",
    "FIT_OPTIONS",
    "K_P",
    "LAM_P",
    "LAM_Q",
    "PIG_ESTIMATOR",
    "PROBLEM",
    "SCENARIO",
    "TASK_BY",
    "THRESHOLD",
    "category_bars",
    "fit_notes",
    "lambda_k_map",
    "outcome_curve",
    "problems_table",
    "tasks_table",
]

#: Colour of each focus category (Figure 1 of the seed), from the Okabe–Ito palette of
#: :mod:`core.figures` (I and "not covered" neutral: grey and black).
CATEGORY_COLORS = {
    "I": REFERENCE_COLOR,
    "II": GREEN,
    "III": BLUE,
    "IV": ORANGE,
    "V": VERMILLION,
    NOT_COVERED: BLACK,
}
#: The problem whose outcome curve is drawn (default: the first).
PROBLEM = Param("problem", str, None, "problem of the outcome curve (default: the first)")
_S = "seed dolce_lambda_k"
#: Definition and paper section of every column of the DOLCE tables (the page's tooltips).
COLUMN_HELP: dict[str, str] = {
    "category": "Focus category (Figure 1, §4): I closed-book (λ = 0), II easy (λ <= λ_p, "
    "k > k_p), III retrieval (λ <= λ_p, k <= k_p), IV balanced (λ_p < λ <= λ_q), V holistic "
    "(λ > λ_q); 'not covered' for a COW fit with k = 0 (no span answers, λ > L): this tool's "
    "addition, not one of the paper's categories (issue 16).",
    "identified": "False where the estimator does not identify λ: PIG under the published "
    f"Algorithm 2, which scores only the per-length mean score ({_S} App. C, App. L); its λ "
    "and category are the algorithm's output, not an estimate (issue 16).",
    "estimator": "What fitted λ and k: COW always Algorithm 1 ('published'); PIG 'likelihood' "
    "(every observed score scored by the exact ρ̃ pmf on the 1/λ lattice, EM; the default) or "
    f"'published' (Algorithm 2 as printed). {_S} App. C; issue 16.",
    "lam": f"λ, complexity: COW the length in units of the shortest sufficient span, PIG the "
    f"number of aspects ({_S} §3.2-3.3), from the candidates: observed C, 0, max C + 1, L.",
    "k": f"k, redundancy: copies of the span (COW) or of each aspect (PIG) ({_S} §3.2-3.3).",
    "scenario": f"Outcome model applied: COW (answer or not) or PIG (partial points). {_S} §3, "
    "App. H: the task is split into COW and PIG subsets only if both have more than 10 "
    "problems, else the pooled dip test decides for the whole task.",
    "dip_p": f"p-value of Hartigan's dip test on this problem's scores in bins of 0.1 (IDK as "
    f"0); below 0.5: multi-modal, COW ({_S} §3.1, App. H).",
    "dip_scenario": f"The scenario this problem's own dip test gives ({_S} App. H); the task "
    "rule may override it (see scenario).",
    "p_oracle": f"P(z = oracle): the share of the problem's probes the oracle component "
    f"explains, the rest is the task's background noise ({_S} §3.2, Eq. 1, 5).",
    "log_likelihood": "Log-likelihood of the fitted mixture over the problem's probes (COW: "
    "Eq. 1; PIG likelihood: probabilities of the observed outcomes, an interior score as the "
    f"±0.005 window around it; PIG published: Algorithm 2's density). {_S} App. C.",
    "lam_p": f"λ_p: II/III vs IV boundary; default {THRESHOLD_RULE} ({_S} §4).",
    "k_p": f"k_p: II (k > k_p) vs III boundary; default the same value as λ_p, "
    f"{THRESHOLD_RULE} ({_S} §4).",
    "lam_q": f"λ_q: IV vs V boundary; default the longest observed span shorter than L ({_S} §4).",
    "n_obs": "Answered probes the fit used (SPEC §8).",
    "missing": "Probes whose call failed: missing, left out of the fit (SPEC §8).",
    "L": "Context length in units (sentences, or passages) (SPEC §8).",
    "scenario_rule": f"{_S} App. H: 'split' when both the COW and the PIG subset (by the "
    "problems' own dip tests) have more than 10 problems, else the whole task takes the "
    "pooled dip test's scenario ('COW only' / 'PIG only'); 'fixed' when chosen by hand.",
    "task_dip_p": "p-value of the dip test on all the task's scores pooled (bins of 0.1), "
    f"deciding an unsplit task ({_S} App. H).",
    "n_not_identified": "Problems whose λ and category are not identified (PIG, published "
    "Algorithm 2); counted in their category too (issue 16).",
    "n_not_covered": "COW problems with k = 0: not covered by the model, in no category; a "
    "class this tool adds, not one of the paper's (issue 16).",
}
#: The options the fit depends on (the view's cache key).
FIT_OPTIONS = (LAM_P, K_P, LAM_Q, SCENARIO, THRESHOLD, TASK_BY, PIG_ESTIMATOR)


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


def _esc(value: Any) -> str:
    """Dataset text for a hover label: shown as text, never as the label's HTML."""
    return html.escape(str(value))


def _side(value: pd.Series, pos: np.ndarray, *thresholds: pd.Series) -> np.ndarray:
    """Jittered positions kept on their value's side of each (per-problem) threshold.

    A value at a threshold belongs below it (lambda <= lambda_p is II / III): a jitter that
    carries a point across a threshold line is reflected (x * j -> x / j).
    """
    v = value.to_numpy(dtype=float)
    base = _log_pos(value)
    out = np.asarray(pos, dtype=float).copy()
    for th in thresholds:
        t = np.maximum(th.to_numpy(dtype=float), 0.5)
        wrong = ((v <= th.to_numpy(dtype=float)) & (out > t)) | (
            (v > th.to_numpy(dtype=float)) & (out <= t)
        )
        out = np.where(wrong, base * base / out, out)
    return out


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


#: Markers of fits that are not ordinary estimates (issue 16).
_NOT_IDENTIFIED_SYMBOL = "circle-open"
_NOT_COVERED_SYMBOL = "x"
#: Facets per row of the lambda-k map.
_FACETS_PER_ROW = 3


def _threshold_sets(p: pd.DataFrame) -> list[tuple[tuple[float, float, float], pd.Index]]:
    """The distinct (lambda_p, k_p, lambda_q) of the problems, each with its problems' rows.

    Thresholds are per problem (seed §4: from its observed lengths and L), so problems of
    different lengths can sit under different lines; each set gets its own facet.
    """
    keys = list(
        zip(p["lam_p"].astype(float), p["k_p"].astype(float), p["lam_q"].astype(float), strict=True)
    )
    groups: dict[tuple[float, float, float], list[Any]] = {}
    for idx, key in zip(p.index, keys, strict=True):
        groups.setdefault(key, []).append(idx)
    return [(key, pd.Index(rows)) for key, rows in sorted(groups.items())]


def _marker_kind(p: pd.DataFrame) -> pd.Series:
    """``ok``, ``not identified`` (PIG, published Algorithm 2) or ``not covered`` (COW k = 0)."""
    ident = p["identified"].astype(bool) if "identified" in p.columns else True
    kind = np.where(
        p["category"] == NOT_COVERED, "not covered", np.where(ident, "ok", "not identified")
    )
    return pd.Series(kind, index=p.index)


#: Short legend labels (the full definitions are in the hover and the figure's tooltip).
_SHORT = {
    "I": "I: closed-book",
    "II": "II: easy",
    "III": "III: retrieval",
    "IV": "IV: balanced",
    "V": "V: holistic",
    NOT_COVERED: "not covered: COW k = 0 (this tool's class)",
}


#: The category bars' name of the not-covered segment.
_NOT_COVERED_NAME = "not covered (COW k = 0; this tool's class)"


def _legend_name(cat: str, kind: str) -> str:
    return _SHORT[cat] + (" · not identified" if kind == "not identified" else "")


def lambda_k_map(fit: DolceFit) -> tuple[go.Figure, pd.DataFrame]:
    """Scatter of (lambda, k) per problem coloured by category, with its threshold lines.

    One facet per distinct threshold set (lambda_p, k_p, lambda_q): the dashed lines of a
    facet are exactly the thresholds its problems' categories were assigned with. PIG fits of
    the published Algorithm 2 (lambda not identified) are open markers, COW fits with k = 0
    (not covered by the model) crosses. Legend below the plot.
    """
    p = fit.problems.copy()
    p["x"] = _side(p["lam"], _log_pos(p["lam"]) * _jitter(p["problem"]), p["lam_p"], p["lam_q"])
    p["y"] = _side(p["k"], _log_pos(p["k"]) * _jitter(p["problem"].astype(str) + "k"), p["k_p"])
    p["marker"] = _marker_kind(p)
    sets = _threshold_sets(p)
    ncols = min(len(sets), _FACETS_PER_ROW)
    nrows = -(-len(sets) // ncols)
    titles = [f"λ_p={a:g}, k_p={b:g}, λ_q={c:g}: {len(rows)} problems" for (a, b, c), rows in sets]
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        subplot_titles=titles if len(sets) > 1 else None,
        horizontal_spacing=0.06,
        vertical_spacing=0.16,
    )
    for ann in fig.layout.annotations:  # the facet titles
        ann.font = {"size": 12}
    question = p["question"] if "question" in p.columns else pd.Series([""] * len(p), p.index)
    # a point is one problem: its probes are the probe predictions of (run,) dataset, instance
    keys = [k for k in ("run", "dataset", "instance_id") if k in p.columns]
    top = float(max(p["lam"].max(), p["k"].max(), p["lam_q"].max(), 1)) * 1.5
    ticks, labels = _log_ticks(top)
    if len(sets) > 1:  # narrow facets: decades only, so the labels stay upright
        keep = [i for i, v in enumerate(ticks) if v == 0.5 or np.log10(v).is_integer()]
        ticks, labels = [ticks[i] for i in keep], [labels[i] for i in keep]
    shown: set[str] = set()
    for f, ((lam_p, k_p, lam_q), rows) in enumerate(sets):
        r, c = f // ncols + 1, f % ncols + 1
        facet = p.loc[rows]
        for cat in (*CATEGORIES, NOT_COVERED):
            for kind in ("ok", "not identified", "not covered"):
                sub = facet[(facet["category"] == cat) & (facet["marker"] == kind)]
                if sub.empty:
                    continue
                name = _legend_name(cat, kind)
                q = question.loc[sub.index].astype(str).str.slice(0, 120)
                symbol = {
                    "ok": "circle",
                    "not identified": _NOT_IDENTIFIED_SYMBOL,
                    "not covered": _NOT_COVERED_SYMBOL,
                }[kind]
                color = CATEGORY_COLORS[cat]
                fig.add_trace(
                    go.Scatter(
                        x=sub["x"],
                        y=sub["y"],
                        mode="markers",
                        name=name,
                        legendgroup=name,
                        showlegend=name not in shown,
                        legendrank=_rank(cat, kind),
                        marker={
                            "color": color,
                            "size": 9,
                            "opacity": 0.85,
                            "symbol": symbol,
                            "line": {
                                "width": 1.5 if kind != "ok" else 0.5,
                                "color": color if kind != "ok" else "white",
                            },
                        },
                        customdata=drill.customdata(sub, keys, "n_obs"),
                        text=[
                            f"{_esc(pid)}<br>{_esc(qq)}<br>task {_esc(t)} · {s} ({e}) · "
                            f"L={L} · λ={lam}, "
                            f"k={k} · {cc}: {CATEGORY_NAMES[cc]}"
                            f"{'' if kind == 'ok' else ' · ' + kind}"
                            f"<br>P(oracle)={po:.2f} · {_probes(n, m)}"
                            for pid, qq, t, s, e, L, lam, k, cc, po, n, m in zip(
                                sub["problem"],
                                q,
                                sub["task"],
                                sub["scenario"],
                                _col(sub, "estimator"),
                                sub["L"],
                                sub["lam"],
                                sub["k"],
                                sub["category"],
                                sub["p_oracle"],
                                sub["n_obs"],
                                _col(sub, "missing"),
                                strict=True,
                            )
                        ],
                        hovertemplate="%{text}<extra></extra>",
                    ),
                    row=r,
                    col=c,
                )
                shown.add(name)
        _threshold_lines(fig, r, c, lam_p, k_p, lam_q, top)
    fig.update_xaxes(
        type="log",
        title_text="λ (complexity)",
        tickvals=ticks,
        ticktext=labels,
        range=[np.log10(0.4), np.log10(top)],
        tickangle=0,
        title_standoff=4,
    )
    fig.update_yaxes(
        type="log", tickvals=ticks, ticktext=labels, range=[np.log10(0.4), np.log10(top)]
    )
    fig.update_yaxes(title_text="k (redundancy)", col=1)
    fig.update_layout(
        legend={
            "orientation": "h",
            "yanchor": "top",
            "y": -0.2 if nrows == 1 else -0.1,
            "xanchor": "left",
            "x": 0.0,
            "title": {"text": "category"},
        },
        margin={"t": 40, "b": 40},
    )
    drill.declare(fig, keys, frame="probes")
    data = p.drop(columns=["x", "y", "marker"])
    if "run" not in data.columns:
        data["run"] = None
    return fig, data


def _rank(cat: str, kind: str) -> int:
    """Legend order: categories I-V, each before its not-identified twin, then not covered."""
    order = (*CATEGORIES, NOT_COVERED)
    return 10 * order.index(cat) + (kind == "not identified")


def _threshold_lines(
    fig: go.Figure, row: int, col: int, lam_p: float, k_p: float, lam_q: float, top: float
) -> None:
    """Dashed lambda_p and lambda_q verticals and the k_p segment (II | III) of one facet.

    On log axes plotly places shapes by data values but annotations by log10 values; 0 (and
    below) sits at 0.5 like the points.
    """
    line = {"dash": "dash", "color": REFERENCE_COLOR, "width": 1.2}
    xp, xq, ky = (max(float(v), 0.5) for v in (lam_p, lam_q, k_p))
    for x in (xp, xq):
        fig.add_shape(type="line", x0=x, x1=x, y0=0.4, y1=top, line=line, row=row, col=col)
    fig.add_shape(type="line", x0=0.4, x1=xp, y0=ky, y1=ky, line=line, row=row, col=col)
    hi = np.log10(top)
    # λ_p's label right of its line, λ_q's left of its own: they never cover each other and
    # λ_q (near the longest spans) stays inside the plot
    for x, text, side in ((xp, f"λ_p={lam_p:g}", "left"), (xq, f"λ_q={lam_q:g}", "right")):
        fig.add_annotation(
            x=np.log10(x),
            y=hi,
            text=text,
            showarrow=False,
            yanchor="top",
            xanchor=side,
            font={"size": 11},
            row=row,
            col=col,
        )
    fig.add_annotation(
        x=np.log10(0.4),
        y=np.log10(ky),
        text=f"k_p={k_p:g}",
        showarrow=False,
        yanchor="bottom",
        xanchor="left",
        font={"size": 11},
        row=row,
        col=col,
    )


def category_bars(fit: DolceFit) -> tuple[go.Figure, pd.DataFrame]:
    """Stacked horizontal bars of category shares per task.

    Problems whose category is not identified (PIG under the published Algorithm 2) are the
    hatched part of their category's bar; COW fits with k = 0 (not covered by the model) get
    their own grey, cross-hatched segment.
    """
    tasks = fit.tasks
    probs = fit.problems
    ident = probs["identified"].astype(bool) if "identified" in probs.columns else True
    fig = go.Figure()
    for cat in (*CATEGORIES, NOT_COVERED):
        in_cat = probs["category"] == cat
        parts = (
            [("", in_cat & ident, "")]
            if cat == NOT_COVERED
            else [("", in_cat & ident, ""), (" · not identified", in_cat & ~ident, "/")]
        )
        for suffix, mask, pattern in parts:
            counts = probs[mask].groupby("task", sort=False).size()
            n = tasks["task"].map(counts).fillna(0).astype(int)
            if (suffix or cat == NOT_COVERED) and not n.any():
                continue
            share = n / tasks["n"].where(tasks["n"] > 0)
            name = f"{cat}{suffix}" if cat in CATEGORIES else _NOT_COVERED_NAME
            fig.add_trace(
                go.Bar(
                    y=tasks["task"],
                    x=share,
                    orientation="h",
                    name=name,
                    marker={
                        "color": CATEGORY_COLORS[cat],
                        "pattern": {"shape": pattern if cat in CATEGORIES else "x"},
                    },
                    customdata=n,
                    hovertemplate=f"{name}: %{{x:.0%}} (%{{customdata}} problems)<extra></extra>",
                )
            )
    fig.update_layout(
        barmode="stack",
        yaxis={"title": "task"},
        margin={"t": 30},
        xaxis={"title": "share of problems", "tickformat": ".0%", "range": [0, 1]},
        legend={"orientation": "h", "yanchor": "top", "y": -0.25, "x": 0.0, "traceorder": "normal"},
    )
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
        series = (
            ("p1", "correct (1)", GREEN),
            ("p0", "wrong (0)", VERMILLION),
            ("pidk", "IDK", REFERENCE_COLOR),
        )
    else:
        series = (("s", "score", BLUE), ("pidk", "IDK", REFERENCE_COLOR))
    for col, label, color in series:
        obs = curve[f"obs_{col}"]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=obs,
                mode="markers",
                name=f"observed {label}",
                marker={"color": color, "size": 9},
                customdata=curve["n"],
                hovertemplate="C=%{text}<extra></extra>",
                text=[
                    f"{c}: {v:.2f} ({_probes(n, m)})"
                    for c, v, n, m in zip(
                        curve["C"], obs, curve["n"], _col(curve, "missing"), strict=True
                    )
                ],
            )
        )
        fit_col = f"fit_{col}"
        if fit_col in curve and curve[fit_col].notna().any():
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=curve[fit_col],
                    mode="lines",
                    name=f"fitted {label}",
                    line={"color": color},
                    text=curve["C"],
                    hovertemplate="C=%{text}: %{y:.2f}<extra></extra>",
                )
            )
    ticks, labels = _log_ticks(float(curve["C"].max()))
    fig.update_layout(
        title=f"{_esc(problem)}: λ={row['lam']}, k={row['k']}, category {row['category']}"
        f"{_flag(row)} ({row['scenario']}, {_estimator(row)}, P(oracle)="
        f"{row['p_oracle']:.2f})",
        xaxis={
            "type": "log",
            "title": "observation length C (units)",
            "tickvals": ticks,
            "ticktext": labels,
        },
        yaxis={"title": "probability / score", "range": [0, 1.05]},
        margin={"t": 50},
        legend=LEGEND_BELOW,
    )
    return fig, curve


def _estimator(row: pd.Series) -> str:
    """Which estimator produced a problem's fit, in words."""
    if row["scenario"] == "COW":
        return "Algorithm 1"
    est = row.get("estimator", "published")
    return "Algorithm 2 as published" if est == "published" else "per-observation likelihood"


def _flag(row: pd.Series) -> str:
    """`` · lambda not identified`` for a PIG fit of the published Algorithm 2, else ``""``."""
    return "" if bool(row.get("identified", True)) else " · λ and category not identified"


def fit_notes(problems: pd.DataFrame, tasks: pd.DataFrame) -> list[tuple[str, str]]:
    """What the page says above the figures: ``(level, text)``, level info, warning or task.

    Which estimators produced the fits, how many PIG fits are not identified, how many COW
    fits are not covered by the model, and each task's scenario rule (App. H). Task names
    are data: the page shows these lines as text.
    """
    notes: list[tuple[str, str]] = []
    if problems.empty:
        return notes
    pig = problems[problems["scenario"] == "PIG"]
    used = ["COW: Algorithm 1"] if (problems["scenario"] == "COW").any() else []
    for est in dict.fromkeys(pig.get("estimator", pd.Series(dtype=str))):
        used.append("PIG: " + _estimator(pd.Series({"scenario": "PIG", "estimator": est})))
    notes.append(("info", "Fitted by " + "; ".join(used) + "."))
    n_ni = int((~problems.get("identified", pd.Series(True, problems.index)).astype(bool)).sum())
    if n_ni:
        notes.append(
            (
                "warning",
                f"{n_ni} PIG problem(s): λ and category NOT IDENTIFIED. The "
                "published Algorithm 2 scores only the per-length mean score, whose "
                "expectation does not depend on λ, so its λ is the largest candidate the "
                "mean allows. Open markers on the map, hatched bars; choose the "
                "likelihood estimator to identify λ.",
            )
        )
    n_nc = int((problems["category"] == NOT_COVERED).sum())
    if n_nc:
        notes.append(
            (
                "warning",
                f"{n_nc} COW problem(s) NOT COVERED by the model: k = 0, no "
                "span of any length answers (λ > L). In none of the paper's categories "
                "I-V (a class this tool adds); crosses on the map.",
            )
        )
    for _, t in tasks.iterrows():
        rule = str(t.get("scenario_rule", ""))
        if rule.endswith(" only"):
            text = (
                f"not split (App. H needs more than 10 problems on both sides: "
                f"{t['n_dip_cow']} COW, {t['n_dip_pig']} PIG by their own dip tests); "
                f"pooled dip test p = {t['task_dip_p']:.3g}, so all {rule}"
            )
        elif rule == "split":
            text = (
                f"split into {t['n_cow']} COW and {t['n_pig']} PIG problems (App. H: more "
                "than 10 on both sides)"
            )
        else:
            continue
        notes.append(("task", f"Task {t['task']}: {text}."))
    return notes


def problems_table(fit: DolceFit) -> pd.DataFrame:
    """The per-problem estimates (``n_obs`` answered probes, ``missing`` failed calls)."""
    return fit.problems


def tasks_table(fit: DolceFit) -> pd.DataFrame:
    """The per-task category distribution, with missing problems and probes beside n."""
    return fit.tasks
