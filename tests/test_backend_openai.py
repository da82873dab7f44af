"""The OpenAI-compatible backend against the stub server (real httpx, real HTTP)."""

from __future__ import annotations

import json
import math

import pytest
from conftest import dead_url
from model_stub import MESSAGES, ModelStub, split_tokens

from core.backends import Backend, EmbeddedReader, OpenAIBackend, RetryPolicy, make_backend
from core.backends.openai_compat import normalize_base_url
from core.execution.prompts import ANSWER_SCHEMA

EXPECTED = EmbeddedReader().generate(MESSAGES).text
FAST = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.02)


def _backend(url: str, **kw) -> OpenAIBackend:
    kw.setdefault("retry", FAST)
    kw.setdefault("connect_timeout_s", 1.0)
    kw.setdefault("api_key", "")
    return OpenAIBackend(kw.pop("model", "stub-model"), base_url=url, **kw)


def _chats(stub: ModelStub) -> list[dict]:
    return stub.bodies("/v1/chat/completions")


def test_exact_request_payload_and_reply(stub):
    backend = _backend(stub.url)
    assert isinstance(backend, Backend) and backend.base_url == stub.url + "/v1"
    reply = backend.generate(MESSAGES)
    backend.generate(MESSAGES)
    assert stub.paths() == ["/v1/models", "/v1/chat/completions", "/v1/chat/completions"]
    assert _chats(stub)[0] == {
        "model": "stub-model",
        "messages": [dict(m) for m in MESSAGES],
        "temperature": 0.0,
        "seed": 0,
        "max_tokens": 1024,
        "stream": False,
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True},
        },
        "logprobs": True,
        "top_logprobs": 0,
    }
    assert reply.ok and reply.text == EXPECTED
    assert reply.prompt_tokens == ModelStub.count_tokens(MESSAGES)
    assert reply.completion_tokens == len(split_tokens(EXPECTED))
    assert reply.model_digest is None and reply.total_duration_ns is None
    assert len(reply.logprobs) == len(split_tokens(EXPECTED))
    conf = json.loads(EXPECTED)["confidence"]
    assert reply.logprob_confidence == pytest.approx(conf, abs=1e-12)
    assert backend.context_length == 131072  # read from /v1/models max_model_len


def test_options_and_per_call_overrides(stub):
    backend = _backend(
        stub.url + "/v1/", seed=3, max_tokens=50, top_logprobs=1, extra_options={"top_p": 0.5}
    )
    backend.generate(MESSAGES, {"seed": 4})
    body = _chats(stub)[0]
    got = (body["seed"], body["max_tokens"], body["top_p"], body["top_logprobs"])
    assert got == (4, 50, 0.5, 1)
    with pytest.raises(ValueError, match="unknown openai option\\(s\\) 'num_ctx'; allowed: "):
        backend.generate(MESSAGES, {"num_ctx": 4})


