"""Prompt templates, the answer contract and label leakage (core/execution/prompts.py)."""

from __future__ import annotations

import re

import jsonschema
import pytest
from test_retrieval import hotpot

from core.execution import prompts as P
from core.retrieval.retrievers import retrieve
from core.types import Instance, Passage

TEMPLATE_HASH_V1 = "643b2e1e510afbb93d7c64ee6489c71aa53a8b414647a3334e319d81db1586f5"


def _inst() -> Instance:
    return Instance(
        "inst-secret-id",
        "Which river flows through Zarnovia?",
        "Velka",
        (
            Passage("p0001", 0, "Bakery", "Bread is baked daily.", "d1", "distractor"),
            Passage(
                "p0002", 1, "Zarnovia", "The Velka flows through Zarnovia.", "d2", "gold", True
            ),
            Passage("p0003", 2, "Economy", "Zarnovia exports glass.", "d3", "conflicting"),
            Passage("p0004", 3, "Rivers", "The Velka is 300 km long.", "d4", "gold", True),
        ),
        answer_aliases=("the Velka",),
    )


def test_full_context_layout_system_then_passages_then_question():
    msgs = P.build_messages(_inst(), "full_context")
    assert [m["role"] for m in msgs] == ["system", "user"]
    assert msgs[0]["content"] == P.SYSTEM_CONTEXT
    user = msgs[1]["content"]
    assert user == (
        "Passages:\n\n"
        "[passage_id: p0001] Title: Bakery\nBread is baked daily.\n\n"
        "[passage_id: p0002] Title: Zarnovia\nThe Velka flows through Zarnovia.\n\n"
        "[passage_id: p0003] Title: Economy\nZarnovia exports glass.\n\n"
        "[passage_id: p0004] Title: Rivers\nThe Velka is 300 km long.\n\n"
        "Question: Which river flows through Zarnovia?"
    )


def test_oracle_shows_gold_passages_in_stored_order():
    user = P.build_messages(_inst(), "oracle")[1]["content"]
    assert re.findall(r"\[passage_id: (p\d{4})\]", user) == ["p0002", "p0004"]
    with pytest.raises(ValueError, match="no gold passages"):
        P.build_messages(Instance("x", "q?", "a", _inst().passages[:1]), "oracle")


def test_no_evidence_says_so_and_shows_nothing():
    msgs = P.build_messages(_inst(), "no_evidence")
    assert msgs[0]["content"] == P.SYSTEM_NO_EVIDENCE
    assert "no passages are given" in msgs[0]["content"].lower()
    assert msgs[1]["content"] == (
        "No passages are given for this question.\n\nQuestion: Which river flows through Zarnovia?"
    )
    assert "[passage_id:" not in msgs[1]["content"]


def test_retrieved_shows_chunks_in_rank_order():
    inst = _inst()
    ranked = retrieve(inst, "lexical", k=2, chunk_size=8, overlap=2)
    user = P.build_messages(inst, "retrieved", ranked)[1]["content"]
    body = "\n\n".join(rc.chunk.text for rc in ranked)
    assert user == f"Passages:\n\n{body}\n\nQuestion: {inst.question}"
    with pytest.raises(ValueError, match="needs passages_or_chunks"):
        P.build_messages(inst, "retrieved")


def test_intervention_takes_explicit_evidence_and_empty_means_no_evidence():
    inst = _inst()
    msgs = P.build_messages(inst, "intervention", [inst.passages[3], inst.passages[1]])
    assert re.findall(r"passage_id: (p\d+)", msgs[1]["content"]) == ["p0004", "p0002"]
    assert P.build_messages(inst, "intervention", []) == P.build_messages(inst, "no_evidence")
    with pytest.raises(TypeError, match="cannot render int"):
        P.build_messages(inst, "intervention", [3])


def test_bad_conditions_and_misplaced_evidence_are_value_errors():
    with pytest.raises(ValueError, match="unknown condition 'closed_book'.*no_evidence"):
        P.build_messages(_inst(), "closed_book")
    with pytest.raises(ValueError, match="must be None"):
        P.build_messages(_inst(), "full_context", list(_inst().passages))


def test_probe_variant_adds_the_unanswerable_instruction():
    for cond in ("no_evidence", "full_context", "oracle"):
        plain = P.build_messages(_inst(), cond)
        probe = P.build_messages(_inst(), cond, probe=True)
        assert probe[0]["content"] == plain[0]["content"] + "\n\n" + P.PROBE_INSTRUCTION
        assert probe[1] == plain[1]
        assert '"unanswerable"' in probe[0]["content"]


