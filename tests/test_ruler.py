"""RULER-lite generator: counts, determinism and answers correct by construction."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections import Counter

import pytest

from core.datasets.ruler import TASKS, build_ruler_lite
from core.types import ROLES, Dataset, Instance


@pytest.fixture(scope="module")
def ruler() -> Dataset:
    return build_ruler_lite()


@pytest.fixture(scope="module")
def small() -> Dataset:
    return build_ruler_lite(seed=5, lengths=(4000, 8000), per_cell=6)


def digest(ds: Dataset) -> str:
    payload = [dataclasses.asdict(inst) for inst in ds.instances]
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def by_task(ds: Dataset, task: str) -> list[Instance]:
    return [i for i in ds.instances if i.metadata["task"] == task]


def test_counts_and_cells(ruler: Dataset) -> None:
    assert len(ruler.instances) == 240
    assert ruler.name == "ruler-lite" and ruler.source == "ruler-lite"
    cells = Counter((i.metadata["task"], i.context_length) for i in ruler.instances)
    assert cells == {(t, n): 20 for t in TASKS for n in (4000, 8000, 16000, 32000)}
    assert [i.instance_id for i in ruler.instances] == [f"ruler_{n:06d}" for n in range(1, 241)]
    for inst in ruler.instances:
        assert inst.reasoning_type == TASKS[inst.metadata["task"]]
        assert inst.answer_type == "number" and inst.source == "ruler-lite"
        total = sum(p.n_tokens for p in inst.passages)
        assert abs(total - inst.context_length) <= 0.05 * inst.context_length
        assert [p.passage_id for p in inst.passages] == [
            f"p{n:04d}" for n in range(1, len(inst.passages) + 1)
        ]
        assert all(p.role in ROLES and p.is_gold == (p.role == "gold") for p in inst.passages)
        assert inst.fan_in == len({p.doc_id for p in inst.passages if p.is_gold})
        n_gold = len(inst.gold_ids)
        assert inst.evidence_density == (
            "low" if n_gold == 1 else "medium" if n_gold <= 3 else "high"
        )


def test_fan_in_per_task(ruler: Dataset) -> None:
    assert {i.fan_in for i in by_task(ruler, "kv_retrieval")} == {1}
    assert {i.fan_in for i in by_task(ruler, "multi_hop_trace")} == {2, 3, 4}
    assert {i.fan_in for i in by_task(ruler, "aggregation_sum")} == {3, 4, 5, 6}


def test_kv_gold_block_position_is_balanced(ruler: Dataset) -> None:
    kv = by_task(ruler, "kv_retrieval")
    assert Counter(i.evidence_position for i in kv) == {"front": 28, "middle": 28, "end": 24}
    for inst in kv:
        total = sum(p.n_tokens for p in inst.passages)
        before = 0
        for p in inst.passages:
            if p.is_gold:
                third = min(2, int(3 * (before + p.n_tokens / 2) / total))
                assert ("front", "middle", "end")[third] == inst.evidence_position
            before += p.n_tokens


def test_kv_answer_is_the_value_of_the_key(ruler: Dataset) -> None:
    for inst in by_task(ruler, "kv_retrieval"):
        key = re.search(r"key (K-\d{5}-[A-Z]{2})", inst.question)[1]
        found = [
            (p, m[1])
            for p in inst.passages
            for m in re.finditer(rf"Key {re.escape(key)} holds (\d+)\.", p.text)
        ]
        assert len(found) == 1
        passage, value = found[0]
        assert passage.is_gold and value == inst.gold_answer
        # look-alike keys (same digits, other letters) live in distractor blocks
        look = [
            p
            for p in inst.passages
            if not p.is_gold and re.search(rf"Key {re.escape(key[:-2])}[A-Z]{{2}} ", p.text)
        ]
        assert len(look) == 3 and all(p.role == "distractor" for p in look)
        stating = [p for p in inst.passages if re.search(rf"\b{inst.gold_answer}\b", p.text)]
        assert stating == [passage]  # the value is stated once, by the gold block


def _resolve(texts: list[str], var: str) -> str:
    assign = {}
    for t in texts:
        for name, rhs in re.findall(r"VAR ([A-Z]{5}) = (VAR [A-Z]{5}|\d+)\.", t):
            assign[name] = rhs
    value = assign[var]
    while value.startswith("VAR "):
        value = assign[value[4:]]
    return value


def test_trace_answer_follows_the_chain(small: Dataset, ruler: Dataset) -> None:
    for inst in (*by_task(small, "multi_hop_trace"), *by_task(ruler, "multi_hop_trace")):
        var = re.search(r"VAR ([A-Z]{5}) hold", inst.question)[1]
        gold_texts = [p.text for p in inst.passages if p.is_gold]
        assert _resolve(gold_texts, var) == inst.gold_answer
        assert _resolve([p.text for p in inst.passages], var) == inst.gold_answer
        # every gold passage holds exactly one link of the chain, in chain order
        links = [re.findall(r"VAR ([A-Z]{5}) = ", t) for t in gold_texts]
        assert all(len(x) == 1 for x in links)
        assert len(gold_texts) == len(inst.metadata["numbers"]["chain"])
        assert [f"VAR {x[0]}" for x in links] == inst.metadata["numbers"]["chain"]
        decoys = [p for p in inst.passages if p.role == "distractor"]
        assert len(decoys) == 2 * len(gold_texts)


def test_sum_answer_recomputed_from_gold(small: Dataset, ruler: Dataset) -> None:
    for inst in (*by_task(small, "aggregation_sum"), *by_task(ruler, "aggregation_sum")):
        cat = re.search(r"category ([A-Z]+)\?", inst.question)[1]
        pattern = rf"category {cat}, amount (\d+)\."
        amounts = {
            p.passage_id: [int(a) for a in re.findall(pattern, p.text)] for p in inst.passages
        }
        assert all(len(amounts[pid]) == 1 for pid in inst.gold_ids)
        assert all(not v for pid, v in amounts.items() if pid not in inst.gold_ids)
        assert inst.gold_answer == str(sum(a for v in amounts.values() for a in v))


def test_determinism(small: Dataset) -> None:
    again = build_ruler_lite(seed=5, lengths=(4000, 8000), per_cell=6)
    assert digest(again) == digest(small)
    other = build_ruler_lite(seed=6, lengths=(4000, 8000), per_cell=6)
    assert digest(other) != digest(small)
    for a, b in zip(small.instances, other.instances, strict=True):
        if a.metadata["task"] != "aggregation_sum":  # 10 categories: a question may repeat
            assert a.question != b.question
        assert a.passages != b.passages
    assert len(small.instances) == 3 * 2 * 6
    assert small.builder_params == {
        "seed": 5,
        "lengths": [4000, 8000],
        "per_cell": 6,
        "tasks": list(TASKS),
        "token_unit": "whitespace",
    }


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="unknown RULER-lite task 'needle'.*kv_retrieval"):
        build_ruler_lite(tasks=("needle",))
    with pytest.raises(ValueError, match="context length"):
        build_ruler_lite(lengths=(500,))
    with pytest.raises(ValueError, match="per_cell"):
        build_ruler_lite(per_cell=-1)
    assert (
        len(build_ruler_lite(tasks=("kv_retrieval",), lengths=(4000,), per_cell=2).instances) == 2
    )
