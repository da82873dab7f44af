"""Per-prediction scores and failure labels (SPEC §6.2-6.4), one example per rule."""

from __future__ import annotations

import math
import re
import string
import unicodedata

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.scoring.rows import (
    SCORE_COLUMNS,
    canonical_yes_no,
    confidence_error,
    evidence_scores,
    exact_match,
    failure_label,
    normalize_relaxed,
    normalize_strict,
    parse_number,
    score_answer,
    score_frame,
    soft_correct,
    token_f1,
)

# ------------------------------------------------------------------ strict normalization


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Paris", "paris"),  # lowercase
        ("The Eiffel-Tower!", "eiffeltower"),  # ASCII punctuation dropped, not spaced
        ("  An  apple,  a   day ", "apple day"),  # articles dropped, spaces collapsed
        ("Theatre", "theatre"),  # an article inside a word stays
        ("Café", "café"),  # strict keeps accents
        ("“Hi”", "“hi”"),  # strict drops ASCII punctuation only
        ("$1,000", "1000"),
        ("a$b", "ab"),  # "$" is dropped before the article regex runs
        ("a×b", "×b"),  # the article regex stops at a non-word character, not at spaces
        ("", ""),
    ],
)
def test_normalize_strict(text, expected):
    assert normalize_strict(text) == expected


# ------------------------------------------------------------------ relaxed normalization


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Café Müller", "cafe muller"),  # NFKD + combining marks dropped (accents)
        ("São Tomé", "sao tome"),
        ("ﬁnal", "final"),  # NFKD compatibility decomposition of the ligature
        ("New_York-City", "new york city"),  # - and _ -> space
        ("“Hello”—world…", "hello world"),  # Unicode punctuation (Pi, Pf, Pd, Po) -> space
        ("The Beatles", "beatles"),  # article dropped
        ("a an the", ""),
        ("$100", "$100"),  # symbols (S*) kept, as published: stricter than strict here
        ("Romeo + Juliet", "romeo + juliet"),
        ("a+b", "+b"),  # articles go by the word-boundary regex, not only as whole tokens
        ("25°C", "25°c"),  # non-ASCII symbols kept
        ("  Zürich  ", "zurich"),
    ],
)
def test_normalize_relaxed(text, expected):
    assert normalize_relaxed(text) == expected


@pytest.mark.parametrize(
    ("text", "answer_type", "reasoning_type", "expected"),
    [
        ("Model Alpha 00654", "entity", "comparison", "model alpha"),  # synthetic suffix
        ("Zurich-00025", "entity", "multi_hop", "zurich"),  # suffix after a hyphen
        ("Alpha 012 00654", None, None, "alpha"),  # dropped repeatedly
        ("00654", "entity", None, ""),  # a bare suffix normalizes to nothing
        ("Alpha 654", None, None, "alpha 654"),  # no leading 0: not a suffix
        ("Alpha 01", None, None, "alpha 01"),  # needs 0 + at least two digits
        ("Alpha 00654 x", None, None, "alpha 00654 x"),  # only trailing tokens
        ("Model 00654", "number", None, "model 00654"),  # kept for number answers
        ("Total 0120", "entity", "arithmetic", "total 0120"),  # kept for arithmetic
    ],
)
def test_synthetic_suffix_rule(text, answer_type, reasoning_type, expected):
    assert normalize_relaxed(text, answer_type, reasoning_type) == expected


# ------------------------------------------------------------------ the published definition


def _published_strict(s: str) -> str:
    """SQuAD's normalize_answer, as the seed's released scorer applies it (written from it)."""
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _published_relaxed(s: str, keep_suffix: bool = False) -> str:
    """The relaxed normalization of issue 15 / seed oncu_four_condition_protocol, step by step."""
    s = unicodedata.normalize("NFKD", s)
    s = "".join(ch for ch in s if not unicodedata.combining(ch))
    s = s.lower().replace("-", " ").replace("_", " ")
    s = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in s)
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    tokens = s.split()
    while not keep_suffix and tokens and re.fullmatch(r"0\d{2,}", tokens[-1]):
        tokens.pop()
    return " ".join(tokens)


_ANSWERS = st.text(
    alphabet=st.one_of(
        st.sampled_from(list("aent hATE$+<=>^`|~-_.,!?'\"()0123456789éüØß°€×“”—…ﬁİ")),
        st.characters(codec="utf-8"),
    ),
    max_size=40,
)


@settings(max_examples=600, deadline=None)
@given(_ANSWERS)
def test_strict_is_the_published_definition(text):
    assert normalize_strict(text) == _published_strict(text)


@settings(max_examples=600, deadline=None)
@given(_ANSWERS, st.sampled_from([(None, None), ("number", None), (None, "arithmetic")]))
def test_relaxed_is_the_published_definition(text, types):
    keep = types != (None, None)
    assert normalize_relaxed(text, *types) == _published_relaxed(text, keep_suffix=keep)


