"""The Ollama backend against the stub server, through the real ``ollama`` client library."""

from __future__ import annotations

import json
import math
from concurrent.futures import ThreadPoolExecutor

import pytest
from conftest import dead_url
from model_stub import MESSAGES, ModelStub, split_tokens

from core.backends import (
    BACKENDS,
    Backend,
    EmbeddedReader,
    OllamaBackend,
    RetryPolicy,
    answer_logprob_confidence,
    make_backend,
    server_status,
)
from core.backends.base import BackendError
from core.backends.ollama import DEFAULT_NUM_CTX, resolve_hosts
from core.backends.support import min_prompt_tokens, too_long_error, with_retries
from core.datasets.controlled import build_controlled
from core.execution.prompts import ANSWER_SCHEMA, build_messages

EXPECTED = EmbeddedReader().generate(MESSAGES).text
FAST = RetryPolicy(attempts=3, backoff_s=0.01, max_backoff_s=0.02)


def _backend(*urls: str, **kw) -> OllamaBackend:
    kw.setdefault("retry", FAST)
    kw.setdefault("connect_timeout_s", 1.0)
    return OllamaBackend(kw.pop("model", "stub-model"), hosts=list(urls), **kw)


def _chats(stub: ModelStub) -> list[dict]:
    return stub.bodies("/api/chat")


# -- request and reply ----------------------------------------------------------------


def test_exact_request_payload_and_call_sequence(stub):
    backend = _backend(stub.url)
    assert isinstance(backend, Backend)
    backend.generate(MESSAGES)
    backend.generate(MESSAGES)
    assert stub.paths() == ["/api/version", "/api/show", "/api/tags", "/api/chat", "/api/chat"]
    assert _chats(stub)[0] == {
        "model": "stub-model",
        "stream": False,
        "options": {"temperature": 0.0, "seed": 0, "num_ctx": 32768, "num_predict": 1024},
        "format": ANSWER_SCHEMA,
        "keep_alive": "30m",
        "messages": [dict(m) for m in MESSAGES],
        "tools": [],
        "think": False,
        "logprobs": True,
        "top_logprobs": 0,
    }


def test_reply_has_text_token_counts_timings_digest_and_logprob_confidence(stub):
    reply = _backend(stub.url, top_logprobs=3).generate(MESSAGES)
    assert reply.ok and reply.text == EXPECTED
    n_prompt, n_eval = ModelStub.count_tokens(MESSAGES), len(split_tokens(EXPECTED))
    assert (reply.prompt_tokens, reply.completion_tokens) == (n_prompt, n_eval)
    assert reply.load_duration_ns == 500_000_000
    assert reply.prompt_eval_duration_ns == 20_000 * n_prompt
    assert reply.eval_duration_ns == 1_000_000 * n_eval
    assert reply.total_duration_ns == 500_000_000 + 20_000 * n_prompt + 1_000_000 * n_eval
    assert reply.model_digest == "sha256:" + "ab" * 32
    assert reply.latency_ms > 0
    assert len(reply.logprobs) == n_eval
    assert reply.logprobs[0] == {
        "token": "{",
        "logprob": -0.001,
        "top_logprobs": [
            {"token": "{", "logprob": -0.001},
            {"token": "<alt1>", "logprob": -2.001},
            {"token": "<alt2>", "logprob": -4.001},
        ],
    }
    # The stub gives every answer token logprob ln(self-reported confidence).
    conf = json.loads(EXPECTED)["confidence"]
    assert reply.logprob_confidence == pytest.approx(conf, abs=1e-12)


def test_options_seed_num_ctx_and_per_call_overrides(stub):
    backend = _backend(
        stub.url,
        num_ctx=4096,
        num_predict=64,
        seed=7,
        temperature=0.2,
        keep_alive="5m",
        top_logprobs=2,
        extra_options={"top_k": 1},
    )
    backend.generate(MESSAGES, {"seed": 8})
    body = _chats(stub)[0]
    assert body["options"] == {
        "top_k": 1,
        "temperature": 0.2,
        "seed": 8,
        "num_ctx": 4096,
        "num_predict": 64,
    }
    assert (body["keep_alive"], body["top_logprobs"]) == ("5m", 2)
    backend.generate(MESSAGES, {"num_ctx": 4096})  # the same value is fine
    with pytest.raises(ValueError, match="num_ctx is fixed at 4096 for this backend"):
        backend.generate(MESSAGES, {"num_ctx": 8192})
    with pytest.raises(ValueError, match="unknown Ollama option\\(s\\) 'colour'; allowed: .*"):
        backend.generate(MESSAGES, {"colour": 1})
    assert len(_chats(stub)) == 2