def test_api_key_from_the_environment(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    OpenAIBackend("stub-model", base_url=stub.url).generate(MESSAGES)
    assert stub.headers[-1]["authorization"] == "Bearer sk-test"
    monkeypatch.delenv("OPENAI_API_KEY")
    OpenAIBackend("stub-model", base_url=stub.url).generate(MESSAGES)
    assert "authorization" not in stub.headers[-1]


def test_server_without_logprobs_is_asked_again_without_them(stub):
    stub.openai_logprobs = False
    backend = _backend(stub.url)
    first = backend.generate(MESSAGES)
    second = backend.generate(MESSAGES)
    assert first.ok and second.ok and first.text == EXPECTED
    assert first.logprob_confidence is None and first.logprobs is None
    assert ["logprobs" in body for body in _chats(stub)] == [True, False, False]


def test_connection_refused():
    url = dead_url()
    reply = _backend(url).generate(MESSAGES)
    assert reply.error == (
        f"cannot reach the OpenAI-compatible server at {url}/v1: start it (e.g. `vllm serve "
        "MODEL`, `llama-server -m FILE`) or fix --base-url"
    )
    assert _backend(url).describe()["error"] == reply.error


def test_unknown_model_names_what_is_served(stub):
    reply = _backend(stub.url, model="llama3").generate(MESSAGES)
    assert reply.error == f"model 'llama3' is not served by {stub.url}/v1; it serves: stub-model"
    assert _chats(stub) == []


def test_http_500_503_stall_not_json_missing_fields_close(stub):
    url = stub.url + "/v1"
    backend = _backend(stub.url, timeout_s=0.2)
    stub.set_mode("500")
    assert backend.generate(MESSAGES).error == f"HTTP 500 from {url}: stub: internal server error"
    assert len(_chats(stub)) == 1
    stub.set_mode("503-once")
    assert backend.generate(MESSAGES).text == EXPECTED
    assert len(_chats(stub)) == 3
    stub.set_mode("not-json")
    assert backend.generate(MESSAGES).error == (
        f"reply from {url} is not JSON (is --base-url an OpenAI API?)"
    )
    stub.set_mode("missing-fields")
    assert backend.generate(MESSAGES).error == (
        f"reply from {url} lacks or mistypes field(s): choices"
    )
    assert len(_chats(stub)) == 5
    stub.set_mode("close")
    err = backend.generate(MESSAGES).error
    assert err.startswith(f"connection to {url} closed mid-response (")
    assert err.endswith("(after 3 tries)") and len(_chats(stub)) == 8
    stub.stall_s = 10.0
    stub.set_mode("stall")
    assert backend.generate(MESSAGES).error == (
        f"timed out after 0.2s waiting for {url} (raise --timeout SECONDS)"
    )  # the deadline is the whole call's: a stall uses it up, no try follows
    assert len(_chats(stub)) == 9


def test_prompt_longer_than_the_served_context_is_not_sent():
    # Refused unsent only when the lower bound (characters / 6) already reaches the context.
    chars = sum(len(m["content"]) for m in MESSAGES)
    bound = chars // 6
    assert bound >= 16
    with ModelStub(context_length=16) as stub:
        reply = _backend(stub.url).generate(MESSAGES)
        assert _chats(stub) == []
    assert reply.error == (
        f"prompt too long: at least {bound} tokens (a lower bound: {chars} characters / 6) >= "
        "the model's context of 16; not sent (prompts are never truncated)"
    )
    # An over-estimate (characters / 3 + 4 per message) would refuse this one: it is sent.
    with ModelStub(context_length=bound + 1) as stub:
        assert math.ceil(chars / 3) + 4 * len(MESSAGES) >= bound + 1
        reply = _backend(stub.url).generate(MESSAGES)
        assert len(_chats(stub)) == 1


def test_server_context_error_is_mapped():
    with ModelStub(context_length=200) as stub:
        # An estimate far too low lets the call through; the server refuses it (HTTP 400).
        reply = _backend(stub.url, chars_per_token=1000.0).generate(MESSAGES)
        n = ModelStub.count_tokens(MESSAGES)
        assert len(_chats(stub)) == 1
    assert reply.error == (
        f"prompt longer than the model's context (server {stub.url}/v1 said: This model's "
        f"maximum context length is 200 tokens. However, you requested {n + 1024} tokens "
        f"({n} in the messages, 1024 in the completion).); shorten the context or serve the "
        "model with a longer one"
    )


def test_describe_and_make_backend(stub, monkeypatch):
    backend = make_backend(
        "openai", "stub-model", base_url=stub.url, options={"max_tokens": 64, "retries": 1}
    )
    assert backend.retry.attempts == 1 and backend.options["max_tokens"] == 64
    assert backend.describe() == {
        "kind": "openai",
        "backend": "openai",
        "model": "stub-model",
        "model_digest": None,
        "label": "OpenAI-compatible stub-model",
        "baseline": False,
        "options": {"temperature": 0.0, "seed": 0, "max_tokens": 64},
        "request": {
            "response_format": "json_schema:ANSWER_SCHEMA",
            "stream": False,
            "logprobs": True,
            "top_logprobs": 0,
        },
        "base_url": stub.url + "/v1",
        "context_length": 131072,
        "error": None,
    }
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ValueError, match="the openai backend needs --base-url"):
        make_backend("openai", "m")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://h:8000/v1")
    assert make_backend("openai", "m").base_url == "http://h:8000/v1"
    with pytest.raises(ValueError, match="unknown option\\(s\\) 'keep_alive' for the openai"):
        make_backend("openai", "m", options={"keep_alive": "5m"})


def test_normalize_base_url():
    assert normalize_base_url("http://h:8000") == "http://h:8000/v1"
    assert normalize_base_url("h:8000/") == "http://h:8000/v1"
    assert normalize_base_url("https://openrouter.ai/api/v1") == "https://openrouter.ai/api/v1"
    with pytest.raises(ValueError, match="base URL 'ftp://h': expected http"):
        normalize_base_url("ftp://h")