def test_relaxed_f1_on_a_symbol_answer_is_the_published_value():
    # gold [tromeo, and, juliet], answer [romeo, +, juliet]: one shared token, P = R = 1/3
    assert token_f1("Romeo + Juliet", "Tromeo and Juliet", relaxed=True) == pytest.approx(1 / 3)
    # strict drops "+": P = 1/2, R = 1/3, F1 = 0.4
    assert token_f1("Romeo + Juliet", "Tromeo and Juliet") == pytest.approx(0.4)


# ------------------------------------------------------------------ EM / F1


def test_exact_match_strict_and_relaxed():
    assert exact_match("The Eiffel Tower.", "eiffel tower") == 1.0
    assert exact_match("Café", "Cafe") == 0.0
    assert exact_match("Café", "Cafe", relaxed=True) == 1.0
    assert exact_match("Model Alpha", "Model Alpha 00654") == 0.0
    assert exact_match("Model Alpha", "Model Alpha 00654", relaxed=True) == 1.0
    assert exact_match("Model Alpha", "Model Alpha 00654", relaxed=True, answer_type="number") == 0


def test_token_f1_squad_definition():
    # pred [cat, sat], gold [cat, sat, down]: P = 1, R = 2/3, F1 = 2(2/3)/(5/3) = 0.8
    assert token_f1("the cat sat", "cat sat down") == pytest.approx(0.8)
    # multiset overlap: [x, x, y] vs [x, y, y] share min(2,1) + min(1,2) = 2; P = R = 2/3
    assert token_f1("x x y", "x y y") == pytest.approx(2 / 3)
    assert token_f1("", "the") == 1.0  # both empty after normalization -> 1
    assert token_f1("", "paris") == 0.0  # one empty -> 0
    assert token_f1("berlin", "paris") == 0.0
    # relaxed: "model alpha" vs "model alpha" (suffix dropped) -> 1; strict: P = 1, R = 2/3
    assert token_f1("Model Alpha", "Model Alpha 00654", relaxed=True) == 1.0
    assert token_f1("Model Alpha", "Model Alpha 00654") == pytest.approx(0.8)


# ------------------------------------------------------------------ soft correctness


@pytest.mark.parametrize(
    ("pred", "gold", "expected"),
    [
        ("True", "yes", 1.0),  # yes/no canonicalization
        ("Correct.", "Yes", 1.0),
        ("false", "No", 1.0),
        ("no", "yes", 0.0),
        ("84.0", "84", 1.0),  # numeric equivalence (relaxed F1 of "84 0" vs "84" is 2/3)
        ("1,000", "1000", 1.0),  # thousands separator
        ("three", "3", 1.0),  # number word
        ("84 years", "84", 0.0),  # a unit is not a number; F1 = 2/3 < 0.8
        ("the cat sat", "cat sat down", 1.0),  # relaxed F1 = 0.8 >= 0.8
        ("Café", "cafe", 1.0),  # relaxed equality
        ("Berlin", "Paris", 0.0),
    ],
)
def test_soft_correct(pred, gold, expected):
    assert soft_correct(pred, gold) == expected


def test_yes_no_and_number_helpers():
    assert canonical_yes_no(" Yes! ") == "yes"
    assert canonical_yes_no("Incorrect") == "no"
    assert canonical_yes_no("maybe") is None
    assert parse_number("1,000") == 1000.0
    assert parse_number("-84.0") == -84.0
    assert parse_number(".5") == 0.5
    assert parse_number("42.") == 42.0
    assert parse_number("Twenty") == 20.0
    assert parse_number("1,00") is None  # malformed thousands group
    assert parse_number("84 years") is None
    assert parse_number("") is None


# ------------------------------------------------------------------ aliases


def test_score_answer_takes_max_over_aliases_per_score():
    s = score_answer("NYC", ["New York City", "NYC"])
    assert s == {
        "em_strict": 1.0,
        "f1_strict": 1.0,
        "em_relaxed": 1.0,
        "f1_relaxed": 1.0,
        "soft_correct": 1.0,
    }
    # vs "New York City": F1 = 0.8 (P 1, R 2/3); vs "York": F1 = 2/3 -> max 0.8; soft: F1 >= 0.8
    s = score_answer("new york", ["New York City", "York"])
    assert s["em_strict"] == 0.0
    assert s["f1_strict"] == pytest.approx(0.8)
    assert s["soft_correct"] == 1.0
    assert score_answer(None, ["Paris"])["f1_relaxed"] == 0.0


# ------------------------------------------------------------------ evidence scores


