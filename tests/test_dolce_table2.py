"""DOLCE default thresholds (seed dolce_lambda_k §4) on the paper's Table 2 (issue 34 item 2).

§4: "We set thresholds λ_p and k_p as the first tertile among the N exponential candidates
(excluding 0, max_j C_ij + 1, L), i.e. p = ⌊N/3⌋. We use λ_q = max_j C_ij." App. J prints the
observation lengths of the representative problems: C = 0, 1, 2, 5, 10, 20, 50, 100 and L
(QuALITY L = 498, 408, 381; LongFQA L = 119, 157, 157, 162). The N = 7 candidates are 1 ... 100
and p = 2: the candidate at index 2 counted from 0 is 5 (the 1/3-quantile), so λ_p = k_p = 5;
λ_q = 100, the longest span shorter than L. Table 2's eight (λ, k) then fall in the categories
it prints; the p-th smallest counted from 1 (2) would put LongFQA's λ = 5, k = 10 in IV.
"""

from __future__ import annotations

import pytest

from core.dolce import NOT_COVERED, assign_category, default_thresholds
from core.dolce.categories import CATEGORY_NAMES
from core.dolce.params import THRESHOLD_RULE
from core.figures.dolce import COLUMN_HELP

#: App. J's observation lengths besides L (the L-Eval ladder).
LADDER = (0, 1, 2, 5, 10, 20, 50, 100)
#: Table 2 (task, category, lambda, k, L). L from App. J; the QuALITY Category V problem's
#: table is blank in the seed, so its L is the story's sentence count from its gold answer
#: ("(D) 406"); any L > 100 gives the same thresholds.
TABLE_2 = [
    ("QuALITY", "II", 1, 100, 498),
    ("QuALITY", "III", 1, 1, 408),
    ("QuALITY", "IV", 50, 1, 381),
    ("QuALITY", "V", "L", 1, 406),
    ("LongFQA", "II", 5, 10, 119),
    ("LongFQA", "III", 2, 1, 157),
    ("LongFQA", "IV", 20, 1, 157),
    ("LongFQA", "V", "L", 1, 162),
]


@pytest.mark.parametrize(("task", "category", "lam", "k", "L"), TABLE_2)
def test_table_2_representative_problems_get_their_published_category(task, category, lam, k, L):
    lam_p, k_p, lam_q = default_thresholds([*LADDER, L], L)
    assert (lam_p, k_p, lam_q) == (5.0, 5.0, 100.0)
    lam = L if lam == "L" else lam
    assert list(assign_category([lam], [k], lam_p, k_p, lam_q)) == [category], task


def test_the_p_th_smallest_counted_from_one_would_not_reproduce_table_2():
    # The earlier reading (index p - 1 = 1: threshold 2) turns LongFQA's II into IV.
    assert list(assign_category([5], [10], 2, 2, 100)) == ["IV"]


@pytest.mark.parametrize(
    ("ladder", "expected"),
    [
        # N = 7 (1 ... 100), p = 2 -> 5.
        ((0, 1, 2, 5, 10, 20, 50, 100, 150), 5.0),
        # N = 8 (1 ... 200), p = 2 -> 5.
        ((0, 1, 2, 5, 10, 20, 50, 100, 200, 350), 5.0),
        # N = 9 (1 ... 500), p = 3 -> 10.
        ((0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 700), 10.0),
        # N = 2: p = 0, the smallest.
        ((0, 1, 2, 3), 1.0),
        # N = 3: p = 1, the middle one.
        ((0, 1, 2, 4, 9), 2.0),
    ],
)
def test_threshold_is_the_candidate_at_index_floor_n_over_3(ladder, expected):
    lam_p, k_p, _ = default_thresholds(ladder, ladder[-1])
    assert lam_p == k_p == expected


def test_help_states_the_rule_with_its_value_and_not_covered_is_labelled_as_ours():
    for text in (THRESHOLD_RULE, COLUMN_HELP["lam_p"], COLUMN_HELP["k_p"]):
        assert "floor(N/3) counted from 0" in text and "5 on the ladder" in text
    assert "this tool's addition" in CATEGORY_NAMES[NOT_COVERED]
    assert "this tool's addition" in COLUMN_HELP["category"]
