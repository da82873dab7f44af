"""DOLCE span-sampling probes: instance -> planned calls on spans of C contiguous units (SPEC §8).

Seed ``dolce_lambda_k.txt`` §3.1 and App. K.1. Pure functions: nothing here touches the store
or a backend.

- **Units** (:func:`split_units`): ``sentence`` (default) splits every passage's text into
  sentences, in context order; ``passage`` makes each passage one unit. ``L`` = number of
  units.
- **Observation lengths** (:func:`exponential_ladder`): 0, 1, 2, 5, 10, 20, 50, 100, ... below
  L, then L itself (the full context).
- **Starts** (:func:`span_starts`), one of three strategies:

  - ``paper`` (the default, the seed's procedure): §3.1 iterates over *all* spans, "shifting one
    unit at a time", when budget allows; App. K.1 recommends take-every-5 (every 5th start, 80 %
    fewer calls, rho(lambda) 0.93 and rho(k) 0.99 against all spans on L-Eval SFiction) when it
    does not. Budget is ``max_spans`` (default 100) spans per observation length: a context
    of at most ``max_spans`` units gets all spans at every length (no length has more than L
    starts); a longer one gets every 5th start (0, 5, 10, ...) at every length. Past the cap
    (a length whose every-5th starts still number more than ``max_spans``, i.e. more than
    ``5 * max_spans`` starts) the stride widens to ``ceil((L - C + 1) / max_spans)``, so that
    length gets at most ``max_spans`` evenly spread spans from start 0 (:func:`paper_stride`).
    Why 100: the seed's all-spans procedure stays exact for every HotpotQA distractor context
    (11 to 99 sentences in the 53-record sample), every 5th start stays exact up to 500
    starts (a 4K-token controlled context has about 280 sentences), and one instance costs at
    most 100 probes per length: 381 probes for L = 284 (a 4K-token context), 870 for
    L = 1,124 (16K tokens) and 1,029 for L = 2,250, where all spans would cost 1,894, 9,364
    and 20,875.
  - ``random``: ``per_length`` distinct starts in ``[0, L - C]`` (all of them when fewer exist)
    drawn with a generator seeded from SHA-256 of ``(seed, instance id, C)``.
  - ``take-every-N``: starts 0, N, 2N, ... (App. K.1: shifting the window by a fixed number of
    units), uncapped.

  C = 0 and C = L have the single start 0.
- **Prompt** (:func:`render_span`): the span's units grouped by passage, each group shown as
  ``[passage_id: pXXXX] Title: <title>`` + newline + its sentences, so the reader can cite;
  built with :func:`core.execution.prompts.build_messages` (condition ``intervention``,
  ``probe=True``,
  which adds the instruction to answer "unanswerable" when the text lacks the answer). C = 0
  gives the no-passage prompt with that instruction.
- **Key**: condition ``probe``, variant ``C=<C>|start=<s>``; ``meta`` = units, C, start, L.
- **Plan summary** (:func:`summarize_plan`, :func:`plan_line`): spans taken per observation
  length, what ``run-probes`` prints before it starts.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.dolce.params import THRESHOLD_RULE
from core.execution.prompts import build_messages, prompt_hash
from core.params import Param
from core.types import Instance, PlannedCall

__all__ = [
    "FIT_PARAMS",
    "K_P",
    "LAM_P",
    "LAM_Q",
    "MAX_SPANS",
    "PAPER_STEP",
    "PARAMS",
    "SCENARIO",
    "TASK_BY",
    "THRESHOLD",
    "PER_LENGTH",
    "PROBE_CONDITION",
    "SEED",
    "STRATEGY",
    "STRATEGIES",
    "UNITS",
    "UNITS_PARAM",
    "Unit",
    "exponential_ladder",
    "paper_stride",
    "parse_strategy",
    "parse_variant",
    "plan_line",
    "plan_probes",
    "probe_variant",
    "render_span",
    "span_starts",
    "split_sentences",
    "split_units",
    "summarize_plan",
]

#: The condition of every probe prediction.
PROBE_CONDITION = "probe"
#: Unit granularities.
UNITS = ("sentence", "passage")
#: Sampling strategies (``take-every-N`` with any N >= 1, e.g. ``take-every-5``).
STRATEGIES = ("paper", "random", "take-every-N")
#: The ``paper`` strategy's stride once a context has more units than the cap (App. K.1).
PAPER_STEP = 5

_SENT_RE = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"'”’)\]]))\s+(?=\S)")
_TAKE_RE = re.compile(r"take-every-(\d+)")
_VARIANT_RE = re.compile(r"C=(\d+)\|start=(\d+)")


def _check_strategy(value: str) -> None:
    parse_strategy(value)


_SECTION = "SPEC §8; seed 001 §3.1, App. K.1"
#: Unit granularity of the probed context.
UNITS_PARAM = Param(
    "units", str, "sentence", "unit the context is split into", choices=UNITS, section=_SECTION
)
#: Random spans per observation length C (strategy ``random`` only).
PER_LENGTH = Param(
    "per_length",
    int,
    5,
    "random spans per observation length (strategy random only)",
    minimum=1,
    section=_SECTION,
)
#: Span sampling strategy: ``paper``, ``random`` or ``take-every-N``.
STRATEGY = Param(
    "strategy",
    str,
    "paper",
    "paper (the seed's: all spans when the context has at most max_spans units, else every "
    "5th start), random (per_length random spans), or take-every-N (sliding windows shifted "
    "by N units)",
    section=_SECTION,
    validate=_check_strategy,
)
#: Cap of the ``paper`` strategy: spans per observation length.
MAX_SPANS = Param(
    "max_spans",
    int,
    100,
    "strategy paper: at most this many spans per observation length (all spans when the "
    "context has at most this many units; past 5 x this many starts the stride widens)",
    minimum=1,
    section=_SECTION,
)
#: Seed of the random span starts.
SEED = Param("seed", int, 0, "span seed", section=_SECTION)
#: The probe planner's parameters (:func:`plan_probes` keywords), in CLI / form order.
PARAMS = (UNITS_PARAM, PER_LENGTH, STRATEGY, MAX_SPANS, SEED)

# The knobs of the fit over the probes (``report dolce``, the DOLCE page, ``export``). Declared
# here, beside the probe knobs, because the method module imports scipy and the CLI builds its
# flags on every call.
_FIT_SECTION = "seed dolce_lambda_k §4"
#: II/III vs IV boundary (default per problem: the first tertile of observed lengths).
LAM_P = Param(
    "lam_p",
    float,
    None,
    "lambda_p, the II/III vs IV boundary (default per problem: " + THRESHOLD_RULE + ")",
    minimum=0.0,
    section=_FIT_SECTION,
)
#: II vs III boundary (default per problem: the first tertile).
K_P = Param(
    "k_p",
    float,
    None,
    "k_p, the II (k > k_p) vs III (k <= k_p) boundary (default per "
    "problem: the same value as lambda_p, " + THRESHOLD_RULE + ")",
    minimum=-1.0,
    section=_FIT_SECTION,
)
#: IV vs V boundary (default: the longest observed span shorter than L).
LAM_Q = Param(
    "lam_q",
    float,
    None,
    "lambda_q, the IV vs V boundary (default per problem: the longest "
    "observed span shorter than L)",
    minimum=0.0,
    section=_FIT_SECTION,
)
#: COW / PIG, or auto (Hartigan's dip test).
SCENARIO = Param(
    "scenario",
    str,
    "auto",
    "outcome scenario; auto: Hartigan's dip test on each problem's "
    "scores (bins of 0.1), COW when p < 0.5, else PIG",
    choices=("auto", "COW", "PIG"),
    section="seed dolce_lambda_k §3.1",
)
#: COW binarization of relaxed F1.
THRESHOLD = Param(
    "threshold",
    float,
    0.5,
    "COW threshold on relaxed F1 (scores >= threshold count as correct)",
    minimum=0.0,
    maximum=1.0,
    section="seed dolce_lambda_k §6, App. K.4",
)
#: Column defining tasks (problems sharing the background noise).
TASK_BY = Param(
    "task_by",
    str,
    "dataset",
    "column that defines tasks (problems sharing the background noise)",
    section=_FIT_SECTION,
)
#: The DOLCE fit's parameters, in CLI order.
FIT_PARAMS = (SCENARIO, THRESHOLD, LAM_P, K_P, LAM_Q, TASK_BY)


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit of a probed context.

    Attributes:
        passage_id: neutral id of the passage the unit comes from.
        title: that passage's title.
        text: the unit's text (a sentence, or the whole passage text).
    """

    passage_id: str
    title: str
    text: str