def test_evidence_scores_ids():
    ev = evidence_scores(["p1", "p3"], ["p1", "p2"])
    assert ev["ev_precision"] == 0.5
    assert ev["ev_recall"] == 0.5
    assert ev["ev_f1"] == 0.5
    assert ev["citation_grounding"] == 1.0
    assert math.isnan(ev["title_grounding"])  # no titles given
    # duplicates count once: P = 1, R = 1/2, F1 = 2(1/2)/(3/2) = 2/3
    ev = evidence_scores(["p1", "p1"], ["p1", "p2"])
    assert (ev["ev_precision"], ev["ev_recall"]) == (1.0, 0.5)
    assert ev["ev_f1"] == pytest.approx(2 / 3)


def test_evidence_scores_nothing_cited_and_empty_gold():
    ev = evidence_scores([], ["p1"], titles={"p1": "A"})
    assert ev == {
        "ev_precision": 0.0,
        "ev_recall": 0.0,
        "ev_f1": 0.0,
        "citation_grounding": 0.0,
        "title_grounding": 0.0,
    }
    # no gold evidence: nothing to score against -> every evidence score NaN
    ev = evidence_scores(["p1"], [], titles={"p1": "A"})
    assert all(math.isnan(v) for v in ev.values())


def test_title_grounding():
    titles = {"p1": "A", "p2": "B", "p3": "A", "p4": "C"}
    # gold titles {A, B} from the gold ids; p3 is titled A (match), p4 is C: 1/2
    ev = evidence_scores(["p3", "p4"], ["p1", "p2"], titles=titles)
    assert ev["title_grounding"] == 0.5
    assert ev["ev_precision"] == 0.0  # no id overlap although the title matches
    assert evidence_scores(["p4"], ["p1"], {"p4": "C"}, gold_titles=["C"])["title_grounding"] == 1
    assert evidence_scores(["p9"], ["p1"], titles=titles)["title_grounding"] == 0.0  # unknown id
    # no gold title known (None or '', as imported passages carry): NaN, not 0 or precision
    for untitled in ({}, {"p1": None}, {"p1": "", "p2": ""}, {"p1": "  "}):
        ev = evidence_scores(["p1", "p2"], ["p1"], titles=untitled)
        assert math.isnan(ev["title_grounding"]) and ev["ev_precision"] == 0.5, untitled
    assert math.isnan(evidence_scores([], ["p1"], titles={"p1": ""})["title_grounding"])
    # an untitled cited passage never matches a gold title: 1/2
    assert evidence_scores(["p1", "p2"], ["p1"], {"p1": "A", "p2": ""})["title_grounding"] == 0.5


# ------------------------------------------------------------------ failure labels


@pytest.mark.parametrize(
    ("parse", "correct", "cited", "gold", "rtype", "expected"),
    [
        (True, True, ["p1"], ["p1"], "single_hop", "parse"),  # parse first, even if correct
        (False, True, [], ["p1"], "single_hop", "success"),  # correct before any evidence rule
        (False, False, [], ["p1"], "multi_hop", "localization"),  # nothing cited
        (False, False, ["p9"], ["p1", "p2"], "multi_hop", "selection"),  # no overlap
        (False, False, ["p1", "p9"], ["p1", "p2"], "multi_hop", "integration"),  # multi + missing
        (False, False, ["p1", "p9"], ["p1", "p2"], "single_hop", "selection"),  # extra non-gold
        (False, False, ["p1", "p2", "p9"], ["p1", "p2"], "comparison", "selection"),  # all + extra
        (False, False, ["p2", "p1"], ["p1", "p2"], "multi_hop", "conversion"),  # exactly gold
        (False, False, ["p1"], ["p1", "p2"], "single_hop", "integration"),  # fallback
    ],
)
def test_failure_label_branches(parse, correct, cited, gold, rtype, expected):
    assert failure_label(parse, correct, cited, gold, rtype) == expected


@pytest.mark.parametrize("rtype", ["multi_hop", "comparison", "arithmetic", "contradiction"])
def test_failure_label_multi_evidence_types(rtype):
    # some gold missing + an extra citation: integration for multi-evidence types only
    assert failure_label(False, False, ["p1", "p9"], ["p1", "p2"], rtype) == "integration"
    assert failure_label(False, False, ["p1", "p9"], ["p1", "p2"], "bridge") == "selection"


def test_confidence_error():
    assert confidence_error(0.9, 1.0) == pytest.approx(0.1)
    assert confidence_error(1.3, 0.0) == 1.0  # clamped to [0, 1]
    assert confidence_error(-0.2, 0.0) == 0.0
    assert math.isnan(confidence_error(None, 1.0))
    assert math.isnan(confidence_error(float("nan"), 1.0))


# ------------------------------------------------------------------ score_frame