def test_logprobs_not_requested_from_old_servers_or_when_off():
    with ModelStub(version="0.11.4") as old:
        reply = _backend(old.url).generate(MESSAGES)
        body = _chats(old)[0]
    assert "logprobs" not in body and "top_logprobs" not in body
    assert reply.ok and reply.logprobs is None and reply.logprob_confidence is None
    with ModelStub() as new:
        _backend(new.url, logprobs=False).generate(MESSAGES)
        assert "logprobs" not in _chats(new)[0]
        _backend(new.url, logprobs=True).generate(MESSAGES)
        assert _chats(new)[1]["logprobs"] is True


# -- errors ---------------------------------------------------------------------------


def test_connection_refused_says_how_to_start_the_server():
    url = dead_url()
    reply = _backend(url).generate(MESSAGES)
    assert not reply.ok and reply.text == ""
    assert reply.error == (
        f"cannot reach Ollama at {url}: start it with `ollama serve` or set OLLAMA_HOST "
        "(or use --backend embedded)"
    )


def test_model_not_pulled_says_ollama_pull(stub):
    reply = _backend(stub.url, model="qwen2.5:7b").generate(MESSAGES)
    assert reply.error == (
        f"model 'qwen2.5:7b' is not pulled on {stub.url}: run `ollama pull qwen2.5:7b`"
    )
    assert _chats(stub) == []
    # A model removed after the first call: the chat's own 404 maps the same way.
    backend = _backend(stub.url)
    assert backend.generate(MESSAGES).ok
    stub.model = "gone"
    assert backend.generate(MESSAGES).error == (
        f"model 'stub-model' is not pulled on {stub.url}: run `ollama pull stub-model`"
    )


def test_http_500_is_reported_and_not_retried(stub):
    stub.set_mode("500")
    reply = _backend(stub.url).generate(MESSAGES)
    assert reply.error == f"HTTP 500 from {stub.url}: stub: internal server error"
    assert len(_chats(stub)) == 1


def test_503_is_retried_with_backoff(stub):
    stub.set_mode("503-once")
    reply = _backend(stub.url).generate(MESSAGES)
    assert reply.ok and reply.text == EXPECTED
    assert len(_chats(stub)) == 2


def test_a_stall_times_out_at_the_whole_call_deadline(stub):
    """``timeout_s`` bounds the call, retries included: a stall uses it up, no try follows."""
    stub.stall_s = 10.0
    stub.set_mode("stall")
    backend = _backend(stub.url, timeout_s=0.2, retry=RetryPolicy(attempts=2, backoff_s=0.01))
    reply = backend.generate(MESSAGES)
    assert reply.error == (
        f"timed out after 0.2s waiting for {stub.url} (a long prompt on a slow machine: raise "
        "--timeout SECONDS)"
    )
    assert len(_chats(stub)) == 1


def test_not_json_and_missing_fields(stub):
    stub.set_mode("not-json")
    backend = _backend(stub.url)
    assert backend.generate(MESSAGES).error == (
        f"reply from {stub.url} is not JSON (is OLLAMA_HOST pointing at an Ollama server?)"
    )
    stub.set_mode("missing-fields")
    assert backend.generate(MESSAGES).error == (
        f"reply from {stub.url} lacks or mistypes field(s): message"
    )
    assert len(_chats(stub)) == 2  # neither is retried


def test_connection_closed_mid_response_is_retried_then_reported(stub):
    stub.set_mode("close")
    reply = _backend(stub.url).generate(MESSAGES)
    assert reply.error.startswith(f"connection to {stub.url} closed mid-response (")
    assert reply.error.endswith("(after 3 tries)")
    assert len(_chats(stub)) == 3


