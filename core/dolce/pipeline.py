"""The whole DOLCE pipeline: scenario per problem, EM per task and scenario, categories."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.dolce.categories import (
    Thresholds,
    assign_category,
    category_distribution,
    default_thresholds,
)
from core.dolce.em import COW_STEPS, PIG_STEPS, fit_cow, fit_pig, require_columns
from core.dolce.outcomes import IDK, dip_scenario

__all__ = ["DolceFit", "fit_dolce", "mixture_curve"]

_OUTCOME_COLUMNS = ("problem", "task", "L", "C", "score", "idk", "start", "answer", "variant")


@dataclass(frozen=True, slots=True)
class DolceFit:
    """DOLCE estimates for a set of problems (per problem first, aggregates derived).

    Attributes:
        problems: one row per problem: ``task, problem, scenario, dip_p, L, n_obs, missing,
            max_C, lam, k, p_oracle, log_likelihood, lam_p, k_p, lam_q, category`` (plus any
            ``extra`` columns passed to :func:`fit_dolce`); ``n_obs`` counts the answered
            probes the fit used, ``missing`` the probes whose call failed (left out).
        tasks: one row per task: ``task, n, missing, n_obs, missing_probes, n_cow, n_pig``
            and the count and share of each category (``n_I`` ... ``n_V``, ``share_I`` ...
            ``share_V``); ``n`` counts the fitted problems, ``missing`` the problems without
            one answered probe (not fitted), ``n_obs`` / ``missing_probes`` the probes.
        curves: one row per (problem, observed C): ``n`` answered probes, ``missing`` failed
            ones, the observed outcome shares / mean score over the answered probes and the
            fitted mixture's (see :func:`fit_cow`, :func:`fit_pig`).
        settings: the settings used (threshold, steps, thresholds, scenario).
    """

    problems: pd.DataFrame
    tasks: pd.DataFrame
    curves: pd.DataFrame
    settings: Mapping[str, Any] = field(default_factory=dict)


def fit_dolce(
    outcomes: pd.DataFrame,
    *,
    scenario: str = "auto",
    threshold: float = 0.5,
    thresholds: Thresholds | None = None,
    cow_steps: int = COW_STEPS,
    pig_steps: int = PIG_STEPS,
) -> DolceFit:
    """Scenario per problem, EM per task and scenario, categories: the DOLCE pipeline.

    Args:
        outcomes: one row per probe: ``problem``, ``L``, ``C``, ``score`` (relaxed F1; NaN for
            a failed or unscored call: missing, left out of the fit and counted, never a
            failed probe), ``idk`` (bool), optionally ``task`` and any per-problem columns to
            carry along (``question`` ...).
        scenario: ``auto`` (Hartigan's dip test per problem), ``COW`` or ``PIG``.
        threshold: COW binarization threshold on the score (0.5).
        thresholds: category thresholds; None fields take the per-problem defaults.
        cow_steps: EM steps for COW (10).
        pig_steps: EM steps for PIG (5).

    Returns:
        The :class:`DolceFit`.
    """
    if scenario not in ("auto", "COW", "PIG"):
        raise ValueError(f"unknown scenario {scenario!r}; choose one of: auto, COW, PIG")
    obs = require_columns(outcomes, ("problem", "L", "C", "score", "idk"), "DOLCE outcomes")
    gone = obs[obs["score"].isna()]
    obs = obs[~obs["score"].isna()].reset_index(drop=True)
    if obs.empty:
        raise ValueError("no scored probe outcomes to fit")
    scores = np.where(obs["idk"].to_numpy(dtype=bool), 0.0, obs["score"].to_numpy(dtype=float))
    obs["_dip_score"] = scores
    scen: dict[Any, tuple[str, float]] = {}
    for pid, frame in obs.groupby("problem", sort=False):
        scen[pid] = dip_scenario(frame["_dip_score"]) if scenario == "auto" else (scenario, np.nan)
    obs["_scenario"] = obs["problem"].map(lambda p: scen[p][0])
    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
    idk = obs["idk"].to_numpy(dtype=bool)
    sc = obs["score"].to_numpy(dtype=float)
    obs["x"] = np.where(idk, IDK, np.where(sc >= threshold, 1, 0))
    obs["s"] = np.where(idk, np.nan, sc)
    parts, curves = [], []
    cow = obs[obs["_scenario"] == "COW"]
    if not cow.empty:
        p, c = fit_cow(cow, steps=cow_steps)
        parts.append(p)
        curves.append(c)
    pig = obs[obs["_scenario"] == "PIG"]
    if not pig.empty:
        p, c = fit_pig(pig, steps=pig_steps)
        parts.append(p)
        curves.append(c)
    problems = pd.concat(parts, ignore_index=True)
    problems.insert(3, "dip_p", problems["problem"].map(lambda p: scen[p][1]))
    th = thresholds or Thresholds()
    defaults = [
        default_thresholds(obs.loc[obs["problem"] == pid, "C"], L)
        for pid, L in zip(problems["problem"], problems["L"], strict=True)
    ]
    problems["lam_p"] = [th.lam_p if th.lam_p is not None else d[0] for d in defaults]
    problems["k_p"] = [th.k_p if th.k_p is not None else d[1] for d in defaults]
    problems["lam_q"] = [th.lam_q if th.lam_q is not None else d[2] for d in defaults]
    problems["category"] = assign_category(
        problems["lam"], problems["k"], problems["lam_p"], problems["k_p"], problems["lam_q"]
    )
    missing = gone.groupby("problem", sort=False).size()
    problems.insert(
        list(problems.columns).index("n_obs") + 1,
        "missing",
        problems["problem"].map(missing).fillna(0).astype(np.int64),
    )
    extra = [c for c in outcomes.columns if c not in _OUTCOME_COLUMNS and c not in problems.columns]
    if extra:
        carried = obs.groupby("problem", sort=False)[extra].first()
        problems = problems.join(carried, on="problem")
    order = {p: i for i, p in enumerate(dict.fromkeys(obs["problem"]))}
    problems = problems.sort_values("problem", key=lambda s: s.map(order), kind="stable")
    problems = problems.reset_index(drop=True)
    return DolceFit(
        problems=problems,
        tasks=_task_counts(category_distribution(problems), problems, gone),
        curves=_curve_counts(pd.concat(curves, ignore_index=True), gone),
        settings={
            "scenario": scenario,
            "threshold": threshold,
            "cow_steps": cow_steps,
            "pig_steps": pig_steps,
            "thresholds": {"lam_p": th.lam_p, "k_p": th.k_p, "lam_q": th.lam_q},
        },
    )


def _task_of(frame: pd.DataFrame) -> pd.Series:
    return frame["task"] if "task" in frame.columns else pd.Series("", index=frame.index)


def _task_counts(tasks: pd.DataFrame, problems: pd.DataFrame, gone: pd.DataFrame) -> pd.DataFrame:
    """Add ``missing`` (unfitted problems), ``n_obs`` and ``missing_probes`` beside ``n``."""
    fitted = set(problems["problem"])
    lost = gone[~gone["problem"].isin(fitted)]
    unfitted = lost.groupby(_task_of(lost), sort=False)["problem"].nunique()
    probes = gone.groupby(_task_of(gone), sort=False).size()
    used = problems.groupby("task", sort=False)["n_obs"].sum()
    out = tasks.copy()
    # a task none of whose probes was answered is listed too, with n = 0
    absent = [t for t in dict.fromkeys(_task_of(gone)) if t not in set(out["task"])]
    if absent:
        blank = pd.DataFrame({"task": absent})
        for col in out.columns[1:]:
            blank[col] = np.nan if col.startswith("share_") else 0
        out = pd.concat([out, blank], ignore_index=True)
    at = list(out.columns).index("n") + 1
    out.insert(at, "missing", out["task"].map(unfitted).fillna(0).astype(np.int64))
    out.insert(at + 1, "n_obs", out["task"].map(used).fillna(0).astype(np.int64))
    out.insert(at + 2, "missing_probes", out["task"].map(probes).fillna(0).astype(np.int64))
    return out


def _curve_counts(curves: pd.DataFrame, gone: pd.DataFrame) -> pd.DataFrame:
    """Add ``missing`` (failed probes at that length) beside each curve point's ``n``."""
    per = gone.groupby(["problem", "C"], sort=False).size()
    keys = list(zip(curves["problem"], curves["C"], strict=True))
    out = curves.copy()
    out.insert(
        list(out.columns).index("n") + 1,
        "missing",
        np.array([int(per.get(k, 0)) for k in keys], dtype=np.int64),
    )
    return out


def mixture_curve(fit: DolceFit, problem: Any) -> pd.DataFrame:
    """One problem's observed outcome curve P(x | C) and the fitted mixture, by C."""
    out = fit.curves[fit.curves["problem"] == problem]
    if out.empty:
        raise ValueError(f"unknown problem {problem!r}")
    return out.sort_values("C").reset_index(drop=True)
