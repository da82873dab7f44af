"""Controlled benchmark generator (SPEC §3.2): grid coverage, placement, distractors, answers."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from itertools import product
from pathlib import Path

import pytest

from core.datasets.controlled import PRESETS, build_controlled, preset_cells
from core.datasets.records import evidence_position as io_evidence_position
from core.types import ROLES, Dataset, Instance

ROOT = Path(__file__).resolve().parents[1]
LENGTHS = (4000, 8000, 16000, 32000)
POSITIONS = ("front", "middle", "end", "scattered")
DECILES = tuple(f"pos_{d:02d}" for d in range(10))
DISTRACTORS = ("none", "low", "high", "conflicting")
REASONING = ("single_hop", "multi_hop", "comparison", "arithmetic")
ENTITY = re.compile(r"^(?P<stem>.+) (?P<suffix>\d{5})$")


@pytest.fixture(scope="module")
def c200() -> Dataset:
    return build_controlled()


@pytest.fixture(scope="module")
def fanin() -> Dataset:
    return build_controlled("fanin-grid")


@pytest.fixture(scope="module")
def scaling_subset() -> Dataset:
    # every decile at 4K and 32K, two reasoning types, every distractor setting, one replicate
    return build_controlled(
        "scaling-3200",
        subset={
            "context_length": [4000, 32000],
            "reasoning_type": ["multi_hop", "arithmetic"],
            "replicate": [0],
            "distractor_similarity": ["conflicting", "low"],
        },
    )


def digest(ds: Dataset) -> str:
    """sha256 of a canonical JSON of every instance with all its passages."""
    payload = [dataclasses.asdict(inst) for inst in ds.instances]
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def offsets(inst: Instance) -> list[tuple[float, float]]:
    """(start, midpoint) relative offsets of the gold passages, computed independently."""
    total = sum(len(p.title.split()) + len(p.text.split()) for p in inst.passages)
    out, before = [], 0
    for p in inst.passages:
        n = len(p.title.split()) + len(p.text.split())
        if p.is_gold:
            out.append((before / total, (before + n / 2) / total))
        before += n
    return out


def region(position: str) -> tuple[float, float]:
    if position in DECILES:
        d = int(position[-2:])
        return d / 10, (d + 1) / 10
    t = POSITIONS.index(position)
    return t / 3, (t + 1) / 3


def inside(x: float, lo: float, hi: float) -> bool:
    return lo <= x < hi or (hi == 1.0 and lo <= x <= 1.0)


def assert_placed(inst: Instance) -> None:
    offs = offsets(inst)
    assert offs, inst.instance_id
    pos = inst.evidence_position
    if pos == "scattered":
        k = len(offs)
        assert k >= 2, inst.instance_id
        thirds = set()
        for j, (start, mid) in enumerate(offs):
            lo, hi = region(POSITIONS[round(2 * j / (k - 1))])
            assert inside(start, lo, hi) and inside(mid, lo, hi), (inst.instance_id, j, offs)
            thirds.add(min(2, int(mid * 3)))
        assert min(2, int(offs[0][1] * 3)) == 0 and min(2, int(offs[-1][1] * 3)) == 2
        assert len(thirds) >= 2
    else:
        lo, hi = region(pos)
        for start, mid in offs:
            assert inside(start, lo, hi) and inside(mid, lo, hi), (inst.instance_id, pos, offs)


def near_identical(a: str, b: str) -> bool:
    """Same name stem, 5-digit suffixes differing in exactly one digit."""
    ma, mb = ENTITY.match(a), ENTITY.match(b)
    if not (ma and mb) or ma["stem"] != mb["stem"]:
        return False
    return sum(x != y for x, y in zip(ma["suffix"], mb["suffix"], strict=True)) == 1


def mentions(text: str, value: str) -> bool:
    """``value`` occurs in ``text`` as a whole token sequence (not inside a longer number)."""
    return re.search(rf"(?<![\w.]){re.escape(value)}(?![\w]|\.\d)", text) is not None


# ---------------------------------------------------------------------------- grid
def test_controlled_200_covers_every_cell(c200: Dataset) -> None:
    assert len(c200.instances) == 200
    cells = Counter(
        (i.context_length, i.evidence_position, i.distractor_similarity, i.reasoning_type)
        for i in c200.instances
    )
    expected = set(product(LENGTHS[:3], POSITIONS, DISTRACTORS, REASONING))
    assert len(expected) == 192
    assert set(cells) == expected
    assert sorted(cells.values()) == [1] * 184 + [2] * 8
    assert Counter(i.reasoning_type for i in c200.instances) == dict.fromkeys(REASONING, 50)
    assert [i.instance_id for i in c200.instances] == [f"controlled_{n:06d}" for n in range(1, 201)]
    assert c200.name == "controlled-200" and c200.source == "controlled"
    assert c200.builder_params == {
        "preset": "controlled-200",
        "seed": 42,
        "token_unit": "whitespace",
    }
    assert all(i.source == "controlled" and i.oracle_applicable for i in c200.instances)


def test_preset_sizes() -> None:
    assert {name: len(preset_cells(name)) for name in PRESETS} == {
        "controlled-200": 200,
        "scaling-3200": 3200,
        "fanin-grid": 144,
    }
    assert all(p["n_instances"] == len(preset_cells(n)) for n, p in PRESETS.items())
    cells = preset_cells("scaling-3200")
    assert Counter((c["context_length"], c["evidence_position"]) for c in cells) == {
        (length, pos): 80 for length in LENGTHS for pos in DECILES
    }


def test_unknown_preset_names_it_and_lists_the_allowed() -> None:
    with pytest.raises(ValueError, match="unknown preset 'controlled-999'") as err:
        build_controlled("controlled-999")
    for name in ("controlled-200", "scaling-3200", "fanin-grid"):
        assert name in str(err.value)
    with pytest.raises(ValueError, match="unknown subset key 'colour'"):
        build_controlled(subset={"colour": ["red"]})
    with pytest.raises(ValueError, match="limit"):
        build_controlled(limit=-1)


def test_context_lengths_within_5_percent(
    c200: Dataset, fanin: Dataset, scaling_subset: Dataset
) -> None:
    for inst in (*c200.instances, *fanin.instances, *scaling_subset.instances):
        total = sum(p.n_tokens for p in inst.passages)
        assert abs(total - inst.context_length) <= 0.05 * inst.context_length, inst.instance_id
        assert inst.metadata["context_tokens"] == total
        assert inst.metadata["token_unit"] == "whitespace"
    assert {i.context_length for i in scaling_subset.instances} == {4000, 32000}


# ---------------------------------------------------------------------------- placement
def test_gold_sits_in_the_named_region(c200: Dataset, fanin: Dataset) -> None:
    for inst in (*c200.instances, *fanin.instances):
        assert_placed(inst)


def test_gold_sits_in_the_named_decile(scaling_subset: Dataset) -> None:
    seen = Counter((i.context_length, i.evidence_position) for i in scaling_subset.instances)
    assert set(seen) == {(n, d) for n in (4000, 32000) for d in DECILES}
    for inst in scaling_subset.instances:
        assert_placed(inst)
        assert inst.metadata["gold_offsets"] == [
            [round(s, 4), round(m, 4)] for s, m in offsets(inst)
        ]


def test_labels_agree_with_the_importers_rule(c200: Dataset) -> None:
    # core.datasets.records labels imported data by gold midpoints in thirds: same labels here
    for inst in c200.instances:
        assert io_evidence_position(inst.passages) == inst.evidence_position, inst.instance_id


def test_single_hop_scattered_is_corroborated(c200: Dataset) -> None:
    cases = [
        i
        for i in c200.instances
        if i.reasoning_type == "single_hop" and i.evidence_position == "scattered"
    ]
    assert len(cases) == 12
    for inst in cases:
        gold = [p for p in inst.passages if p.is_gold]
        assert len(gold) == 2 and inst.fan_in == 2 and inst.evidence_density == "medium"
        assert inst.metadata["evidence_mode"] == "corroborated"
        assert all(mentions(p.text, inst.gold_answer) for p in gold)


# ---------------------------------------------------------------------------- passages
def test_passage_ids_roles_and_sizes(c200: Dataset, fanin: Dataset) -> None:
    for inst in (*c200.instances, *fanin.instances):
        assert [p.passage_id for p in inst.passages] == [
            f"p{n:04d}" for n in range(1, len(inst.passages) + 1)
        ]
        assert [p.ord for p in inst.passages] == list(range(len(inst.passages)))
        first_seen = list(dict.fromkeys(p.doc_id for p in inst.passages))
        assert first_seen == [f"doc_{n:05d}" for n in range(1, len(first_seen) + 1)]
        for p in inst.passages:
            assert p.role in ROLES and p.is_gold == (p.role == "gold")
            assert 60 <= p.n_tokens <= 300, (inst.instance_id, p.passage_id, p.n_tokens)
            assert p.title.strip()
            if p.role == "filler":
                assert not re.search(r"\d", p.title + p.text)  # filler never states a number
        assert inst.gold_ids == tuple(p.passage_id for p in inst.passages if p.role == "gold")


def test_fan_in_is_distinct_gold_docs(c200: Dataset, fanin: Dataset) -> None:
    for inst in (*c200.instances, *fanin.instances):
        assert inst.fan_in == len({p.doc_id for p in inst.passages if p.is_gold})
        assert inst.fan_in == inst.metadata["cell"]["fan_in"]
    assert {i.fan_in for i in c200.instances} == {1, 2}
    assert len(fanin.instances) == 144
    grid = Counter((i.fan_in, i.reasoning_type, i.context_length) for i in fanin.instances)
    assert grid == {
        (f, r, n): 4
        for f in range(1, 7)
        for r in ("multi_hop", "comparison", "arithmetic")
        for n in (4000, 8000)
    }
    for inst in fanin.instances:
        n_gold = sum(p.is_gold for p in inst.passages)
        assert n_gold == max(2, inst.fan_in)
        assert inst.evidence_density == ("medium" if n_gold <= 3 else "high")
    assert {i.evidence_position for i in fanin.instances} == set(POSITIONS)
    assert {i.distractor_similarity for i in fanin.instances} == set(DISTRACTORS)


def test_evidence_density_counts_gold_passages(c200: Dataset) -> None:
    for inst in c200.instances:
        n_gold = len(inst.gold_ids)
        assert inst.evidence_density == {1: "low", 2: "medium", 3: "medium"}[n_gold]
        assert inst.metadata["n_gold_passages"] == n_gold
    assert Counter(i.evidence_density for i in c200.instances) == {"low": 38, "medium": 162}


# ---------------------------------------------------------------------------- distractors
def _facts(inst: Instance) -> dict[str, dict]:
    return dict(inst.metadata["passage_facts"])


def test_distractor_settings(c200: Dataset) -> None:
    for inst in c200.instances:
        facts = _facts(inst)
        gold = [facts[p.passage_id] for p in inst.passages if p.is_gold]
        gold_subjects = {f["subject"] for f in gold}
        gold_relations = {f["relation"] for f in gold}
        distractors = [p for p in inst.passages if p.role == "distractor"]
        conflicting = [p for p in inst.passages if p.role == "conflicting"]
        setting = inst.distractor_similarity
        if setting == "none":
            assert not distractors and not conflicting
            continue
        assert len(distractors) >= 4
        for p in distractors:
            fact = facts[p.passage_id]
            assert fact["subject"] in p.title + " " + p.text and mentions(p.text, fact["value"])
            if setting == "low":
                assert fact["relation"] not in gold_relations
                stems = {ENTITY.match(s)["stem"] for s in gold_subjects}
                assert ENTITY.match(fact["subject"])["stem"] not in stems
            else:  # high and conflicting: same attribute of a near-identical entity
                assert fact["relation"] in gold_relations
                assert any(near_identical(fact["subject"], s) for s in gold_subjects)
        assert bool(conflicting) == (setting == "conflicting")


def test_conflicting_passage_asserts_another_value_for_a_look_alike(c200: Dataset) -> None:
    cases = [i for i in c200.instances if i.distractor_similarity == "conflicting"]
    assert len(cases) == 50
    for inst in cases:
        facts = _facts(inst)
        gold = [facts[p.passage_id] for p in inst.passages if p.is_gold]
        conflicting = [p for p in inst.passages if p.role == "conflicting"]
        assert len(conflicting) == len({(f["subject"], f["relation"]) for f in gold})
        for p in conflicting:
            fact = facts[p.passage_id]
            twins = [
                g
                for g in gold
                if g["relation"] == fact["relation"]
                and near_identical(fact["subject"], g["subject"])
            ]
            assert twins, (inst.instance_id, fact)
            assert all(t["value"] != fact["value"] for t in twins)
            assert fact["subject"] in p.text and mentions(p.text, fact["value"])
            assert not p.is_gold


def test_conflicting_comparisons_reverse_the_order(c200: Dataset) -> None:
    for inst in c200.instances:
        if inst.distractor_similarity != "conflicting" or inst.reasoning_type != "comparison":
            continue
        facts = _facts(inst)
        values = {f["subject"]: float(f["value"]) for f in facts.values()}
        gold = {facts[pid]["subject"] for pid in inst.gold_ids}
        for p in inst.passages:
            if p.role == "conflicting":
                f = facts[p.passage_id]
                twin = next(g for g in gold if near_identical(f["subject"], g))
                if twin == inst.gold_answer:
                    assert values[f["subject"]] < min(values[g] for g in gold)
                else:
                    assert values[f["subject"]] > values[inst.gold_answer]


# ---------------------------------------------------------------------------- answers
def test_single_hop_answer_is_stated_only_by_gold(c200: Dataset) -> None:
    for inst in c200.instances:
        if inst.reasoning_type != "single_hop":
            continue
        gold_text = " ".join(p.text for p in inst.passages if p.is_gold)
        assert mentions(gold_text, inst.gold_answer), inst.instance_id
        for p in inst.passages:
            if not p.is_gold:
                for answer in (inst.gold_answer, *inst.answer_aliases):
                    assert not mentions(p.title + " " + p.text, answer), (inst.instance_id, p)


def test_answer_types_and_entity_suffixes(c200: Dataset) -> None:
    for inst in c200.instances:
        if inst.answer_type == "entity":
            assert re.search(r" 0\d{4}$", inst.gold_answer), inst.gold_answer
        else:
            assert inst.answer_type == "number"
            float(inst.gold_answer)
    kinds = Counter((i.reasoning_type, i.answer_type) for i in c200.instances)
    assert kinds[("multi_hop", "entity")] == kinds[("comparison", "entity")] == 50
    assert kinds[("arithmetic", "number")] == 50
    assert kinds[("single_hop", "entity")] > 0 and kinds[("single_hop", "number")] > 0
    for inst in c200.instances:
        if inst.answer_type == "number" and inst.gold_answer.endswith(".0"):
            assert inst.answer_aliases == (inst.gold_answer[:-2],)


_VALUE = re.compile(
    r"((?:Dataset|Model) \w+ \d{5}|\w+ Labs \d{5})"
    r"(?: achieved an accuracy of| reached an accuracy of| contains| holds| includes| employs)"
    r" (\d+(?:\.\d)?)"
)


def _stated_values(inst: Instance) -> dict[str, float]:
    values: dict[str, float] = {}
    for p in inst.passages:
        if p.is_gold:
            for entity, value in _VALUE.findall(p.text):
                values[entity] = float(value)
    return values


def _question_entities(question: str) -> list[str]:
    return re.findall(r"(?:Dataset|Model) \w+ \d{5}|\w+ Labs \d{5}", question)


def test_arithmetic_and_comparison_answers_derive_from_gold_text(
    c200: Dataset, fanin: Dataset
) -> None:
    n_checked = 0
    for inst in (*c200.instances, *fanin.instances):
        if inst.reasoning_type not in ("arithmetic", "comparison"):
            continue
        values = _stated_values(inst)
        names = _question_entities(inst.question)
        assert names and all(n in values for n in names), (inst.instance_id, names, values)
        if inst.reasoning_type == "comparison":
            assert inst.gold_answer == max(names, key=lambda n: values[n])
        elif inst.question.startswith("How many more"):
            a, b = names
            assert inst.gold_answer == str(int(values[a] - values[b]))
            assert int(inst.gold_answer) > 0
        else:
            assert inst.gold_answer == str(int(sum(values[n] for n in names)))
            assert len(names) == max(2, inst.fan_in)
        n_checked += 1
    assert n_checked == 100 + 96


def test_multi_hop_chain_leads_from_question_to_answer(c200: Dataset, fanin: Dataset) -> None:
    for inst in (*c200.instances, *fanin.instances):
        if inst.reasoning_type != "multi_hop":
            continue
        chain = inst.metadata["gold_facts"]
        assert len(chain) == len(inst.gold_ids) >= 2
        assert chain[0]["subject"] in inst.question
        assert inst.gold_answer not in inst.question
        for a, b in zip(chain, chain[1:], strict=False):
            assert a["value"] == b["subject"]  # the bridge entity
        assert chain[-1]["value"] == inst.gold_answer
        gold_text = [p.text for p in inst.passages if p.is_gold]
        for fact in chain:  # each hop is stated by one gold passage
            stated = [
                t
                for t in gold_text
                if any(fact["subject"] in s and fact["value"] in s for s in t.split(". "))
            ]
            assert len(stated) == 1, (inst.instance_id, fact)


# ---------------------------------------------------------------------------- determinism
def test_same_seed_identical_other_seed_different(c200: Dataset) -> None:
    again = build_controlled("controlled-200", seed=42)
    assert digest(again) == digest(c200)
    other = build_controlled("controlled-200", seed=7)
    assert digest(other) != digest(c200)
    same_q = sum(
        a.question == b.question for a, b in zip(c200.instances, other.instances, strict=True)
    )
    assert same_q <= 5
    # the cells do not depend on the seed
    cell = ("context_length", "evidence_position", "distractor_similarity", "reasoning_type")
    assert [[getattr(i, k) for k in cell] for i in other.instances] == [
        [getattr(i, k) for k in cell] for i in c200.instances
    ]


def test_subset_and_limit_give_the_full_build_instances() -> None:
    head = build_controlled("scaling-3200", limit=5)
    assert [i.instance_id for i in head.instances] == [f"controlled_{n:06d}" for n in range(1, 6)]
    third = build_controlled("scaling-3200", subset={"replicate": [2]}, limit=1)
    assert third.instances == (head.instances[2],)
    assert third.builder_params["subset"] == {"replicate": [2]}
    assert third.builder_params["limit"] == 1


def test_deterministic_across_processes() -> None:
    # a different PYTHONHASHSEED must not change anything (no hash(), no global random)
    code = (
        "import dataclasses, hashlib, json\n"
        "from core.datasets.controlled import build_controlled\n"
        "ds = build_controlled('fanin-grid', seed=3, limit=12)\n"
        "payload = [dataclasses.asdict(i) for i in ds.instances]\n"
        "text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(',', ':'))\n"
        "print(hashlib.sha256(text.encode('utf-8')).hexdigest())\n"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == digest(build_controlled("fanin-grid", seed=3, limit=12))


@pytest.mark.slow
def test_full_scaling_3200() -> None:
    ds = build_controlled("scaling-3200")
    assert len(ds.instances) == 3200
    cells = Counter(
        (i.context_length, i.evidence_position, i.distractor_similarity, i.reasoning_type)
        for i in ds.instances
    )
    assert cells == {c: 5 for c in product(LENGTHS, DECILES, DISTRACTORS, REASONING)}
    for inst in ds.instances:
        assert_placed(inst)
        total = sum(p.n_tokens for p in inst.passages)
        assert abs(total - inst.context_length) <= 0.05 * inst.context_length
        assert inst.fan_in == len({p.doc_id for p in inst.passages if p.is_gold})
