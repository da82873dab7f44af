"""The controlled generator's facts: relations, chains, comparisons, arithmetic, names."""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Fact",
    "Names",
    "RELS",
    "Rel",
    "Spec",
    "TITLES",
    "arithmetic",
    "comparison",
    "fmt",
    "multi_hop",
    "new_fact",
    "single_hop",
    "title_stem",
]


# ---------------------------------------------------------------------------- entities, facts
def _family(pattern: str, words: str) -> tuple[str, ...]:
    return tuple(pattern.format(w) for w in words.split())


_STEMS = {
    "model": _family("Model {}", "Alpha Beta Gamma Delta Epsilon Zeta Theta Kappa Lambda Sigma"),
    "lab": _family("{} Labs", "Arcturus Borealis Cygnus Draco Lyra Orion Vega Altair Carina"),
    "city": _family("{}", "Velmora Tarsk Ostrel Brindlemoor Calvane Dunmere Eskerby Falkirn"),
    "dataset": _family("Dataset {}", "Amber Birch Cobalt Dune Ember Fjord Garnet Heron Iris"),
    "province": _family("{} Province", "Norvale Eastmarch Highmoor Saltreach Tamberlin Wendover"),
    "agency": _family("{} Agency", "Meridian Keystone Lodestar Beacon Harbinger Sentinel"),
}


@dataclass(frozen=True, slots=True)
class Rel:
    """A relation: its phrasing, the family of its values and how a number is written."""

    subj: str
    obj: str  # entity family, or "number"
    phrasings: tuple[str, ...]
    question: str
    describe: str = ""
    low: int = 0  # numeric range (inclusive), in tenths for accuracy
    high: int = 0
    tenths: bool = False


RELS: dict[str, Rel] = {
    "developed_by": Rel(
        "model",
        "lab",
        ("{s} was developed by {o}.", "{o} developed {s} as its main research system."),
        "Which lab developed {s}?",
        "the developer of {s}",
    ),
    "located_in": Rel(
        "lab",
        "city",
        ("{s} is headquartered in {o}.", "The main offices of {s} are located in {o}."),
        "In which city is {s} headquartered?",
        "the headquarters city of {s}",
    ),
    "trained_on": Rel(
        "model",
        "dataset",
        ("{s} was trained on {o}.", "The training data for {s} came from {o}."),
        "Which dataset was {s} trained on?",
        "the training dataset of {s}",
    ),
    "curated_by": Rel(
        "dataset",
        "lab",
        ("{s} was curated by {o}.", "{o} assembled and curated {s}."),
        "Which lab curated {s}?",
        "the curator of {s}",
    ),
    "in_region": Rel(
        "city",
        "province",
        ("{s} lies within {o}.", "The city of {s} is part of {o}."),
        "Which province contains {s}?",
        "the province containing {s}",
    ),
    "administered_by": Rel(
        "province",
        "agency",
        ("{s} is administered by {o}.", "{o} oversees the administration of {s}."),
        "Which agency administers {s}?",
        "the agency administering {s}",
    ),
    "fine_tuned_from": Rel(
        "model",
        "model",
        ("{s} was fine-tuned from {o}.", "{s} started as a fine-tuned copy of {o}."),
        "Which model was {s} fine-tuned from?",
        "the base model of {s}",
    ),
    "accuracy": Rel(
        "model",
        "number",
        (
            "{s} achieved an accuracy of {o} on the held-out evaluation.",
            "On the held-out evaluation, {s} reached an accuracy of {o}.",
        ),
        "What accuracy did {s} achieve on the held-out evaluation?",
        low=550,
        high=950,
        tenths=True,
    ),
    "samples": Rel(
        "dataset",
        "number",
        ("{s} contains {o} samples.", "In total, {s} holds {o} samples."),
        "How many samples does {s} contain?",
        low=100,
        high=999,
    ),
    "researchers": Rel(
        "lab",
        "number",
        ("{s} employs {o} researchers.", "The staff of {s} includes {o} researchers."),
        "How many researchers does {s} employ?",
        low=20,
        high=480,
    ),
}


_SINGLE_HOP_RELS = (
    "developed_by",
    "located_in",
    "trained_on",
    "curated_by",
    "in_region",
    "fine_tuned_from",
    "accuracy",
    "samples",
    "researchers",
)


