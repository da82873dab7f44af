"""CUE-R ``replace`` on the real HotpotQA sample (issue 34 item 3; seed 004 §4.3, §5.6).

The paper replaces the target with "a topically related but non-supporting passage" drawn
from the example's candidate paragraphs (HotpotQA distractor setting: ten paragraphs, the
supporting-facts titles are the support), so ``replace`` applies to every example (n = 200
for every operator). §5.6: easy = a random non-support chunk, medium = the non-support one
with the highest BM25 score against the question, hard = the one with the highest BM25 score
against the target text. The reference below is written from that text: the band is read
from the raw file (paragraphs whose title is not a supporting-facts title, the target left
out), and BM25 Okapi (k1 = 1.5, b = 0.75, ``rank_bm25``) over the example's paragraphs
(title and text, lowercase runs of letters and digits) picks the expected passage.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import pytest
from conftest import shared_fixture
from rank_bm25 import BM25Okapi

from core.cuer.interventions import plan_interventions
from core.datasets.importers import read_dataset

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
LEVELS = ("easy", "medium", "hard")


@lru_cache(maxsize=1)
def _data() -> tuple[list, list]:
    path = shared_fixture(HOTPOT)
    raw = json.loads(path.read_text("utf-8"))
    instances = read_dataset(path, fmt="hotpotqa", name="hotpot").dataset.instances
    return raw, list(instances)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _plans() -> list[tuple[dict, object, dict]]:
    """(raw record, instance, {variant head: call}) with no citations (target by rank)."""
    raw, instances = _data()
    by_id = {inst.instance_id: inst for inst in instances}
    out = []
    for rec in raw:
        inst = by_id[rec["_id"]]
        calls = plan_interventions(inst, [], two_support=False, zero_retrieval=False)
        out.append((rec, inst, {c.variant.split("|")[0]: c for c in calls}))
    return out


def test_replace_covers_every_instance_with_a_non_support_passage():
    plans = _plans()
    assert len(plans) == 53
    with_band = 0
    for rec, inst, calls in plans:
        support = {t for t, _ in rec["supporting_facts"]}
        target = calls["remove"].meta["target"]
        titles = {p.passage_id: p.title for p in inst.passages}
        band = [pid for pid, t in titles.items() if t not in support and pid != target]
        with_band += bool(band)
        # replace applies exactly where the band is not empty, at every hardness level
        assert all(f"replace:{lv}" in calls for lv in LEVELS) == bool(band), inst.instance_id
    # 52 examples have ten paragraphs (8 non-support); one has only its two supporting
    # paragraphs, so replace covers 52 of 53 and that one is counted where the Replace rows
    # are shown (tests/test_cuer.py). The chunk pool covered 26 (windows of 220 tokens that
    # touch no gold paragraph).
    assert with_band == 52
    assert sum("replace:easy" in calls for _, _, calls in plans) == 52
    (short,) = [(rec, calls) for rec, _, calls in plans if len(rec["context"]) == 2]
    assert "remove" in short[1] and not any(k.startswith("replace") for k in short[1])


@pytest.mark.parametrize("level", ["medium", "hard"])
def test_medium_and_hard_take_the_highest_bm25_passage_of_the_band(level):
    differs = 0
    for rec, inst, calls in _plans():
        support = {t for t, _ in rec["supporting_facts"]}
        target = calls["remove"].meta["target"]
        passages = list(inst.passages)
        # the paragraphs in file order are the passages in id order
        assert [p.title for p in passages] == [t for t, _ in rec["context"]]
        bm25 = BM25Okapi([_tokens(f"{p.title}\n{p.text}") for p in passages], k1=1.5, b=0.75)
        tgt = next(p for p in passages if p.passage_id == target)
        query = rec["question"] if level == "medium" else f"{tgt.title}\n{tgt.text}"
        scores = bm25.get_scores(_tokens(query))
        band = [
            i for i, p in enumerate(passages) if p.title not in support and p.passage_id != target
        ]
        if not band:
            assert f"replace:{level}" not in calls
            continue
        best = max(band, key=lambda i: (scores[i], -i))
        meta = calls[f"replace:{level}"].meta
        assert meta["replacement"] == passages[best].passage_id, inst.instance_id
        # the choice is in the band and has the band's top score (ties: the earlier one)
        assert meta["replacement_passages"] == [passages[best].passage_id]
        differs += not meta["replacement_novel"]
    # Informational: how often the best passage is one the base context already shows.
    print(f"\n{level}: the best non-support passage is already shown in {differs} of 52")


def test_easy_is_a_non_support_passage_and_the_prompt_holds_it_whole():
    for rec, inst, calls in _plans():
        support = {t for t, _ in rec["supporting_facts"]}
        if "replace:easy" not in calls:
            continue  # no non-support paragraph (counted above)
        call = calls["replace:easy"]
        rid = call.meta["replacement"]
        repl = next(p for p in inst.passages if p.passage_id == rid)
        assert repl.title not in support and rid != call.meta["target"]
        text = call.messages[-1]["content"]
        assert repl.text.strip() in text  # the whole paragraph, not a window of it
        assert call.meta["pool"] == "passages" and call.meta["candidates"] == 8