def test_contextual_prompts_of_one_instance_share_their_prefix():
    inst = _inst()
    full = P.build_messages(inst, "full_context")
    oracle = P.build_messages(inst, "oracle")
    dropped = P.build_messages(inst, "intervention", inst.passages[:3])
    assert full[0] == oracle[0] == dropped[0]
    assert all(
        m[1]["content"].startswith("Passages:\n\n[passage_id: p000") for m in (full, dropped)
    )
    assert all(m[1]["content"].endswith(f"Question: {inst.question}") for m in (full, dropped))


def test_template_hash_and_version_are_pinned():
    # Changing any template changes this hash: bump TEMPLATE_VERSION and update both here.
    assert P.TEMPLATE_VERSION == "1"
    assert re.fullmatch(r"[0-9a-f]{64}", P.template_hash())
    assert P.template_hash() == TEMPLATE_HASH_V1


def test_prompt_hash_is_stable_and_content_sensitive():
    a = P.build_messages(_inst(), "full_context")
    b = [{"content": m["content"], "role": m["role"], "extra": 1} for m in a]
    assert P.prompt_hash(a) == P.prompt_hash(b)
    assert re.fullmatch(r"[0-9a-f]{64}", P.prompt_hash(a))
    assert P.prompt_hash(a) != P.prompt_hash(P.build_messages(_inst(), "oracle"))
    assert P.prompt_hash(a) != P.prompt_hash(P.build_messages(_inst(), "full_context", probe=True))


def test_answer_schema_is_the_contract():
    assert P.ANSWER_SCHEMA["required"] == ["answer", "evidence_ids", "confidence", "explanation"]
    assert list(P.ANSWER_SCHEMA["properties"]) == P.ANSWER_SCHEMA["required"]
    jsonschema.Draft202012Validator.check_schema(P.ANSWER_SCHEMA)
    good = {"answer": "Velka", "evidence_ids": ["p0002"], "confidence": 0.9, "explanation": "x"}
    jsonschema.validate(good, P.ANSWER_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**good, "confidence": 1.5}, P.ANSWER_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"answer": "Velka"}, P.ANSWER_SCHEMA)


_LABEL_WORDS = re.compile(
    r"\b(?:gold|distractor|is_gold|role|conflicting|filler|supporting|oracle)\b", re.I
)


def _label_free(content: str, inst: Instance) -> list[str]:
    """Words of the prompt that no passage contains (passage data may say "gold" or "role")."""
    vocab = {w.lower() for p in inst.passages for w in re.findall(r"\w+", f"{p.title} {p.text}")}
    return [w for w in re.findall(r"\w+", content) if w.lower() not in vocab]


def test_no_gold_labels_reach_a_prompt_on_real_hotpotqa():
    for inst in hotpot():
        ids = {p.passage_id for p in inst.passages}
        ranked = retrieve(inst, "lexical", k=3)
        calls = [
            P.build_messages(inst, "no_evidence"),
            P.build_messages(inst, "full_context"),
            P.build_messages(inst, "oracle"),
            P.build_messages(inst, "retrieved", ranked),
            P.build_messages(inst, "intervention", list(inst.passages[::-1]), probe=True),
        ]
        for msgs in calls:
            text = "\n".join(m["content"] for m in msgs)
            assert inst.instance_id not in text
            leaked = [w for w in _label_free(text, inst) if _LABEL_WORDS.fullmatch(w)]
            assert not leaked, (inst.instance_id, leaked)
            shown = re.findall(r"\[passage_id: ([^\]]*)\]", text)
            assert all(re.fullmatch(r"p\d{4}", pid) for pid in shown)
            assert set(shown) <= ids
        # the oracle prompt shows exactly the gold passages, marked only by their neutral ids
        oracle_ids = re.findall(r"\[passage_id: (p\d{4})\]", calls[2][1]["content"])
        assert oracle_ids == list(inst.gold_ids)
        # the no-evidence prompt never carries the gold answer (unless the question does)
        answer = inst.gold_answer.lower()
        if len(answer) > 3 and answer not in inst.question.lower():
            assert answer not in "\n".join(m["content"] for m in calls[0]).lower()


def test_leak_check_catches_labels():
    inst = _inst()
    text = P.build_messages(inst, "full_context")[1]["content"] + " (role: gold, is_gold)"
    leaked = [w for w in _label_free(text, inst) if _LABEL_WORDS.fullmatch(w)]
    assert leaked == ["role", "gold", "is_gold"]


def test_templates_contain_no_label_words():
    for _, body in P._TEMPLATES:
        assert not _LABEL_WORDS.search(body), body