_CHAINS = {
    2: ("developed_by", "located_in"),
    3: ("developed_by", "located_in", "in_region"),
    4: ("trained_on", "curated_by", "located_in", "in_region"),
    5: ("fine_tuned_from", "trained_on", "curated_by", "located_in", "in_region"),
    6: (
        "fine_tuned_from",
        "trained_on",
        "curated_by",
        "located_in",
        "in_region",
        "administered_by",
    ),
}


_COMPARE = {
    "accuracy": (
        "Which model achieved the higher accuracy on the held-out evaluation, {a} or {b}?",
        "Which of these models achieved the highest accuracy on the held-out evaluation: {l}?",
    ),
    "samples": (
        "Which dataset contains more samples, {a} or {b}?",
        "Which of these datasets contains the most samples: {l}?",
    ),
    "researchers": (
        "Which lab employs more researchers, {a} or {b}?",
        "Which of these labs employs the most researchers: {l}?",
    ),
}


_ARITH = {
    "samples": (
        "What is the total number of samples in {l} combined?",
        "How many more samples does {a} contain than {b}?",
    ),
    "researchers": (
        "How many researchers do {l} employ in total?",
        "How many more researchers does {a} employ than {b}?",
    ),
}


TITLES = ("Profile: {s}", "Notes on {s}", "{s} overview", "Record for {s}", "About {s}")


def title_stem(name: str) -> str:
    """The stem of a title (its first word, lower-cased)."""
    return name.rsplit(" ", 1)[0]


def fmt(rel: Rel, value: int) -> str:
    """A number written as the relation writes it (unit, thousands)."""
    return f"{value / 10:.1f}" if rel.tenths else str(value)


def _listing(names: Sequence[str], last: str) -> str:
    return ", ".join(names[:-1]) + f" {last} " + names[-1]


class Names:
    """Unique entity names of one instance."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: set[str] = set()

    def new(self, family: str, avoid: Iterable[str] = ()) -> str:
        """A fresh name of the family, none of ``avoid``."""
        avoid = set(avoid)
        stems = [s for s in _STEMS[family] if s not in avoid] or list(_STEMS[family])
        while True:
            name = f"{self.rng.choice(stems)} {self.rng.randint(100, 9999):05d}"
            if name not in self.used:
                self.used.add(name)
                return name

    def near(self, name: str) -> str:
        """Same stem, suffix differing in exactly one of its last three digits."""
        stem, suffix = name.rsplit(" ", 1)
        while True:
            pos = self.rng.randint(len(suffix) - 3, len(suffix) - 1)
            digit = self.rng.choice([c for c in "0123456789" if c != suffix[pos]])
            cand = f"{stem} {suffix[:pos]}{digit}{suffix[pos + 1 :]}"
            if cand not in self.used:
                self.used.add(cand)
                return cand


@dataclass(slots=True)
class Fact:
    """One generated fact: subject, relation, value, and its number if any."""

    subject: str
    relation: str
    value: str
    number: int | None = None  # raw integer (tenths for accuracy)
    phrasing: int = 0
    title: int = 0

    def sentence(self) -> str:
        """The fact as a sentence of the passage."""
        rel = RELS[self.relation]
        return rel.phrasings[self.phrasing].format(s=self.subject, o=self.value)

    def as_dict(self) -> dict[str, Any]:
        """The fact as the instance's metadata records it."""
        return {"subject": self.subject, "relation": self.relation, "value": self.value}


def new_fact(rng: random.Random, subject: str, relation: str, value: str, number=None) -> Fact:
    """A fact of ``subject``, phrased by the relation's template."""
    rel = RELS[relation]
    return Fact(
        subject,
        relation,
        value,
        number,
        rng.randrange(len(rel.phrasings)),
        rng.randrange(len(TITLES)),
    )


def _distinct_numbers(rng: random.Random, rel: Rel, k: int, gap: int, pad: int = 0) -> list[int]:
    """Values in the relation's range (shrunk by ``pad`` at both ends), pairwise >= gap apart."""
    while True:
        vals = [rng.randint(rel.low + pad, rel.high - pad) for _ in range(k)]
        ordered = sorted(vals)
        if all(b - a >= gap for a, b in zip(ordered, ordered[1:], strict=False)):
            return vals


# ---------------------------------------------------------------------------- questions
@dataclass(slots=True)
class Spec:
    """What one instance asks and which facts its gold passages state."""

    question: str
    answer: str
    answer_type: str
    aliases: tuple[str, ...]
    facts: list[Fact]  # one per gold passage, in logical order
    mode: str
    numbers: dict[str, Any]
    corroborate: bool = False


