"""CE@N->k reranking (seed 000 App. A.13): retrieval protocol, run config, CLI and Runs page.

The reranker is a stub scorer registered by name
(:func:`core.retrieval.retrievers.register_reranker`,
the documented way to stand in for a cross-encoder without weights); one test loads a tiny
local cross-encoder directory through the real offline path.

The toy instance has six one-chunk passages (chunk size 10, overlap 0: marker 2 tokens +
``Title:`` + a one-word title + 6 words). The question's only token ``zebra`` occurs twice in
c0002, once in c0004 and nowhere else, so BM25 ranks c0002, c0004, then the zero-score chunks
in chunk order: c0001, c0003, c0005, c0006. The stub scores each chunk by its title
(:data:`STUB_SCORES`), so every expected top k below follows by hand from the two orders.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import ROOT, open_page

from core.backends import make_backend
from core.execution.jobs import RunRequest, run_command, run_request_from_row
from core.execution.rerun import shown_context
from core.execution.runs import run_conditions
from core.oncu.conditions import plan_conditions, retrieval_config
from core.retrieval import retrievers as R
from core.store import Store
from core.types import Dataset, Instance, Passage

#: Stub cross-encoder scores by chunk title. t1 and t4 tie (first-stage ranks 3 and 2); t5 and
#: t6 score highest but are first-stage ranks 5 and 6, outside a pool of 4.
STUB_SCORES = {"t1": 0.7, "t2": 0.1, "t3": 0.9, "t4": 0.7, "t5": 5.0, "t6": 9.0}
STUB = "stub-ce-test"
CALLS: list[tuple[str, list[str]]] = []


def _stub(query, texts):
    CALLS.append((query, list(texts)))
    return [STUB_SCORES[re.search(r"\bt\d\b", t).group()] for t in texts]


def _toy() -> Instance:
    texts = [
        "alpha river stone moss hill lake",
        "zebra zebra stone moss hill lake",
        "beta river stone moss hill lake",
        "zebra river stone moss hill lake",
        "oak river stone moss hill lake",
        "pine river stone moss hill lake",
    ]
    passages = tuple(
        Passage(
            f"p{i + 1:04d}",
            i,
            f"t{i + 1}",
            t,
            f"d{i + 1}",
            "gold" if i == 2 else "distractor",
            i == 2,
        )
        for i, t in enumerate(texts)
    )
    return Instance("toy", "Which zebra?", "beta", passages)


WINDOW = {"chunk_size": 10, "overlap": 0}


@pytest.fixture
def stub():
    CALLS.clear()
    R.register_reranker(STUB, _stub)
    yield STUB
    R.RERANKERS.pop(STUB, None)


def _ids(ranked):
    return [rc.chunk.chunk_id for rc in ranked]


# ------------------------------------------------------------------------------ protocol


def test_first_stage_order_of_the_toy_is_the_hand_checked_one():
    ranked = R.rank_chunks(_toy(), "lexical", **WINDOW)
    assert _ids(ranked) == ["c0002", "c0004", "c0001", "c0003", "c0005", "c0006"]
    assert ranked[0].score > ranked[1].score > 0 and {rc.score for rc in ranked[2:]} == {0.0}


def test_ce_4_to_3_keeps_the_stub_top_3_with_ties_in_first_stage_order(stub):
    got = R.retrieve(_toy(), "lexical", k=3, rerank=stub, rerank_pool=4, **WINDOW)
    # pool (first stage) c0002 .1, c0004 .7, c0001 .7, c0003 .9 -> .9, then the .7 tie in
    # first-stage order (c0004 rank 2 before c0001 rank 3, though c0001 comes first in text)
    assert _ids(got) == ["c0003", "c0004", "c0001"]
    assert [rc.score for rc in got] == [0.9, 0.7, 0.7]
    assert [rc.rank for rc in got] == [1, 2, 3]
    # the scorer saw the question and the 4 candidates' marker-free text, first stage first
    assert len(CALLS) == 1 and CALLS[0][0] == "Which zebra?"
    assert CALLS[0][1] == [
        "  t2\nzebra zebra stone moss hill lake",
        "  t4\nzebra river stone moss hill lake",
        "  t1\nalpha river stone moss hill lake",
        "  t3\nbeta river stone moss hill lake",
    ]


def test_another_n_reranks_another_pool(stub):
    six = R.retrieve(_toy(), "lexical", k=3, rerank=stub, rerank_pool=6, **WINDOW)
    assert _ids(six) == ["c0006", "c0005", "c0003"] and [rc.score for rc in six] == [9, 5, 0.9]
    three = R.retrieve(_toy(), "lexical", k=3, rerank=stub, rerank_pool=3, **WINDOW)
    assert _ids(three) == ["c0004", "c0001", "c0002"]
    # a pool larger than the chunks reranks them all
    assert _ids(R.retrieve(_toy(), "lexical", k=1, rerank=stub, rerank_pool=50, **WINDOW)) == [
        "c0006"
    ]


def test_a_scorer_passed_as_a_callable_is_the_same_protocol():
    got = R.retrieve(_toy(), "lexical", k=3, rerank=_stub, rerank_pool=4, **WINDOW)
    assert _ids(got) == ["c0003", "c0004", "c0001"]


def test_bad_rerank_settings_and_scorers_fail_loudly(stub):
    inst = _toy()
    with pytest.raises(ValueError, match=r"rerank N=2 is smaller than top-k=3"):
        R.retrieve(inst, "lexical", k=3, rerank=stub, rerank_pool=2, **WINDOW)
    with pytest.raises(ValueError, match=r"rerank N=2 is smaller than top-k=3"):
        retrieval_config(top_k=3, rerank=2, rerank_model=stub)
    with pytest.raises(ValueError, match=r"'rerank' must be >= 1"):
        retrieval_config(top_k=1, rerank=0, rerank_model=stub)
    with pytest.raises(ValueError, match=r"returned 1 scores for 4 chunks"):
        R.retrieve(inst, "lexical", k=3, rerank=lambda q, t: [1.0], rerank_pool=4, **WINDOW)
    with pytest.raises(ValueError, match=r"not a finite number"):
        R.retrieve(
            inst,
            "lexical",
            k=1,
            rerank=lambda q, t: [float("nan")] * len(t),
            rerank_pool=4,
            **WINDOW,
        )
    with pytest.raises(ValueError, match=r"without '\|'"):
        R.register_reranker("a|b", _stub)


def test_unavailable_models_say_how_to_get_one(tmp_path, monkeypatch):
    missing = str(tmp_path / "no-model")
    reason = R.rerank_unavailable(missing)
    assert reason == (
        f"cross-encoder '{missing}' is not available locally and this tool never downloads "
        "weights (no PyPI package carries them): on a machine with internet run `hf download "
        "cross-encoder/ms-marco-MiniLM-L6-v2 --local-dir DIR`, copy DIR here and pass "
        "--rerank-model DIR (dashboard: set EVIDENCE_RERANK_MODEL=DIR)"
    )
    with pytest.raises(ValueError) as exc:
        R.reranker(missing)
    assert str(exc.value) == reason
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in R.rerank_unavailable(str(tmp_path / "empty"))
    monkeypatch.setenv(R.RERANK_MODEL_ENV, missing)
    assert R.default_rerank_model() == missing and R.rerank_available() is False
    monkeypatch.delenv(R.RERANK_MODEL_ENV)
    assert R.default_rerank_model() == "cross-encoder/ms-marco-MiniLM-L6-v2"


# ------------------------------------------------------------------------------ planning


def test_retrieval_config_records_rerank_n_and_model(stub):
    assert retrieval_config("lexical", 3, 10, 0, rerank=4, rerank_model=stub) == {
        "retriever": "lexical",
        "top_k": 3,
        "chunk_size": 10,
        "overlap": 0,
        "rerank": 4,
        "rerank_model": stub,
        "condition_id": f"retrieved|lexical@3|chunk10/0|rerank={stub}@4",
    }
    # without a rerank the record is what it always was (stored runs resume unchanged)
    assert retrieval_config("lexical", 3, 10, 0) == {
        "retriever": "lexical",
        "top_k": 3,
        "chunk_size": 10,
        "overlap": 0,
        "condition_id": "retrieved|lexical@3|chunk10/0",
    }
    parsed = R.parse_retrieval_condition(f"retrieved|lexical@3|chunk10/0|rerank={stub}@4")
    assert parsed["rerank"] == stub and parsed["rerank_pool"] == 4


def test_planned_retrieved_call_shows_the_reranked_chunks(stub):
    (call,) = plan_conditions(
        [_toy()], ["retrieved"], top_k=3, rerank=4, rerank_model=stub, **WINDOW
    )
    assert call.meta == {
        "retrieval": f"retrieved|lexical@3|chunk10/0|rerank={stub}@4",
        "chunk_ids": ["c0003", "c0004", "c0001"],
        "chunk_scores": [0.9, 0.7, 0.7],
    }
    assert call.input_passage_ids == ("p0003", "p0004", "p0001")
    prompt = call.messages[-1]["content"]
    assert prompt.index("p0003") < prompt.index("p0004") < prompt.index("p0001")


def test_a_run_stores_rerank_n_and_another_n_is_another_configuration(tmp_path, stub):
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(Dataset("toy", "test", "test", {}, (_toy(),)))
    backend = make_backend("embedded")
    s = run_conditions(
        store,
        "toy",
        backend,
        ["retrieved"],
        name="ce",
        top_k=3,
        rerank=4,
        rerank_model=stub,
        **WINDOW,
    )
    assert (s.status, s.planned, s.errors) == ("done", 1, 0)
    row = store.run_row("ce")
    assert row["retrieval"] == {
        "retriever": "lexical",
        "top_k": 3,
        "chunk_size": 10,
        "overlap": 0,
        "rerank": 4,
        "rerank_model": stub,
        "condition_id": f"retrieved|lexical@3|chunk10/0|rerank={stub}@4",
    }
    pred = store.prediction_rows("ce").iloc[0]
    assert list(pred["input_passage_ids"]) == ["p0003", "p0004", "p0001"]
    # the same configuration resumes (nothing left to do); another N is refused by name
    again = run_conditions(
        store,
        "toy",
        backend,
        ["retrieved"],
        name="ce",
        top_k=3,
        rerank=4,
        rerank_model=stub,
        **WINDOW,
    )
    assert (again.planned, again.executed, again.skipped_existing) == (1, 0, 1)
    with pytest.raises(ValueError, match="run 'ce' exists with another retrieval setting"):
        run_conditions(
            store,
            "toy",
            backend,
            ["retrieved"],
            name="ce",
            top_k=3,
            rerank=6,
            rerank_model=stub,
            **WINDOW,
        )
    with pytest.raises(ValueError, match="rerank applies to the retrieved condition"):
        run_conditions(
            store, "toy", backend, ["no_evidence"], name="ne", rerank=4, rerank_model=stub
        )
    assert store.run_row("ne") is None


def test_case_view_reruns_start_from_the_reranked_chunks(stub):
    run = {"retrieval": retrieval_config("lexical", 3, 10, 0, rerank=4, rerank_model=stub)}
    assert _ids(shown_context(None, run, _toy(), "retrieved")) == ["c0003", "c0004", "c0001"]


def test_a_missing_model_fails_the_run_before_its_row_and_any_call(tmp_path):
    store = Store(tmp_path / "s.duckdb")
    store.write_dataset(Dataset("toy", "test", "test", {}, (_toy(),)))
    with pytest.raises(ValueError, match="is not available locally"):
        run_conditions(
            store,
            "toy",
            make_backend("embedded"),
            ["retrieved"],
            name="ce",
            rerank=4,
            rerank_model=str(tmp_path / "none"),
        )
    assert store.run_row("ce") is None and store.prediction_rows("ce").empty


def test_runs_page_requests_carry_rerank_and_resume_it(stub):
    req = RunRequest("s.duckdb", "toy", "ce", ("retrieved",), rerank=8)
    argv = run_command(req)
    assert argv[argv.index("--rerank") + 1] == "8" and "--rerank-model" not in argv
    row = {
        "run_id": "ce",
        "dataset_id": "toy",
        "backend": "embedded",
        "conditions": ["retrieved"],
        "retrieval": retrieval_config("lexical", 3, rerank=8, rerank_model=stub),
    }
    back = run_request_from_row("s.duckdb", row)
    assert (back.rerank, back.rerank_model) == (8, stub)
    argv = run_command(back)
    assert argv[argv.index("--rerank-model") + 1] == stub
    with pytest.raises(ValueError, match="rerank N=2 is smaller than top-k=3"):
        run_command(RunRequest("s.duckdb", "toy", "ce", ("retrieved",), rerank=2))


# ------------------------------------------------------------------------------ the CLI


def test_cli_rerank_without_a_cross_encoder_exits_1_with_one_line(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).write_dataset(Dataset("toy", "test", "test", {}, (_toy(),)))
    env = {k: v for k, v in os.environ.items() if k != R.RERANK_MODEL_ENV}
    env["HF_HOME"] = str(tmp_path / "hf")  # an empty Hugging Face cache
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "run",
            "--db",
            str(db),
            "--dataset",
            "toy",
            "--backend",
            "embedded",
            "--conditions",
            "retrieved",
            "--rerank",
            "8",
            "--name",
            "ce",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert res.returncode == 1, res.stderr
    assert res.stderr.splitlines() == [
        "error: cross-encoder 'cross-encoder/ms-marco-MiniLM-L6-v2' is not available locally "
        "and this tool never downloads weights (no PyPI package carries them): on a machine "
        "with internet run `hf download cross-encoder/ms-marco-MiniLM-L6-v2 --local-dir DIR`, "
        "copy DIR here and pass --rerank-model DIR (dashboard: set EVIDENCE_RERANK_MODEL=DIR)"
    ]
    assert res.stdout == "" and Store(db).run_row("ce") is None


# ------------------------------------------------------------------------------ the page


def _page_store(tmp_path):
    db = tmp_path / "s.duckdb"
    Store(db).write_dataset(Dataset("toy", "test", "test", {}, (_toy(),)))
    return db


def test_runs_page_disables_rerank_with_the_install_hint(tmp_path, monkeypatch):
    missing = str(tmp_path / "no-model")
    monkeypatch.setenv(R.RERANK_MODEL_ENV, missing)
    at = open_page(monkeypatch, _page_store(tmp_path), "screens/runs.py", "toy")
    box = at.number_input(key="runs.rerank")
    assert box.label == "Rerank N" and box.disabled and box.value is None
    captions = [c.value for c in at.caption if "is off" in c.value]
    # the caption is Markdown with the hint escaped as text (core.views.case.md_escape)
    shown = captions[0].replace("\\", "").replace("\u2060", "") if captions else ""
    assert len(captions) == 1 and "hf download" in shown and missing in shown, captions


def test_runs_page_offers_rerank_when_a_reranker_is_available(tmp_path, monkeypatch, stub):
    monkeypatch.setenv(R.RERANK_MODEL_ENV, stub)
    at = open_page(monkeypatch, _page_store(tmp_path), "screens/runs.py", "toy")
    box = at.number_input(key="runs.rerank")
    assert box.label == "Rerank N" and not box.disabled
    assert not [c for c in at.caption if "is off" in c.value]


# ------------------------------------------------------------------- a real cross-encoder


def _tiny_cross_encoder(path):
    """A 1-layer BERT cross-encoder with seeded random weights, as a local model directory.

    Written from torch alone (config, vocabulary and state dict by hand), the files a Hugging
    Face cross-encoder directory holds.
    """
    import torch

    path.mkdir()
    words = [
        "[PAD]",
        "[UNK]",
        "[CLS]",
        "[SEP]",
        "[MASK]",
        *("which zebra alpha beta river stone moss hill lake oak pine t1 t2 t3 t4 t5 t6 ?".split()),
    ]
    (path / "vocab.txt").write_text("\n".join(words) + "\n")
    (path / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True})
    )
    h, inner, v = 16, 32, len(words)
    (path / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["BertForSequenceClassification"],
                "model_type": "bert",
                "vocab_size": v,
                "hidden_size": h,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": inner,
                "max_position_embeddings": 64,
                "type_vocab_size": 2,
                "id2label": {"0": "LABEL_0"},
                "label2id": {"LABEL_0": 0},
            }
        )
    )
    g = torch.Generator().manual_seed(0)

    def rand(*shape):
        return torch.randn(shape, generator=g) * 0.5

    sd = {
        "bert.embeddings.word_embeddings.weight": rand(v, h),
        "bert.embeddings.position_embeddings.weight": rand(64, h),
        "bert.embeddings.token_type_embeddings.weight": rand(2, h),
    }
    layer = "bert.encoder.layer.0."
    linear = {
        layer + "attention.self.query": (h, h),
        layer + "attention.self.key": (h, h),
        layer + "attention.self.value": (h, h),
        layer + "attention.output.dense": (h, h),
        layer + "intermediate.dense": (inner, h),
        layer + "output.dense": (h, inner),
        "bert.pooler.dense": (h, h),
        "classifier": (1, h),
    }
    for name, (n_out, n_in) in linear.items():
        sd[f"{name}.weight"], sd[f"{name}.bias"] = rand(n_out, n_in), rand(n_out)
    for norm in (
        "bert.embeddings.LayerNorm",
        layer + "attention.output.LayerNorm",
        layer + "output.LayerNorm",
    ):
        sd[f"{norm}.weight"], sd[f"{norm}.bias"] = torch.ones(h), torch.zeros(h)
    torch.save(sd, path / "pytorch_model.bin")


def test_a_local_cross_encoder_directory_loads_offline_and_reranks(tmp_path):
    """Reference check of the real path: the order is the model's own raw scores, sorted."""
    from sentence_transformers import CrossEncoder

    model = tmp_path / "tiny-ce"
    _tiny_cross_encoder(model)
    assert R.rerank_unavailable(str(model)) is None
    inst = _toy()
    got = R.retrieve(inst, "lexical", k=3, rerank=str(model), rerank_pool=6, **WINDOW)
    first = R.rank_chunks(inst, "lexical", **WINDOW)
    ce = CrossEncoder(str(model), device="cpu", local_files_only=True)
    raw = ce.predict(
        [(inst.question, R.search_text(rc.chunk.text)) for rc in first], activation_fn=lambda x: x
    )
    scores = [round(float(s), 6) for s in raw]
    order = sorted(range(6), key=lambda j: (-scores[j], j))[:3]
    assert _ids(got) == [first[j].chunk.chunk_id for j in order]
    assert [rc.score for rc in got] == [scores[j] for j in order]
    assert len(set(scores)) == 6  # the weights separate the chunks: the order is the model's
    assert _ids(got) != _ids(first)[:3]  # and it is not the first stage's
