"""CRUX answerability: required sub-questions, ratings from gold or a judge, the judge's prompt."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field

from core.scoring.parsing import parse_reply
from core.types import Instance

__all__ = [
    "Answerability",
    "ETA",
    "JUDGE_TEMPLATE",
    "JUDGE_TEMPLATE_VERSION",
    "answerability_from_gold",
    "answerability_from_ratings",
    "check_eta",
    "judge_messages",
    "parse_rating",
    "required_subset",
]


#: Answerability threshold on the 0..5 rating scale (seed 002 fn. 3).
ETA = 3


def check_eta(eta: float) -> float:
    """``eta`` as a float in (0, 5] (ValueError naming the bad value)."""
    try:
        e = float(eta)
    except (TypeError, ValueError):
        raise ValueError(f"eta must be a number in (0, 5], got {eta!r}") from None
    if isinstance(eta, bool) or not 0.0 < e <= 5.0:
        raise ValueError(f"eta must be a number in (0, 5] (the 0-5 rating scale), got {eta!r}")
    return e


def required_subset(passage_to_subquestions: Mapping[Hashable, Iterable[Hashable]]) -> list:
    """Z*: greedy set cover of the sub-questions the given passages answer (seed 002 §3.2).

    At each step the passage answering the most not-yet-covered sub-questions joins; ties go
    to the passage that comes first in the mapping's order (pass passages in context order).
    Stops when no passage adds a sub-question.

    Args:
        passage_to_subquestions: passage id -> the sub-question ids it answers.

    Returns:
        Passage ids of the required subset, in the order they were chosen.
    """
    items = [(pid, frozenset(sqs)) for pid, sqs in passage_to_subquestions.items()]
    covered: set[Hashable] = set()
    out: list = []
    while True:
        gains = [len(s - covered) for _, s in items]
        if not gains or max(gains) == 0:
            return out
        best = max(range(len(items)), key=lambda j: (gains[j], -j))
        pid, sqs = items.pop(best)
        covered |= sqs
        out.append(pid)


@dataclass(frozen=True, slots=True)
class Answerability:
    """Which sub-questions each passage of one instance answers.

    Attributes:
        instance_id: the instance.
        source: ``"gold"`` (derived from gold evidence) or ``"judge:<name>"`` (stored ratings).
        sub_questions: every sub-question id of the instance.
        answers: passage id -> sub-question ids of ``answerable`` it answers (rating >= eta);
            judged passages only (with ``source == "gold"``: the gold passages).
        answerable: ``Q_ans``, the sub-questions the oracle context answers: those some gold
            passage answers (so Z* answers them all, Cov(Z*) = 1).
        required: Z*, passage ids of the greedy set cover by gold passages.
        eta: the threshold the ratings were cut at; None for answerability derived from gold
            (binary: no threshold applies).
        discarded: the instance's other sub-questions, filtered out of every metric as the
            paper filters them (seed 002 §3.2, App. A.3), also when a non-gold passage
            answers them.
        distractor_only: those of ``discarded`` that some non-gold passage answers.
    """

    instance_id: str
    source: str
    sub_questions: tuple[str, ...]
    answers: Mapping[str, frozenset[str]]
    answerable: frozenset[str]
    required: tuple[str, ...] = field(default=())
    eta: float | None = None
    discarded: frozenset[str] = field(default=frozenset())
    distractor_only: frozenset[str] = field(default=frozenset())


def answerability_from_gold(instance: Instance) -> Answerability:
    """Binary answerability derived from gold evidence.

    Each gold passage answers its own sub-question (id = its passage id) and no other passage
    answers anything.
    """
    gold = instance.gold_ids
    answers = {pid: frozenset({pid}) for pid in gold}
    return Answerability(
        instance_id=instance.instance_id,
        source="gold",
        sub_questions=tuple(gold),
        answers=answers,
        answerable=frozenset(gold),
        required=tuple(required_subset(answers)),
    )


def answerability_from_ratings(
    instance: Instance,
    sub_questions: Iterable[str],
    ratings: Iterable[tuple[str, str, float]],
    judge: str,
    eta: float = ETA,
) -> Answerability:
    """Answerability from stored 0..5 ratings (an item answers q when its rating >= ``eta``).

    Args:
        instance: the instance (its gold passages form the required subset).
        sub_questions: the instance's sub-question ids.
        ratings: ``(passage_id, sq_id, rating)`` rows of one judge.
        judge: the judge's name (recorded as ``judge:<name>``).
        eta: answerability threshold in (0, 5]: an item answers q when its rating >= eta.

    Raises:
        ValueError: a rating outside 0..5, a rating of a passage the instance lacks, or eta
            outside (0, 5].
    """
    eta = check_eta(eta)
    known = {p.passage_id for p in instance.passages}
    order = {p.passage_id: p.ord for p in instance.passages}
    sqs = list(dict.fromkeys(str(q) for q in sub_questions))
    answers: dict[str, set[str]] = {}
    for pid, sq, rating in ratings:
        r = float(rating)
        if not 0.0 <= r <= 5.0:
            raise ValueError(
                f"instance {instance.instance_id!r}: rating {rating!r} of ({pid}, {sq}) is "
                "outside 0..5"
            )
        if pid not in known:
            raise ValueError(
                f"instance {instance.instance_id!r}: rating for unknown passage {pid!r}"
            )
        if str(sq) not in sqs:
            sqs.append(str(sq))
        answers.setdefault(pid, set())
        if r >= eta:
            answers[pid].add(str(sq))
    gold = set(instance.gold_ids)
    # Q_ans: what the oracle (gold) passages answer; a sub-question only a distractor answers
    # is discarded like one nothing answers (seed 002 §3.2), so Cov(Z*) = 1 by construction
    answerable = frozenset().union(*(answers[p] for p in answers if p in gold))
    frozen = {p: frozenset(answers[p]) & answerable for p in sorted(answers, key=order.__getitem__)}
    return Answerability(
        instance_id=instance.instance_id,
        source=f"judge:{judge}",
        sub_questions=tuple(sqs),
        answers=frozen,
        answerable=answerable,
        required=tuple(required_subset({p: s for p, s in frozen.items() if p in gold})),
        eta=eta,
        discarded=frozenset(sqs) - answerable,
        distractor_only=frozenset().union(*answers.values()) - answerable,
    )


#: CRUX graded-rating prompt (seed 002, App. A.1, Figure 8), fixed text; version recorded in
#: the judge name so ratings of another template never mix.
JUDGE_TEMPLATE = """\
Instruction: Determine whether the question can be answered based on the provided context? \
Rate the context with on a scale from 0 to 5 according to the guideline below. Do not write \
anything except the rating.

