"""The column scorer (core/scoring/vector.py) equals the per-row reference on every row and field.

``score_frame`` (vectorized) and ``score_arrow`` (the store's Arrow path) against
``score_frame_rows`` (the published definitions applied one prediction at a time): on the
released ONCU outputs (with their published numbers), on what ``python -m core score`` writes
for them, and on randomized frames with symbol answers, numbers, yes/no, aliases, empty and
missing answers, failed calls, parse errors and unicode.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import RELEASE_CONTROLLED, RELEASE_HOTPOTQA, shared_fixture
from test_oncu_release import frame_from_oncu_release

from core.datasets.results import import_results, score_runs
from core.scoring.rows import SCORE_COLUMNS, score_arrow, score_frame, score_frame_rows
from core.store import Store


def assert_same(got: pd.DataFrame, ref: pd.DataFrame) -> None:
    """Every field of every row equal: floats within 1e-12 with NaN where NaN, labels equal."""
    assert list(got.columns) == list(SCORE_COLUMNS) == list(ref.columns)
    assert len(got) == len(ref)
    for col in SCORE_COLUMNS[:-1]:
        a = got[col].to_numpy(dtype=float)
        b = ref[col].to_numpy(dtype=float)
        nan = np.isnan(b)
        assert (np.isnan(a) == nan).all(), (
            f"{col}: NaN at rows {np.flatnonzero(np.isnan(a) != nan)[:5]}"
        )
        diff = np.abs(a[~nan] - b[~nan])
        assert (diff <= 1e-12).all(), f"{col}: rows {np.flatnonzero(~nan)[diff > 1e-12][:5]}"
    la = got["failure_label"].tolist()
    lb = ref["failure_label"].tolist()
    bad = [i for i, (x, y) in enumerate(zip(la, lb)) if x != y]
    assert not bad, f"failure_label differs at rows {bad[:5]}: {[(la[i], lb[i]) for i in bad[:5]]}"


def arrow_of(df: pd.DataFrame) -> pa.Table:
    """The frame as the store hands it to ``score_arrow`` (typed Arrow columns)."""
    lists = pa.list_(pa.string())
    schema = {
        "answer": pa.string(),
        "gold_answer": pa.string(),
        "answer_aliases": lists,
        "answer_type": pa.string(),
        "reasoning_type": pa.string(),
        "cited_ids": lists,
        "gold_ids": lists,
        "cited_titles": lists,
        "gold_titles": lists,
        "parse_error": pa.string(),
        "error": pa.string(),
        "confidence": pa.float64(),
        "condition": pa.string(),
    }
    return pa.table({k: pa.array(df[k].tolist(), t, from_pandas=True) for k, t in schema.items()})


# ------------------------------------------------------------------ released model outputs


@pytest.mark.parametrize("rel", [RELEASE_CONTROLLED, RELEASE_HOTPOTQA])
def test_release_outputs_score_as_the_reference(rel):
    df = frame_from_oncu_release(shared_fixture(rel))
    got = score_frame(df)
    assert_same(got, score_frame_rows(df))
    # the published sample-level relaxed F1 (fixtures README, Table 7), from these scores
    published = {
        RELEASE_CONTROLLED: {
            "no_evidence": 0.000,
            "full_context": 0.538,
            "retrieved": 0.975,
            "oracle": 0.903,
        },
        RELEASE_HOTPOTQA: {
            "no_evidence": 0.241,
            "full_context": 0.733,
            "retrieved": 0.590,
            "oracle": 0.767,
        },
    }[rel]
    means = got["f1_relaxed"].groupby(df["condition"]).mean()
    for cond, value in published.items():
        assert abs(means[cond] - value) <= 0.0005 + 1e-12, (cond, means[cond], value)


def test_store_rescore_of_the_release_equals_the_reference(tmp_path):
    """``score_runs`` (DuckDB -> Arrow -> column scorer -> scores table) on the real outputs."""
    store = Store(tmp_path / "s.duckdb")
    import_results(store, shared_fixture(RELEASE_CONTROLLED), name="controlled")
    import_results(store, shared_fixture(RELEASE_HOTPOTQA), name="hotpotqa")
    runs = sorted(store.runs_frame()["run_id"])
    assert score_runs(store, runs) == 1600
    assert_stored_equal_the_reference(store, runs)


def assert_stored_equal_the_reference(store: Store, runs: list[str], n: int = 1600) -> None:
    """The runs' stored score rows are exactly the per-row reference's, one per prediction."""
    frame = store.scoring_frame(runs)
    ref = score_frame_rows(frame)
    stored = store.prediction_rows(runs[0])
    for run in runs[1:]:
        stored = pd.concat([stored, store.prediction_rows(run)], ignore_index=True)
    key = ["run_id", "instance_id", "condition", "variant"]
    merged = frame[key].merge(stored, on=key, how="left")
    assert len(merged) == len(frame) == n
    held = store.condition_means(runs, "em_strict")["n"].sum()  # score rows, variant ''
    assert held == (frame["variant"] == "").sum()  # no stale row left besides
    got = merged[list(SCORE_COLUMNS)].astype({c: float for c in SCORE_COLUMNS[:-1]})
    got["failure_label"] = (
        got["failure_label"].astype(object).where(got["failure_label"].notna(), None)
    )
    assert_same(got.reset_index(drop=True), ref.reset_index(drop=True))
    # the released passages carry no titles (''): title grounding is missing, never equal to
    # evidence precision (issue 36 item 1), while precision is measured
    assert got["title_grounding"].isna().all() and got["ev_precision"].notna().sum() > 0


def test_rescore_writes_only_what_differs(tmp_path):
    """A re-score updates changed rows in place, inserts missing ones and deletes stale ones;
    re-scoring unchanged data writes nothing, so the data version stays as it is."""
    store = Store(tmp_path / "s.duckdb")
    import_results(store, shared_fixture(RELEASE_CONTROLLED), name="controlled")
    import_results(store, shared_fixture(RELEASE_HOTPOTQA), name="hotpotqa")
    runs = sorted(store.runs_frame()["run_id"])
    version = store.data_version()
    assert score_runs(store, runs) == 1600
    assert store.data_version() == version  # the import scored them already: nothing written
    rows = store.prediction_rows(runs[0]).head(3)
    key = ["run_id", "instance_id", "condition", "variant"]
    wrong = rows[key].assign(em_strict=0.25, failure_label="bogus")  # other scores NULL
    ghost = rows[key].head(1).assign(instance_id="no-such-instance", em_strict=1.0)
    with store.transaction() as con:
        store.write_scores(con, wrong, replace=True)
        store.write_scores(con, ghost, replace=False)
        store.delete_scores(con, [runs[1]])
    assert store.prediction_rows(runs[0])["failure_label"].eq("bogus").sum() == 3
    version = store.data_version()
    assert score_runs(store, runs) == 1600
    assert store.data_version() > version
    assert_stored_equal_the_reference(store, runs)  # fixed, re-inserted, ghost deleted
    assert store.prediction_rows(runs[1])["em_strict"].notna().sum() > 0


def test_rescore_with_every_row_changed_in_small_batches(tmp_path):
    """Every stored row wrong: all updated in place, over several batches, equal to the
    reference."""
    store = Store(tmp_path / "s.duckdb")
    import_results(store, shared_fixture(RELEASE_CONTROLLED), name="controlled")
    runs = sorted(store.runs_frame()["run_id"])
    key = ["run_id", "instance_id", "condition", "variant"]
    rows = pd.concat([store.prediction_rows(run)[key] for run in runs], ignore_index=True)
    with store.transaction() as con:
        store.write_scores(con, rows.assign(em_strict=-1.0), replace=True)
    assert score_runs(store, runs, batch_rows=97) == 800
    assert_stored_equal_the_reference(store, runs, 800)


# ------------------------------------------------------------------ randomized frames

ANSWERS = [
    "Paris",
    "paris.",
    "The Paris",
    "a+b",
    "$100",
    "100",
    "100.0",
    "1,000",
    "1000",
    "three",
    "3",
    "3.",
    " 3 ",
    "+5",
    ".5",
    "-84.0",
    "1e5",
    "9" * 400,
    "Yes",
    "yes.",
    "TRUE",
    "nope",
    "No",
    "y",
    "n",
    "",
    "   ",
    "None",
    "unknown",
    "Model Alpha 00123",
    "model alpha",
    "Alpha 00123 0456",
    "00123",
    "São Paulo",
    "Sao Paulo",
    "Café Müller",
    "cafe muller",
    "İstanbul",
    "STRASSE",
    "straße",
    "１２３",
    "Ⅻ",
    "\u212a",
    "New\u00a0York",
    "New York",
    "new-york",
    "new_york",
    "x<y",
    "x < y",
    "a\u0301",
    "á",
    "\u2028",
    "an apple a day",
    "the the",
    "Théâtre",
    "“Quoted”",
    "\x1cfoo\x1dbar",
    "tab\tsep",
    "line\nbreak",
    "1,000,000",
    "10 000",
    "½",
    "O'Neil",
    "o neil",
    "Seventeen",
    "twenty.",
    "ＡＢＣ",
    "abc",
    "中国",
    "中国。",
    "🙂",
    "e=mc^2",
    "e mc^2",
]
GOLDS = ANSWERS[:40] + ["Paris", "3", "yes", "no", "1000", "Model Alpha 00123", "São Paulo"]
TYPES = [None, "entity", "number", "yes_no", "date"]
REASONS = [None, "single_hop", "multi_hop", "comparison", "arithmetic", "contradiction"]
IDS = ["p0001", "p0002", "p0003", "p0004", "p0005", "P0001", "p 1", "é"]
TITLES = ["Paris", "France", "Alpha", None, "Zurich"]
CONDS = [
    "no_evidence",
    "full_context",
    "retrieved",
    "oracle",
    "intervention|remove",
    "no_evidence|x",
    "retrieved|lexical@3",
]


def random_frame(seed: int, n: int = 3000, titles: bool = True, gold_titles: bool = True):
    rng = np.random.default_rng(seed)

    def pick(values, p_none=0.0):
        return None if rng.random() < p_none else values[rng.integers(len(values))]

    def id_list(max_len):
        return [IDS[i] for i in rng.integers(0, len(IDS), rng.integers(0, max_len + 1))]

    rows = []
    for _ in range(n):
        answer = pick(ANSWERS, 0.05)
        if rng.random() < 0.03:
            answer = float("nan")
        gold = pick(GOLDS, 0.03)
        aliases = (
            None if rng.random() < 0.5 else [pick(GOLDS, 0.1) for _ in range(rng.integers(0, 3))]
        )
        cited = id_list(4)
        gold_ids = id_list(3)
        row = {
            "answer": answer,
            "gold_answer": gold,
            "answer_aliases": aliases,
            "answer_type": pick(TYPES),
            "reasoning_type": pick(REASONS),
            "cited_ids": cited,
            "gold_ids": gold_ids,
            "parse_error": pick([None, None, None, None, "", "  ", "invalid JSON", None]),
            "error": pick([None] * 12 + ["", " ", "timeout", "HTTP 500"]),
            "condition": pick(CONDS),
            "confidence": pick(
                [None, float("nan"), 0.0, -0.0, 0.3, 0.9, 1.0, 1.7, -0.2, float("inf")]
            ),
        }
        if titles:
            k = len(cited) + int(rng.integers(-1, 2)) if rng.random() < 0.1 else len(cited)
            row["cited_titles"] = [pick(TITLES) for _ in range(max(k, 0))]
        if gold_titles:
            row["gold_titles"] = [pick(TITLES) for _ in gold_ids]
        rows.append(row)
    return pd.DataFrame(rows)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_frames_score_as_the_reference(seed):
    df = random_frame(seed)
    ref = score_frame_rows(df)
    assert_same(score_frame(df), ref)
    for field in ("f1_relaxed", "soft_correct", "em_relaxed"):
        got = score_frame(df, correct_field=field, confidence_against=field)
        assert_same(got, score_frame_rows(df, correct_field=field, confidence_against=field))


@pytest.mark.parametrize(("titles", "gold_titles"), [(False, False), (True, False), (False, True)])
def test_random_frames_without_title_columns(titles, gold_titles):
    df = random_frame(7, n=1500, titles=titles, gold_titles=gold_titles)
    assert_same(score_frame(df), score_frame_rows(df))


def test_arrow_path_scores_as_the_reference():
    df = random_frame(3)
    df["confidence"] = pd.to_numeric(df["confidence"])
    df["answer"] = [a if isinstance(a, str) else None for a in df["answer"]]
    df["answer_aliases"] = [
        None if a is None else [x for x in a if x is not None] for a in df["answer_aliases"]
    ]
    got = score_arrow(arrow_of(df)).to_pandas()
    got["failure_label"] = (
        got["failure_label"].astype(object).where(got["failure_label"].notna(), None)
    )
    assert_same(got, score_frame_rows(df))


def test_failed_calls_are_never_scored_as_answers():
    df = random_frame(4, n=400)
    df["error"] = ["timeout" if i % 2 else None for i in range(len(df))]
    df["answer"] = df["gold_answer"]  # a failed call with the right text is still no answer
    got = score_frame(df)
    failed = df["error"].notna().to_numpy()
    assert got.loc[failed, list(SCORE_COLUMNS[:-1])].isna().all().all()
    assert got.loc[failed, "failure_label"].isna().all()
    assert got.loc[~failed, "em_strict"].notna().all()
    assert_same(got, score_frame_rows(df))


def test_hand_checked_rows():
    """Values worked out by hand, through the column scorer."""
    df = pd.DataFrame(
        {
            "answer": ["the Eiffel-Tower!", "$100", "three", "Model Alpha 00123", "red blue green"],
            "gold_answer": ["Eiffel Tower", "100", "3", "model alpha", "red pink"],
            "answer_aliases": [None, None, None, None, ["blue green black"]],
            "answer_type": [None, None, "number", None, None],
            "reasoning_type": ["single_hop"] * 5,
            "cited_ids": [["p1", "p1"], [], ["p9"], ["p1"], ["p1", "p2"]],
            "gold_ids": [["p1"], ["p1"], ["p1"], [], ["p1", "p3"]],
            "parse_error": [None] * 5,
            "condition": ["full_context"] * 5,
        }
    )
    got = score_frame(df)
    # "eiffeltower" vs "eiffel tower": strict EM 0; the relaxed tokens are equal
    assert got["em_strict"][0] == 0.0 and got["em_relaxed"][0] == 1.0
    # "$100" keeps its "$" in relaxed, loses it in strict
    assert got["em_strict"][1] == 1.0 and got["em_relaxed"][1] == 0.0
    assert got["soft_correct"][2] == 1.0 and got["em_relaxed"][2] == 0.0  # same number
    assert got["em_relaxed"][3] == 1.0 and got["em_strict"][3] == 0.0  # suffix dropped
    # gold: 1 common token of 3 and 2 (F1 0.4); alias: 2 of 3 and 3 (F1 2/3): the max
    assert math.isclose(got["f1_strict"][4], 2 / 3, rel_tol=0, abs_tol=1e-15)
    assert got["ev_precision"][0] == 1.0 and got["ev_recall"][0] == 1.0  # duplicates ignored
    assert got["ev_precision"][4] == 0.5 and got["ev_recall"][4] == 0.5  # {p1, p2} vs {p1, p3}
    assert math.isnan(got["ev_f1"][3])  # no gold ids: nothing to score against
    assert got["failure_label"].tolist() == [
        "conversion",
        "success",
        "selection",
        "selection",
        "selection",
    ]
    assert_same(got, score_frame_rows(df))


def test_non_string_ids_fall_back_to_the_reference():
    df = random_frame(5, n=200)
    df.at[3, "cited_ids"] = [1, "p0001"]
    df.at[4, "gold_ids"] = [1]
    assert_same(score_frame(df), score_frame_rows(df))
