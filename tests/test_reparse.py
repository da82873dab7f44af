"""``python -m core score`` re-derives stored replies' parsed fields (core/scoring/reparse.py).

A store written by an older parser (unshown and non-passage ids scored, no cap, replies that
are not strict JSON salvaged into answers) is read again as the ONCU protocol reads it; DuckDB
sets aside the rows whose parse cannot change, and the test checks that set-aside is sound:
after the re-parse every row equals :func:`core.scoring.parsing.parse_reply` of its raw reply.
"""

from __future__ import annotations

import json

import pytest
from test_engine import TOY

from core.cli import main
from core.scoring.parsing import parse_reply
from core.scoring.reparse import reparse_runs
from core.store import Store

GOOD = {"answer": "84", "evidence_ids": ["p0002"], "confidence": 0.5, "explanation": "x"}
# Raw replies, each with what an older parser stored for it (answer, cited ids, parse error)
# or None: "as the current parser reads it". Shown ids: p0001-p0003.
REPLIES = [
    (json.dumps(GOOD), None),
    (json.dumps({**GOOD, "evidence_ids": ["p0002", "p9999"]}), ("84", ["p0002", "p9999"], None)),
    (
        json.dumps({**GOOD, "evidence_ids": ["p0002", "evaluation_754"]}),
        ("84", ["p0002", "evaluation_754"], None),
    ),
    (
        json.dumps({**GOOD, "evidence_ids": ["p1", "p2", "p3", "p0001"]}),
        ("84", ["p0001", "p0002", "p0003"], None),
    ),
    (json.dumps({**GOOD, "evidence_ids": ["[passage_id: p0003]"]}), ("84", ["p0003"], None)),
    (json.dumps({**GOOD, "evidence_ids": ["p0001", "p0002", "p0003"]}), None),
    (json.dumps({**GOOD, "evidence_ids": "p0001"}), ("84", ["p0001"], None)),
    (json.dumps({**GOOD, "evidence_ids": [3]}), ("84", ["3"], None)),
    (json.dumps({**GOOD, "answer": " 84 "}), None),
    (json.dumps({**GOOD, "answer": "84\u00a0"}), ("84\u00a0", ["p0002"], None)),
    (json.dumps({**GOOD, "answer": "passage_2"}), ("passage_2", ["p0002"], None)),
    (json.dumps({"final_answer": "84", "evidence_ids": ["p0002"]}), ("84", ["p0002"], None)),
    (json.dumps({"Answer": "84", "answer": "71"}), ("84", [], None)),
    (json.dumps({"answer": None}), ("", [], "field 'answer' is null")),
    ("{'answer': '84', 'evidence_ids': ['p0002']}", ("84", ["p0002"], None)),
    ('{"answer": "84", "evidence_ids": ["p0002"],}', ("84", ["p0002"], None)),
    ('{"answer": "8\n4"}', ("8\n4", [], None)),
    ('Here: {"answer": "84", "evidence_ids": ["p0002"]} done', None),
    ('```json\n{"answer": "84", "evidence_ids": ["p0002"]}\n```', None),
    (
        '<think>draft {"answer": "71"}</think>{"answer": "84", "evidence_ids": ["p0002"]}',
        ("71", [], None),
    ),
    ('<think>draft {"answer": "71"}', ("71", [], None)),
    ('{"answer": "84", "evidence_ids": ["p0002"', ("", [], "no JSON object found")),
    ('{"answer": "84", "evidence_ids": ["p0002"], "explanation": "a </think> b"}', None),
    ("", ("", [], "empty reply")),
]


def _store(db_path, cap=None):
    store = Store(db_path)
    store.write_dataset(TOY)
    rows = []
    for n, (raw, old) in enumerate(REPLIES):
        now = parse_reply(raw, ["p0001", "p0002", "p0003"])
        answer, cited, error = old or (now.answer, list(now.evidence_ids), now.parse_error)
        rows.append(
            {
                "run_id": "r",
                "instance_id": "t1",
                "condition": "intervention",
                "variant": f"v{n}",
                "input_passage_ids": ["p0001", "p0002", "p0003"],
                "raw_response": raw,
                "answer": answer,
                "cited_ids": cited,
                "parse_error": error,
                "explanation": now.explanation,
                "confidence": now.confidence,
                "meta": json.dumps({"parse": now.record()}) if now.record() and not old else None,
            }
        )
    # rows never re-parsed: a failed call, no shown ids (imported), a reply stored cut
    bad = json.dumps({**GOOD, "evidence_ids": ["p9999"]})
    rows += [
        {
            "run_id": "r",
            "instance_id": "t2",
            "condition": "oracle",
            "variant": "",
            "raw_response": bad,
            "error": "timeout",
            "input_passage_ids": ["p0001"],
        },
        {
            "run_id": "r",
            "instance_id": "t2",
            "condition": "full_context",
            "variant": "",
            "raw_response": bad,
            "answer": "84",
            "cited_ids": ["p9999"],
        },
        {
            "run_id": "r",
            "instance_id": "t3",
            "condition": "oracle",
            "variant": "",
            "raw_response": bad,
            "answer": "84",
            "cited_ids": ["p9999"],
            "input_passage_ids": ["p0002"],
            "meta": json.dumps(
                {"raw_response_truncated": {"bytes": 300_000, "kept_bytes": 262_144}}
            ),
        },
    ]
    with store.transaction() as con:
        options = {"temperature": 0} if cap is None else {"temperature": 0, "max_cited": cap}
        store.insert_run(
            con,
            {
                "run_id": "r",
                "dataset_id": "toy",
                "backend": "ollama",
                "model": "m",
                "status": "done",
                "options": options,
            },
        )
        store.write_predictions(con, rows, replace=False)
    return store


