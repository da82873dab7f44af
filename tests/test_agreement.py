"""Agreement statistics equal hand-computed values (issue 20 item 4; core/stats/agreement.py)."""

from __future__ import annotations

import math

import pytest

from core.stats.agreement import (
    UndefinedAgreement,
    cohen_kappa,
    confusion_matrix,
    fleiss_kappa,
    krippendorff_alpha,
    label_agreement,
    pair_agreement,
)


def _pairs(table: list[list[int]], labels: list[str]) -> tuple[list[str], list[str]]:
    """Two raters' label lists whose confusion table (rows: a, columns: b) is ``table``."""
    a: list[str] = []
    b: list[str] = []
    for i, row in enumerate(table):
        for j, count in enumerate(row):
            a += [labels[i]] * count
            b += [labels[j]] * count
    return a, b


def test_cohen_kappa_2x2_by_hand():
    # rows rater A, columns rater B:      yes  no
    #                               yes    20   5   (A: 25 yes)
    #                               no     10  15   (A: 25 no)
    # n = 50; p_o = (20 + 15) / 50 = 0.70
    # B: 30 yes, 20 no; p_e = (25*30 + 25*20) / 50^2 = (750 + 500) / 2500 = 0.50
    # kappa = (0.70 - 0.50) / (1 - 0.50) = 0.40
    a, b = _pairs([[20, 5], [10, 15]], ["yes", "no"])
    assert cohen_kappa(a, b) == pytest.approx(0.40, abs=1e-12)
    res = pair_agreement(a, b, ["yes", "no"])
    assert (res.n, res.agreed) == (50, 35)
    assert res.raw_agreement == pytest.approx(0.70)
    assert res.expected_agreement == pytest.approx(0.50)
    assert res.kappa == pytest.approx(0.40)
    assert res.confusion == ((20, 5), (10, 15))
    # per label: yes: A 25, B 30, both 20, either 25 + 30 - 20 = 35 -> 20/35
    #            no:  A 25, B 20, both 15, either 25 + 20 - 15 = 30 -> 15/30
    yes, no = res.per_label
    assert (yes.count_a, yes.count_b, yes.both, yes.either) == (25, 30, 20, 35)
    assert yes.agreement == pytest.approx(20 / 35)
    assert (no.count_a, no.count_b, no.both, no.either) == (25, 20, 15, 30)
    assert no.agreement == pytest.approx(0.5)


def test_cohen_kappa_three_labels_by_hand():
    # rows A, columns B over (loc, sel, int):
    #   loc [4, 1, 0]   A: loc 5
    #   sel [1, 3, 1]   A: sel 5
    #   int [0, 2, 3]   A: int 5       n = 15
    # B: loc 5, sel 6, int 4; p_o = (4 + 3 + 3) / 15 = 10/15
    # p_e = (5*5 + 5*6 + 5*4) / 225 = 75/225 = 1/3
    # kappa = (2/3 - 1/3) / (2/3) = 0.5
    a, b = _pairs([[4, 1, 0], [1, 3, 1], [0, 2, 3]], ["loc", "sel", "int"])
    assert cohen_kappa(a, b) == pytest.approx(0.5, abs=1e-12)


def test_weighted_kappa_uses_the_rating_values():
    # ratings on values (0, 1, 3); rows A, columns B:
    #   0 [2, 1, 0]   A: 3
    #   1 [0, 2, 1]   A: 3
    #   3 [0, 0, 2]   A: 2      n = 8; B: 2, 3, 3
    # quadratic disagreement weights (vi - vj)^2: w01 = 1, w03 = 9, w13 = 4
    # observed: (1*w01 + 1*w13) / 8 = 5/8
    # expected: sum w_ij r_i c_j / n^2 = [1*(3*3 + 3*2) + 9*(3*3 + 2*2) + 4*(3*3 + 2*3)] / 64
    #         = (15 + 117 + 60) / 64 = 3
    # kappa_w = 1 - (5/8) / 3 = 19/24
    a, b = _pairs([[2, 1, 0], [0, 2, 1], [0, 0, 2]], [0, 1, 3])
    assert cohen_kappa(a, b, weights="quadratic") == pytest.approx(19 / 24, abs=1e-12)
    # linear |vi - vj|: w01 = 1, w03 = 3, w13 = 2; observed (1 + 2) / 8 = 3/8
    # expected: [1*15 + 3*13 + 2*15] / 64 = 84/64; kappa_w = 1 - (3/8) / (84/64) = 5/7
    assert cohen_kappa(a, b, weights="linear") == pytest.approx(5 / 7, abs=1e-12)
    with pytest.raises(ValueError, match="numeric"):
        cohen_kappa(["x", "y"], ["y", "x"], weights="linear")