def split_sentences(text: str) -> list[str]:
    """Sentences of a text: split after ``.``, ``!`` or ``?`` (and closing quotes) + space."""
    out = []
    for line in text.split("\n"):
        out.extend(s.strip() for s in _SENT_RE.split(line) if s.strip())
    return out


def split_units(instance: Instance, units: str = "sentence") -> list[Unit]:
    """The instance's context as ordered units (``sentence`` or ``passage``)."""
    if units not in UNITS:
        raise ValueError(f"unknown units {units!r}; choose one of: {', '.join(UNITS)}")
    out: list[Unit] = []
    for p in instance.passages:
        if units == "passage":
            if p.text.strip():
                out.append(Unit(p.passage_id, p.title, p.text.strip()))
            continue
        out.extend(Unit(p.passage_id, p.title, s) for s in split_sentences(p.text))
    return out


def exponential_ladder(L: int) -> list[int]:
    """Observation lengths 0, 1, 2, 5, 10, 20, 50, ... below ``L``, then ``L`` (SPEC §8)."""
    if isinstance(L, bool) or not isinstance(L, int) or L < 1:
        raise ValueError(f"L must be a positive integer, got {L!r}")
    out = [0]
    scale = 1
    while True:
        for base in (1, 2, 5):
            c = base * scale
            if c >= L:
                return out + [L]
            out.append(c)
        scale *= 10


