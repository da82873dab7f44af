"""score_frame at scale (issue 38 item 3): scores in parts and narrow column types change nothing.

``score_inputs`` scores answers and evidence in parts of ``ANSWER_ROWS`` rows (262,144): here a
part of 257 rows, so a 3,000-row randomized frame takes 12 parts, against one call and the
per-row reference. And a frame whose columns are Arrow lists, Arrow text and categoricals (as
the growth bench holds them) scores bit for bit as the same frame with Python objects.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from test_scoring_vectorized import assert_same, random_frame

import core.scoring.vector as sv
from core.scoring.rows import SCORE_COLUMNS, score_frame, score_frame_rows


def _bitwise(a: pd.DataFrame, b: pd.DataFrame) -> None:
    pd.testing.assert_frame_equal(a, b, check_exact=True)


@pytest.mark.parametrize("seed", [0, 1])
def test_parts_score_as_one_call_and_as_the_reference(seed, monkeypatch):
    df = random_frame(seed)
    whole = score_frame(df)
    monkeypatch.setattr(sv, "ANSWER_ROWS", 257)
    parts = score_frame(df)
    _bitwise(parts, whole)
    assert_same(parts, score_frame_rows(df))


def test_arrow_and_categorical_columns_score_as_objects():
    df = random_frame(2)
    ref = score_frame(df)
    narrow = df.copy()
    for c in ("cited_ids", "gold_ids", "cited_titles", "gold_titles", "answer_aliases"):
        values = pa.array(df[c].tolist(), type=pa.list_(pa.string()), from_pandas=True)
        narrow[c] = pd.Series(pd.arrays.ArrowExtensionArray(values), index=df.index)
    for c in ("condition", "answer_type", "reasoning_type", "parse_error", "error"):
        narrow[c] = df[c].astype("category")
    narrow["answer"] = df["answer"].astype(pd.ArrowDtype(pa.string()))
    got = score_frame(narrow)
    assert list(got.columns) == list(SCORE_COLUMNS)
    _bitwise(got, ref)