def test_kappa_undefined_is_said_not_nan():
    with pytest.raises(UndefinedAgreement, match="'selection'"):
        cohen_kappa(["selection"] * 4, ["selection"] * 4)
    res = pair_agreement(["selection"] * 4, ["selection"] * 4)
    assert res.kappa is None and "undefined" in res.kappa_note
    assert res.raw_agreement == 1.0
    # one rater all "a", the other all "b": p_e = 0, p_o = 0 -> kappa = 0 (defined)
    assert cohen_kappa(["a", "a"], ["b", "b"]) == 0.0


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [
        (["x"], ["x"], "at least 2 items"),
        (["x", "y"], ["x"], "same"),
        (["x", None], ["x", "y"], "missing"),
    ],
)
def test_bad_input_is_one_line_value_error(a, b, match):
    with pytest.raises(ValueError, match=match) as exc:
        cohen_kappa(a, b)
    assert "\n" not in str(exc.value)


def test_confusion_matrix_keeps_given_label_order_and_unused_labels():
    labels, m = confusion_matrix(["b", "a", "a"], ["a", "a", "c"], ["c", "b", "a", "z"])
    assert labels == ["c", "b", "a", "z"]
    # (b, a) once, (a, a) once, (a, c) once
    assert m == [[0, 0, 0, 0], [0, 0, 1, 0], [1, 0, 1, 0], [0, 0, 0, 0]]
    rows = label_agreement(["b", "a", "a"], ["a", "a", "c"], ["c", "b", "a", "z"])
    assert rows[3].either == 0 and rows[3].agreement is None
    with pytest.raises(ValueError, match="not among the labels"):
        confusion_matrix(["a", "q"], ["a", "a"], ["a"])


def test_fleiss_kappa_four_items_three_raters_by_hand():
    # items x raters; categories a, b, c; n = 3 raters
    #   1: a a a  -> counts (3,0,0): P_1 = (9 - 3) / (3*2) = 1
    #   2: a a b  -> (2,1,0): P_2 = (4 + 1 - 3) / 6 = 1/3
    #   3: a b c  -> (1,1,1): P_3 = (1 + 1 + 1 - 3) / 6 = 0
    #   4: b b b  -> (0,3,0): P_4 = 1
    # P_bar = (1 + 1/3 + 0 + 1) / 4 = 7/12
    # p_a = 6/12, p_b = 5/12, p_c = 1/12; P_e = (36 + 25 + 1) / 144 = 62/144 = 31/72
    # kappa = (7/12 - 31/72) / (1 - 31/72) = (11/72) / (41/72) = 11/41
    rows = [["a", "a", "a"], ["a", "a", "b"], ["a", "b", "c"], ["b", "b", "b"]]
    assert fleiss_kappa(rows) == pytest.approx(11 / 41, abs=1e-12)


def test_fleiss_kappa_edges():
    with pytest.raises(UndefinedAgreement, match="every rating"):
        fleiss_kappa([["a", "a", "a"], ["a", "a", "a"]])
    with pytest.raises(ValueError, match="same number"):
        fleiss_kappa([["a", "b", "a"], ["a", "b"]])
    with pytest.raises(ValueError, match="at least 2 items"):
        fleiss_kappa([["a", "b", "a"]])
    # two raters: Fleiss' kappa is Scott's pi. Items (x,x), (x,y), (y,y), (y,y):
    # P_i = 1, 0, 1, 1 -> P_bar = 3/4; p_x = 3/8, p_y = 5/8; P_e = (9 + 25) / 64 = 34/64
    # kappa = (48/64 - 34/64) / (30/64) = 14/30
    assert fleiss_kappa([["x", "x"], ["x", "y"], ["y", "y"], ["y", "y"]]) == pytest.approx(
        14 / 30, abs=1e-12
    )