def parse_strategy(strategy: str) -> tuple[str, int | None]:
    """``("paper", None)``, ``("random", None)`` or ``("take-every", N)``; ValueError otherwise."""
    if strategy in ("paper", "random"):
        return strategy, None
    m = _TAKE_RE.fullmatch(str(strategy))
    if m and int(m.group(1)) >= 1:
        return "take-every", int(m.group(1))
    raise ValueError(
        f"unknown strategy {strategy!r}; choose 'paper', 'random' or 'take-every-N' with "
        "N >= 1 (e.g. take-every-5)"
    )


def paper_stride(L: int, C: int, max_spans: int = MAX_SPANS.default) -> int:
    """The ``paper`` strategy's stride between span starts at length ``C`` of ``L`` units.

    1 (all spans) when ``L <= max_spans``; else ``PAPER_STEP`` (every 5th start), widened to
    ``ceil((L - C + 1) / max_spans)`` when every 5th start would still give more than
    ``max_spans`` spans. So a length never gets more than ``max_spans`` spans.

    Args:
        L: number of units.
        C: span length, ``1 <= C <= L``.
        max_spans: the cap (spans per length).
    """
    if max_spans < 1:
        raise ValueError(f"max_spans must be >= 1, got {max_spans}")
    n_starts = L - C + 1
    if L <= max_spans:
        return 1
    if math.ceil(n_starts / PAPER_STEP) <= max_spans:
        return PAPER_STEP
    return math.ceil(n_starts / max_spans)


