"""CUE-R planning (core.cuer.interventions): operators, target selection, variants, plans."""

from __future__ import annotations

import pytest

from core.cuer.interventions import (
    PLANNER_VERSION,
    EvidenceItem,
    evidence_items,
    format_variant,
    parse_variant,
    perturb,
    plan_interventions,
    plan_rerun,
    replacement_candidates,
    select_target,
    shown_passage_ids,
)
from core.execution.prompts import (
    SYSTEM_CONTEXT,
    SYSTEM_NO_EVIDENCE,
    build_messages,
    render_evidence,
    render_passage,
)
from core.retrieval.retrievers import chunk_instance
from core.types import Instance, Passage


def _p(pid: str, title: str, text: str, gold: bool = False, role: str = "filler") -> Passage:
    return Passage(pid, int(pid[1:]) - 1, title, text, title, "gold" if gold else role, gold)


INST = Instance(
    instance_id="i1",
    question="Which lab developed Model Gamma 01805?",
    gold_answer="Draco Labs",
    passages=(
        _p("p0001", "Alpha notes", "alpha one two"),
        _p("p0002", "Model Gamma 01805", "Model Gamma 01805 was developed by Draco Labs.", True),
        _p("p0003", "Beta notes", "beta three four", role="distractor"),
        _p("p0004", "Model Gamma 01805", "Model Gamma 01805 was tested in Oslo.", True),
        _p("p0005", "Gamma lab history", "lab developed gamma model prototypes in the valley"),
        _p("p0006", "Draco Labs office", "Draco Labs opened a new office"),
        _p(
            "p0007",
            "Model Gamma 01805",
            "Model Gamma 01805 was developed by Orion Works.",
            role="conflicting",
        ),
    ),
    reasoning_type="multi_hop",
    answer_type="entity",
)
BY_ID = {p.passage_id: p for p in INST.passages}


def _shown(*ids: str) -> list[Passage]:
    return [BY_ID[i] for i in ids]


def _ids(items: list[EvidenceItem]) -> list[str]:
    return ["+".join(it.passage_ids) for it in items]


# ------------------------------------------------------------------ operators on passages


def test_remove_drops_the_target_and_keeps_order():
    out = perturb(INST, _shown("p0003", "p0002", "p0001"), "remove", "p0002")
    assert _ids(out) == ["p0003", "p0001"]
    assert [it.text for it in out] == [
        render_passage(BY_ID["p0003"]),
        render_passage(BY_ID["p0001"]),
    ]


def test_remove_several_targets_two_support_both():
    shown = _shown("p0002", "p0003", "p0004", "p0001")
    assert _ids(perturb(INST, shown, "remove", "p0002+p0004")) == ["p0003", "p0001"]
    assert _ids(perturb(INST, shown, "remove", ["p0004", "p0002"])) == ["p0003", "p0001"]


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        ("front", ["p0002", "p0003", "p0002", "p0001"]),
        ("after", ["p0003", "p0002", "p0002", "p0001"]),
        ("end", ["p0003", "p0002", "p0001", "p0002"]),
        (None, ["p0003", "p0002", "p0001", "p0002"]),  # the paper's default: end
    ],
)
def test_duplicate_positions(position, expected):
    out = perturb(INST, _shown("p0003", "p0002", "p0001"), "duplicate", "p0002", position=position)
    assert _ids(out) == expected
    copies = [it for it in out if it.source.startswith("duplicate:")]
    assert [c.text for c in copies] == [render_passage(BY_ID["p0002"])]


@pytest.mark.parametrize(
    ("move_to", "expected"),
    [
        (0, ["p0002", "p0003", "p0001"]),
        (1, ["p0003", "p0002", "p0001"]),
        (2, ["p0003", "p0001", "p0002"]),
    ],
)
def test_move(move_to, expected):
    assert (
        _ids(perturb(INST, _shown("p0003", "p0002", "p0001"), "move", "p0002", move_to=move_to))
        == expected
    )


def test_replace_hardness_on_passages():
    shown = _shown("p0003", "p0002", "p0001")
    # Eligible (seed 004 §5.6, the band): the non-support passages besides the target, shown
    # or not: p0001, p0003, p0005, p0006, p0007 (p0002, p0004 are gold).
    # medium: BM25 vs the question -> p0005 ("lab developed gamma model"); p0007 shares
    # "developed model gamma 01805" but "lab" (idf log(6.5/1.5)) is unique to p0005.
    medium = perturb(INST, shown, "replace", "p0002", hardness="medium")
    assert _ids(medium) == ["p0003", "p0005", "p0001"]
    assert medium[1].text == render_passage(BY_ID["p0005"])
    assert medium[1].source == "replacement:p0005"
    # hard: BM25 vs the target's text -> p0007, the near-identical conflicting passage.
    hard = perturb(INST, shown, "replace", "p0002", hardness="hard")
    assert _ids(hard) == ["p0003", "p0007", "p0001"]