def test_prompt_longer_than_num_ctx_is_not_sent(stub):
    # Refused unsent only when the lower bound (characters / 6) already reaches num_ctx.
    chars = sum(len(m["content"]) for m in MESSAGES)
    bound = chars // 6
    assert bound >= 64
    reply = _backend(stub.url, num_ctx=64).generate(MESSAGES)
    assert reply.error == (
        f"prompt too long: at least {bound} tokens (a lower bound: {chars} characters / 6) >= "
        "num_ctx=64; not sent (prompts are never truncated): raise num_ctx or shorten the "
        "context"
    )
    assert stub.requests == []  # nothing at all reached the server
    # At the bound itself the prompt still cannot fit: refused; one token above it: sent.
    assert "not sent" in _backend(stub.url, num_ctx=bound).generate(MESSAGES).error
    assert stub.requests == []
    reply = _backend(stub.url, num_ctx=bound + 1).generate(MESSAGES)
    assert len(_chats(stub)) == 1 and reply.error.startswith("prompt filled the context")
    assert min_prompt_tokens(MESSAGES) == bound


def test_prompt_an_over_estimate_would_refuse_is_sent(stub):
    # The old estimate (characters / 3 + 4 per message) put MESSAGES at 336 tokens and refused
    # it at num_ctx=300; the stub counts 256, so it fits and must be sent and answered.
    chars = sum(len(m["content"]) for m in MESSAGES)
    assert math.ceil(chars / 3) + 4 * len(MESSAGES) >= 300 > ModelStub.count_tokens(MESSAGES)
    reply = _backend(stub.url, num_ctx=300).generate(MESSAGES)
    assert reply.ok and reply.text == EXPECTED
    assert reply.prompt_tokens == ModelStub.count_tokens(MESSAGES)
    assert _chats(stub)[0]["options"]["num_ctx"] == 300


def test_prompt_truncated_by_the_server_fails_the_call(stub):
    # Between the lower bound and the true count the prompt is sent; the stub truncates it as
    # Ollama does, and the reported prompt_eval_count fails the call.
    bound = min_prompt_tokens(MESSAGES)
    assert bound < 200 < ModelStub.count_tokens(MESSAGES)
    reply = _backend(stub.url, num_ctx=200).generate(MESSAGES)
    assert len(_chats(stub)) == 1
    assert reply.error == (
        f"prompt filled the context: prompt_eval_count=200 >= num_ctx=200, so {stub.url} "
        f"truncated it (lower bound was {bound}); raise num_ctx or shorten the context"
    )
    assert reply.text == "" and reply.prompt_tokens == 200


def _longest_full_context(preset: str, length: int) -> list[dict]:
    """The longest ``full_context`` prompt among the preset's cells of one context length."""
    ds = build_controlled(preset, subset={"context_length": [length]})
    prompts = [build_messages(inst, "full_context") for inst in ds.instances]
    return max(prompts, key=lambda m: sum(len(x["content"]) for x in m))


def test_longest_controlled_200_full_context_is_sent_at_num_ctx_32768(stub):
    # The 16K-word contexts the published runs sent at num_ctx 32768 (the old estimate,
    # characters / 3 + 8, put the longest at about 36K tokens and never sent it).
    messages = _longest_full_context("controlled-200", 16000)
    chars = sum(len(m["content"]) for m in messages)
    assert chars // 6 < DEFAULT_NUM_CTX <= math.ceil(chars / 3) + 8
    reply = _backend(stub.url).generate(messages)
    sent = _chats(stub)
    assert len(sent) == 1 and sent[0]["messages"] == messages
    assert sent[0]["options"]["num_ctx"] == DEFAULT_NUM_CTX == 32768
    assert reply.ok and reply.prompt_tokens == ModelStub.count_tokens(messages) < 32768
    # A server that counts more tokens than the context holds truncates it: the call fails.
    n = ModelStub.count_tokens(messages)
    num_ctx = n - 1
    assert chars // 6 < num_ctx
    reply = _backend(stub.url, num_ctx=num_ctx).generate(messages)
    assert len(_chats(stub)) == 2 and _chats(stub)[1]["options"]["num_ctx"] == num_ctx
    assert reply.error.startswith(
        f"prompt filled the context: prompt_eval_count={num_ctx} >= num_ctx={num_ctx}, so "
        f"{stub.url} truncated it"
    )
    assert reply.text == "" and reply.prompt_tokens == num_ctx


