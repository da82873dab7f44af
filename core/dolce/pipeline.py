"""The whole DOLCE pipeline: scenario per task (App. H), EM per task and scenario, categories."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from core.dolce.categories import (
    NOT_COVERED,
    Thresholds,
    assign_category,
    category_distribution,
    default_thresholds,
)
from core.dolce.em import (
    COW_STEPS,
    PIG_STEPS,
    check_pig_estimator,
    fit_cow,
    fit_pig,
    require_columns,
)
from core.dolce.likelihood import PIG_TOLERANCE, check_tolerance
from core.dolce.outcomes import IDK, task_scenarios
from core.dolce.params import LIKELIHOOD_STEPS, PUBLISHED

__all__ = ["DolceFit", "fit_dolce", "mixture_curve"]

_OUTCOME_COLUMNS = ("problem", "task", "L", "C", "score", "idk", "start", "answer", "variant")


@dataclass(frozen=True, slots=True)
class DolceFit:
    """DOLCE estimates for a set of problems (per problem first, aggregates derived).

    Attributes:
        problems: one row per problem: ``task, problem, scenario, dip_p, dip_scenario,
            estimator, L, n_obs, missing, max_C, lam, k, p_oracle, log_likelihood, lam_p,
            k_p, lam_q, category, identified`` (plus any ``extra`` columns passed to
            :func:`fit_dolce`); ``dip_p`` / ``dip_scenario`` are the problem's own dip test
            and ``scenario`` the one applied by the task's rule (App. H); ``estimator`` is
            ``published`` for COW (Algorithm 1) and the PIG estimator for PIG; ``identified``
            is False where the estimator does not identify lambda (PIG under ``published``):
            its lambda and category are the algorithm's output, not an estimate; ``category``
            is ``not covered`` for a COW fit with k = 0 (no span answers: lambda > L);
            ``n_obs`` counts the answered probes the fit used, ``missing`` the probes whose
            call failed (left out).
        tasks: one row per task: ``task, n, missing, n_obs, missing_probes, n_cow, n_pig``,
            ``scenario_rule`` (``split``, ``COW only``, ``PIG only`` or ``fixed`` when the
            scenario was given), ``task_dip_p`` (the pooled dip test deciding an unsplit
            task), ``n_dip_cow`` / ``n_dip_pig`` (the problems' own tests) and the count and
            share of each category (see :func:`core.dolce.category_distribution`); ``n``
            counts the fitted problems, ``missing`` the problems without one answered probe
            (not fitted), ``n_obs`` / ``missing_probes`` the probes.
        curves: one row per (problem, observed C): ``n`` answered probes, ``missing`` failed
            ones, the observed outcome shares / mean score over the answered probes and the
            fitted mixture's (see :func:`fit_cow`, :func:`fit_pig`).
        settings: the settings used (scenario, threshold, steps, thresholds, PIG estimator
            and tolerance).
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
    pig_steps: int | None = None,
    pig_estimator: str = "likelihood",
    pig_tolerance: float = PIG_TOLERANCE,
) -> DolceFit:
    """Scenario per task, EM per task and scenario, categories: the DOLCE pipeline.

    Args:
        outcomes: one row per probe: ``problem``, ``L``, ``C``, ``score`` (relaxed F1; NaN for
            a failed or unscored call: missing, left out of the fit and counted, never a
            failed probe), ``idk`` (bool), optionally ``task`` and any per-problem columns to
            carry along (``question`` ...).
        scenario: ``auto`` (Hartigan's dip test per problem, applied per task by the rule
            of App. H: :func:`core.dolce.task_scenarios`), ``COW`` or ``PIG``.
        threshold: COW binarization threshold on the score (0.5).
        thresholds: category thresholds; None fields take the per-problem defaults.
        cow_steps: EM steps for COW (10).
        pig_steps: EM steps for PIG (None: 10 for ``likelihood``, 5 for ``published``).
        pig_estimator: ``likelihood`` (default; identifies lambda) or ``published``
            (Algorithm 2 as printed; PIG lambda and categories flagged not identified).
        pig_tolerance: ``likelihood`` only: the half-width of the window an interior score
            stands for (0.005; :mod:`core.dolce.likelihood`).

    Returns:
        The :class:`DolceFit`.
    """
    if scenario not in ("auto", "COW", "PIG"):
        raise ValueError(f"unknown scenario {scenario!r}; choose one of: auto, COW, PIG")
    check_pig_estimator(pig_estimator)
    check_tolerance(pig_tolerance)
    if pig_steps is None:
        pig_steps = PIG_STEPS if pig_estimator == PUBLISHED else LIKELIHOOD_STEPS
    obs = require_columns(outcomes, ("problem", "L", "C", "score", "idk"), "DOLCE outcomes")
    gone = obs[obs["score"].isna()]
    obs = obs[~obs["score"].isna()].reset_index(drop=True)
    if obs.empty:
        raise ValueError("no scored probe outcomes to fit")
    scores = np.where(obs["idk"].to_numpy(dtype=bool), 0.0, obs["score"].to_numpy(dtype=float))
    dips, rules = [], []
    for task, frame in obs.assign(score=scores).groupby("task", sort=False):
        if scenario == "auto":
            per, rule, task_p = task_scenarios(frame[["problem", "score"]])
        else:
            per = pd.DataFrame(
                {
                    "problem": frame["problem"].unique(),
                    "dip_p": np.nan,
                    "dip_scenario": "",
                    "scenario": scenario,
                }
            )
            rule, task_p = "fixed", np.nan
        dips.append(per)
        rules.append(
            {
                "task": task,
                "scenario_rule": rule,
                "task_dip_p": task_p,
                "n_dip_cow": int((per["dip_scenario"] == "COW").sum()),
                "n_dip_pig": int((per["dip_scenario"] == "PIG").sum()),
            }
        )
    dip = pd.concat(dips, ignore_index=True).set_index("problem")
    obs["_scenario"] = obs["problem"].map(dip["scenario"])
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
        p, c = fit_pig(pig, steps=pig_steps, estimator=pig_estimator, tolerance=pig_tolerance)
        parts.append(p)
        curves.append(c)
    problems = pd.concat(parts, ignore_index=True)
    problems.insert(3, "dip_p", problems["problem"].map(dip["dip_p"]))
    problems.insert(4, "dip_scenario", problems["problem"].map(dip["dip_scenario"]))
    th = thresholds or Thresholds()
    defaults = [
        default_thresholds(obs.loc[obs["problem"] == pid, "C"], L)
        for pid, L in zip(problems["problem"], problems["L"], strict=True)
    ]
    problems["lam_p"] = [th.lam_p if th.lam_p is not None else d[0] for d in defaults]
    problems["k_p"] = [th.k_p if th.k_p is not None else d[1] for d in defaults]
    problems["lam_q"] = [th.lam_q if th.lam_q is not None else d[2] for d in defaults]
    category = assign_category(
        problems["lam"], problems["k"], problems["lam_p"], problems["k_p"], problems["lam_q"]
    )
    # Assumption 1 needs k >= 1: a COW fit with k = 0 says no span answers (lambda > L).
    uncovered = (problems["scenario"] == "COW") & (problems["k"] == 0)
    problems["category"] = np.where(uncovered, NOT_COVERED, category).astype(object)
    problems["identified"] = ~(
        (problems["scenario"] == "PIG") & (problems["estimator"] == PUBLISHED)
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
        tasks=_task_counts(category_distribution(problems), problems, gone, rules),
        curves=_curve_counts(pd.concat(curves, ignore_index=True), gone),
        settings={
            "scenario": scenario,
            "threshold": threshold,
            "cow_steps": cow_steps,
            "pig_steps": pig_steps,
            "pig_estimator": pig_estimator,
            "pig_tolerance": pig_tolerance,
            "thresholds": {"lam_p": th.lam_p, "k_p": th.k_p, "lam_q": th.lam_q},
        },
    )


def _task_of(frame: pd.DataFrame) -> pd.Series:
    return frame["task"] if "task" in frame.columns else pd.Series("", index=frame.index)


def _task_counts(
    tasks: pd.DataFrame, problems: pd.DataFrame, gone: pd.DataFrame, rules: list[dict]
) -> pd.DataFrame:
    """Counts beside ``n`` and the scenario rule after ``n_pig``.

    ``missing`` (unfitted problems), ``n_obs`` and ``missing_probes`` go beside ``n``;
    ``scenario_rule``, ``task_dip_p``, ``n_dip_cow`` and ``n_dip_pig`` after ``n_pig``.
    """
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
    rule = pd.DataFrame(
        rules, columns=["task", "scenario_rule", "task_dip_p", "n_dip_cow", "n_dip_pig"]
    ).set_index("task")
    at = list(out.columns).index("n_pig") + 1
    for i, col in enumerate(rule.columns):
        values = out["task"].map(rule[col])
        if col.startswith("n_"):
            values = values.fillna(0).astype(np.int64)
        elif col == "scenario_rule":
            values = values.fillna("")
        out.insert(at + i, col, values)
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
