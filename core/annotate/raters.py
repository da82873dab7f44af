"""Raters of an annotation sample: rule labels, annotators, judge runs; their agreement report."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.annotate.judged import (
    SAMPLED_RUBRICS,
    judge_raters,
    rubric_labels,
)
from core.scoring.rows import FAILURE_LABELS
from core.stats.agreement import (
    UndefinedAgreement,
    fleiss_kappa,
    krippendorff_alpha,
    pair_agreement,
)
from core.store import Store, StoreError
from core.store.annotations import (
    annotation_labels,
    rule_labels,
    sampled_items,
)

__all__ = [
    "AMBIGUOUS",
    "DEFAULT_RUBRIC",
    "RUBRICS",
    "RULE_RATER",
    "RaterSource",
    "Rubric",
    "agreement_report",
    "check_run",
    "rater_labels",
    "register_rater_source",
    "rubric_of",
]


#: The label seed 000's annotators could give besides the taxonomy's (App. A.6, Table 26);
#: the rules never assign it.
AMBIGUOUS = "ambiguous"


#: The rater name of the rule-based labels (``scores.failure_label``).
RULE_RATER = "rule"


@dataclass(frozen=True, slots=True)
class Rubric:
    """What raters label under one rubric.

    Attributes:
        name: the rubric's name (``--rubric``).
        labels: the vocabulary an annotator may use, in report order.
        level: Krippendorff's α level of its labels (``nominal`` or ``ordinal``).
        description: one line for the help and the report.
    """

    name: str
    labels: tuple[str, ...]
    level: str
    description: str


#: The failure taxonomy of seed 000 App. A.5 (:data:`core.scoring.rows.FAILURE_LABELS`), plus the
#: annotators' ``ambiguous`` of App. A.6.
DEFAULT_RUBRIC = "failure_taxonomy"


RUBRICS: dict[str, Rubric] = {
    DEFAULT_RUBRIC: Rubric(
        DEFAULT_RUBRIC,
        (*FAILURE_LABELS, AMBIGUOUS),
        "nominal",
        "failure taxonomy labels of seed 000 App. A.5 (rule rater: scores.failure_label)",
    ),
    **{name: Rubric(name, *rubric_labels(name)) for name in SAMPLED_RUBRICS},
}


#: A rater source: ``(store, run, rubric) -> {rater: {item_id: label}}``.
RaterSource = Callable[[Store, str, str], dict[str, dict[str, str]]]


def check_run(store: Store, run: str) -> None:
    """Raise StoreError unless ``run`` is a run of the store."""
    if store.run_row(run) is None:
        raise StoreError(f"no run '{run}' in {store.path}")


def rubric_of(name: str) -> Rubric:
    """The annotation rubric named ``name`` (ValueError naming the known ones)."""
    if name not in RUBRICS:
        raise ValueError(f"unknown rubric {name!r}; expected one of {sorted(RUBRICS)}")
    return RUBRICS[name]


# ---------------------------------------------------------------------------- raters
def _rule_source(store: Store, run: str, rubric: str) -> dict[str, dict[str, str]]:
    """The rule-based labels of the sampled items (failure taxonomy only)."""
    if rubric != DEFAULT_RUBRIC:
        return {}
    labels = rule_labels(store, run, rubric)
    return {RULE_RATER: labels} if labels else {}


def _annotator_source(store: Store, run: str, rubric: str) -> dict[str, dict[str, str]]:
    """Every annotator's imported labels."""
    out: dict[str, dict[str, str]] = {}
    for row in annotation_labels(store, run, rubric).itertuples(index=False):
        out.setdefault(row.annotator, {})[row.item_id] = row.label
    return out


def _judge_source(store: Store, run: str, rubric: str) -> dict[str, dict[str, str]]:
    """Every judge run of a judge rubric on the run, as ``judge:<run id>``."""
    if rubric == DEFAULT_RUBRIC:
        return {}
    return judge_raters(store, run, rubric, sampled_items(store, run, rubric))


_SOURCES: dict[str, RaterSource] = {
    "rule": _rule_source,
    "annotators": _annotator_source,
    "judges": _judge_source,
}


def register_rater_source(name: str, source: RaterSource) -> None:
    """Add a source of raters (a judge rubric's judgments, say) under a name.

    Args:
        name: the source's name (a second registration under it replaces the first).
        source: ``(store, run, rubric) -> {rater: {item_id: label}}``; item ids are those of
            the run's sample (:func:`core.store.annotations.sampled_items`), labels strings
            (or values :func:`core.stats.agreement.pair_agreement` can compare).
    """
    _SOURCES[name] = source


