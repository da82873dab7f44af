"""The Case view's trace divergence D is the Interventions page's D (issue 14).

Both come from :func:`core.cuer.metrics.trace_divergence` with the instance's answer and reasoning
type. A reader double answers ``"Total 0NNN"`` with NNN = the number of passages it was shown,
so an original and its ``remove`` perturbation differ only in the synthetic-looking suffix:
for a number answer (or arithmetic reasoning) that suffix is kept by the relaxed normalizer
and the answer counts as changed (+0.3); without the answer type it would be dropped.
"""

from __future__ import annotations

import pytest

import core.execution.rerun
from core.backends import EmbeddedReader
from core.cuer.metrics import trace_divergence
from core.datasets.controlled import build_controlled
from core.execution.rerun import RerunRequest, rerun
from core.execution.runs import run_interventions
from core.selection import Selection
from core.store import Store
from core.types import Dataset
from core.views.catalog import get_table


class _SuffixReader(EmbeddedReader):
    """The embedded reader with its answer replaced by ``Total 0NNN`` (NNN passages shown)."""

    def read(self, messages):
        obj = super().read(messages)
        shown = sum(str(m.get("content", "")).count("[passage_id:") for m in messages)
        return dict(obj, answer=f"Total 0{shown:03d}", cited_ids=[], confidence=0.5)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    # number / arithmetic instances and entity ones (0, 50, 100, 150: the reasoning types)
    picks = tuple(full.instances[i] for i in (0, 50, 100, 150))
    store = Store(tmp_path_factory.mktemp("agree") / "s.duckdb")
    store.write_dataset(Dataset("small", full.source, full.builder, full.builder_params, picks))
    summary = run_interventions(
        store,
        "small",
        _SuffixReader(workers=False),
        name="cr",
        operators=("remove",),
        two_support=False,
        zero_retrieval=False,
    )
    assert summary.status == "done" and summary.errors == 0
    return store


def test_case_view_divergence_equals_the_interventions_page(store, monkeypatch):
    page = get_table("cuer_role_examples").build(store, Selection(dataset="small"))
    page = page[page["operator"] == "remove"].set_index("instance_id")
    assert len(page) == 4
    # the Case view reruns with the run's own backend: the same reader double
    monkeypatch.setattr(
        core.execution.rerun, "make_backend", lambda *a, **k: _SuffixReader(workers=False)
    )
    kept_suffix = 0
    for iid, row in page.iterrows():
        inst = store.load_instances("small", [iid])[0]
        req = RerunRequest(
            "small", iid, "cr", "retrieved", "remove", row["target"], {}, "embedded", None
        )
        res = rerun(store, req)
        case_d = res["divergence"]
        assert case_d == pytest.approx(row["trace_divergence"])
        orig, pert = res["original"], res["perturbed"]
        untyped = trace_divergence(
            orig["cited_ids"] or (),
            pert["cited_ids"] or (),
            orig["answer"],
            pert["answer"],
            orig["confidence"],
            pert["confidence"],
        )
        if inst.answer_type == "number" or inst.reasoning_type == "arithmetic":
            kept_suffix += 1
            assert case_d == pytest.approx(untyped + 0.3)  # the answer type matters here
        else:
            assert case_d == pytest.approx(untyped)
    assert kept_suffix >= 1


def test_transcripts_rebuild_the_prompts_exactly_as_sent(store):
    """Every stored call of the run (base retrieved and each CUE-R variant) gets its messages
    back, and they hash to the stored prompt hash; the shown items follow the prompt order."""
    from core.execution.prompts import prompt_hash
    from core.views.case import case_data

    for iid in store.list_instance_ids("small"):
        case = case_data(store, "small", iid, ["cr"])
        rows = case["predictions"].to_dict("records")
        assert rows and len(rows) == len(case["transcripts"])
        for row, t in zip(rows, case["transcripts"], strict=True):
            assert t["messages"] is not None, (iid, row["variant"], t["prompt_note"])
            assert prompt_hash(t["messages"]) == row["prompt_hash"]
            if row["condition"] == "retrieved":  # ranked chunks, scores as stored
                meta = t["meta"]
                assert [i["chunk_id"] for i in t["items"]] == meta["chunk_ids"]
                n = len(meta["chunk_ids"])
                assert [i["rank"] for i in t["items"]] == list(range(1, n + 1))
                assert [i["score"] for i in t["items"]] == meta["chunk_scores"]
            else:
                assert [i["passage_ids"][0] for i in t["items"]] == list(row["input_passage_ids"])


def test_a_changed_prompt_is_not_shown_as_sent(store):
    """A stored hash the templates cannot give back: no messages, a note saying why."""
    from core.types import Instance
    from core.views.transcript import transcript

    inst: Instance = store.load_instances("small", store.list_instance_ids("small")[:1])[0]
    row = {
        "condition": "full_context",
        "variant": "",
        "prompt_hash": "0" * 64,
        "input_passage_ids": [p.passage_id for p in inst.passages],
        "meta": "{}",
    }
    t = transcript(inst, row, None)
    assert t["messages"] is None and "cannot be rebuilt" in t["prompt_note"]
    cut = transcript(
        inst,
        dict(row, meta='{"raw_response_truncated": {"bytes": 900000, "kept_bytes": 262144}}'),
        None,
    )
    assert cut["truncated_note"] == "reply cut to 262144 of 900000 bytes when stored"
    # "contains the answer": whole words, any case
    word = inst.passages[0].text.split()[1].strip(".,")
    hit = transcript(inst, dict(row, answer=word.upper()), None)["items"][0]
    assert hit["contains_answer"] is True
    part = transcript(inst, dict(row, answer=word[:-1]), None)["items"][0]
    assert part["contains_answer"] is (f" {word[:-1]} " in f" {inst.passages[0].text} ")


def test_md_escape_leaves_nothing_for_markdown_to_render():
    """Punctuation that could start Markdown is escaped where it could; a word joiner
    (U+2060) follows an escaped ``:`` or ``@`` and splits ``www.``; lines join; plain
    messages keep their source."""
    from core.views.case import md_escape

    j = "\u2060"
    assert md_escape("a]b") == "a\\]b"
    assert md_escape("![t](http://h:1/x.png)") == f"\\!\\[t\\]\\(http\\:{j}//h\\:{j}1/x.png\\)"
    assert md_escape("$x$ <img> # h\nnext") == "\\$x\\$ \\<img\\> \\# h next"
    assert md_escape("Www.a.b me@x.org :smile:") == f"Www{j}\\.a.b me\\@{j}x.org \\:{j}smile:"
    assert md_escape("1. one") == "1\\. one" and md_escape("- item") == "\\- item"
    assert md_escape("_em_ snake_case") == "\\_em\\_ snake_case"
    plain = "/data/up/bad_17.csv: field 'method': required column missing; a - b?"
    assert md_escape(plain) == plain
