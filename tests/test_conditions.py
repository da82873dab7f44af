"""The four conditions as planned calls, and the retrieval-only audit (core/oncu/conditions.py)."""

from __future__ import annotations

import json
import math
import re

import pytest
from conftest import shared_fixture

from core.cli import main
from core.datasets.controlled import build_controlled
from core.datasets.importers import read_dataset
from core.execution.prompts import (
    NO_PASSAGES,
    SYSTEM_CONTEXT,
    SYSTEM_NO_EVIDENCE,
    build_messages,
    prompt_hash,
)
from core.oncu.conditions import (
    check_conditions,
    plan_conditions,
    planned_keys,
    retrieval_audit,
    retrieval_config,
)
from core.retrieval.retrievers import retrieval_diagnostics, retrieve
from core.store import Store
from core.types import CONDITIONS, Instance, Passage

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
FOUR = list(CONDITIONS)


def _toy(instance_id: str = "i1", oracle_applicable: bool = True, gold: bool = True) -> Instance:
    passages = (
        Passage("p0001", 0, "Alpha", "Alpha is a quiet village by the river.", "d1"),
        Passage(
            "p0002",
            1,
            "Beta",
            "Beta scored 84 points on the final test.",
            "d2",
            "gold" if gold else "filler",
            gold,
        ),
        Passage(
            "p0003", 2, "Gamma", "Gamma scored 80 points on the final test.", "d3", "distractor"
        ),
    )
    return Instance(
        instance_id,
        "What did Beta score on the final test?",
        "84",
        passages,
        fan_in=1,
        oracle_applicable=oracle_applicable,
    )


def test_plan_of_one_instance_has_the_exact_calls_in_prefix_order():
    inst = _toy()
    calls = plan_conditions([inst], FOUR, top_k=1, chunk_size=12, overlap=2)
    # Contextual prompts share SYSTEM_CONTEXT ("...question using...") and sort before the
    # no-evidence one ("...question without..."). Their user messages start "Passages:\n\n
    # [passage_id: p000": full context and the retrieved chunk c0002 continue with "1", the
    # oracle with "2"; then "] Title: Alpha" (full) sorts before "] the river." ("T" < "t").
    assert [c.condition for c in calls] == ["full_context", "retrieved", "oracle", "no_evidence"]
    by = {c.condition: c for c in calls}
    assert {c.variant for c in calls} == {""}
    assert {c.instance_id for c in calls} == {"i1"}
    assert by["no_evidence"].input_passage_ids == ()
    assert by["full_context"].input_passage_ids == ("p0001", "p0002", "p0003")
    assert by["oracle"].input_passage_ids == ("p0002",)
    # 12-token windows, overlap 2: c0002 spans tokens 10..22 = the end of p0001 and p0002's
    # start; it is the only chunk with both "beta" and "score" ... and wins BM25.
    assert by["retrieved"].input_passage_ids == ("p0001", "p0002")
    assert by["retrieved"].meta["retrieval"] == "retrieved|lexical@1|chunk12/2"
    assert by["retrieved"].meta["chunk_ids"] == ["c0002"]
    for c in calls:
        assert c.prompt_hash == prompt_hash(c.messages)
    assert list(by["full_context"].messages) == build_messages(inst, "full_context")
    assert list(by["oracle"].messages) == build_messages(inst, "oracle")
    assert by["no_evidence"].messages[0]["content"] == SYSTEM_NO_EVIDENCE
    assert by["retrieved"].messages[0]["content"] == SYSTEM_CONTEXT
    assert (
        by["retrieved"]
        .messages[1]["content"]
        .startswith(
            "Passages:\n\n[passage_id: p0001] the river.\n\n[passage_id: p0002] Title: Beta\n"
        )
    )
    assert by["no_evidence"].meta == by["full_context"].meta == by["oracle"].meta == {}


def test_oracle_is_not_planned_without_gold_evidence():
    insts = [_toy("a"), _toy("b", oracle_applicable=False), _toy("c", gold=False)]
    calls = plan_conditions(insts, ["no_evidence", "oracle"])
    assert [(c.instance_id, c.condition) for c in calls] == [
        ("a", "oracle"),
        ("a", "no_evidence"),
        ("b", "no_evidence"),
        ("c", "no_evidence"),
    ]
    assert planned_keys(insts[1], FOUR) == [
        ("b", "no_evidence", ""),
        ("b", "full_context", ""),
        ("b", "retrieved", ""),
    ]
    assert planned_keys(insts[0], ["oracle", "oracle"]) == [("a", "oracle", "")]


