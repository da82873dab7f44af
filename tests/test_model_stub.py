"""The stub model server used by backend, engine and benchmark tests (tests/model_stub.py)."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from model_stub import GARBAGE_REPLIES, MESSAGES, MODES, ModelStub, split_tokens

from core.backends import EmbeddedReader


def test_count_tokens_is_word_and_symbol_pieces_plus_four_per_message():
    msgs = [{"role": "system", "content": "Hi, you."}, {"role": "user", "content": "a b"}]
    # "Hi" "," "you" "." = 4 (+4) and "a" "b" = 2 (+4)
    assert ModelStub.count_tokens(msgs) == 14


def test_split_tokens_concatenate_back():
    text = '{"answer": "Keltbridge", "x": [1, 2]}  '
    toks = split_tokens(text)
    assert "".join(toks) == text
    assert toks[:6] == ["{", '"', "answer", '"', ":", ' "']


def test_ollama_chat_answers_with_the_embedded_reply_and_timings():
    expected = EmbeddedReader().generate(MESSAGES).text
    with ModelStub(latency_s=0.01) as stub:
        body = {"model": "stub-model", "messages": MESSAGES, "options": {"num_ctx": 4096}}
        first = httpx.post(stub.url + "/api/chat", json=body).json()
        second = httpx.post(stub.url + "/api/chat", json=body).json()
        body["options"] = {"num_ctx": 8192}
        third = httpx.post(stub.url + "/api/chat", json=body).json()
        assert stub.paths() == ["/api/chat"] * 3
    assert first["message"] == {"role": "assistant", "content": expected}
    n_prompt = ModelStub.count_tokens(MESSAGES)
    n_eval = len(split_tokens(expected))
    assert first["prompt_eval_count"] == n_prompt and first["eval_count"] == n_eval
    assert first["load_duration"] == 500_000_000  # first load
    assert second["load_duration"] == 100_000  # warm
    assert third["load_duration"] == 500_000_000  # num_ctx changed: reload
    assert first["prompt_eval_duration"] == 20_000 * n_prompt
    assert first["eval_duration"] == 1_000_000 * n_eval
    assert first["total_duration"] == 500_000_000 + 20_000 * n_prompt + 1_000_000 * n_eval + 10**7
    assert "logprobs" not in first


def test_ollama_chat_truncates_to_num_ctx_like_ollama():
    with ModelStub() as stub:
        body = {"model": "stub-model", "messages": MESSAGES, "options": {"num_ctx": 16}}
        got = httpx.post(stub.url + "/api/chat", json=body).json()
    assert got["prompt_eval_count"] == 16


def test_logprobs_cover_the_reply_and_mark_the_answer_tokens():
    reply = json.loads(EmbeddedReader().generate(MESSAGES).text)
    with ModelStub() as stub:
        body = {"model": "stub-model", "messages": MESSAGES, "logprobs": True, "top_logprobs": 3}
        got = httpx.post(stub.url + "/api/chat", json=body).json()
    lps = got["logprobs"]
    assert "".join(e["token"] for e in lps) == got["message"]["content"]
    inside = [e for e in lps if e["token"] == "Keltbridge"]
    assert reply["answer"] == "Keltbridge"
    assert inside[0]["logprob"] == math.log(reply["confidence"])
    assert [t["token"] for t in inside[0]["top_logprobs"]] == ["Keltbridge", "<alt1>", "<alt2>"]
    assert lps[0] == {
        "token": "{",
        "logprob": -0.001,
        "bytes": [123],
        "top_logprobs": [
            {"token": "{", "logprob": -0.001, "bytes": [123]},
            {"token": "<alt1>", "logprob": -2.001, "bytes": list(b"<alt1>")},
            {"token": "<alt2>", "logprob": -4.001, "bytes": list(b"<alt2>")},
        ],
    }


def test_remembered_answers_equal_fresh_ones():
    """Token counts and log-probabilities are remembered per prompt and reply (the stub is no
    benchmark's limit): a repeated chat gets the same numbers, another ``top_logprobs`` its own."""
    body = {"model": "stub-model", "messages": MESSAGES, "logprobs": True, "top_logprobs": 2}
    with ModelStub() as stub:
        first = httpx.post(stub.url + "/api/chat", json=body).json()
        again = httpx.post(stub.url + "/api/chat", json=body).json()
        wider = httpx.post(stub.url + "/api/chat", json=dict(body, top_logprobs=3)).json()
    with ModelStub() as other:  # nothing remembered yet
        fresh = httpx.post(other.url + "/api/chat", json=body).json()
    assert (
        first["prompt_eval_count"] == again["prompt_eval_count"] == ModelStub.count_tokens(MESSAGES)
    )
    assert first["logprobs"] == again["logprobs"] == fresh["logprobs"]
    assert [len(e["top_logprobs"]) for e in wider["logprobs"]] == [3] * len(wider["logprobs"])
    assert [e["top_logprobs"] for e in wider["logprobs"]][0][:2] == first["logprobs"][0][
        "top_logprobs"
    ]


def test_model_info_endpoints():
    with ModelStub(model="m1", digest="sha256:" + "cd" * 32) as stub:
        assert httpx.get(stub.url + "/api/version").json() == {"version": "0.12.11"}
        tags = httpx.get(stub.url + "/api/tags").json()["models"]
        assert [(m["name"], m["digest"]) for m in tags] == [("m1:latest", "cd" * 32)]
        assert httpx.post(stub.url + "/api/show", json={"model": "m1"}).status_code == 200
        assert httpx.post(stub.url + "/api/show", json={"model": "m2"}).status_code == 404
        assert httpx.get(stub.url + "/v1/models").json()["data"][0]["id"] == "m1"
        assert httpx.get(stub.url + "/nope").status_code == 404


def test_openai_chat_and_context_error():
    with ModelStub(context_length=100) as stub:
        body = {"model": "stub-model", "messages": MESSAGES, "max_tokens": 10}
        r = httpx.post(stub.url + "/v1/chat/completions", json=body)
        assert r.status_code == 400 and "maximum context length is 100" in r.text
        stub.context_length = 10_000
        got = httpx.post(stub.url + "/v1/chat/completions", json=body).json()
    text = got["choices"][0]["message"]["content"]
    assert text == EmbeddedReader().generate(MESSAGES).text
    assert got["usage"]["prompt_tokens"] == ModelStub.count_tokens(MESSAGES)


def test_modes():
    with ModelStub() as stub:
        url = stub.url + "/api/chat"
        body = {"model": "stub-model", "messages": MESSAGES}
        stub.set_mode("503-once")
        assert [httpx.post(url, json=body).status_code for _ in range(2)] == [503, 200]
        stub.set_mode("500")
        assert httpx.post(url, json=body).status_code == 500
        stub.set_mode("not-json")
        assert httpx.post(url, json=body).text == "<html>this is not json</html>"
        stub.set_mode("missing-fields")
        assert httpx.post(url, json=body).json() == {"model": "stub-model", "done": True}
        stub.set_mode("json-list")
        assert httpx.post(url, json=body).text == "[]"
        stub.set_mode("json-null")
        assert httpx.post(url, json=body).text == "null"
        stub.set_mode("close")
        with pytest.raises(httpx.RemoteProtocolError):
            httpx.post(url, json=body)
        stub.set_mode("stall")
        stub.stall_s = 5.0
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(url, json=body, timeout=0.2)
        assert httpx.get(stub.url + "/api/version").status_code == 200  # info still answers
    with pytest.raises(ValueError, match="unknown stub mode 'slow'; allowed: ok, 500"):
        stub.set_mode("slow")
    assert MODES == (
        "ok",
        "500",
        "503-once",
        "stall",
        "not-json",
        "missing-fields",
        "close",
        "garbage",
        "json-list",
        "json-null",
        "huge",
    )


def test_garbage_replies_and_queued_modes():
    with ModelStub() as stub:
        body = {"model": "stub-model", "messages": MESSAGES}
        stub.set_mode("garbage")
        texts = [
            httpx.post(stub.url + "/api/chat", json=body).json()["message"]["content"]
            for _ in GARBAGE_REPLIES
        ]
        assert texts == list(GARBAGE_REPLIES)
        got = httpx.post(stub.url + "/v1/chat/completions", json=body).json()
        assert got["choices"][0]["message"]["content"] == GARBAGE_REPLIES[0]
        stub.set_mode("ok")
        stub.queue_modes("500", "garbage", "503-once")
        codes = [httpx.post(stub.url + "/api/chat", json=body).status_code for _ in range(5)]
        assert codes == [500, 200, 503, 200, 200] and stub.mode == "ok"
    with pytest.raises(ValueError, match="unknown stub mode 'slow'"):
        stub.queue_modes("ok", "slow")