def test_controlled_and_scaling_contexts_up_to_16k_pass_the_pre_send_check():
    # Every full-context prompt of controlled-200, and the longest of scaling-3200's 4K-16K
    # cells, is under the lower-bound refusal at num_ctx 32768.
    for inst in build_controlled("controlled-200").instances:
        msgs = build_messages(inst, "full_context")
        assert too_long_error(msgs, 6.0, 32768, "num_ctx=32768") is None, inst.instance_id
    for length in (4000, 8000, 16000):
        msgs = _longest_full_context("scaling-3200", length)
        assert min_prompt_tokens(msgs) < 32768


# -- several hosts --------------------------------------------------------------------


def test_round_robin_over_two_hosts_and_retry_moves_to_the_next_host():
    with ModelStub() as a, ModelStub(digest="sha256:" + "cd" * 32) as b:
        backend = _backend(a.url, b.url)
        replies = [backend.generate(MESSAGES) for _ in range(4)]
        assert [len(_chats(a)), len(_chats(b))] == [2, 2]
        assert [r.model_digest[-2:] for r in replies] == ["ab", "cd", "ab", "cd"]
        info = backend.describe()
        assert info["digests_agree"] is False and info["model_digest"] == "sha256:" + "ab" * 32
        a.set_mode("503-once")
        assert backend.generate(MESSAGES).ok  # 5th call: a answers 503, b answers
        assert [len(_chats(a)), len(_chats(b))] == [3, 3]


def test_concurrent_calls_are_thread_safe():
    with ModelStub(latency_s=0.02) as a, ModelStub(latency_s=0.02) as b:
        backend = _backend(a.url, b.url)
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda _: backend.generate(MESSAGES), range(16)))
        assert all(r.ok and r.text == EXPECTED for r in replies)
        assert [len(_chats(a)), len(_chats(b))] == [8, 8]
        assert [a.paths().count("/api/show"), b.paths().count("/api/show")] == [1, 1]


def test_resolve_hosts(monkeypatch):
    monkeypatch.delenv("OLLAMA_HOST", raising=False)
    assert resolve_hosts() == ["http://127.0.0.1:11434"]
    monkeypatch.setenv("OLLAMA_HOST", "h1, h2:1234,https://h3")
    assert resolve_hosts() == ["http://h1:11434", "http://h2:1234", "https://h3:443"]
    assert resolve_hosts(["0.0.0.0", "http://x:1/"]) == ["http://127.0.0.1:11434", "http://x:1"]
    with pytest.raises(ValueError, match="Ollama host 'ftp://x': scheme must be http or https"):
        resolve_hosts(["ftp://x"])


# -- status, description, factory ----------------------------------------------------


def test_server_status_on_a_live_and_a_dead_host(stub):
    dead = dead_url()
    assert server_status([stub.url, dead]) == [
        {
            "host": stub.url,
            "reachable": True,
            "version": "0.12.11",
            "models": ["stub-model:latest"],
            "error": None,
        },
        {
            "host": dead,
            "reachable": False,
            "version": None,
            "models": [],
            "error": f"cannot reach Ollama at {dead}: start it with `ollama serve` or set "
            "OLLAMA_HOST (or use --backend embedded)",
        },
    ]


def test_describe(stub):
    info = _backend(stub.url).describe()
    assert info == {
        "kind": "ollama",
        "backend": "ollama",
        "model": "stub-model",
        "model_digest": "sha256:" + "ab" * 32,
        "label": "Ollama stub-model",
        "baseline": False,
        "options": {"temperature": 0.0, "seed": 0, "num_ctx": 32768, "num_predict": 1024},
        "request": {
            "format": "ANSWER_SCHEMA",
            "think": False,
            "stream": False,
            "keep_alive": "30m",
            "logprobs": "auto",
            "top_logprobs": 0,
        },
        "hosts": [stub.url],
        "host_digests": {stub.url: "sha256:" + "ab" * 32},
        "host_versions": {stub.url: "0.12.11"},
        "digests_agree": True,
        "error": None,
    }
    dead = dead_url()
    down = _backend(dead).describe()
    assert down["model_digest"] is None and down["error"].startswith("cannot reach Ollama at")