def test_replace_easy_is_seeded_random_over_eligible_units():
    shown = _shown("p0003", "p0002", "p0001")
    picks = {
        perturb(INST, shown, "replace", "p0002", hardness="easy", seed=s)[1].passage_ids[0]
        for s in range(30)
    }
    assert picks == {"p0001", "p0003", "p0005", "p0006", "p0007"}
    a = perturb(INST, shown, "replace", "p0002", hardness="easy", seed=7)
    b = perturb(INST, shown, "replace", "p0002", hardness="easy", seed=7)
    assert a == b


def test_replacement_candidates_order():
    shown = _shown("p0003", "p0002", "p0001")
    hard = replacement_candidates(INST, shown, "p0002", "hard")
    assert [u[0] for u in hard][0] == "p0007"
    assert sorted(u[0] for u in hard) == ["p0001", "p0003", "p0005", "p0006", "p0007"]
    # Shown passages stay eligible: everything shown still leaves the non-support ones.
    all_shown = _shown("p0001", "p0002", "p0003", "p0005", "p0006", "p0007")
    assert [u[0] for u in replacement_candidates(INST, all_shown, "p0002", "medium")][0] == (
        "p0005"
    )
    # No non-support passage besides the target: nothing, and perturb says so.
    gold_only = Instance("g", "Q?", "a", (BY_ID["p0002"], BY_ID["p0004"], BY_ID["p0001"]))
    assert replacement_candidates(gold_only, _shown("p0001"), "p0001", "easy") == []
    with pytest.raises(ValueError, match="no replacement for 'p0001'.*no non-support passage"):
        perturb(gold_only, _shown("p0001"), "replace", "p0001", hardness="medium")


def test_perturb_rejects_bad_input():
    shown = _shown("p0003", "p0002")
    with pytest.raises(ValueError, match="unknown operator 'swap'"):
        perturb(INST, shown, "swap", "p0002")
    with pytest.raises(ValueError, match="target 'p0004' is not shown"):
        perturb(INST, shown, "remove", "p0004")
    with pytest.raises(ValueError, match="unknown duplicate position 'middle'"):
        perturb(INST, shown, "duplicate", "p0002", position="middle")
    with pytest.raises(ValueError, match="hardness applies to operator 'replace' only"):
        perturb(INST, shown, "remove", "p0002", hardness="easy")
    with pytest.raises(ValueError, match="replace needs a hardness"):
        perturb(INST, shown, "replace", "p0002")
    with pytest.raises(ValueError, match="move_to must be in 0..1"):
        perturb(INST, shown, "move", "p0002", move_to=2)
    with pytest.raises(ValueError, match="takes one target"):
        perturb(INST, shown, "duplicate", "p0002+p0003")


# ------------------------------------------------------------------ operators on chunks


def _chunks(*ids: str):
    by = {c.chunk_id: c for c in chunk_instance(INST, 12, 4)}
    return [by[i] for i in ids]


def test_chunks_are_viewed_as_passage_segments():
    shown = _chunks("c0003", "c0001")
    items = evidence_items(shown)
    assert [(it.passage_ids, it.source) for it in items] == [
        (("p0002",), "c0003"),
        (("p0003",), "c0003"),
        (("p0001",), "c0001"),
        (("p0002",), "c0001"),
    ]
    assert items[0].text == "[passage_id: p0002] 01805 was developed by Draco Labs."
    assert items[3].text == "[passage_id: p0002] Title: Model"
    assert render_evidence(items) == render_evidence(shown)
    assert shown_passage_ids(shown) == ["p0002", "p0003", "p0001"]


def test_remove_on_chunks_drops_only_the_targets_segments():
    out = perturb(INST, _chunks("c0003", "c0001"), "remove", "p0002")
    assert [it.text for it in out] == [
        "[passage_id: p0003] Title: Beta notes\nbeta",
        "[passage_id: p0001] Title: Alpha notes\nalpha one two",
    ]


def test_duplicate_on_chunks_copies_every_target_segment():
    out = perturb(INST, _chunks("c0003", "c0001"), "duplicate", "p0002", position="front")
    assert [(it.passage_ids[0], it.source) for it in out] == [
        ("p0002", "duplicate:c0003"),
        ("p0002", "duplicate:c0001"),
        ("p0002", "c0003"),
        ("p0003", "c0003"),
        ("p0001", "c0001"),
        ("p0002", "c0001"),
    ]