def test_instances_keep_dataset_order_and_plans_are_deterministic():
    ds = build_controlled("controlled-200", seed=42, subset={"context_length": [4000]})
    insts = list(ds.instances[:12])
    a = plan_conditions(insts, FOUR)
    b = plan_conditions(insts, FOUR)
    assert a == b
    order = [c.instance_id for c in a]
    # one instance's calls are contiguous, in dataset order
    assert list(dict.fromkeys(order)) == [i.instance_id for i in insts]
    assert len(a) == 4 * len(insts)
    keys = [(c.instance_id, c.condition, c.variant) for c in a]
    assert len(set(keys)) == len(keys)


def test_no_prompt_leaks_labels_and_ids_are_the_neutral_ones():
    ds = build_controlled("controlled-200", seed=42)
    insts = list(ds.instances[::5])  # 40 instances over every cell kind
    calls = plan_conditions(insts, FOUR)
    by_id = {i.instance_id: i for i in insts}
    label = re.compile(r"\b(gold|distractor|conflicting|filler|is_gold|role|doc_id)\b", re.I)
    shown = re.compile(r"\[passage_id: (p\d{4})\]")
    for c in calls:
        inst = by_id[c.instance_id]
        text = "\n".join(m["content"] for m in c.messages)
        assert [m["role"] for m in c.messages] == ["system", "user"]
        assert not label.search(text), (c.instance_id, c.condition)
        assert c.instance_id not in text
        for p in inst.passages:
            assert p.doc_id not in text
        ids = shown.findall(c.messages[1]["content"])  # the system text has an example id
        assert set(ids) == set(c.input_passage_ids)
        assert set(ids) <= {p.passage_id for p in inst.passages}
        if c.condition == "no_evidence":  # the question only (comparison questions name the
            # choices, so the answer may be in the question itself)
            assert c.messages[1]["content"] == NO_PASSAGES + "\n\nQuestion: " + inst.question
            assert ids == []
        if c.condition == "oracle":
            assert tuple(ids) == inst.gold_ids


def test_bad_conditions_and_retrievers_are_refused_by_name():
    with pytest.raises(ValueError, match=r"unknown condition 'closed_book'; choose from: no_evid"):
        plan_conditions([_toy()], ["closed_book"])
    with pytest.raises(ValueError, match="no condition given"):
        check_conditions([])
    with pytest.raises(ValueError, match="bm99"):
        plan_conditions([_toy()], ["retrieved"], retriever="bm99")
    assert check_conditions(["oracle", " no_evidence", "oracle"]) == ("oracle", "no_evidence")
    assert retrieval_config() == {
        "retriever": "lexical",
        "top_k": 3,
        "chunk_size": 220,
        "overlap": 40,
        "condition_id": "retrieved|lexical@3|chunk220/40",
    }


# ------------------------------------------------------------------------ retrieval audit


def test_audit_of_a_hand_checked_instance():
    # One 220-token chunk holds all three passages: 1 gold of 3 shown, 1 distractor.
    audit = retrieval_audit([_toy()], ["lexical", "oracle"], [3, 1])
    agg = audit.aggregate
    assert list(agg["retriever"]) == ["lexical", "lexical", "oracle", "oracle"]
    assert list(agg["k"]) == [1, 3, 1, 3]
    row = agg.iloc[0].to_dict()
    assert row["recall"] == 1.0
    assert row["full_chain_coverage"] == 1.0
    assert row["evidence_f1"] == pytest.approx(0.5)  # P = 1/3, R = 1: 2PR / (P + R) = 1/2
    assert row["distractor_rate"] == pytest.approx(1 / 3)
    assert row["passages_per_context"] == 3
    assert row["n_instances"] == row["n_with_gold"] == 1
    no_gold = retrieval_audit([_toy(gold=False)], ["lexical"], [3]).aggregate.iloc[0]
    assert math.isnan(no_gold["recall"]) and no_gold["n_with_gold"] == 0
    assert no_gold["distractor_rate"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="k values must be integers >= 1"):
        retrieval_audit([_toy()], ["lexical"], [0])