def test_make_backend(stub, monkeypatch):
    assert BACKENDS == ("embedded", "ollama", "openai")
    emb = make_backend("embedded")
    assert isinstance(emb, EmbeddedReader) and emb.model == "extractive-bm25"
    assert make_backend("embedded", options={"threshold": 0.3}).threshold == 0.3
    monkeypatch.setenv("OLLAMA_HOST", stub.url)
    ol = make_backend(
        "ollama", "stub-model", options={"num_ctx": 2048, "retries": 2, "backoff_s": 0.0}
    )
    assert ol.hosts == [stub.url] and ol.num_ctx == 2048
    assert ol.retry == RetryPolicy(attempts=2, backoff_s=0.0, max_backoff_s=8.0)
    assert make_backend("ollama", "m", hosts=["a", "b:1"]).hosts == [
        "http://a:11434",
        "http://b:1",
    ]
    with pytest.raises(ValueError, match="unknown backend 'vllm'; allowed: embedded, ollama"):
        make_backend("vllm")
    with pytest.raises(ValueError, match="unknown option\\(s\\) 'num_ctx' for the embedded"):
        make_backend("embedded", options={"num_ctx": 1})
    with pytest.raises(ValueError, match="the ollama backend needs a model name"):
        make_backend("ollama")


# -- shared rules ---------------------------------------------------------------------


def test_answer_logprob_confidence_hand_computed():
    toks = [
        {"token": '{"', "logprob": -0.5},
        {"token": "answer", "logprob": -0.01},
        {"token": '":', "logprob": -0.02},
        {"token": ' "', "logprob": -0.03},
        {"token": "Par", "logprob": -0.1},
        {"token": "is", "logprob": -0.3},
        {"token": '",', "logprob": -0.04},
        {"token": ' "confidence": 0.9}', "logprob": -0.7},
    ]
    assert answer_logprob_confidence(toks) == pytest.approx(math.exp(-0.2), abs=1e-15)
    assert math.exp(-0.2) == pytest.approx(0.8187307530779818, abs=1e-15)
    # A token carrying the opening quote and the value's first letters counts.
    glued = [{"token": '{"answer": "Pa', "logprob": -1.0}, {"token": 'ris"}', "logprob": -3.0}]
    assert answer_logprob_confidence(glued) == pytest.approx(math.exp(-2.0), abs=1e-15)
    number = [
        {"token": '{"answer": ', "logprob": -9.0},
        {"token": "42", "logprob": -0.4},
        {"token": "}", "logprob": -9.0},
    ]
    assert answer_logprob_confidence(number) == pytest.approx(math.exp(-0.4), abs=1e-15)
    assert answer_logprob_confidence([{"token": '{"answer": ""}', "logprob": -1.0}]) is None
    assert answer_logprob_confidence([{"token": "no json", "logprob": -1.0}]) is None
    assert answer_logprob_confidence(None) is None and answer_logprob_confidence([]) is None


def test_retry_policy_delays_and_with_retries():
    assert list(RetryPolicy(attempts=5, backoff_s=0.5, max_backoff_s=1.5).delays()) == [
        0.5,
        1.0,
        1.5,
        1.5,
    ]
    waits: list[float] = []
    calls: list[int] = []

    def flaky(k: int) -> str:
        calls.append(k)
        if k < 2:
            raise BackendError("busy", retryable=True)
        return "ok"

    assert with_retries(flaky, RetryPolicy(attempts=3, backoff_s=0.1), waits.append) == "ok"
    assert (calls, waits) == ([0, 1, 2], [0.1, 0.2])

    def permanent(k: int) -> str:
        calls.append(k)
        raise BackendError("bad")

    calls.clear()
    with pytest.raises(BackendError, match="^bad$"):
        with_retries(permanent, RetryPolicy(attempts=3), waits.append)
    assert calls == [0]
    with pytest.raises(ValueError, match="attempts must be >= 1, got 0"):
        RetryPolicy(attempts=0)
