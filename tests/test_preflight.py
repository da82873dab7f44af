"""The backend preflight (issue 18 item 3) against the local stub servers, through the real
``ollama`` client and HTTP: a server that is down, a model that is not pulled or served, a
prompt over the context (certainly, or probably), and a backend that is ready."""

from __future__ import annotations

from conftest import dead_url
from model_stub import ModelStub

from core.backends.preflight import Problem, preflight


def test_embedded_needs_nothing():
    assert preflight("embedded", None, prompt_chars=10**9) == []


def test_a_server_backend_without_a_model_is_a_model_problem():
    assert preflight("ollama", "  ") == [
        Problem("model", "the ollama backend needs a model name (Model field)")
    ]


# ------------------------------------------------------------------------------ ollama
def test_ollama_down_is_one_server_problem():
    url = dead_url()
    problems = preflight("ollama", "stub-model", hosts=[url], prompt_chars=100, timeout_s=1.0)
    assert [p.check for p in problems] == ["server"]
    assert str(problems[0]) == (
        f"cannot reach Ollama at {url}: start it with `ollama serve` or set OLLAMA_HOST "
        "(or use --backend embedded)"
    )


def test_ollama_model_not_pulled(stub):
    problems = preflight("ollama", "qwen2.5:14b", hosts=[stub.url])
    assert problems == [
        Problem(
            "model",
            (
                f"model 'qwen2.5:14b' is not pulled on {stub.url} (pulled: stub-model:latest): run "
                "`ollama pull qwen2.5:14b`"
            ),
        )
    ]
    assert "/api/show" not in stub.paths()


def test_ollama_ready_asks_version_tags_and_show(stub):
    assert preflight("ollama", "stub-model", hosts=[stub.url], prompt_chars=40_000) == []
    assert {"/api/version", "/api/tags", "/api/show"} <= set(stub.paths())
    assert stub.bodies("/api/show")[-1]["model"] == "stub-model"


def test_ollama_context_from_the_model_info_and_num_ctx():
    with ModelStub(context_length=1000) as stub:
        where = f"stub-model's context_length on {stub.url}"
        # 6,000 characters / 6 = 1,000 tokens at least: cannot fit 1,000 (the model's own)
        sure = preflight("ollama", "stub-model", hosts=[stub.url], prompt_chars=6000)
        assert sure == [
            Problem(
                "context",
                (
                    "the longest prompt has at least 1,000 tokens (6,000 characters / 6), over the "
                    f"context of 1,000 ({where}): its calls will fail; raise num_ctx or shorten "
                    "the plan"
                ),
            )
        ]
        # 4,000 characters / 4 = about 1,000 tokens: may not fit; 3,996 -> 999 fits
        maybe = preflight("ollama", "stub-model", hosts=[stub.url], prompt_chars=4000)
        assert [p.check for p in maybe] == ["context"]
        assert str(maybe[0]).startswith("the longest prompt has about 1,000 tokens (4,000 ")
        assert str(maybe[0]).endswith(f"({where}): it may not fit; raise num_ctx, or launch anyway")
        assert preflight("ollama", "stub-model", hosts=[stub.url], prompt_chars=3996) == []
        # a num_ctx below the model's context is the limit
        small = preflight("ollama", "stub-model", hosts=[stub.url], prompt_chars=2100, num_ctx=512)
        assert "over the context of 512 (num_ctx=512)" in str(small[0])


def test_ollama_default_num_ctx_is_the_limit(stub):
    # the stub's model holds 131,072 tokens; a run loads it with num_ctx 32,768
    problems = preflight("ollama", "stub-model", hosts=[stub.url], prompt_chars=200_000)
    assert len(problems) == 1 and problems[0].check == "context"
    assert "at least 33,333 tokens" in str(problems[0])
    assert "context of 32,768 (num_ctx=32768, the run default)" in str(problems[0])


# ------------------------------------------------------------------------------ openai
def test_openai_down_is_one_server_problem():
    url = dead_url()
    problems = preflight("openai", "stub-model", base_url=url, timeout_s=1.0)
    assert problems == [
        Problem(
            "server",
            (
                f"cannot reach the OpenAI-compatible server at {url}/v1: start it (e.g. `vllm "
                "serve "
                "MODEL`) or fix the base URL"
            ),
        )
    ]


def test_openai_model_not_served(stub):
    problems = preflight("openai", "gpt-x", base_url=stub.url)
    assert problems == [
        Problem("model", f"model 'gpt-x' is not served by {stub.url}/v1 (it serves: stub-model)")
    ]
    assert stub.paths() == ["/v1/models"]


def test_openai_context_and_ready():
    with ModelStub(context_length=100) as stub:
        url = f"{stub.url}/v1"
        over = preflight("openai", "stub-model", base_url=url, prompt_chars=600)
        assert over == [
            Problem(
                "context",
                (
                    "the longest prompt has at least 100 tokens (600 characters / 6), over the "
                    "context "
                    f"of 100 (stub-model's max_model_len on {url}): its calls will fail; raise "
                    "num_ctx "
                    "or shorten the plan"
                ),
            )
        ]
        assert preflight("openai", "stub-model", base_url=url, prompt_chars=396) == []
        assert preflight("openai", "stub-model", base_url=url, prompt_chars=396, num_ctx=50)


# ------------------------------------------------------------------------------ Runs page
def test_the_runs_page_refuses_a_launch_when_ollama_is_down(tmp_path, monkeypatch):
    """Launch with Ollama down: the preflight's line, no job, no exception box."""
    from conftest import ROOT
    from model_stub import PASSAGE
    from streamlit.testing.v1 import AppTest

    from core.store import Store
    from core.types import Dataset, Instance
    from core.views.case import md_escape

    db = tmp_path / "s.duckdb"
    inst = Instance("q1", "What is the capital of Zarnovia?", "Keltbridge", (PASSAGE,))
    Store(db).write_dataset(Dataset("one", "test", "test", {}, (inst,)))
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    url = dead_url()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("screens/runs.py")
    at.run()
    at.selectbox(key="runs.method").set_value("probes").run()
    inputs = {t.label: t for t in at.text_input}
    inputs["Run name"].set_value("down-probes")
    inputs["Model"].set_value("stub-model")
    inputs["Server URL"].set_value(url)
    next(s for s in at.selectbox if s.label == "Backend").set_value("ollama")
    next(b for b in at.button if b.label == "Launch").click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    errors = [e.value for e in at.error]
    line = (
        f"preflight: cannot reach Ollama at {url}: start it with `ollama serve` or set "
        "OLLAMA_HOST (or use --backend embedded)"
    )
    assert errors == [md_escape(line)], errors
    assert Store(db).run_row("down-probes") is None
    assert not [m.value for m in at.markdown if m.value.startswith("**down-probes**")]
