"""Agreement between raters: Cohen's κ, Fleiss' κ, Krippendorff's α, confusion matrices.

The published definitions, computed by the libraries that implement them:

* Cohen's κ (Cohen 1960) for two raters: ``(p_o - p_e) / (1 - p_e)``, with ``p_o`` the share
  of items both raters labelled alike and ``p_e`` the agreement expected from each rater's
  own label shares; computed by ``statsmodels.stats.inter_rater.cohens_kappa`` on the
  confusion table. ``weights="linear"`` / ``"quadratic"`` give the weighted κ of ordered
  ratings (AuthTrace's quadratic-weighted κ on 0-3, seed 004 Table 12), the disagreement
  weights built from the rating values themselves, not their ranks.
* Fleiss' κ (Fleiss 1971) for any fixed number of raters per item:
  ``statsmodels.stats.inter_rater.fleiss_kappa`` on ``aggregate_raters``' counts.
* Krippendorff's α (Krippendorff 2011): the ``krippendorff`` package, level ``nominal`` for
  labels and ``ordinal`` for ratings (0-5, 0-3); a missing rating is allowed.
* The confusion matrix (rows: the first rater, columns: the second) and, per label, the
  label distribution of each rater (seed 000 Table 26) with ``both / either``: of the items
  where at least one rater used the label, the share where both did.

Pure functions over plain sequences. Bad input (fewer than 2 items, sequences of different
lengths, an unknown level) raises ``ValueError`` with one line; a statistic whose definition
divides by zero (every rating the same label: ``p_e = 1``) raises
:class:`UndefinedAgreement` saying why, never a silent NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Literal

import krippendorff
import numpy as np

__all__ = [
    "LEVELS",
    "WEIGHTS",
    "LabelAgreement",
    "PairAgreement",
    "UndefinedAgreement",
    "cohen_kappa",
    "confusion_matrix",
    "fleiss_kappa",
    "krippendorff_alpha",
    "label_agreement",
    "pair_agreement",
]

#: Krippendorff's α levels of measurement offered.
LEVELS = ("nominal", "ordinal", "interval")
#: Weightings of Cohen's κ: None (unweighted), linear, quadratic.
WEIGHTS = (None, "linear", "quadratic")

Label = Hashable


class UndefinedAgreement(ValueError):
    """A statistic that is undefined on these ratings (its denominator is zero); says why."""


@dataclass(frozen=True, slots=True)
class LabelAgreement:
    """One label's row of a two-rater comparison.

    Attributes:
        label: the label.
        count_a: items the first rater gave this label.
        count_b: items the second rater gave this label.
        both: items both raters gave this label.
        either: items at least one rater gave this label.
        agreement: ``both / either``; None when neither rater used the label.
    """

    label: Label
    count_a: int
    count_b: int
    both: int
    either: int
    agreement: float | None


@dataclass(frozen=True, slots=True)
class PairAgreement:
    """Two raters on the items both rated (seed 000 App. A.6, Tables 25-26).

    Attributes:
        n: items both raters rated.
        agreed: items with the same label from both.
        raw_agreement: ``agreed / n`` (``p_o``).
        expected_agreement: ``p_e``, the agreement expected from the raters' label shares.
        kappa: Cohen's κ; None when undefined (``kappa_note`` says why).
        kappa_note: why κ is undefined, else None.
        labels: the labels of the confusion matrix, in order.
        confusion: ``confusion[i][j]``: items the first rater labelled ``labels[i]`` and the
            second ``labels[j]``.
        per_label: one :class:`LabelAgreement` per label, in ``labels`` order.
    """

    n: int
    agreed: int
    raw_agreement: float
    expected_agreement: float
    kappa: float | None
    kappa_note: str | None
    labels: tuple[Label, ...]
    confusion: tuple[tuple[int, ...], ...]
    per_label: tuple[LabelAgreement, ...]


def _check_pair(a: Sequence[Label], b: Sequence[Label]) -> None:
    if len(a) != len(b):
        raise ValueError(f"the two raters rated {len(a)} and {len(b)} items; expected the same")
    if len(a) < 2:
        raise ValueError(f"agreement needs at least 2 items, got {len(a)}")
    if any(v is None for v in (*a, *b)):
        raise ValueError("a rating is missing (None); give the items both raters rated")


def _ordered(values: Sequence[Label], labels: Sequence[Label] | None) -> list[Label]:
    """``labels`` (checked to cover ``values``), else the values seen, sorted."""
    seen = set(values)
    if labels is None:
        return sorted(seen, key=lambda v: (str(type(v)), v))  # type: ignore[arg-type]
    out = list(dict.fromkeys(labels))
    extra = seen - set(out)
    if extra:
        raise ValueError(
            f"ratings {sorted(map(str, extra))} are not among the labels {list(map(str, out))}"
        )
    return out


def confusion_matrix(
    a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label] | None = None
) -> tuple[list[Label], list[list[int]]]:
    """The confusion matrix of two raters over the same items.

    Args:
        a: the first rater's label of each item.
        b: the second rater's label of the same items, in the same order.
        labels: the rows' and columns' labels in order (default: the labels used, sorted);
            must cover every label used.

    Returns:
        ``(labels, matrix)`` with ``matrix[i][j]`` the items ``a`` labelled ``labels[i]`` and
        ``b`` labelled ``labels[j]``.

    Raises:
        ValueError: fewer than 2 items, lengths differ, a None rating, a label not in
            ``labels``.
    """
    _check_pair(a, b)
    order = _ordered([*a, *b], labels)
    index = {v: i for i, v in enumerate(order)}
    matrix = [[0] * len(order) for _ in order]
    for x, y in zip(a, b, strict=True):
        matrix[index[x]][index[y]] += 1
    return order, matrix


def _weight_values(order: Sequence[Label], weights: str | None) -> np.ndarray | None:
    if weights is None:
        return None
    if weights not in WEIGHTS:
        raise ValueError(f"unknown weights {weights!r}; expected one of {WEIGHTS}")
    try:
        return np.array([float(v) for v in order])  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(
            f"{weights} weights need numeric ratings, got {[str(v) for v in order]}"
        ) from None


def cohen_kappa(
    a: Sequence[Label],
    b: Sequence[Label],
    labels: Sequence[Label] | None = None,
    weights: Literal["linear", "quadratic"] | None = None,
) -> float:
    """Cohen's κ of two raters (statsmodels ``cohens_kappa`` on the confusion table).

    Args:
        a: the first rater's label of each item.
        b: the second rater's label of the same items.
        labels: the label set (default: the labels used); unused labels change nothing.
        weights: None for Cohen's κ; ``"linear"`` or ``"quadratic"`` for the weighted κ of
            numeric ratings, weights from the rating values (a 0-3 scale: ``|i - j|`` or
            ``(i - j)^2``).

    Raises:
        ValueError: see :func:`confusion_matrix`; weights on non-numeric labels.
        UndefinedAgreement: ``p_e = 1`` (both raters used one and the same label for every
            item), where κ is 0/0.
    """
    # statsmodels costs ~1 s to import; loaded on use so the CLI starts fast.
    from statsmodels.stats.inter_rater import cohens_kappa as _sm_kappa

    order, matrix = confusion_matrix(a, b, labels)
    values = _weight_values(order, weights)
    table = np.asarray(matrix, dtype=float)
    if values is None:
        if _expected(table) >= 1.0:
            raise UndefinedAgreement(_one_label(order, table))
        return float(_sm_kappa(table, return_results=False))
    # disagreement expected by chance, sum_ij w_ij r_i c_j: zero -> 0/0
    diff = np.abs(values[:, None] - values[None, :])
    w = diff if weights == "linear" else diff**2
    expected = float((w * np.outer(table.sum(1), table.sum(0))).sum())
    if expected == 0.0:
        raise UndefinedAgreement(_one_label(order, table))
    return float(_sm_kappa(table, weights=values, wt=weights, return_results=False))


def _expected(table: np.ndarray) -> float:
    """``p_e = sum_k (row_k / n) (col_k / n)``."""
    n = table.sum()
    return float((table.sum(1) * table.sum(0)).sum() / (n * n))


def _one_label(order: Sequence[Label], table: np.ndarray) -> str:
    used = [str(v) for v, r, c in zip(order, table.sum(1), table.sum(0), strict=True) if r or c]
    return (
        f"Cohen's kappa is undefined: both raters gave every item the label {used[0]!r} "
        "(expected agreement 1, kappa = 0/0)"
        if len(used) == 1
        else "Cohen's kappa is undefined: the chance disagreement is 0"
    )


def label_agreement(
    a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label] | None = None
) -> list[LabelAgreement]:
    """Per label: each rater's count (seed 000 Table 26), ``both``, ``either``, ``both/either``.

    Args:
        a: the first rater's label of each item.
        b: the second rater's label of the same items.
        labels: the labels to report, in order (default: the labels used, sorted).

    Raises:
        ValueError: see :func:`confusion_matrix`.
    """
    order, matrix = confusion_matrix(a, b, labels)
    out = []
    for i, label in enumerate(order):
        count_a = sum(matrix[i])
        count_b = sum(row[i] for row in matrix)
        both = matrix[i][i]
        either = count_a + count_b - both
        out.append(
            LabelAgreement(label, count_a, count_b, both, either, both / either if either else None)
        )
    return out


def pair_agreement(
    a: Sequence[Label], b: Sequence[Label], labels: Sequence[Label] | None = None
) -> PairAgreement:
    """Everything about two raters on the same items: n, p_o, p_e, κ, confusion, per label.

    κ that is undefined is reported as None with the reason in ``kappa_note``.

    Raises:
        ValueError: see :func:`confusion_matrix`.
    """
    order, matrix = confusion_matrix(a, b, labels)
    n = len(a)
    agreed = sum(matrix[i][i] for i in range(len(order)))
    try:
        kappa: float | None = cohen_kappa(a, b, order)
        note = None
    except UndefinedAgreement as exc:
        kappa, note = None, str(exc)
    return PairAgreement(
        n=n,
        agreed=agreed,
        raw_agreement=agreed / n,
        expected_agreement=_expected(np.asarray(matrix, dtype=float)),
        kappa=kappa,
        kappa_note=note,
        labels=tuple(order),
        confusion=tuple(tuple(r) for r in matrix),
        per_label=tuple(label_agreement(a, b, order)),
    )


def fleiss_kappa(ratings: Sequence[Sequence[Label]]) -> float:
    """Fleiss' κ: one row per item, the labels its raters gave (the same count per item).

    statsmodels ``aggregate_raters`` counts each item's labels, ``fleiss_kappa`` (method
    ``fleiss``) computes ``(P_bar - P_e) / (1 - P_e)``.

    Args:
        ratings: ``ratings[i]`` the labels item ``i`` got, one per rater (at least 2 each).

    Raises:
        ValueError: fewer than 2 items, fewer than 2 raters, items with different numbers of
            ratings, a None rating.
        UndefinedAgreement: every rating is the same label (``P_e = 1``).
    """
    from statsmodels.stats.inter_rater import aggregate_raters  # ~1 s import: on use
    from statsmodels.stats.inter_rater import fleiss_kappa as _sm_fleiss

    if len(ratings) < 2:
        raise ValueError(f"agreement needs at least 2 items, got {len(ratings)}")
    sizes = {len(r) for r in ratings}
    if len(sizes) != 1:
        raise ValueError(f"every item needs the same number of ratings, got {sorted(sizes)}")
    (m,) = sizes
    if m < 2:
        raise ValueError(f"Fleiss' kappa needs at least 2 raters per item, got {m}")
    flat = [v for r in ratings for v in r]
    if any(v is None for v in flat):
        raise ValueError("a rating is missing (None); Fleiss' kappa needs every item rated")
    order = _ordered(flat, None)
    if len(order) == 1:
        raise UndefinedAgreement(
            f"Fleiss' kappa is undefined: every rating is {str(order[0])!r} "
            "(expected agreement 1, kappa = 0/0)"
        )
    index = {v: i for i, v in enumerate(order)}
    codes = np.array([[index[v] for v in r] for r in ratings])
    counts, _ = aggregate_raters(codes, n_cat=len(order))
    return float(_sm_fleiss(counts, method="fleiss"))


def krippendorff_alpha(
    data: Sequence[Sequence[Label | None]],
    level: str = "nominal",
    labels: Sequence[Label] | None = None,
) -> float:
    """Krippendorff's α of a reliability matrix (the ``krippendorff`` package).

    Args:
        data: one row per rater, one column per item; None is a missing rating.
        level: ``nominal`` (labels), ``ordinal`` (ordered ratings such as 0-5 or 0-3; the
            order is ``labels`` or the ratings sorted) or ``interval`` (numeric ratings).
        labels: the values in order (default: those used, sorted); for ``ordinal`` this is
            the scale's order.

    Raises:
        ValueError: rows of different lengths, fewer than 2 raters or items, an unknown
            level, interval level with non-numeric ratings.
        UndefinedAgreement: fewer than 2 values can be paired (no item rated twice) or only
            one value is used (``D_e = 0``).
    """
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}; expected one of {LEVELS}")
    if len(data) < 2:
        raise ValueError(f"Krippendorff's alpha needs at least 2 raters, got {len(data)}")
    widths = {len(row) for row in data}
    if len(widths) != 1:
        raise ValueError(f"every rater's row needs one entry per item, got {sorted(widths)}")
    (width,) = widths
    if width < 2:
        raise ValueError(f"agreement needs at least 2 items, got {width}")
    used = [v for row in data for v in row if v is not None]
    order = _ordered(used, labels)
    if level == "interval":
        try:
            code = {v: float(v) for v in order}  # type: ignore[arg-type]
        except (TypeError, ValueError):
            raise ValueError("interval level needs numeric ratings") from None
    else:
        code = {v: float(i) for i, v in enumerate(order)}
    matrix = np.array([[math.nan if v is None else code[v] for v in row] for row in data])
    pairable = (~np.isnan(matrix)).sum(0)
    if int(pairable[pairable >= 2].sum()) < 2:
        raise UndefinedAgreement(
            "Krippendorff's alpha is undefined: no item was rated by 2 or more raters"
        )
    values = Counter(matrix[:, pairable >= 2][~np.isnan(matrix[:, pairable >= 2])].tolist())
    if len(values) < 2:
        raise UndefinedAgreement(
            "Krippendorff's alpha is undefined: every pairable rating is the same value "
            "(expected disagreement 0, alpha = 0/0)"
        )
    domain = sorted(code.values())
    return float(
        krippendorff.alpha(reliability_data=matrix, value_domain=domain, level_of_measurement=level)
    )