def test_replace_on_chunks_puts_a_whole_passage_at_the_first_segment():
    # Shown chunks c0003 (p0002, p0003) and c0001 (p0001, p0002); the replacement is a whole
    # non-support passage (the paper's paragraph), put where p0002's first segment was; its
    # other segment goes. Hard = BM25 vs p0002's passage ("Model Gamma 01805 ... developed by
    # Draco Labs"): p0007 ("Model Gamma 01805 was developed by Orion Works"). Medium = BM25
    # vs the question: p0005 ("lab developed gamma model").
    shown = _chunks("c0003", "c0001")
    out = perturb(INST, shown, "replace", "p0002", hardness="hard", chunk_size=12, overlap=4)
    assert [(it.passage_ids, it.source) for it in out] == [
        (("p0007",), "replacement:p0007"),
        (("p0003",), "c0003"),
        (("p0001",), "c0001"),
    ]
    assert out[0].text == render_passage(BY_ID["p0007"])
    medium = perturb(INST, shown, "replace", "p0002", hardness="medium", chunk_size=12, overlap=4)
    assert medium[0].source == "replacement:p0005"


def test_shown_passages_are_not_avoided():
    # §5.6 takes the highest BM25 in the band: p0007 is shown (in c0009, c0010) and still the
    # hard choice; no preference for passages absent from the context.
    shown = _chunks("c0003", "c0001", "c0009", "c0010")
    assert "p0007" in shown_passage_ids(shown)
    hard = replacement_candidates(INST, shown, "p0002", "hard", chunk_size=12, overlap=4)
    assert hard[0][0] == "p0007"
    calls = plan_interventions(
        INST,
        ["p0002"],
        shown=shown,
        operators=["replace"],
        hardness=["hard"],
        two_support=False,
        zero_retrieval=False,
        chunk_size=12,
        overlap=4,
    )
    meta = calls[0].meta
    assert (meta["replacement"], meta["replacement_novel"], meta["pool"]) == (
        "p0007",
        False,
        "passages",
    )
    assert meta["candidates"] == 5 and meta["planner"] == PLANNER_VERSION == 2


def test_single_passage_instance_replaces_with_an_unshown_chunk():
    doc = Passage("p0001", 0, "Report", " ".join(f"w{i}" for i in range(60)), "d", "gold", True)
    one = Instance("one", "What is w7?", "w8", (doc,))
    chunks = chunk_instance(one, 12, 4)
    shown = [chunks[0], chunks[2]]
    got = replacement_candidates(one, shown, "p0001", "easy", chunk_size=12, overlap=4)
    assert sorted(u[0] for u in got) == sorted(
        c.chunk_id for c in chunks if c.chunk_id not in {chunks[0].chunk_id, chunks[2].chunk_id}
    )
    assert replacement_candidates(one, chunks, "p0001", "hard", chunk_size=12, overlap=4) == []


# ------------------------------------------------------------------ target selection


@pytest.mark.parametrize(
    ("shown", "cited", "target", "rule"),
    [
        # 1: a cited passage whose title is a gold support title (first in shown order).
        (("p0003", "p0001", "p0002"), ["p0001", "p0002"], "p0002", "cited_support_title"),
        # 2: otherwise any cited passage; ids that were not shown are ignored.
        (("p0003", "p0001", "p0002"), ["p0004", "p0001"], "p0001", "cited"),
        # 3: otherwise the first shown passage with a support title (a conflicting passage
        # with the gold title counts: the rule reads titles, as the paper's does).
        (("p0003", "p0007", "p0002"), [], "p0007", "retrieved_support_title"),
        # 4: otherwise the highest-ranked shown passage.
        (("p0003", "p0001"), ["p0009"], "p0003", "top_ranked"),
    ],
)
def test_target_selection_priority(shown, cited, target, rule):
    t = select_target(INST, _shown(*shown), cited)
    assert (t.passage_id, t.rule) == (target, rule)


def test_no_target_without_evidence():
    assert select_target(INST, [], ["p0002"]) is None


# ------------------------------------------------------------------ variants and plans


def test_variant_ids_round_trip():
    cases = {
        ("remove", "p0004", None): "remove|p0004",
        ("replace", "p0004", "hard"): "replace:hard|p0004",
        ("duplicate", "p0004", "end"): "duplicate:end|p0004",
        ("move", "p0004", 2): "move:2|p0004",
        ("two_support", ("p0002", "p0007"), "both"): "two_support:both|p0002+p0007",
        ("zero_retrieval", None, None): "zero_retrieval",
    }
    for (op, target, param), text in cases.items():
        assert format_variant(op, target, param) == text
        parsed = parse_variant(text)
        assert parsed["operator"] == op and parsed["base"] == "retrieved"
    assert format_variant("remove", "p0004", base="oracle") == "remove|p0004@oracle"
    assert parse_variant("remove|p0004@oracle")["base"] == "oracle"
    assert parse_variant("two_support:both|p0002+p0007")["targets"] == ("p0002", "p0007")
    with pytest.raises(ValueError, match="not an intervention variant"):
        parse_variant("C=5|start=2")


