"""Thinking models' output: reasoning kept apart, never parsed as the answer (issue 35 items 2, 4).

Reasoning inside the reply (``<think>`` blocks of qwen3 / deepseek-r1, gpt-oss's harmony
channels) is removed by :func:`core.scoring.parsing.parse_reply` before the answer is looked for;
reasoning the server returns apart (Ollama ``message.thinking``, OpenAI-compatible
``message.reasoning_content`` / ``message.reasoning``) lands in ``Reply.reasoning``.
"""

from __future__ import annotations

import json

import pytest

from core.scoring.parsing import REASONING_UNCLOSED, parse_reply, split_reasoning

DRAFT = '{"answer":"Bridgetown"}'
FINAL = '{"answer":"Keltbridge"}'


def test_the_answer_after_the_reasoning_is_parsed_not_the_draft_inside_it():
    got = parse_reply(f"<think>draft {DRAFT}</think>{FINAL}")
    assert (got.answer, got.parse_error) == ("Keltbridge", None)
    assert got.reasoning == f"draft {DRAFT}"


@pytest.mark.parametrize(
    "text",
    [
        f"<think>\nLet me see. {DRAFT}\n</think>\n\n{FINAL}",  # qwen3, deepseek-r1
        f"<thinking>{DRAFT}</thinking>{FINAL}",
        f"<reasoning>{DRAFT}</reasoning>\n```json\n{FINAL}\n```",
        f"  <THINK>{DRAFT}</THINK>{FINAL}",
        f"<think>a</think><think>{DRAFT}</think>{FINAL}",  # two blocks
        f"Okay, the question asks... {DRAFT}\n</think>\n\n{FINAL}",  # template wrote <think>
        # gpt-oss, harmony format on a raw completion server
        f"<|channel|>analysis<|message|>draft {DRAFT}<|end|><|start|>assistant"
        f"<|channel|>final<|message|>{FINAL}<|return|>",
        f"<|start|>assistant<|channel|>analysis<|message|>{DRAFT}<|end|><|start|>assistant"
        f"<|channel|>final <|constrain|>json<|message|>{FINAL}",
    ],
)
def test_reasoning_formats(text):
    got = parse_reply(text)
    assert (got.answer, got.parse_error) == ("Keltbridge", None), text
    assert "Bridgetown" in got.reasoning


@pytest.mark.parametrize(
    "text",
    [
        f"<think>draft {DRAFT}",  # cut off at the token limit inside its reasoning
        f"<think>a</think><think>draft {DRAFT}",
        f"<|channel|>analysis<|message|>draft {DRAFT}",
        f"<|channel|>analysis<|message|>draft {DRAFT}<|end|>",
    ],
)
def test_a_reply_that_ends_inside_its_reasoning_is_a_parse_error(text):
    got = parse_reply(text, ["p0001"])
    assert (got.answer, got.evidence_ids, got.parse_error) == ("", (), REASONING_UNCLOSED)
    assert "Bridgetown" in got.reasoning and got.salvaged == ""  # the draft is never salvaged


def test_reasoning_without_an_answer_and_an_empty_think_block():
    assert parse_reply("<think>hmm</think>  ").parse_error == "no answer after the reasoning"
    got = parse_reply(f"<think>\n\n</think>\n\n{FINAL}")  # qwen3 with thinking off
    assert (got.answer, got.reasoning) == ("Keltbridge", "")


def test_tags_inside_the_answer_object_are_text():
    text = json.dumps({"answer": "a", "explanation": "the <think> tag </think> is text"})
    got = parse_reply(text)
    assert (got.answer, got.reasoning) == ("a", "")
    assert got.explanation == "the <think> tag </think> is text"
    assert split_reasoning("plain") == ("", "plain", False)
    got = parse_reply(json.dumps({"answer": "a", "explanation": "ends with </think> here"}))
    assert (got.answer, got.reasoning, got.parse_error) == ("a", "", None)
    text = 'Sure: {"answer": "a", "explanation": "x </think> y"}'
    assert parse_reply(text).answer == "a"


def test_a_long_reply_is_parsed_whole():
    # a valid answer followed by 300,000 characters of explanation (issue 35 item 4)
    text = FINAL + "\n" + "Because " * 37_500
    assert len(text) > 300_000
    assert parse_reply(text).answer == "Keltbridge"
    got = parse_reply("<think>" + "x" * 300_000 + "</think>" + FINAL)
    assert got.answer == "Keltbridge" and len(got.reasoning) == 300_000


# ------------------------------------------------------- reasoning returned apart, the engine


