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
        problems: one row per problem: ``task, problem, scenario, dip_p, L, n_obs, max_C,
            lam, k, p_oracle, log_likelihood, lam_p, k_p, lam_q, category`` (plus any
            ``extra`` columns passed to :func:`fit_dolce`).
        tasks: one row per task: ``task, n, n_cow, n_pig`` and the count and share of each
            category (``n_I`` ... ``n_V``, ``share_I`` ... ``share_V``).
        curves: one row per (problem, observed C): observed outcome shares / mean score and
            the fitted mixture's (see :func:`fit_cow`, :func:`fit_pig`).
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
        outcomes: one row per probe: ``problem``, ``L``, ``C``, ``score`` (relaxed F1, NaN for
            an unscored call, which is dropped), ``idk`` (bool), optionally ``task`` and any
            per-problem columns to carry along (``question`` ...).
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
    extra = [c for c in outcomes.columns if c not in _OUTCOME_COLUMNS and c not in problems.columns]
    if extra:
        carried = obs.groupby("problem", sort=False)[extra].first()
        problems = problems.join(carried, on="problem")
    order = {p: i for i, p in enumerate(dict.fromkeys(obs["problem"]))}
    problems = problems.sort_values("problem", key=lambda s: s.map(order), kind="stable")
    problems = problems.reset_index(drop=True)
    return DolceFit(
        problems=problems,
        tasks=category_distribution(problems),
        curves=pd.concat(curves, ignore_index=True),
        settings={
            "scenario": scenario,
            "threshold": threshold,
            "cow_steps": cow_steps,
            "pig_steps": pig_steps,
            "thresholds": {"lam_p": th.lam_p, "k_p": th.k_p, "lam_q": th.lam_q},
        },
    )


def mixture_curve(fit: DolceFit, problem: Any) -> pd.DataFrame:
    """One problem's observed outcome curve P(x | C) and the fitted mixture, by C."""
    out = fit.curves[fit.curves["problem"] == problem]
    if out.empty:
        raise ValueError(f"unknown problem {problem!r}")
    return out.sort_values("C").reset_index(drop=True)
