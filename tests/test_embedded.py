"""The embedded baseline reader and the backend protocol (core/backends)."""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_retrieval import hotpot

from core.backends import EMBEDDED_LABEL, Backend, EmbeddedReader, Reply
from core.backends.embedded import parse_prompt
from core.execution.prompts import build_messages
from core.retrieval.retrievers import retrieve
from core.scoring.parsing import parse_reply
from core.types import Instance, Passage

READER = EmbeddedReader()

PASSAGES = (
    Passage(
        "p0001",
        0,
        "Zarnovia",
        "Zarnovia is a small country in the northern mountains. The capital of Zarnovia is "
        "Keltbridge. Its population is 2,400,000.",
        "d1",
        "gold",
        True,
    ),
    Passage(
        "p0002",
        1,
        "Orbis Tower",
        "Orbis Tower is a skyscraper in Lisbon. It was completed in 1998 and has 52 floors.",
        "d2",
        "distractor",
    ),
    Passage(
        "p0003",
        2,
        "Keltbridge",
        "Keltbridge was founded in 1320 by Aldo Vensk. The city is known for its glass bridges.",
        "d3",
        "gold",
        True,
    ),
    Passage(
        "p0004",
        3,
        "Mirel Tower",
        "Mirel Tower is a skyscraper in Porto. It was completed in 2004 and has 61 floors.",
        "d4",
        "distractor",
    ),
)
CONFLICT = Passage(
    "p0005",
    4,
    "Zarnovia capital",
    "The capital of Zarnovia: the capital city of Zarnovia is Duskmoor, the capital of Zarnovia.",
    "d5",
    "conflicting",
)


def ask(question: str, passages=PASSAGES, condition="intervention", probe=False) -> dict:
    inst = Instance("x", question, "", tuple(PASSAGES))
    ev = list(passages) if condition in ("intervention", "retrieved") else None
    reply = READER.generate(build_messages(inst, condition, ev, probe=probe))
    assert reply.error is None
    return json.loads(reply.text)


def test_reader_implements_the_backend_protocol():
    assert isinstance(READER, Backend)
    info = READER.describe()
    assert info["label"] == EMBEDDED_LABEL == "embedded baseline reader"
    assert info["baseline"] is True and info["backend"] == "embedded"
    assert READER.name == "embedded" and READER.model
    json.dumps(info)


def test_reply_fields():
    msgs = build_messages(Instance("x", "What is the capital of Zarnovia?", "", PASSAGES), "oracle")
    reply = READER.generate(msgs, {"temperature": 0})
    assert isinstance(reply, Reply) and reply.ok
    assert reply.prompt_tokens == sum(len(m["content"].split()) for m in msgs)
    assert reply.completion_tokens == len(reply.text.split())
    assert reply.latency_ms >= 0 and reply.total_duration_ns >= 0
    assert reply.model_digest == READER.digest and reply.model_digest.startswith("sha256:")
    assert reply.logprobs is None
    assert set(json.loads(reply.text)) == {"answer", "evidence_ids", "confidence", "explanation"}


def test_correct_single_hop_with_the_right_citation():
    got = ask("What is the capital of Zarnovia?")
    assert got["answer"] == "Keltbridge"
    assert got["evidence_ids"] == ["p0001"]
    assert 0.5 < got["confidence"] <= 0.95
    assert "p0001" in got["explanation"]
    assert ask("What is the population of Zarnovia?")["answer"] == "2,400,000"


def test_unknown_without_evidence_and_unanswerable_under_a_probe():
    none = ask("What is the capital of Zarnovia?", condition="no_evidence")
    assert none == {
        "answer": "unknown",
        "evidence_ids": [],
        "confidence": 0.05,
        "explanation": "No passages were shown, so nothing can be extracted.",
    }
    # the fact is absent from the shown text
    assert ask("What is the capital of Zarnovia?", PASSAGES[1:2])["answer"] == "unknown"
    assert ask("What is the capital of Freedonia?")["answer"] == "unknown"
    probe = ask("What is the capital of Zarnovia?", PASSAGES[1:2], probe=True)
    assert probe["answer"] == "unanswerable" and probe["evidence_ids"] == []
    assert (
        ask("What is the capital of Zarnovia?", condition="no_evidence", probe=True)["answer"]
        == "unanswerable"
    )


def test_a_conflicting_passage_can_fool_it():
    got = ask("What is the capital of Zarnovia?", PASSAGES + (CONFLICT,))
    assert got["answer"] == "Duskmoor"
    assert got["evidence_ids"] == ["p0005"]


def test_one_bridge_hop():
    got = ask("Who founded the capital of Zarnovia?")
    assert got["answer"] == "Aldo Vensk"
    assert got["evidence_ids"] == ["p0001", "p0003"]
    assert "Bridge 'Keltbridge'" in got["explanation"]
    assert ask("In what year was the capital of Zarnovia founded?")["answer"] == "1320"
    # without the bridge passage the founding is not in the text: no answer
    assert ask("Who founded the capital of Zarnovia?", PASSAGES[:1])["answer"] == "unknown"