def test_plan_interventions_on_passages():
    shown = _shown("p0003", "p0002", "p0004", "p0001")
    calls = plan_interventions(INST, ["p0002"], shown=shown, positions=("front", "end"), seed=3)
    assert sorted(c.variant for c in calls) == sorted(
        [
            "duplicate:front|p0002",
            "duplicate:end|p0002",
            "replace:easy|p0002",
            "replace:medium|p0002",
            "replace:hard|p0002",
            "remove|p0002",
            "two_support:1|p0002",
            "two_support:2|p0004",
            "two_support:both|p0002+p0004",
            "zero_retrieval",
        ]
    )
    # Prefix-cache order: sorted by prompt text (the no-evidence system message sorts after
    # the contextual one: "You answer a question using" < "You answer a question without").
    texts = ["\x00".join(m["content"] for m in c.messages) for c in calls]
    assert texts == sorted(texts) and calls[-1].variant == "zero_retrieval"
    assert {c.condition for c in calls} == {"intervention"}
    by = {c.variant: c for c in calls}
    rm = by["remove|p0002"]
    assert rm.input_passage_ids == ("p0003", "p0004", "p0001")
    assert rm.meta["target"] == "p0002" and rm.meta["rule"] == "cited_support_title"
    assert rm.meta["operator"] == "remove"
    assert rm.meta["retrieval"] == "retrieved|lexical@5|chunk220/40"
    assert rm.messages == tuple(
        build_messages(INST, "intervention", _shown("p0003", "p0004", "p0001"))
    )
    assert by["replace:hard|p0002"].meta["replacement"] == "p0007"
    assert by["replace:medium|p0002"].input_passage_ids == ("p0003", "p0005", "p0004", "p0001")
    # Removing support 1 is the same prompt as removing the target: the cache serves it.
    assert by["two_support:1|p0002"].prompt_hash == rm.prompt_hash
    assert by["two_support:both|p0002+p0004"].input_passage_ids == ("p0003", "p0001")
    zero = by["zero_retrieval"]
    assert zero.input_passage_ids == ()
    assert zero.messages[0]["content"] == SYSTEM_NO_EVIDENCE
    assert zero.messages == tuple(build_messages(INST, "no_evidence"))
    for c in calls:
        text = "".join(m["content"] for m in c.messages)
        for label in ("gold", "distractor", "conflicting", "filler", INST.instance_id):
            assert label not in text


def test_plan_interventions_options_and_retrieval():
    calls = plan_interventions(
        INST,
        [],
        top_k=3,
        chunk_size=12,
        overlap=4,
        operators=["remove"],
        two_support=False,
        zero_retrieval=False,
    )
    # Retrieved c0006, c0007, c0002 (BM25 vs the question); nothing cited, so the first
    # shown passage with a support title: p0004 (its segment opens c0006).
    assert [c.variant for c in calls] == ["remove|p0004"]
    assert calls[0].meta["rule"] == "retrieved_support_title"
    assert calls[0].input_passage_ids == ("p0005", "p0002")
    assert calls[0].messages[0]["content"] == SYSTEM_CONTEXT
    with pytest.raises(ValueError, match="unknown operator 'swap'"):
        plan_interventions(INST, [], operators=["swap"])
    with pytest.raises(ValueError, match="unknown replace hardness 'extreme'"):
        plan_interventions(INST, [], hardness=["extreme"])


def test_plan_rerun_for_the_case_view():
    shown = _shown("p0003", "p0002", "p0001")
    call = plan_rerun(INST, shown, "move", "p0002", move_to=0)
    assert call.variant == "move:0|p0002"
    assert call.input_passage_ids == ("p0002", "p0003", "p0001")
    assert call.meta == {
        "base": "retrieved",
        "operator": "move",
        "rule": "user",
        "target": "p0002",
        "move_to": 0,
    }
    rep = plan_rerun(INST, shown, "replace", "p0002", hardness="medium", base="full_context")
    assert rep.variant == "replace:medium|p0002@full_context"
    assert rep.meta["replacement"] == "p0005"
    dup = plan_rerun(INST, shown, "duplicate", "p0002")
    assert dup.variant == "duplicate:end|p0002"
    zero = plan_rerun(INST, shown, "zero_retrieval", "")
    assert zero.variant == "zero_retrieval" and zero.input_passage_ids == ()