Guideline:
5: The context is highly relevant, complete, and accurate.
4: The context is mostly relevant and complete but may have minor gaps or inaccuracies.
3: The context is partially relevant and complete, with noticeable gaps or inaccuracies.
2: The context has limited relevance and completeness, with significant gaps or inaccuracies.
1: The context is minimally relevant or complete, with substantial shortcomings.
0: The context is not relevant or complete at all.

Question: {question}

Context: {context}
Rating:"""


JUDGE_TEMPLATE_VERSION = "1"


def judge_messages(question: str, context: str) -> list[dict[str, str]]:
    """The chat messages asking a judge to rate ``context`` for ``question`` (0..5)."""
    return [{"role": "user", "content": JUDGE_TEMPLATE.format(question=question, context=context)}]


def parse_rating(text: str | None) -> int:
    """The judge's rating: the first non-blank character if it is a digit 0..5, else 0.

    Seed 002 (Fig. 8): "The output with incorrect format will be regarded as 0". A leading
    ``Rating:`` label is tolerated, and so is a reply in the answer contract (backends such as
    Ollama enforce its JSON schema): then the ``answer`` field is read.
    """
    s = (text or "").strip()
    if s.startswith(("{", "```")):
        s = parse_reply(s).answer.strip()
    if s.lower().startswith("rating:"):
        s = s[7:].strip()
    if s and s[0] in "012345" and (len(s) == 1 or not s[1].isdigit()):
        return int(s[0])
    return 0