@pytest.mark.parametrize("cap", [None, 2])
def test_every_stored_reply_reads_as_the_parser_reads_it_after_a_reparse(db_path, cap):
    store = _store(db_path, cap)
    with store.transaction() as con:
        got = reparse_runs(con, ["r"])
    # by hand: 18 rows stored by an older parser, of which 3 parse the same today (four ids
    # of which one repeats, one id as a string, an empty reply; the cut reply's fields are
    # the same but its salvaged answer is new in meta); with a cap of 2 the two replies citing
    # three shown ids change too
    changed = 15 if cap is None else 17
    assert (got.checked, got.changed, got.by_run) == (len(REPLIES) + 1, changed, {"r": changed})
    assert got.parsed < got.checked  # the clean rows were not parsed again
    rows = store.prediction_rows("r").set_index("variant")
    for n, (raw, _) in enumerate(REPLIES):
        row = rows.loc[f"v{n}"]
        want = parse_reply(raw, ["p0001", "p0002", "p0003"], max_cited=cap or 3)
        error = row["parse_error"] if isinstance(row["parse_error"], str) else None
        assert (row["answer"], list(row["cited_ids"]), error) == (
            want.answer,
            list(want.evidence_ids),
            want.parse_error,
        ), raw
        meta = json.loads(row["meta"]) if isinstance(row["meta"], str) else {}
        assert meta.get("parse", {}) == want.record(), raw
    # the failed call, the imported-like row and the reply stored cut keep what they had
    untouched = store.prediction_rows("r").set_index(["instance_id", "condition"])
    assert untouched.loc[("t2", "full_context"), "cited_ids"].tolist() == ["p9999"]
    assert untouched.loc[("t3", "oracle"), "cited_ids"].tolist() == ["p9999"]
    with store.transaction() as con:  # a second pass: nothing left to change
        again = reparse_runs(con, ["r"])
    assert again.changed == 0


def test_score_says_how_many_rows_changed(db_path, capsys):
    _store(db_path)
    assert main(["score", "--db", str(db_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    changed = 15
    assert out[-1].startswith("re-parsed ") and out[-1].endswith(
        f": {changed} row(s) changed (r: {changed})"
    )
    assert main(["score", "--db", str(db_path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(": 0 row(s) changed")


# Evidence lists the set-aside in SQL must read exactly as the parser does (normalization,
# first occurrences, shown ids up to the cap, the rest set apart), or leave to the parser.
_EVIDENCE = [
    ["P0002"],
    ["2", "p02", "p0002"],
    [" p0002"],
    ["p0002", "p0009", "p0009", "doc 7"],
    ["p\u0661"],
    ["p0001", "p0002", "p0003", "p0001", "p0002"],
    [None, "p0002"],
    ["p1234567890123456789"],
    ["p0000"],
    ["p0003", "P3", "3", 3],
    ["p0001", "p00001"],
    [],
    ["evaluation_754", "archive_694"],
    ["p0003", "p0002", "p0001", "p0009"],
]


@pytest.mark.parametrize("cap", [3, 2])
def test_the_sql_set_aside_agrees_with_the_parser_on_evidence_lists(db_path, cap):
    store = Store(db_path)
    store.write_dataset(TOY)
    shown = ["p0001", "p0002", "p0003"]
    rows = []
    for n, ids in enumerate(_EVIDENCE):
        raw = json.dumps({"answer": "84", "evidence_ids": ids})
        now = parse_reply(raw, shown, max_cited=cap)
        for k, (cited, record) in enumerate(
            (
                (list(now.evidence_ids), now.record()),  # as parsed today
                (list(now.evidence_ids), {}),  # its set-aside ids not recorded
                ([i for i in ids if isinstance(i, str)][:4], {}),  # an older parser's ids
                (list(now.evidence_ids)[:1], now.record()),  # one scored id lost
            )
        ):
            rows.append(
                {
                    "run_id": "s",
                    "instance_id": "t1",
                    "condition": "intervention",
                    "variant": f"v{n}.{k}",
                    "input_passage_ids": shown,
                    "raw_response": raw,
                    "answer": "84",
                    "cited_ids": cited,
                    "meta": json.dumps({"parse": record}) if record else None,
                }
            )
    with store.transaction() as con:
        store.insert_run(
            con,
            {
                "run_id": "s",
                "dataset_id": "toy",
                "backend": "ollama",
                "model": "m",
                "status": "done",
                "options": {"max_cited": cap},
            },
        )
        store.write_predictions(con, rows, replace=False)
    with store.transaction() as con:
        reparse_runs(con, ["s"])
    got = store.prediction_rows("s").set_index("variant")
    for n, ids in enumerate(_EVIDENCE):
        want = parse_reply(json.dumps({"answer": "84", "evidence_ids": ids}), shown, max_cited=cap)
        for k in range(4):
            row = got.loc[f"v{n}.{k}"]
            meta = json.loads(row["meta"]) if isinstance(row["meta"], str) else {}
            assert list(row["cited_ids"]) == list(want.evidence_ids), (ids, k)
            assert meta.get("parse", {}) == want.record(), (ids, k)
    with store.transaction() as con:  # what is stored now stands; parsed again only the
        again = reparse_runs(con, ["s"])  # lists SQL leaves to the parser: a space, a
    assert (again.changed, again.parsed) == (0, 4 * 4)  # non-ASCII digit, a null, a number