def span_starts(
    L: int,
    C: int,
    *,
    strategy: str = STRATEGY.default,
    per_length: int = PER_LENGTH.default,
    max_spans: int = MAX_SPANS.default,
    seed: int = 0,
    key: str = "",
) -> list[int]:
    """Start units of the spans of length ``C`` to probe (sorted).

    Args:
        L: number of units.
        C: span length, ``0 <= C <= L``.
        strategy: ``paper``, ``random`` or ``take-every-N``.
        per_length: spans per length for ``random``.
        max_spans: spans per length at most, for ``paper``.
        seed: random seed (``random``).
        key: mixed into the seed (the instance id), so instances get different spans.
    """
    if not 0 <= C <= L:
        raise ValueError(f"C must be in [0, {L}], got {C}")
    if per_length < 1:
        raise ValueError(f"per_length must be >= 1, got {per_length}")
    if max_spans < 1:
        raise ValueError(f"max_spans must be >= 1, got {max_spans}")
    kind, step = parse_strategy(strategy)
    n_starts = L - C + 1
    if C == 0:
        return [0]
    if kind == "paper":
        return list(range(0, n_starts, paper_stride(L, C, max_spans)))
    if step is not None:
        return list(range(0, n_starts, step))
    if per_length >= n_starts:
        return list(range(n_starts))
    digest = hashlib.sha256(f"dolce-probe\x1f{seed}\x1f{key}\x1f{C}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    return sorted(rng.sample(range(n_starts), per_length))


def render_span(span: Sequence[Unit]) -> list[str]:
    """The span as evidence blocks: consecutive units of one passage share one header."""
    blocks: list[tuple[str, str, list[str]]] = []
    for u in span:
        if blocks and blocks[-1][0] == u.passage_id:
            blocks[-1][2].append(u.text)
        else:
            blocks.append((u.passage_id, u.title, [u.text]))
    return [
        f"[passage_id: {pid}] Title: {title.strip()}\n{' '.join(texts)}"
        for pid, title, texts in blocks
    ]


def probe_variant(C: int, start: int) -> str:
    """The canonical variant id ``C=<C>|start=<start>``."""
    return f"C={int(C)}|start={int(start)}"


def parse_variant(variant: str) -> tuple[int, int]:
    """``(C, start)`` of a probe variant id; ValueError naming the bad value otherwise."""
    m = _VARIANT_RE.fullmatch(str(variant))
    if not m:
        raise ValueError(f"not a probe variant: {variant!r} (expected 'C=<C>|start=<start>')")
    return int(m.group(1)), int(m.group(2))


def plan_probes(
    instance: Instance,
    *,
    units: str = UNITS_PARAM.default,
    per_length: int = PER_LENGTH.default,
    strategy: str = STRATEGY.default,
    seed: int = SEED.default,
    lengths: Sequence[int] | None = None,
    max_spans: int = MAX_SPANS.default,
) -> list[PlannedCall]:
    """Plan the DOLCE probes of one instance (condition ``probe``).

    Args:
        instance: the instance (its passages are split into units).
        units: ``sentence`` (default) or ``passage``.
        per_length: random spans per observation length (strategy ``random``).
        strategy: ``paper`` (default), ``random`` or ``take-every-N`` (module docstring).
        seed: random seed of the span starts (strategy ``random``).
        lengths: observation lengths (default :func:`exponential_ladder` of L); each in [0, L].
        max_spans: the ``paper`` strategy's cap: spans per observation length at most.

    Returns:
        One call per (C, start), ordered by C then start; variant ``C=<C>|start=<s>``, meta
        ``{"units", "C", "start", "L"}``, ``input_passage_ids`` the passages the span touches.

    Raises:
        ValueError: unknown units or strategy, bad per_length, max_spans or lengths, or an
            instance with no text to split.
    """
    parse_strategy(strategy)
    all_units = split_units(instance, units)
    L = len(all_units)
    if L == 0:
        raise ValueError(f"instance {instance.instance_id!r} has no text to probe")
    ladder = exponential_ladder(L) if lengths is None else sorted({int(c) for c in lengths})
    bad = [c for c in ladder if not 0 <= c <= L]
    if bad:
        raise ValueError(f"observation lengths must be in [0, {L}], got {bad[0]}")
    calls = []
    for C in ladder:
        starts = span_starts(
            L,
            C,
            strategy=strategy,
            per_length=per_length,
            max_spans=max_spans,
            seed=seed,
            key=instance.instance_id,
        )
        for s in starts:
            span = all_units[s : s + C]
            messages = build_messages(instance, "intervention", render_span(span), probe=True)
            calls.append(
                PlannedCall(
                    instance_id=instance.instance_id,
                    condition=PROBE_CONDITION,
                    variant=probe_variant(C, s),
                    messages=tuple(messages),
                    input_passage_ids=tuple(dict.fromkeys(u.passage_id for u in span)),
                    prompt_hash=prompt_hash(messages),
                    meta={"units": units, "C": C, "start": s, "L": L},
                )
            )
    return calls


def summarize_plan(calls: Sequence[PlannedCall]) -> dict[str, Any]:
    """Spans taken per observation length over planned probe calls (JSON-ready).

    Each instance's full context (``C == L``, whatever L is) is counted under ``"L"`` so that
    instances of different lengths share one row.

    Args:
        calls: :func:`plan_probes` output, for one or many instances.

    Returns:
        ``{"instances", "probes", "spans_per_length"}``; ``spans_per_length`` is one dict per
        length, ``C`` ascending with ``"L"`` last: ``C``, ``spans`` (calls at that length),
        ``instances`` (instances probed at that length) and ``min`` / ``max`` (spans per such
        instance).
    """
    per: dict[int | str, dict[str, int]] = {}
    for c in calls:
        C, L = int(c.meta["C"]), int(c.meta["L"])
        key: int | str = "L" if C == L else C
        row = per.setdefault(key, {})
        row[c.instance_id] = row.get(c.instance_id, 0) + 1
    order = sorted((k for k in per if k != "L"), key=int) + (["L"] if "L" in per else [])
    rows = [
        {
            "C": k,
            "spans": sum(per[k].values()),
            "instances": len(per[k]),
            "min": min(per[k].values()),
            "max": max(per[k].values()),
        }
        for k in order
    ]
    return {
        "instances": len({c.instance_id for c in calls}),
        "probes": len(calls),
        "spans_per_length": rows,
    }


def plan_line(summary: dict[str, Any], strategy: str, **settings: Any) -> str:
    """One line for a :func:`summarize_plan` result, e.g. ``... C=1: 120 (40 per instance)``.

    Args:
        summary: :func:`summarize_plan` output.
        strategy: the strategy that planned it (shown).
        **settings: other settings to show, e.g. ``max_spans=100``.
    """
    shown = ", ".join([f"strategy {strategy}"] + [f"{k} {v}" for k, v in settings.items()])
    parts = []
    for row in summary["spans_per_length"]:
        each = row["min"] if row["min"] == row["max"] else f"{row['min']}-{row['max']}"
        parts.append(f"C={row['C']}: {row['spans']} ({each} per instance)")
    return (
        f"probe plan: {summary['instances']} instances, {summary['probes']} probes ({shown}); "
        f"spans per length: {', '.join(parts) or 'none'}"
    )