def test_the_reasoning_fields_of_both_apis_reach_the_reply(stub):
    from model_stub import MESSAGES

    from core.backends.ollama import OllamaBackend
    from core.backends.openai_compat import OpenAIBackend

    plain = OllamaBackend("stub-model", hosts=[stub.url]).generate(MESSAGES)
    assert plain.reasoning is None
    stub.thinking = f"Let me think. {DRAFT}"
    for backend in (
        OllamaBackend("stub-model", hosts=[stub.url]),
        OpenAIBackend("stub-model", base_url=stub.url),
    ):
        reply = backend.generate(MESSAGES)
        assert reply.error is None and reply.reasoning == stub.thinking
        assert reply.text == plain.text  # the content alone: the reasoning is not in it
        assert "Bridgetown" not in parse_reply(reply.text).answer


def test_the_engine_stores_reasoning_apart_and_the_run_records_its_cap(db_path, stub):
    from test_engine import TOY

    from core.backends.ollama import OllamaBackend
    from core.execution.runs import run_conditions
    from core.store import Store

    store = Store(db_path)
    store.write_dataset(TOY)
    stub.thinking = f"Let me think. {DRAFT}"
    backend = OllamaBackend("stub-model", hosts=[stub.url])
    run_conditions(store, "toy", backend, ("oracle",), name="r", max_cited=2)
    run_conditions(store, "toy", backend, ("oracle",), name="again", max_cited=2)
    assert store.run_row("r")["options"]["max_cited"] == 2
    for run, cached in (("r", False), ("again", True)):  # the cache keeps the reasoning too
        rows = store.prediction_rows(run)
        assert len(rows) == 3 and list(rows["cache_hit"]) == [cached] * 3
        for meta in rows["meta"]:
            assert json.loads(meta)["reasoning"] == stub.thinking
        assert not rows["answer"].eq("Bridgetown").any()
    run_conditions(store, "toy", backend, ("oracle",), name="plain")
    assert "max_cited" not in store.run_row("plain")["options"]  # the default is not written
    with pytest.raises(ValueError, match="max_cited"):  # a run's cap is fixed
        run_conditions(store, "toy", backend, ("oracle",), name="r", max_cited=3)


def test_a_300k_character_reply_keeps_its_parsed_fields_and_is_stored_cut(db_path):
    # issue 35 item 4: parsed whole (the answer first, 300,000 characters of explanation
    # after it), the stored raw text cut to MAX_REPLY_BYTES and flagged; not re-parsed later
    from test_engine import TOY, Scripted, _plan, _spec

    from core.backends import Reply
    from core.execution.engine import execute
    from core.execution.limits import MAX_REPLY_BYTES
    from core.execution.runs import start_run
    from core.scoring.reparse import reparse_runs
    from core.store import Store

    long = json.dumps(
        {"answer": "84", "evidence_ids": ["p0002", "p9999"], "explanation": "because " * 37_500}
    )
    assert len(long) > 300_000

    class Long(Scripted):
        def generate(self, messages, options=None):
            return Reply(text=long, latency_ms=1.0)

    store = Store(db_path)
    store.write_dataset(TOY)
    calls = [c for c in _plan() if c.condition == "oracle"]
    backend = Long()
    start_run(store, _spec(), backend)
    execute(store, "t", calls, backend)
    rows = store.prediction_rows("t")
    assert len(rows) == 3
    for _, row in rows.iterrows():
        assert (row["answer"], list(row["cited_ids"]), row["parse_error"]) == (
            "84",
            ["p0002"],
            None,
        )
        meta = json.loads(row["meta"])
        assert meta["raw_response_truncated"] == {"bytes": len(long), "kept_bytes": MAX_REPLY_BYTES}
        assert meta["parse"] == {"unshown_ids": ["p9999"]}
        assert len(row["raw_response"]) == MAX_REPLY_BYTES
    with store.transaction() as con:  # the cut text is not parsed again (it is not JSON)
        assert reparse_runs(con, ["t"]).changed == 0


def test_a_reply_cut_off_inside_reasoning_returned_apart_is_a_parse_error(db_path, stub):
    # the server's reasoning field holds the draft, the content is empty (Ollama) or null
    # (OpenAI-compatible): the reply ended inside its reasoning, not a failed call
    from test_engine import TOY

    from core.backends.ollama import OllamaBackend
    from core.backends.openai_compat import OpenAIBackend
    from core.execution.runs import run_conditions
    from core.store import Store

    store = Store(db_path)
    store.write_dataset(TOY)
    stub.thinking, stub.thinking_only = f"Let me think. {DRAFT}", True
    for name, backend in (
        ("o", OllamaBackend("stub-model", hosts=[stub.url])),
        ("v", OpenAIBackend("stub-model", base_url=stub.url)),
    ):
        s = run_conditions(store, "toy", backend, ("oracle",), name=name)
        assert (s.errors, s.parse_errors) == (0, 3)
        rows = store.prediction_rows(name)
        assert set(rows["parse_error"]) == {REASONING_UNCLOSED} and set(rows["answer"]) == {""}
        assert {json.loads(m)["reasoning"] for m in rows["meta"]} == {stub.thinking}