def _number_aliases(rel: Rel, value: int) -> tuple[str, ...]:
    if rel.tenths:
        return (str(value // 10),) if value % 10 == 0 else ()
    return (f"{value:,}",) if value >= 1000 else ()


def single_hop(rng: random.Random, names: Names, scattered: bool) -> Spec:
    """A single-hop question and its gold fact."""
    relation = rng.choice(_SINGLE_HOP_RELS)
    rel = RELS[relation]
    subject = names.new(rel.subj)
    if rel.obj == "number":
        number = rng.randint(rel.low, rel.high)
        fact = new_fact(rng, subject, relation, fmt(rel, number), number)
        answer_type, aliases = "number", _number_aliases(rel, number)
        numbers: dict[str, Any] = {"value": fmt(rel, number)}
    else:
        fact = new_fact(rng, subject, relation, names.new(rel.obj, avoid=[title_stem(subject)]))
        answer_type, aliases, numbers = "entity", (), {}
    facts = [fact, fact] if scattered else [fact]
    return Spec(
        rel.question.format(s=subject),
        fact.value,
        answer_type,
        aliases,
        facts,
        "corroborated" if scattered else "single",
        numbers,
        corroborate=scattered,
    )


def multi_hop(rng: random.Random, names: Names, k: int) -> Spec:
    """A ``k``-hop chain question and its gold facts."""
    chain = _CHAINS[k]
    entity = names.new(RELS[chain[0]].subj)
    start = entity
    facts = []
    stems = {title_stem(entity)}
    for relation in chain:
        rel = RELS[relation]
        obj = names.new(rel.obj, avoid=stems)
        stems.add(title_stem(obj))
        facts.append(new_fact(rng, entity, relation, obj))
        entity = obj
    desc = start
    for relation in chain[:-1]:
        desc = RELS[relation].describe.format(s=desc)
    question = RELS[chain[-1]].question.format(s=desc)
    return Spec(question, entity, "entity", (), facts, "chain", {"chain": list(chain)})


def _subjects(names: Names, rel: Rel, k: int) -> list[str]:
    """``k`` new subjects of relation ``rel``, no two sharing a stem."""
    subjects: list[str] = []
    for _ in range(k):
        subjects.append(names.new(rel.subj, avoid=[title_stem(s) for s in subjects]))
    return subjects


def comparison(rng: random.Random, names: Names, k: int) -> Spec:
    """A comparison of ``k`` subjects and its gold facts."""
    attribute = rng.choice(tuple(_COMPARE))
    rel = RELS[attribute]
    subjects = _subjects(names, rel, k)
    gap = 10 if rel.tenths else 5
    # keep 3 gaps of room at both ends, so conflicting look-alikes can score below / above all
    values = _distinct_numbers(rng, rel, k, gap, pad=3 * gap)
    facts = [
        new_fact(rng, s, attribute, fmt(rel, v), v) for s, v in zip(subjects, values, strict=True)
    ]
    winner = subjects[values.index(max(values))]
    shown = subjects[:]
    rng.shuffle(shown)
    two, many = _COMPARE[attribute]
    question = (
        two.format(a=shown[0], b=shown[1]) if k == 2 else many.format(l=_listing(shown, "or"))
    )
    numbers = {"attribute": attribute, "values": {f.subject: f.value for f in facts}}
    return Spec(question, winner, "entity", (), facts, "compare", numbers)


def arithmetic(rng: random.Random, names: Names, k: int) -> Spec:
    """An arithmetic question over ``k`` numbers and its gold facts."""
    attribute = rng.choice(tuple(_ARITH))
    rel = RELS[attribute]
    subjects = _subjects(names, rel, k)
    values = _distinct_numbers(rng, rel, k, gap=1)
    facts = [new_fact(rng, s, attribute, str(v), v) for s, v in zip(subjects, values, strict=True)]
    op = rng.choice(("sum", "difference")) if k == 2 else "sum"
    total, diff = _ARITH[attribute]
    if op == "sum":
        shown = subjects[:]
        rng.shuffle(shown)
        result = sum(values)
        question = total.format(l=_listing(shown, "and"))
    else:
        hi_i = values.index(max(values))
        a, b = subjects[hi_i], subjects[1 - hi_i]
        result = values[hi_i] - values[1 - hi_i]
        question = diff.format(a=a, b=b)
    numbers = {
        "attribute": attribute,
        "operation": op,
        "operands": {f.subject: v for f, v in zip(facts, values, strict=True)},
        "result": result,
    }
    return Spec(
        question, str(result), "number", _number_aliases(rel, result), facts, "aggregate", numbers
    )