def rater_labels(store: Store, run: str, rubric: str = DEFAULT_RUBRIC) -> dict[str, dict[str, str]]:
    """``{rater: {item_id: label}}`` of every source: ``rule`` first, then by name.

    Raises:
        ValueError: two sources name the same rater.
    """
    merged: dict[str, dict[str, str]] = {}
    for source_name, source in _SOURCES.items():
        for rater, labels in source(store, run, rubric).items():
            if rater in merged:
                raise ValueError(f"rater {rater!r} comes from two sources ({source_name})")
            merged[rater] = dict(labels)
    return dict(sorted(merged.items(), key=lambda kv: (kv[0] != RULE_RATER, kv[0])))


# ---------------------------------------------------------------------------- report
def _label_order(vocab: Sequence[str], used: set[str]) -> list[str]:
    return [v for v in vocab if v in used] + sorted(used - set(vocab))


def agreement_report(store: Store, run: str, rubric: str = DEFAULT_RUBRIC) -> dict[str, Any]:
    """Agreement of every pair of raters of a run's sample, and of all raters together.

    Per pair (rule first, then by name), on the items both rated: ``n``, ``agreed``,
    ``raw_agreement``, ``expected_agreement``, ``kappa`` (Cohen's; None with ``kappa_note``
    when undefined or when fewer than 2 items are shared), the confusion matrix (rows: the
    first rater) over the labels either used (vocabulary order) and one row per label
    (``count_a``, ``count_b``: each rater's count; ``both``, ``either``, ``agreement`` =
    both / either). With three or more raters, on the items every
    one of them rated: Fleiss' κ and Krippendorff's α (the rubric's level), each None with a
    note when undefined.

    Raises:
        StoreError: no such run.
        ValueError: an unknown rubric.
    """
    spec = rubric_of(rubric)
    check_run(store, run)
    raters = rater_labels(store, run, rubric)
    n_items = len(sampled_items(store, run, rubric))
    pairs = [_pair(a, b, raters[a], raters[b], spec) for a, b in itertools.combinations(raters, 2)]
    return {
        "run": run,
        "rubric": rubric,
        "labels": list(spec.labels),
        "n_items": n_items,
        "raters": {r: len(v) for r, v in raters.items()},
        "pairs": pairs,
        "all_raters": _all_raters(raters, spec) if len(raters) >= 3 else None,
    }


def _pair(
    a: str, b: str, la: Mapping[str, str], lb: Mapping[str, str], spec: Rubric
) -> dict[str, Any]:
    common = sorted(set(la) & set(lb))
    out: dict[str, Any] = {"rater_a": a, "rater_b": b, "n": len(common)}
    if len(common) < 2:
        return out | {"kappa": None, "kappa_note": f"{len(common)} items rated by both; need 2"}
    xa, xb = [la[i] for i in common], [lb[i] for i in common]
    res = pair_agreement(xa, xb, _label_order(spec.labels, {*xa, *xb}))
    return out | {
        "agreed": res.agreed,
        "disagreed": res.n - res.agreed,
        "raw_agreement": res.raw_agreement,
        "expected_agreement": res.expected_agreement,
        "kappa": res.kappa,
        "kappa_note": res.kappa_note,
        "labels": list(res.labels),
        "confusion": [list(r) for r in res.confusion],
        "per_label": [
            {
                "label": p.label,
                "count_a": p.count_a,
                "count_b": p.count_b,
                "both": p.both,
                "either": p.either,
                "agreement": p.agreement,
            }
            for p in res.per_label
        ],
    }


def _all_raters(raters: Mapping[str, Mapping[str, str]], spec: Rubric) -> dict[str, Any]:
    names = list(raters)
    common = sorted(set.intersection(*(set(v) for v in raters.values())))
    out: dict[str, Any] = {"raters": names, "n": len(common), "alpha_level": spec.level}
    rows = [[raters[r][i] for r in names] for i in common]
    try:
        out["fleiss_kappa"], out["fleiss_note"] = fleiss_kappa(rows), None
    except UndefinedAgreement as exc:
        out["fleiss_kappa"], out["fleiss_note"] = None, str(exc)
    except ValueError as exc:
        out["fleiss_kappa"], out["fleiss_note"] = None, f"{exc} (items every rater rated)"
    data = [[raters[r][i] for i in common] for r in names]
    order = _label_order(spec.labels, {v for row in data for v in row})
    try:
        out["krippendorff_alpha"] = krippendorff_alpha(data, spec.level, order)
        out["alpha_note"] = None
    except UndefinedAgreement as exc:
        out["krippendorff_alpha"], out["alpha_note"] = None, str(exc)
    except ValueError as exc:
        out["krippendorff_alpha"], out["alpha_note"] = None, f"{exc} (items every rater rated)"
    return out