def test_krippendorff_alpha_nominal_by_hand():
    # raters x items: A: a a b b ; B: a b b b (every item pairable, m_u = 2)
    # coincidences (each unit adds its ordered pairs / (m_u - 1) = 1):
    #   unit 1 (a,a): o_aa += 2; unit 2 (a,b): o_ab += 1, o_ba += 1; units 3, 4: o_bb += 4
    # n_a = 3, n_b = 5, n = 8
    # alpha = 1 - (n - 1) * sum_{c != k} o_ck / sum_{c != k} n_c n_k = 1 - 7 * 2 / (2*3*5)
    #       = 1 - 14/30 = 8/15
    data = [["a", "a", "b", "b"], ["a", "b", "b", "b"]]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(8 / 15, abs=1e-12)


def test_krippendorff_alpha_nominal_with_a_missing_rating_by_hand():
    # raters x items (None: missing):
    #   A: a  a  b  None
    #   B: a  b  b  b
    #   C: a  None  b  b
    # unit 1 (a,a,a): m = 3, each of the 6 ordered pairs weighs 1/2: o_aa += 3
    # unit 2 (a,b):   o_ab += 1, o_ba += 1
    # unit 3 (b,b,b): o_bb += 3
    # unit 4 (b,b):   o_bb += 2
    # n_a = 3 + 1 = 4, n_b = 1 + 3 + 2 = 6, n = 10
    # alpha = 1 - (n - 1) * (o_ab + o_ba) / (2 n_a n_b) = 1 - 9 * 2 / 48 = 1 - 3/8 = 5/8
    data = [["a", "a", "b", None], ["a", "b", "b", "b"], ["a", None, "b", "b"]]
    assert krippendorff_alpha(data, "nominal") == pytest.approx(5 / 8, abs=1e-12)


def test_krippendorff_alpha_ordinal_by_hand():
    # ratings 0..2; A: 0 1 2 ; B: 0 2 2
    # coincidences: o_00 = 2, o_12 = o_21 = 1, o_22 = 2; n_0 = 2, n_1 = 1, n_2 = 3, n = 6
    # ordinal delta^2_ck = (sum_{g=c..k} n_g - (n_c + n_k) / 2)^2:
    #   d01 = (3 - 1.5)^2 = 2.25, d02 = (6 - 2.5)^2 = 12.25, d12 = (4 - 2)^2 = 4
    # D_o = sum o_ck d_ck / n = (1*4 + 1*4) / 6 = 4/3
    # D_e = sum_{c != k} n_c n_k d_ck / (n (n - 1)) = 2*(2*1*2.25 + 2*3*12.25 + 1*3*4) / 30
    #     = 2 * (4.5 + 73.5 + 12) / 30 = 6
    # alpha = 1 - D_o / D_e = 1 - (4/3) / 6 = 7/9
    data = [[0, 1, 2], [0, 2, 2]]
    assert krippendorff_alpha(data, "ordinal") == pytest.approx(7 / 9, abs=1e-12)
    # nominal on the same data: o_12 + o_21 = 2; 1 - 5 * 2 / (2*(2*1 + 2*3 + 1*3)) = 1 - 10/22
    assert krippendorff_alpha(data, "nominal") == pytest.approx(12 / 22, abs=1e-12)


def test_krippendorff_alpha_published_example():
    # Krippendorff (2011), "Computing Krippendorff's Alpha-Reliability", section C: 4
    # observers, 12 units, missing values; published alpha: nominal 0.743, ordinal 0.815,
    # interval 0.849.
    n = None
    data = [
        [1, 2, 3, 3, 2, 1, 4, 1, 2, n, n, n],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, n, 3],
        [n, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, n],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, n],
    ]
    assert round(krippendorff_alpha(data, "nominal"), 3) == 0.743
    assert round(krippendorff_alpha(data, "ordinal"), 3) == 0.815
    assert round(krippendorff_alpha(data, "interval"), 3) == 0.849


def test_krippendorff_alpha_undefined_and_bad_input():
    with pytest.raises(UndefinedAgreement, match="same value"):
        krippendorff_alpha([["a", "a"], ["a", "a"]])
    with pytest.raises(UndefinedAgreement, match="no item"):
        krippendorff_alpha([["a", None], [None, "b"]])
    with pytest.raises(ValueError, match="unknown level"):
        krippendorff_alpha([["a", "b"], ["a", "b"]], "ratio-ish")
    with pytest.raises(ValueError, match="one entry per item"):
        krippendorff_alpha([["a", "b"], ["a"]])
    assert not math.isnan(krippendorff_alpha([["a", "b"], ["a", "b"]]))