def test_comparison_arithmetic_and_yes_no():
    assert ask("Which tower has more floors, Orbis Tower or Mirel Tower?")["answer"] == (
        "Mirel Tower"
    )
    assert ask("Which tower has fewer floors, Orbis Tower or Mirel Tower?")["answer"] == (
        "Orbis Tower"
    )
    assert ask("Which tower was completed first, Orbis Tower or Mirel Tower?")["answer"] == (
        "Orbis Tower"
    )
    diff = ask("How many more floors does Mirel Tower have than Orbis Tower?")
    assert diff["answer"] == "9" and diff["evidence_ids"] == ["p0004", "p0002"]
    total = ask("How many floors do Orbis Tower and Mirel Tower have in total?")
    assert total["answer"] == "113"
    assert ask("Are Orbis Tower and Mirel Tower both skyscrapers?")["answer"] == "yes"
    assert ask("Is Orbis Tower a skyscraper in Lisbon?")["answer"] == "yes"
    # a value missing from the shown text: no comparison
    assert (
        ask("Which tower has more floors, Orbis Tower or Mirel Tower?", PASSAGES[:2])["answer"]
        == "unknown"
    )


def test_deterministic_and_independent_of_options():
    msgs = build_messages(
        Instance("x", "Who founded the capital of Zarnovia?", "", PASSAGES), "full_context"
    )
    texts = {READER.generate(msgs, {"seed": s, "temperature": 1.0}).text for s in range(5)}
    assert len(texts) == 1
    assert EmbeddedReader().generate(msgs).text in texts


def test_parse_prompt_reads_chunks_back():
    inst = hotpot()[0]
    ranked = retrieve(inst, "lexical", k=3)
    question, blocks, probe = parse_prompt(build_messages(inst, "retrieved", ranked, probe=True))
    assert question == inst.question and probe
    assert [pid for pid, _, _ in blocks] == [pid for rc in ranked for pid in rc.chunk.passage_ids]
    q2, full, probe2 = parse_prompt(build_messages(inst, "full_context"))
    assert not probe2
    assert [(pid, t, x) for pid, t, x in full] == [
        (p.passage_id, p.title, p.text) for p in inst.passages
    ]


def test_hotpotqa_smoke_cites_only_shown_ids():
    answered = 0
    for inst in hotpot():
        ranked = retrieve(inst, "lexical", k=3)
        shown = {pid for rc in ranked for pid in rc.chunk.passage_ids}
        for cond, ev, ids in (
            ("full_context", None, {p.passage_id for p in inst.passages}),
            ("retrieved", ranked, shown),
        ):
            reply = READER.generate(build_messages(inst, cond, ev))
            parsed = parse_reply(reply.text, known_ids=ids)
            assert parsed.parse_error is None and parsed.unknown_ids == ()
            assert parsed.confidence is not None
            answered += parsed.answer not in ("unknown", "unanswerable")
    assert answered > 40  # it answers a good share; correctness is a baseline's


def test_controlled_benchmark_behaviour():
    controlled = pytest.importorskip("core.datasets.controlled")
    ds = controlled.build_controlled(
        "controlled-200", seed=7, subset={"context_length": [4000]}, limit=32
    )
    for inst in ds.instances:
        none = json.loads(READER.generate(build_messages(inst, "no_evidence")).text)
        assert none["answer"] == "unknown"
        oracle = json.loads(READER.generate(build_messages(inst, "oracle")).text)
        cited = set(oracle["evidence_ids"])
        assert cited <= set(inst.gold_ids)
        if inst.reasoning_type == "single_hop":
            golds = {inst.gold_answer, *inst.answer_aliases}
            assert oracle["answer"] in golds, (inst.question, oracle)


_WORDS = st.text(max_size=40) | st.sampled_from(
    [
        "Model Alpha 00654",
        "How many more",
        "Which is older, A or B?",
        "Is X or Y",
        "(born 1990)",
        "3,400",
        "Tower",
        ". ",
        "? ",
        "\n",
        '"',
        "and",
        "both",
        "same",
        ":",
        ",",
        "in total",
    ]
)
_SENTENCE = st.lists(_WORDS, max_size=10).map(" ".join)


@settings(max_examples=200, deadline=None)
@given(_SENTENCE, st.lists(st.tuples(_SENTENCE, _SENTENCE), max_size=4), st.booleans())
@example("0", [("0", ": :")], False)  # every sentence without a token: BM25 avgdl was 0
def test_reader_never_fails_on_odd_text(question, texts, probe):
    passages = tuple(
        Passage(f"p{i + 1:04d}", i, title, text, "d") for i, (title, text) in enumerate(texts)
    )
    inst = Instance("x", question, "", passages)
    for msgs in (
        build_messages(inst, "full_context", probe=probe),
        build_messages(inst, "retrieved", retrieve(inst, "lexical", k=2, chunk_size=8, overlap=2)),
    ):
        reply = READER.generate(msgs)
        assert reply.error is None, reply.error
        parsed = parse_reply(reply.text, known_ids=[p.passage_id for p in passages])
        assert parsed.parse_error is None and parsed.unknown_ids == ()
