"""The fast BM25 of the lexical retriever gives ``rank_bm25.BM25Okapi``'s scores, bit for bit.

:func:`core.retrieval.bm25.bm25_okapi_scores` (vectorized over token ids) and
:func:`core.retrieval.bm25.chunk_tokens` (byte operations for ASCII text) replaced the reference in
:func:`core.retrieval.retrievers._bm25_scores` (issue 17); ``rank_bm25`` stays the reference here
(:func:`core.retrieval.retrievers._bm25_reference`), on the HotpotQA fixture, controlled data and
corpora
made to reach the reference's corners (the idf floor, NaN from a zero denominator).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import shared_fixture
from rank_bm25 import BM25Okapi

import core.retrieval.retrievers as R
from core.datasets.controlled import build_controlled
from core.datasets.importers import read_dataset
from core.retrieval import chunks
from core.retrieval.bm25 import bm25_okapi_scores, chunk_tokens

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
SETTINGS = [(1.5, 0.75), (1.2, 1.0), (0.9, 0.0)]


def _same(a, b) -> bool:
    """Equal as floats, bit for bit (NaN equal to NaN)."""
    return np.array_equal(
        np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), equal_nan=True
    )


def _check_instances(instances, windows=((220, 40),)) -> int:
    n = 0
    for inst in instances:
        for size, overlap in windows:
            chunks = R.chunk_instance(inst, size, overlap)
            for k1, b in SETTINGS:
                fast = R._bm25_scores(inst.question, chunks, k1, b)
                ref = R._bm25_reference(inst.question, chunks, k1, b)
                assert _same(fast, ref), (inst.instance_id, size, k1, b)
                n += 1
    return n


def test_scores_equal_the_reference_on_hotpotqa():
    instances = read_dataset(shared_fixture(HOTPOT), fmt="hotpotqa", name="h").dataset.instances
    assert _check_instances(instances, windows=((220, 40), (64, 8))) == len(instances) * 6


def test_scores_equal_the_reference_on_controlled_data():
    ds = build_controlled("controlled-200", seed=42)
    assert _check_instances(ds.instances[::10]) == 20 * 3


def test_a_hand_computed_score_and_the_idf_floor():
    # N = 3, avgdl = 4/3. idf(a) = ln(1.5) - ln(2.5) < 0, floored at 0.25 * mean idf;
    # idf(b) = idf(c) = ln(2.5) - ln(1.5) = 0.5108.
    corpus = [["a", "b"], ["a"], ["c"]]
    idf_b = math.log(2.5) - math.log(1.5)
    mean = (-idf_b + idf_b + idf_b) / 3
    got = bm25_okapi_scores(corpus, ["b", "a"])
    # doc 0: b: 0.5108 * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 2 / (4/3))) = 0.41700;
    # a: 0.25 * mean * 2.5 / 3.0625 = 0.03475.
    assert got[0] == pytest.approx(0.41700 + 0.03475, abs=1e-5)
    assert got[2] == 0.0
    assert got[1] == pytest.approx(0.25 * mean * 2.5 / (1 + 1.5 * (0.25 + 0.75 * 1 / (4 / 3))))
    assert _same(got, BM25Okapi(corpus).get_scores(["b", "a"]))


@pytest.mark.parametrize(
    "corpus, query, k1, b",
    [
        ([["x", "y", "x"], ["y"], ["z", "x"]], ["x", "x", "q", "y"], 1.5, 0.75),  # repeats, absent
        ([["x"], [], ["x", "y"]], ["x", "y"], 1.5, 1.0),  # empty document, b = 1: 0/0 -> NaN
        ([["x"], ["y"], ["x", "y"]], ["x", "w"], 0.0, 0.75),  # k1 = 0: 0/0 -> NaN
        ([["the"] * 3, ["the", "a"], ["the"]], ["the", "a"], 2.0, 0.5),  # a word in every doc
    ],
)
def test_corners_equal_the_reference(corpus, query, k1, b):
    with np.errstate(all="ignore"):
        ref = BM25Okapi(corpus, k1=k1, b=b).get_scores(query)
        fast = bm25_okapi_scores(corpus, query, k1, b)
    assert _same(fast, ref)


@pytest.mark.parametrize(
    "text",
    [
        "Paris, the CAPITAL of France (pop. 2,102,650) -- since 987_AD!",
        "İstanbul ΟΔΥΣΣΕΥΣ straße K-band naïve café 東京 x²",
        "tabs\tand\nnewlines\x1c\x1dseparators\x0bvertical",
    ],
)
def test_tokens_equal_the_regular_expressions(text):
    assert chunk_tokens(text, chunks.TOKEN_RE) == [t.encode() for t in R.lexical_tokens(text)]
