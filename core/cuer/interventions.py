"""CUE-R interventions as planned model calls (SPEC §7; seed 004 §3.2, §4.3, §5.5-5.7, App. C).

Pure planning: no store, no backend. The base trace is the ``retrieved`` condition of the same
run (top-k chunks of a retriever, BM25 k=5 by default); the engine executes it first, and the
interventions are planned from its cited ids.

Evidence items and targets. The model cites passage ids, and the user reads passages, so the
intervened evidence item is a *passage*: the target id is a passage id (``p0004``). Retrieved
chunks are windows that may hold segments of several passages (each segment opens with its
passage's marker), so the shown context is viewed as the flat list of those segments
(:func:`evidence_items`); rendering that list gives exactly the base prompt's evidence text.
An operator changes only the target's segments and leaves every other segment where it was:

- ``remove``: drop every segment of the target (and of every id given, for the two-support
  ablation); "delete the target item from the context entirely" (seed 004 §4.3);
- ``replace``: put a replacement passage in place of the target's first segment and drop its
  other segments. Candidates are the instance's non-support passages other than the target,
  whole (the paper's paragraphs; an instance with a single passage uses its unshown chunks),
  see :func:`replacement_candidates`. Hardness (seed 004 §5.6): ``easy`` a seeded random
  candidate, ``medium`` the candidate with the highest BM25 score against the question,
  ``hard`` the candidate with the highest BM25 score against the target's passage (BM25
  Okapi k1=1.5, b=0.75 over all passages of the instance, ties to the earlier passage);
- ``duplicate``: insert a copy of the target's segments at the ``front``, right ``after`` the
  target's last segment, or at the ``end`` (default) (seed 004 App. C);
- ``move`` (the Case view's rerun): take the target's segments out and insert them, as one
  block, before item ``move_to`` of the remaining list (``move_to`` = its length: at the end).

Target selection (seed 004 §5.5, the first rule that yields a shown passage; "shown order" is
the order of first appearance in the retrieved context, i.e. rank order):

1. ``cited_support_title``: a cited passage whose title is a gold support title;
2. ``cited``: any cited passage;
3. ``retrieved_support_title``: the first shown passage whose title is a gold support title;
4. ``top_ranked``: the first shown passage.

Canonical variant ids (the prediction key within a run, condition ``intervention``):
``remove|p0004``, ``replace:hard|p0004``, ``duplicate:end|p0004``, ``move:2|p0004``,
``two_support:1|p0002``, ``two_support:2|p0007``, ``two_support:both|p0002+p0007`` and
``zero_retrieval`` (the no-evidence prompt). A rerun on another base than ``retrieved`` (the
Case view over a full-context or oracle prediction) adds ``@<base>``: ``remove|p0004@oracle``.
Gold labels choose targets and replacements; they never reach a prompt.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.cuer.evidence import (
    REPLACE_HARDNESS,
    REPLACE_SEED,
    EvidenceItem,
    Pool,
    Target,
    evidence_items,
    replacement_candidates,
    select_target,
    shown_passage_ids,
)
from core.execution.prompts import build_messages, prompt_hash
from core.params import Param
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    TOP_K,
    Chunk,
    chunk_instance,
    rank_chunks,
    retrieval_condition_id,
)
from core.types import Instance, PlannedCall

__all__ = [
    "BASE_TOP_K",
    "DUPLICATE_POSITION",
    "DUPLICATE_POSITIONS",
    "DUPLICATE_POSITIONS_PARAM",
    "EPS",
    "EvidenceItem",
    "MOVE_TO",
    "OPERATORS",
    "OPERATORS_PARAM",
    "OPERATOR_PARAMS",
    "PLANNER_VERSION",
    "PLAN_OPERATORS",
    "REPLACE_HARDNESS",
    "REPLACE_HARDNESS_PARAM",
    "REPLACE_LEVEL",
    "REPLACE_SEED",
    "REPORT_PARAMS",
    "RUN_PARAMS",
    "TARGET_RULES",
    "TAU",
    "TWO_SUPPORT",
    "TWO_SUPPORT_PARTS",
    "Target",
    "ZERO_RETRIEVAL",
    "check_plan_options",
    "evidence_items",
    "format_variant",
    "parse_variant",
    "perturb",
    "plan_settings",
    "plan_interventions",
    "plan_rerun",
    "replacement_candidates",
    "select_target",
    "shown_passage_ids",
]

#: Operators :func:`perturb` applies.
OPERATORS = ("remove", "replace", "duplicate", "move")
#: Operators a run plans per target (``move`` is the Case view's).
PLAN_OPERATORS = ("remove", "replace", "duplicate")
#: Duplicate insertion positions (seed 004 App. C); ``end`` is the paper's default.
DUPLICATE_POSITIONS = ("front", "after", "end")
#: Target-selection rules in priority order (seed 004 §5.5).
TARGET_RULES = ("cited_support_title", "cited", "retrieved_support_title", "top_ranked")
#: Parts of the two-support ablation: remove support 1, support 2, both (seed 004 §6.8).
TWO_SUPPORT_PARTS = ("1", "2", "both")

# ------------------------------------------------------------------- declared parameters
# One declaration per knob: `python -m core run-interventions` flags, the Case view's rerun
# widgets and the planners' keyword defaults all come from these.

#: Base retrieved chunks (seed 004 §5.1: BM25 top k = 5, not the four-condition protocol's 3).
BASE_TOP_K = Param(
    "top_k",
    int,
    5,
    "base retrieved chunks",
    minimum=TOP_K.minimum,
    maximum=TOP_K.maximum,
    section="seed 004 §5.1",
)
#: Replacement hardness of one ``replace`` call.
REPLACE_LEVEL = Param(
    "hardness",
    str,
    "easy",
    "replacement: seeded random (easy), similar to the question (medium) or to the target (hard)",
    choices=REPLACE_HARDNESS,
    section="seed 004 §5.6",
)
#: Where ``duplicate`` inserts the copy.
DUPLICATE_POSITION = Param(
    "position",
    str,
    "end",
    "where the copy goes: front, after the target, or end",
    choices=DUPLICATE_POSITIONS,
    section="seed 004 App. C",
)
#: Where ``move`` puts the target (index in the list without it; the Case view's operator).
MOVE_TO = Param("move_to", int, 0, "index the target moves to (0 = front)", minimum=0)
#: Each operator's own parameters, by operator name.
OPERATOR_PARAMS: dict[str, tuple[Param, ...]] = {
    "remove": (),
    "replace": (REPLACE_LEVEL, REPLACE_SEED),
    "duplicate": (DUPLICATE_POSITION,),
    "move": (MOVE_TO,),
}
#: Operators a run plans per target.
OPERATORS_PARAM = Param(
    "operators",
    str,
    PLAN_OPERATORS,
    "operators planned per target",
    choices=PLAN_OPERATORS,
    section="seed 004 §4.3",
    multiple=True,
)
#: Replacement hardness levels a run plans.
REPLACE_HARDNESS_PARAM = Param(
    "replace_hardness",
    str,
    REPLACE_HARDNESS,
    "replacement hardness levels planned",
    choices=REPLACE_HARDNESS,
    section="seed 004 §5.6",
    multiple=True,
)
#: Duplicate positions a run plans (the paper's default: ``end``).
DUPLICATE_POSITIONS_PARAM = Param(
    "duplicate_positions",
    str,
    ("end",),
    "duplicate positions planned",
    choices=DUPLICATE_POSITIONS,
    section="seed 004 App. C",
    multiple=True,
)
#: The two-support ablation where >= 2 gold passages are shown.
TWO_SUPPORT = Param(
    "two_support",
    bool,
    True,
    "two-support ablation where >= 2 gold passages are shown",
    section="seed 004 §6.8",
)
#: The zero-retrieval control (the no-evidence prompt).
ZERO_RETRIEVAL = Param(
    "zero_retrieval",
    bool,
    True,
    "zero-retrieval control: the no-evidence prompt",
    section="seed 004 §5.7",
)
#: What a CUE-R run plans (``run-interventions`` flags after the retrieval ones).
RUN_PARAMS = (
    OPERATORS_PARAM,
    REPLACE_HARDNESS_PARAM,
    DUPLICATE_POSITIONS_PARAM,
    TWO_SUPPORT,
    ZERO_RETRIEVAL,
    REPLACE_SEED,
)
#: Version of the CUE-R plan. 2 (issue 34): replacements are whole non-support passages
#: (seed 004 §5.6), no longer chunks that touch no gold passage. An interventions run records
#: it with its retrieval settings (:func:`plan_settings`), so a run planned by another
#: version is refused on resume instead of mixing old and new replacement prompts under the
#: same variant ids; each replace call's meta carries it too (``planner``; absent: 1).
PLANNER_VERSION = 2


def plan_settings(retrieval: Mapping[str, Any]) -> dict[str, Any]:
    """An interventions run's recorded settings: retrieval configuration and plan version.

    The plan's version (:data:`PLANNER_VERSION`, key ``cuer_planner``) is checked with the
    retrieval settings when the run is resumed.
    """
    return {**retrieval, "cuer_planner": PLANNER_VERSION}


#: Role threshold: a change is negligible when |delta| <= eps (and D <= eps).
EPS = Param(
    "eps",
    float,
    0.05,
    "negligible change. Redundant: every |Δ| <= eps and D <= eps. "
    "Confidence-distorting: |Δcal| > eps and |Δcorr| <= eps. Strong complementary: both single "
    "drops <= eps, joint drop > eps",
    minimum=0.0,
    maximum=1.0,
    section="SPEC §7; CUE-R (seed 004) §3.5",
)
#: Role threshold: trace divergence D >= tau is large.
TAU = Param(
    "tau",
    float,
    0.5,
    "large trace divergence. Distractive: D >= tau and a utility worsens; "
    "D = 0.5 (1 - Jaccard of cited ids) + 0.3 [answer changed] + 0.2 |c - c'|",
    minimum=0.0,
    maximum=1.0,
    section="SPEC §7; CUE-R (seed 004) §3.4-3.5",
)
#: Axis of the two-support (synergy) drops.
SYNERGY_METRIC = Param(
    "synergy_metric",
    str,
    "answer_f1",
    "axis of the two-support drops (the paper: answer F1)",
    choices=("answer_f1", "correctness", "grounding"),
    section="CUE-R (seed 004) §6.8, Table 9",
)
#: The role thresholds of ``report interventions``.
REPORT_PARAMS = (EPS, TAU)


# ------------------------------------------------------------------------------ items


# ------------------------------------------------------------------------------ targets


# ------------------------------------------------------------------------------ replacement


# ------------------------------------------------------------------------------ perturb


def _targets(target_id: str | Sequence[str]) -> list[str]:
    if isinstance(target_id, str):
        ids = [t.strip() for t in target_id.split("+") if t.strip()]
    else:
        ids = [str(t).strip() for t in target_id]
    if not ids:
        raise ValueError("no target passage id given")
    return ids


def perturb(
    instance: Instance,
    shown: Sequence[Any],
    operator: str,
    target_id: str | Sequence[str],
    *,
    hardness: str | None = None,
    position: str | None = None,
    move_to: int | None = None,
    seed: int = REPLACE_SEED.default,
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
) -> list[EvidenceItem]:
    """The shown evidence after one intervention (see the module docstring).

    Args:
        instance: the instance.
        shown: the base evidence (passages or chunks), in prompt order.
        operator: ``remove``, ``replace``, ``duplicate`` or ``move``.
        target_id: the target passage id; ``remove`` also takes several (a sequence, or ids
            joined by ``+``).
        hardness: ``replace`` only (required): easy / medium / hard.
        position: ``duplicate`` only: front / after / end (default ``end``).
        move_to: ``move`` only: index in the list without the target (0 = front).
        seed: seed of the ``easy`` replacement.
        chunk_size: chunking of the replacement candidates (the base retrieval's).
        overlap: chunk overlap of the replacement candidates.

    Returns:
        The perturbed evidence items in prompt order (render with
        :func:`core.execution.prompts.render_evidence`; an empty list is the no-evidence prompt).

    Raises:
        ValueError: unknown operator or parameter, a target that is not shown, a parameter
            given to the wrong operator, or no eligible replacement.
    """
    if operator not in OPERATORS:
        raise ValueError(f"unknown operator {operator!r}; choose from: {', '.join(OPERATORS)}")
    for name, value, owner in (
        ("hardness", hardness, "replace"),
        ("position", position, "duplicate"),
        ("move_to", move_to, "move"),
    ):
        if value is not None and operator != owner:
            raise ValueError(f"{name} applies to operator {owner!r} only, not {operator!r}")
    items = evidence_items(shown)
    ids = _targets(target_id)
    if len(ids) > 1 and operator != "remove":
        raise ValueError(f"operator {operator!r} takes one target, got {'+'.join(ids)}")
    shown_ids = shown_passage_ids(items)
    for tid in ids:
        if tid not in shown_ids:
            raise ValueError(
                f"target {tid!r} is not shown in instance {instance.instance_id!r}; "
                f"shown: {', '.join(shown_ids) or '(none)'}"
            )
    hit = [i for i, it in enumerate(items) if set(it.passage_ids) & set(ids)]
    rest = [it for i, it in enumerate(items) if i not in hit]
    if operator == "remove":
        return rest
    tid = ids[0]
    block = [items[i] for i in hit]
    if operator == "duplicate":
        position = position or "end"
        if position not in DUPLICATE_POSITIONS:
            raise ValueError(
                f"unknown duplicate position {position!r}; choose from: "
                f"{', '.join(DUPLICATE_POSITIONS)}"
            )
        copy = [EvidenceItem(it.passage_ids, it.text, f"duplicate:{it.source}") for it in block]
        if position == "front":
            return copy + items
        if position == "end":
            return items + copy
        return items[: hit[-1] + 1] + copy + items[hit[-1] + 1 :]
    if operator == "move":
        if move_to is None or isinstance(move_to, bool) or not isinstance(move_to, int):
            raise ValueError(f"move needs an integer move_to, got {move_to!r}")
        if not 0 <= move_to <= len(rest):
            raise ValueError(f"move_to must be in 0..{len(rest)}, got {move_to}")
        return rest[:move_to] + block + rest[move_to:]
    if hardness is None:
        raise ValueError(f"replace needs a hardness; choose from: {', '.join(REPLACE_HARDNESS)}")
    pool = Pool(instance, shown, chunk_size, overlap)
    return _replace(instance, items, tid, pool.candidates(tid, hardness, seed))


def _replace(
    instance: Instance,
    items: Sequence[EvidenceItem],
    target_id: str,
    candidates: Sequence[tuple[str, tuple[str, ...], str]],
) -> list[EvidenceItem]:
    """``items`` with the first candidate in place of the target's first segment."""
    if not candidates:
        raise ValueError(
            f"no replacement for {target_id!r} in instance {instance.instance_id!r}: it has no "
            "non-support passage besides the target (single passage: no unshown chunk)"
        )
    unit_id, unit_ids, unit_text = candidates[0]
    hit = [i for i, it in enumerate(items) if target_id in it.passage_ids]
    new = [
        EvidenceItem(it.passage_ids, it.text, f"replacement:{unit_id}")
        for it in evidence_items([Chunk(unit_id, 0, unit_text, unit_ids, 0, 0)])
    ]
    return [
        *items[: hit[0]],
        *new,
        *(it for i, it in enumerate(items[hit[0] :], hit[0]) if i not in hit),
    ]


# ------------------------------------------------------------------------------ variants


def format_variant(
    operator: str,
    target: str | Sequence[str] | None = None,
    param: str | int | None = None,
    base: str = "retrieved",
) -> str:
    """The canonical variant id of an intervention.

    Examples: ``remove|p0004``, ``replace:hard|p0004``, ``duplicate:end|p0004``,
    ``move:2|p0004``, ``two_support:both|p0002+p0007``, ``zero_retrieval``; a base other than
    ``retrieved`` appends ``@<base>``.
    """
    if operator == "zero_retrieval":
        head = "zero_retrieval"
    else:
        ids = _targets(target if target is not None else "")
        op = operator if param is None else f"{operator}:{param}"
        head = f"{op}|{'+'.join(ids)}"
    return head if base == "retrieved" else f"{head}@{base}"


def parse_variant(variant: str) -> dict[str, Any]:
    """Inverse of :func:`format_variant`.

    Returns:
        ``{"operator", "param", "targets", "base"}`` (``param`` a string or None, ``targets``
        a tuple of passage ids).

    Raises:
        ValueError: not an intervention variant id.
    """
    text, _, base = str(variant).partition("@")
    base = base or "retrieved"
    if text == "zero_retrieval":
        return {"operator": "zero_retrieval", "param": None, "targets": (), "base": base}
    head, sep, tail = text.partition("|")
    op, _, param = head.partition(":")
    known = (*OPERATORS, "two_support")
    if not sep or op not in known or not tail:
        raise ValueError(
            f"not an intervention variant: {variant!r} (expected e.g. 'replace:hard|p0004')"
        )
    return {
        "operator": op,
        "param": param or None,
        "targets": tuple(tail.split("+")),
        "base": base,
    }


# ------------------------------------------------------------------------------ planning


def _call(
    instance: Instance, items: Sequence[EvidenceItem], variant: str, meta: Mapping[str, Any]
) -> PlannedCall:
    messages = tuple(build_messages(instance, "intervention", list(items)))
    return PlannedCall(
        instance_id=instance.instance_id,
        condition="intervention",
        variant=variant,
        messages=messages,
        input_passage_ids=tuple(shown_passage_ids(items)),
        prompt_hash=prompt_hash(messages),
        meta=dict(meta),
    )


def check_plan_options(
    operators: Iterable[str] | None = None,
    hardness: Iterable[str] | None = None,
    positions: Iterable[str] | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """Validate a run's operators, replacement hardness levels and duplicate positions.

    None means all of them (positions: all three). Returns them de-duplicated, in the given
    order.

    Raises:
        ValueError: an unknown value (the message names it and the allowed ones).
    """
    return (
        _choices(operators, PLAN_OPERATORS, "operator"),
        _choices(hardness, REPLACE_HARDNESS, "replace hardness"),
        _choices(positions, DUPLICATE_POSITIONS, "duplicate position"),
    )


def _choices(values: Iterable[str] | None, allowed: Sequence[str], what: str) -> tuple[str, ...]:
    out: list[str] = []
    for v in allowed if values is None else values:
        v = str(v).strip()
        if v not in allowed:
            raise ValueError(f"unknown {what} {v!r}; choose from: {', '.join(allowed)}")
        if v not in out:
            out.append(v)
    return tuple(out)


def plan_interventions(
    instance: Instance,
    base_cited_ids: Iterable[str],
    *,
    top_k: int = BASE_TOP_K.default,
    retriever: str = "lexical",
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
    operators: Iterable[str] | None = OPERATORS_PARAM.default,
    hardness: Iterable[str] | None = REPLACE_HARDNESS_PARAM.default,
    positions: Iterable[str] | None = DUPLICATE_POSITIONS_PARAM.default,
    two_support: bool = TWO_SUPPORT.default,
    zero_retrieval: bool = ZERO_RETRIEVAL.default,
    seed: int = REPLACE_SEED.default,
    shown: Sequence[Any] | None = None,
) -> list[PlannedCall]:
    """Plan one instance's CUE-R interventions on its base retrieved trace.

    Args:
        instance: the instance.
        base_cited_ids: the ids cited by the base ``retrieved`` prediction.
        top_k: chunks of the base retrieval (seed 004: 5).
        retriever: retriever family of the base retrieval (seed 004: BM25, ``lexical``).
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.
        operators: any of ``remove``, ``replace``, ``duplicate``.
        hardness: replacement hardness levels planned.
        positions: duplicate positions planned (the paper's default: ``end``).
        two_support: plan the two-support ablation where >= 2 gold passages are shown.
        zero_retrieval: plan the zero-retrieval control (the no-evidence prompt).
        seed: seed of the easy replacement.
        shown: the base evidence, when the caller already has it (default: retrieved here,
            exactly as :func:`core.oncu.conditions.plan_conditions` does).

    Returns:
        Calls with condition ``intervention``, sorted by their rendered prompt text so that
        prompts sharing the longest prefix are adjacent (the model server reuses the KV cache
        of the common prefix, as in :func:`core.oncu.conditions.plan_conditions`; ties keep the
        variant order). Each ``meta`` holds the operator, its
        parameter, the target(s), the selection rule, the base retrieval id and, for a
        replacement, the unit put in. A replacement with no eligible unit is left out.

    Raises:
        ValueError: an unknown operator, hardness, position or retriever.
    """
    ops, levels, places = check_plan_options(operators, hardness, positions)
    base_id = retrieval_condition_id(retriever, top_k, chunk_size, overlap)
    chunks = None
    if shown is None:
        chunks = chunk_instance(instance, chunk_size, overlap)
        ranked = rank_chunks(instance, retriever, chunk_size, overlap, chunks=chunks)
        shown = ranked[: int(top_k)]
    items = evidence_items(shown)
    target = select_target(instance, shown, base_cited_ids)
    calls: list[PlannedCall] = []
    common = {"base": "retrieved", "retrieval": base_id}
    if target is not None:
        tid = target.passage_id
        tmeta = {**common, "target": tid, "rule": target.rule}
        if "duplicate" in ops:
            for pos in places:
                new = perturb(instance, items, "duplicate", tid, position=pos)
                meta = {**tmeta, "operator": "duplicate", "position": pos}
                calls.append(_call(instance, new, format_variant("duplicate", tid, pos), meta))
        if "replace" in ops:
            pool = Pool(instance, shown, chunk_size, overlap, chunks=chunks)
            for level in levels:
                cands = pool.candidates(tid, level, seed)
                if not cands:
                    continue
                new = _replace(instance, items, tid, cands)
                meta = {
                    **tmeta,
                    "operator": "replace",
                    "hardness": level,
                    "seed": seed,
                    "replacement": cands[0][0],
                    "replacement_passages": list(cands[0][1]),
                    "replacement_novel": not set(cands[0][1]) & pool.shown_ids,
                    "pool": pool.pool,
                    "candidates": len(cands),
                    "planner": PLANNER_VERSION,
                }
                calls.append(_call(instance, new, format_variant("replace", tid, level), meta))
        if "remove" in ops:
            new = perturb(instance, items, "remove", tid)
            meta = {**tmeta, "operator": "remove"}
            calls.append(_call(instance, new, format_variant("remove", tid), meta))
    if two_support:
        gold = set(instance.gold_ids)
        supports = [pid for pid in shown_passage_ids(items) if pid in gold][:2]
        if len(supports) == 2:
            for part, ids in (("1", supports[:1]), ("2", supports[1:]), ("both", supports)):
                new = perturb(instance, items, "remove", ids)
                meta = {**common, "operator": "two_support", "part": part, "supports": supports}
                calls.append(_call(instance, new, format_variant("two_support", ids, part), meta))
    if zero_retrieval:
        meta = {**common, "operator": "zero_retrieval"}
        calls.append(_call(instance, [], format_variant("zero_retrieval"), meta))
    return sorted(calls, key=lambda c: ("\x00".join(m["content"] for m in c.messages), c.variant))


def plan_rerun(
    instance: Instance,
    shown: Sequence[Any],
    operator: str,
    target_id: str | Sequence[str],
    *,
    base: str = "retrieved",
    **params: Any,
) -> PlannedCall:
    """One intervention call for the Case view's rerun (stored like any intervention).

    Args:
        instance: the instance.
        shown: the evidence of the prediction being perturbed, in prompt order.
        operator: ``remove``, ``replace``, ``duplicate``, ``move`` or ``zero_retrieval``.
        target_id: the target passage id (ignored for ``zero_retrieval``).
        base: the condition of the prediction being perturbed (``retrieved`` by default;
            another base is appended to the variant id).
        **params: :func:`perturb`'s keyword arguments (``hardness``, ``position``,
            ``move_to``, ``seed``, ``chunk_size``, ``overlap``).

    Returns:
        The planned call; ``meta`` records the operator, its parameters, the target and
        ``rule: "user"``.

    Raises:
        ValueError: as :func:`perturb`.
    """
    meta: dict[str, Any] = {"base": base, "operator": operator, "rule": "user"}
    if operator == "zero_retrieval":
        return _call(instance, [], format_variant("zero_retrieval", base=base), meta)
    new = perturb(instance, shown, operator, target_id, **params)
    ids = _targets(target_id)
    param = {
        "replace": params.get("hardness"),
        "duplicate": params.get("position") or "end",
        "move": params.get("move_to"),
    }.get(operator)
    meta.update({"target": "+".join(ids), **{k: v for k, v in params.items() if v is not None}})
    if operator == "replace":
        meta["replacement"] = next(
            (it.source.split(":", 1)[1] for it in new if it.source.startswith("replacement:")),
            None,
        )
    return _call(instance, new, format_variant(operator, ids, param, base=base), meta)