def _frame() -> pd.DataFrame:
    rows = [
        # answer, gold, aliases, atype, rtype, cited, gold_ids, parse_error, error, cond, conf
        (
            "Paris",
            "Paris",
            None,
            "entity",
            "single_hop",
            ["p1"],
            ["p1"],
            None,
            None,
            "full_context",
            0.8,
        ),
        ("", "Paris", [], "entity", "single_hop", [], ["p1"], None, None, "no_evidence", None),
        (
            "Paris",
            "Paris",
            None,
            "entity",
            "multi_hop",
            ["p1"],
            ["p1", "p2"],
            "bad json",
            None,
            "retrieved",
            0.9,
        ),
        (
            None,
            "Paris",
            None,
            "entity",
            "single_hop",
            ["p1"],
            ["p1"],
            "",
            "timeout",
            "oracle",
            None,
        ),
        (
            "None",
            "None",
            ["nothing"],
            "string",
            "single_hop",
            ["p2"],
            ["p1"],
            "",
            None,
            "oracle",
            float("nan"),
        ),
        (
            None,
            "Rome",
            None,
            "entity",
            "single_hop",
            ["p1"],
            ["p1"],
            None,
            None,
            "intervention",
            None,
        ),
    ]
    cols = [
        "answer",
        "gold_answer",
        "answer_aliases",
        "answer_type",
        "reasoning_type",
        "cited_ids",
        "gold_ids",
        "parse_error",
        "error",
        "condition",
        "confidence",
    ]
    return pd.DataFrame(rows, columns=cols, index=[10, 11, 12, 13, 14, 15])


def test_score_frame_rows():
    out = score_frame(_frame())
    assert list(out.columns) == list(SCORE_COLUMNS)
    assert list(out.index) == [10, 11, 12, 13, 14, 15]
    # correct, cited the gold: success; confidence error |0.8 - 1|
    assert out.loc[10, "em_strict"] == 1.0
    assert out.loc[10, "failure_label"] == "success"
    assert out.loc[10, "confidence_error"] == pytest.approx(0.2)
    assert math.isnan(out.loc[10, "title_grounding"])  # no title columns
    # no_evidence: scored, no failure label
    assert out.loc[11, "f1_relaxed"] == 0.0
    assert out.loc[11, "failure_label"] is None
    assert out.loc[11, "ev_recall"] == 0.0
    # parse error: answer scored 0 although the text matches, citations ignored, label parse
    assert out.loc[12, ["em_strict", "f1_relaxed", "soft_correct"]].tolist() == [0.0, 0.0, 0.0]
    assert out.loc[12, "ev_recall"] == 0.0
    assert out.loc[12, "failure_label"] == "parse"
    assert out.loc[12, "confidence_error"] == pytest.approx(0.9)
    # failed call (no reply): not an answer, so no scores and no label (missing, not wrong)
    assert out.loc[13, ["em_strict", "f1_relaxed", "ev_f1", "confidence_error"]].isna().all()
    assert out.loc[13, "failure_label"] is None
    # "None" is an answer (correct although the citation misses); NaN confidence -> NaN error
    assert out.loc[14, "em_strict"] == 1.0
    assert out.loc[14, "failure_label"] == "success"
    assert math.isnan(out.loc[14, "confidence_error"])
    # missing answer scored as empty, cited all gold -> conversion
    assert out.loc[15, "f1_strict"] == 0.0
    assert out.loc[15, "failure_label"] == "conversion"


def test_score_frame_title_grounding_and_correct_field():
    df = _frame().iloc[[0]].copy()
    df["cited_titles"] = [["Paris"]]
    df["gold_titles"] = [["Paris"]]
    assert score_frame(df).iloc[0]["title_grounding"] == 1.0
    df["answer"] = ["Paris!!"]
    df["gold_answer"] = ["paris 00123"]
    out = score_frame(df, correct_field="em_relaxed").iloc[0]
    assert (out["em_strict"], out["em_relaxed"]) == (0.0, 1.0)
    assert out["failure_label"] == "success"
    assert score_frame(df).iloc[0]["failure_label"] == "conversion"  # strict EM is 0


def test_score_frame_validates():
    with pytest.raises(ValueError, match="correct_field"):
        score_frame(_frame(), correct_field="accuracy")
    with pytest.raises(ValueError, match="gold_ids"):
        score_frame(_frame().drop(columns=["gold_ids"]))


def test_score_frame_missing_gold_does_not_become_an_empty_gold():
    df = _frame().iloc[[1]].copy()  # empty answer
    df["gold_answer"] = [None]
    df["answer_aliases"] = [["Rome", None]]
    assert score_frame(df).iloc[0]["em_strict"] == 0.0  # only "Rome" is a gold
    df["answer"] = ["rome"]
    assert score_frame(df).iloc[0]["em_strict"] == 1.0
