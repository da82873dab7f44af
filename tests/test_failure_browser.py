"""The failure browser's queries (issue 18 item 1) on a small hand-checked store.

Nine predictions of two runs over four instances, each one's outcome worked out by hand from
SPEC §6.4 (correct = label ``success``, or strict EM = 1 where a condition carries no label; a
failed call is ``call failed``, never wrong; no score row is ``unscored``). "Failures only" is
the Case view's notion: a failed call or a failure label other than ``success``.
"""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import ROOT, open_page

from core.selection import Selection
from core.store import Store
from core.store.failure_rows import FailureFilter, escape_like, filter_from_json, filter_to_json
from core.types import Dataset, Instance, Passage
from core.views import failures as fv
from core.views.common import clear_cache

_QUESTIONS = {
    "i0": ("What is 50% of Alpha?", "bridge", 1),
    "i1": ("Who is x_y's father?", "comparison", 2),
    "i2": ("What did O'Brien say?", "bridge", 2),
    "i3": ("A plain question", "comparison", 3),
}
#: (run, instance, condition, answer, error, em_strict, f1_relaxed, label); None scores with a
#: score row where ``scored``; i3 full_context has no score row at all.
_ROWS = [
    ("r1", "i0", "full_context", "50 percent", None, 0.0, 0.5, "conversion"),  # wrong
    ("r1", "i0", "no_evidence", "x", None, 0.0, 0.0, None),  # wrong (EM 0, no label)
    ("r1", "i1", "full_context", "yes", None, 1.0, 1.0, "success"),  # correct
    ("r1", "i1", "no_evidence", "Abc_def", None, 1.0, 1.0, None),  # correct (EM 1)
    ("r1", "i2", "full_context", None, "backend raised TimeoutError", None, None, None),
    ("r1", "i2", "no_evidence", "100%", None, 0.0, 0.25, None),  # wrong
    ("r1", "i3", "full_context", "maybe", None, None, None, None),  # unscored (no score row)
    ("r1", "i3", "oracle", "z", None, 0.0, 0.2, "localization"),  # wrong
    ("r2", "i0", "oracle", "a", None, 0.0, 0.1, "selection"),  # wrong
]
#: The failures-only list in its default order (run, instance order, condition): the
#: no-evidence baseline's wrong answers carry no failure label and are not in it.
_FAILURES = [
    ("r1", "i0", "full_context"),
    ("r1", "i2", "full_context"),
    ("r1", "i3", "oracle"),
    ("r2", "i0", "oracle"),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Store:
    """The hand-checked store: dataset ``D``, runs ``r1`` and ``r2``."""
    store = Store(tmp_path_factory.mktemp("fb") / "fb.duckdb")
    instances = tuple(
        Instance(
            instance_id=iid,
            question=q,
            gold_answer="g",
            reasoning_type=rt,
            fan_in=fan,
            passages=(Passage("p1", 0, "T", "text", "d1", "gold", True),),
        )
        for iid, (q, rt, fan) in _QUESTIONS.items()
    )
    store.write_dataset(Dataset("D", "test", "test", {}, instances))
    preds, scores = [], []
    for run, iid, cond, answer, error, em, f1, label in _ROWS:
        preds.append(
            {
                "run_id": run,
                "instance_id": iid,
                "condition": cond,
                "variant": "",
                "answer": answer,
                "error": error,
                "cited_ids": [],
            }
        )
        if (iid, cond) != ("i3", "full_context"):
            scores.append(
                {
                    "run_id": run,
                    "instance_id": iid,
                    "condition": cond,
                    "variant": "",
                    "em_strict": em,
                    "f1_relaxed": f1,
                    "failure_label": label,
                }
            )
    with store.transaction() as con:
        for run in ("r1", "r2"):
            store.insert_run(
                con,
                {
                    "run_id": run,
                    "dataset_id": "D",
                    "backend": "imported",
                    "model": "m",
                    "status": "done",
                    "kind": "imported",
                },
            )
        store.write_predictions(con, preds, replace=False)
        store.write_scores(con, pd.DataFrame(scores), replace=False)
    return store


def _keys(rows) -> list[tuple[str, str, str]]:
    return list(zip(rows["run"], rows["instance_id"], rows["condition"], strict=True))


def _app(store: Store, monkeypatch, page: str):
    """An ``AppTest`` of ``app.py`` on ``store`` switched to ``page`` (not yet run)."""
    from streamlit.testing.v1 import AppTest

    clear_cache()
    monkeypatch.setenv("EVIDENCE_DB", str(store.path))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(page)
    return at


def _list(store: Store, **kw) -> list[tuple[str, str, str]]:
    rows, counts = store.failure_page(FailureFilter(runs=("r1", "r2"), **kw), 0, 100)
    assert counts["total"] == len(rows)
    return _keys(rows)


def test_failures_only_lists_labelled_failures_and_failed_calls_in_order(store):
    rows, counts = store.failure_page(FailureFilter(runs=("r1", "r2")), 0, 50)
    assert _keys(rows) == _FAILURES
    assert list(rows["row"]) == [1, 2, 3, 4]
    assert counts == {"correct": 0, "wrong": 3, "call failed": 1, "unscored": 0, "total": 4}
    assert list(rows["outcome"]) == ["wrong", "call failed", "wrong", "wrong"]
    assert list(rows["failure_label"]) == ["conversion", None, "localization", "selection"]
    assert rows["question"].iloc[0] == "What is 50% of Alpha?"
    assert list(rows["fan_in"]) == [1, 2, 3, 1]


def test_every_outcome_is_counted_without_the_toggle(store):
    _, counts = store.failure_page(FailureFilter(runs=("r1", "r2"), failures_only=False), 0, 50)
    assert counts == {"correct": 2, "wrong": 5, "call failed": 1, "unscored": 1, "total": 9}
    assert _list(store, failures_only=False, outcomes=("correct",)) == [
        ("r1", "i1", "full_context"),
        ("r1", "i1", "no_evidence"),
    ]
    assert _list(store, failures_only=False, outcomes=("unscored",)) == [
        ("r1", "i3", "full_context")
    ]
    assert _list(store, failures_only=False, outcomes=("wrong",)) == [
        ("r1", "i0", "full_context"),
        ("r1", "i0", "no_evidence"),
        ("r1", "i2", "no_evidence"),
        ("r1", "i3", "oracle"),
        ("r2", "i0", "oracle"),
    ]
    # with failures only, the outcomes asked for among the failures
    assert _list(store, outcomes=("correct", "call failed")) == [("r1", "i2", "full_context")]
    assert _list(store, outcomes=("wrong",)) == [_FAILURES[0], *_FAILURES[2:]]


def test_a_failed_call_shows_its_error_and_is_never_wrong(store):
    rows, counts = store.failure_page(
        FailureFilter(runs=("r1",), outcomes=("call failed",), failures_only=False), 0, 50
    )
    assert counts["total"] == counts["call failed"] == 1
    row = rows.iloc[0]
    assert (row["instance_id"], row["outcome"]) == ("i2", "call failed")
    assert row["error"] == "backend raised TimeoutError"
    assert row["score"] != row["score"]  # NaN: no score
    assert row["failure_label"] is None
    assert _list(store, outcomes=("wrong",), conditions=("full_context",)) == [
        ("r1", "i0", "full_context")
    ]


def test_paging_covers_the_list_once(store):
    filt = FailureFilter(runs=("r1", "r2"))
    pages = [store.failure_page(filt, off, 3) for off in (0, 3)]
    assert [len(r) for r, _ in pages] == [3, 1]
    assert _keys(pages[0][0]) + _keys(pages[1][0]) == _FAILURES
    assert list(pages[1][0]["row"]) == [4]
    assert [c["total"] for _, c in pages] == [4, 4]
    past, counts = store.failure_page(filt, 8, 3)
    assert past.empty and counts["total"] == 4


def test_condition_label_and_metadata_filters(store):
    assert _list(store, conditions=("no_evidence",)) == []  # no labels: not failures
    assert _list(store, conditions=("no_evidence",), failures_only=False, outcomes=("wrong",)) == [
        ("r1", "i0", "no_evidence"),
        ("r1", "i2", "no_evidence"),
    ]
    assert _list(store, labels=("conversion", "localization")) == [
        ("r1", "i0", "full_context"),
        ("r1", "i3", "oracle"),
    ]
    assert _list(store, cells=(("reasoning_type", ("comparison",)),)) == [("r1", "i3", "oracle")]
    assert _list(store, cells=(("fan_in", ("2",)),)) == [("r1", "i2", "full_context")]
    assert _list(store, cells=(("fan_in", ("2",)),), failures_only=False) == [
        ("r1", "i1", "full_context"),
        ("r1", "i1", "no_evidence"),
        ("r1", "i2", "full_context"),
        ("r1", "i2", "no_evidence"),
    ]
    # two cells: both must hold
    assert _list(
        store,
        cells=(("fan_in", ("1", "2")), ("reasoning_type", ("bridge",))),
        conditions=("oracle",),
    ) == [("r2", "i0", "oracle")]


def test_free_text_is_literal_and_case_insensitive(store):
    every = {"failures_only": False}
    # % is a character: the question of i0 and the answer "100%" of i2 no_evidence
    assert _list(store, text="%", **every) == [
        ("r1", "i0", "full_context"),
        ("r1", "i0", "no_evidence"),
        ("r1", "i2", "no_evidence"),
        ("r2", "i0", "oracle"),
    ]
    assert _list(store, text="50%", **every) == [
        ("r1", "i0", "full_context"),
        ("r1", "i0", "no_evidence"),
        ("r2", "i0", "oracle"),
    ]
    # _ is a character too (as a LIKE wildcard it would match every row)
    assert _list(store, text="_", **every) == [
        ("r1", "i1", "full_context"),
        ("r1", "i1", "no_evidence"),
    ]
    assert _list(store, text="ABC_DEF", **every) == [("r1", "i1", "no_evidence")]
    assert _list(store, text="o'brien", **every) == [
        ("r1", "i2", "full_context"),
        ("r1", "i2", "no_evidence"),
    ]
    assert _list(store, text="x_y's", **every) == [
        ("r1", "i1", "full_context"),
        ("r1", "i1", "no_evidence"),
    ]
    assert _list(store, text="\\", **every) == []
    assert _list(store, text="   ", **every) == _list(store, **every)  # blank: no text filter
    hostile = "'; DROP TABLE predictions; --"
    assert _list(store, text=hostile, **every) == []
    assert len(_list(store, **every)) == 9  # the table is still there
    assert escape_like("a%b_c\\") == "a\\%b\\_c\\\\"


def test_sorts_put_missing_scores_last(store):
    by_asc = _list(store, sort="score_asc", failures_only=False)
    assert by_asc == [
        ("r1", "i0", "no_evidence"),
        ("r2", "i0", "oracle"),
        ("r1", "i3", "oracle"),
        ("r1", "i2", "no_evidence"),
        ("r1", "i0", "full_context"),
        ("r1", "i1", "full_context"),
        ("r1", "i1", "no_evidence"),
        ("r1", "i2", "full_context"),
        ("r1", "i3", "full_context"),
    ]
    assert _list(store, sort="score_desc", failures_only=False) == [
        by_asc[i] for i in (5, 6, 4, 3, 2, 1, 0, 7, 8)
    ]
    assert _list(store, sort="fan_in")[:2] == [("r1", "i3", "oracle"), ("r1", "i2", "full_context")]
    assert _list(store, sort="label")[0] == ("r1", "i0", "full_context")  # conversion first


def test_neighbours_step_through_the_lists_instances(store):
    filt = FailureFilter(runs=("r1", "r2"))
    got = store.failure_neighbours(filt, "D", "i2", around=1)
    assert (got["position"], got["total"]) == (2, 3)  # i0, i2, i3 (i0's r2 row is a repeat)
    assert [w["instance_id"] for w in got["window"]] == ["i0", "i2", "i3"]
    assert got["window"][0] | {} == {
        "position": 1,
        "dataset": "D",
        "instance_id": "i0",
        "run": "r1",
        "condition": "full_context",
    }
    first = store.failure_neighbours(filt, "D", "i0", around=1)
    assert [w["position"] for w in first["window"]] == [1, 2]
    assert store.failure_neighbours(filt, "D", "i1") is None  # correct: not listed
    assert store.failure_neighbours(filt, "other", "i0") is None
    # by score, lowest first: i0 (r2 oracle 0.1), i3 (0.2), then i2 (its failed call: no score)
    asc = store.failure_neighbours(FailureFilter(runs=("r1", "r2"), sort="score_asc"), "D", "i2")
    assert asc["position"] == 3 and [w["instance_id"] for w in asc["window"]] == ["i3", "i2"]
    low = store.failure_neighbours(FailureFilter(runs=("r1", "r2"), sort="score_asc"), "D", "i0")
    assert (low["window"][0]["run"], low["window"][0]["condition"]) == ("r2", "oracle")


def test_bad_identifiers_are_refused(store):
    with pytest.raises(ValueError, match="score field"):
        store.failure_page(FailureFilter(runs=("r1",), score_field="em_strict; DROP"), 0, 5)
    with pytest.raises(ValueError, match="sort"):
        store.failure_page(FailureFilter(runs=("r1",), sort="run_id; --"), 0, 5)
    with pytest.raises(ValueError, match="not instance cells"):
        store.failure_page(FailureFilter(runs=("r1",), cells=(("question", ("x",)),)), 0, 5)
    with pytest.raises(ValueError, match="outcome"):
        store.failure_page(FailureFilter(runs=("r1",), outcomes=("fine",)), 0, 5)


def test_view_resolves_the_selection_and_keeps_the_page_in_range(store):
    clear_cache()
    sel = Selection(dataset="D", filters={"reasoning_type": ("bridge",)}, score_field="em_strict")
    filt = fv.failure_filter(store, sel, conditions=("no_evidence",), failures_only=False)
    assert filt.runs == ("r1", "r2") and filt.cells == (("reasoning_type", ("bridge",)),)
    assert filter_from_json(filter_to_json(filt)) == filt
    page = fv.failure_page(store, filt, 0)
    assert _keys(page["rows"]) == [("r1", "i0", "no_evidence"), ("r1", "i2", "no_evidence")]
    assert list(page["rows"]["score"]) == [0.0, 0.0]  # the selection's score field (em_strict)
    late = fv.failure_page(store, filt, 100, limit=1)  # past the end: the last page
    assert late["offset"] == 1 and _keys(late["rows"]) == [("r1", "i2", "no_evidence")]
    assert fv.failure_facets(store, ["r1", "r2"]) == {
        "conditions": ["full_context", "no_evidence", "oracle"],
        "labels": ["conversion", "localization", "selection", "success"],
    }
    with pytest.raises(ValueError, match="sort"):
        fv.failure_filter(store, sel, sort="nope")


def test_page_lists_failures_and_counts_failed_calls(store, monkeypatch):
    clear_cache()
    at = open_page(monkeypatch, store.path, "screens/failures.py", "D")
    assert any(
        m.value.startswith("**4 predictions** in this list: 3 wrong · 1 call failed")
        for m in at.markdown
    )
    assert any("1 failed call in this list" in w.value for w in at.warning)
    table = at.dataframe[0].value
    assert list(table["instance_id"]) == ["i0", "i2", "i3", "i0"]
    assert table.loc[table["instance_id"] == "i2", "error"].tolist() == [
        "backend raised TimeoutError"
    ]
    at.text_input(key="failures.text").input("O'BRIEN").run()
    assert not at.exception
    assert list(at.dataframe[0].value["instance_id"]) == ["i2"]


def test_case_view_steps_through_the_browsers_list(store, monkeypatch):
    at = _app(store, monkeypatch, "screens/case_view.py")
    at.session_state["failures.trail"] = {
        "filter": filter_to_json(FailureFilter(runs=("r1", "r2"))),
        "runs": {},
    }
    at.query_params.update({"dataset": "D", "instance": "i2", "from": "failures"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    captions = [c.value for c in at.caption]
    assert "Instance 2 of 3 (failure browser filter)" in captions, captions
    at.button(key="case.next").click().run()
    assert at.session_state["case.instance"] == "i3"
    assert "Instance 3 of 3 (failure browser filter)" in [c.value for c in at.caption]
    assert at.button(key="case.next").disabled  # the list's last instance
    at.button(key="case.prev").click().run()
    at.button(key="case.prev").click().run()
    assert at.session_state["case.instance"] == "i0"
    # without from=failures the Case view steps through its own picker, as before
    at.query_params.pop("from")
    at.run()
    assert "Instance 1 of 4" in [c.value for c in at.caption]


def test_a_link_restores_the_browsers_filters_and_changes_are_written_back(store, monkeypatch):
    at = _app(store, monkeypatch, "screens/failures.py")
    at.query_params.update({"dataset": "D", "cond": "oracle,nope", "only": "0"})
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["failures.conditions"] == ["oracle"]
    assert at.session_state["failures.only"] is False
    assert any("URL parameter cond: unknown value nope ignored." in w.value for w in at.warning)
    assert _keys(at.dataframe[0].value) == [("r1", "i3", "oracle"), ("r2", "i0", "oracle")]
    assert at.query_params["cond"] == "oracle" and at.query_params["only"] == "0"
    at.text_input(key="failures.text").input("plain").run()  # i3's question
    assert at.query_params["q"] == "plain"
    assert _keys(at.dataframe[0].value) == [("r1", "i3", "oracle")]
    at.toggle(key="failures.only").set_value(True).run()
    assert "only" not in at.query_params  # the default is not written