@pytest.fixture(scope="module")
def hotpot_instances():
    return read_dataset(shared_fixture(HOTPOT), fmt="hotpotqa", name="hotpot").dataset.instances


def test_audit_on_hotpotqa_reports_bm25_recall_and_oracle_reaches_one(hotpot_instances):
    insts = hotpot_instances
    audit = retrieval_audit(insts, ["lexical", "oracle"], [3, 16])
    agg = audit.aggregate.set_index(["retriever", "k"])
    assert len(audit.per_instance) == 53 * 4
    assert agg.loc[("lexical", 3), "n_with_gold"] == 53
    # Regression pin of BM25 k=3 on the 53-record sample (short paragraphs: a 220-token
    # chunk spans about three of them), checked against retrieve + retrieval_diagnostics.
    lex3 = agg.loc[("lexical", 3), "recall"]
    assert lex3 == pytest.approx(48 / 53)
    direct = [retrieval_diagnostics(i, retrieve(i, "lexical", 3))["recall"] for i in insts]
    assert lex3 == pytest.approx(sum(direct) / len(direct))
    for k in (3, 16):
        assert agg.loc[("oracle", k), "recall"] == 1.0
        assert agg.loc[("oracle", k), "full_chain_coverage"] == 1.0
    assert agg.loc[("lexical", 16), "recall"] == 1.0


def test_report_retrieval_cli_json(tmp_path, capsys, hotpot_instances):
    db = tmp_path / "s.duckdb"
    rc = main(
        [
            "import",
            "dataset",
            "--format",
            "hotpotqa",
            str(shared_fixture(HOTPOT)),
            "--name",
            "hotpot",
            "--db",
            str(db),
        ]
    )
    assert rc == 0
    capsys.readouterr()
    rc = main(
        [
            "report",
            "retrieval",
            "--db",
            str(db),
            "--dataset",
            "hotpot",
            "--retrievers",
            "lexical,oracle",
            "--k",
            "3,16",
            "--json",
        ]
    )
    assert rc == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["retriever"], r["k"]) for r in rows] == [
        ("lexical", 3),
        ("lexical", 16),
        ("oracle", 3),
        ("oracle", 16),
    ]
    assert rows[0]["recall"] == pytest.approx(48 / 53)
    assert rows[2]["recall"] == 1.0
    assert set(rows[0]) >= {
        "dataset",
        "retriever",
        "k",
        "recall",
        "full_chain_coverage",
        "evidence_f1",
        "distractor_rate",
        "passages_per_context",
        "n_instances",
    }
    rc = main(["report", "retrieval", "--db", str(db), "--dataset", "nope", "--json"])
    assert rc == 1
    assert "no dataset named 'nope'" in capsys.readouterr().err
    rc = main(["report", "retrieval", "--db", str(db), "--dataset", "hotpot", "--k", "3,x"])
    assert rc == 1
    assert Store(db).dataset_names() == ["hotpot"]


@pytest.mark.parametrize(
    "text",
    [
        "plain ASCII text",
        'quotes " and backslashes \\ and \\" together',
        "lines\nand\r\ncarriage returns\tand tabs",
        "accents: café, naïve, Ångström; CJK 漢字; emoji 🙂; line sep \u2028 and nbsp \u00a0",
        "rare controls: NUL \x00, bell \x07, backspace \x08, form feed \x0c, unit sep \x1f",
        "DEL \x7f is not escaped by JSON",
        "",
    ],
)
def test_the_planner_hashes_prompts_exactly_as_prompt_hash(text):
    from core.oncu.conditions import _prompt_hash

    for messages in (
        [{"role": "system", "content": SYSTEM_CONTEXT}, {"role": "user", "content": text}],
        [{"role": "user", "content": text, "name": "ignored"}],
        [{"role": text, "content": text}],
        [],
    ):
        assert _prompt_hash(messages) == prompt_hash(messages)
    for call in plan_conditions([_toy()], FOUR, top_k=1, chunk_size=12, overlap=2):
        assert call.prompt_hash == prompt_hash(call.messages)


def test_the_planner_hash_fails_like_prompt_hash_on_a_lone_surrogate():
    from core.oncu.conditions import _prompt_hash

    messages = [{"role": "user", "content": "half a pair: \ud800"}]
    for fn in (_prompt_hash, prompt_hash):
        with pytest.raises(UnicodeEncodeError):
            fn(messages)
