"""What the parse sets apart, shown: the transcript and the failure browser's per-run counts.

A run of scripted replies through the engine (issue 34 item 1, issue 35 item 2): cited ids that
were not shown or are not passage ids, shown ids past the run's cap, a reply off the contract
with a salvaged answer, a reply that ends inside its reasoning and one whose reasoning the
server returned apart. Each is stored beside the scored fields, counted per run in the failure
browser and shown in the prediction's transcript, never scored.
"""

from __future__ import annotations

import json

import pytest
from conftest import open_page
from test_engine import TOY, Scripted, _plan, _spec

from core.backends import Reply
from core.execution.engine import execute
from core.execution.runs import start_run
from core.store import Store
from core.views.common import clear_cache
from core.views.failures import parse_notes_by_run
from core.views.transcript import transcript

_TEXTS = {  # (instance, condition) -> (reply text, reasoning returned apart)
    ("t1", "full_context"): (
        json.dumps({"answer": "84", "evidence_ids": ["p0002", "p9999", "evaluation_754"]}),
        None,
    ),
    ("t1", "oracle"): ('<think>draft {"answer": "71"}', None),
    ("t2", "full_context"): (
        json.dumps({"answer": "71", "evidence_ids": ["p0002", "p0003", "p0001"]}),
        None,
    ),
    ("t2", "oracle"): (
        json.dumps({"answer": "71", "evidence_ids": ["p0002"]}),
        'Let me think. {"answer": "12"}',
    ),
    ("t3", "full_context"): ("{'answer': '90', 'evidence_ids': ['p0002']}", None),
}
_PLAIN = json.dumps({"answer": "x", "evidence_ids": []})


class _Replies(Scripted):
    """Scripted replies by (instance, condition); reasoning returned apart where given."""

    def __init__(self, calls, **kw):
        super().__init__(**kw)
        self.by_hash = {c.prompt_hash: (c.instance_id, c.condition) for c in calls}

    def generate(self, messages, options=None):
        from core.execution.prompts import prompt_hash

        text, apart = _TEXTS.get(self.by_hash.get(prompt_hash(messages)), (_PLAIN, None))
        return Reply(text=text, latency_ms=1.0, reasoning=apart)


@pytest.fixture
def run_store(db_path):
    store = Store(db_path)
    store.write_dataset(TOY)
    calls = _plan()
    backend = _Replies(calls)
    start_run(store, _spec(options={"temperature": 0, "seed": 0, "max_cited": 2}), backend)
    execute(store, "t", calls, backend)
    clear_cache()
    return store


def test_the_failure_browser_counts_what_the_parse_set_apart_per_run(run_store, monkeypatch):
    assert parse_notes_by_run(run_store, ["t"]) == {
        "t": "1 reply cited 2 passages that were not shown (or not passage ids) · 1 reply "
        "cited 1 shown passage past the cap · 1 reply ended inside their reasoning (parse "
        "errors) · 1 reply off the contract with a salvaged answer (parse errors, not "
        "scored) · 2 replies with reasoning kept apart"
    }
    at = open_page(monkeypatch, run_store.path, "screens/failures.py", "toy")
    captions = " ".join(c.value for c in at.caption)
    assert "cited 2 passages that were not shown" in captions


def test_the_transcript_shows_each_reply_s_set_apart_parts(run_store):
    rows = run_store.prediction_rows("t").set_index(["instance_id", "condition"])
    run = run_store.run_row("t")
    inst = {i.instance_id: i for i in run_store.load_instances("toy")}

    def notes(iid, cond):
        row = rows.loc[(iid, cond)].to_dict()
        return row, transcript(inst[iid], row, run)["parse"]

    row, got = notes("t1", "full_context")
    assert list(row["cited_ids"]) == ["p0002"]  # scored: the one shown id
    assert got["lines"] == [
        "cited 2 passages that were not shown (or not passage ids), not "
        "scored: p9999, evaluation_754"
    ]
    row, got = notes("t2", "full_context")
    assert list(row["cited_ids"]) == ["p0002", "p0003"]  # the run's cap: 2
    assert got["lines"] == ["cited 1 shown passage past the cap, not scored: p0001"]
    row, got = notes("t1", "oracle")
    assert (row["answer"], row["parse_error"]) == ("", "reply ended inside its reasoning")
    assert got["reasoning"] == 'draft {"answer": "71"}'
    assert got["reasoning_note"] == "the reply ended inside its reasoning"
    row, got = notes("t2", "oracle")
    assert row["answer"] == "71" and got["reasoning"] == 'Let me think. {"answer": "12"}'
    assert got["reasoning_note"] == "returned by the server apart from the reply"
    row, got = notes("t3", "full_context")
    assert (row["answer"], row["parse_error"]) == ("", "no JSON object found")
    assert got["lines"] == [
        "salvaged from a reply off the contract, not scored: answer '90' "
        "in a reply that is not strict JSON"
    ]
