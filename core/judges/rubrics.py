"""The papers' judge rubrics as fixed, versioned templates (issue 20).

A :class:`Rubric` is a name, a version, the template text (its SHA-256 is the rubric's hash,
stored with every judgment), the rating scale and the parser of a judge's reply. Four are
registered (:data:`RUBRICS`):

- ``crux-answerability`` (0..5): CRUX's graded-rating prompt, seed 002 App. A.1 Figure 8,
  word for word (:data:`core.crux.metrics.JUDGE_TEMPLATE`, version 1 -- the template the ``judge
  crux`` command has always used, so its stored ratings and cached replies stay valid);
- ``crux-coverage`` (0..5): the same Figure 8 prompt with the *generated answer* y as the
  context. Seed 002 §3.3: "We can also apply this formula to evaluate the coverage of the
  final RAG result y"; the paper gives no separate prompt for it, so the answer-side judgment
  reuses Figure 8 and the same threshold eta (Cov(y) in :mod:`core.crux.answers`);
- ``authtrace-correctness`` (0..3): AuthTrace's AC judge, seed 003 App. K.3 (system prompt and
  user template as printed, the English translation of the Chinese original);
  AC = score / 3 x 100 (:func:`ac_from_score`);
- ``authtrace-evidence`` (0/1): AuthTrace's evidence judges, seed 003 App. K.4 (ER: is a gold
  evidence unit covered by the predicted context pack?) and K.5 (EP: does a predicted
  evidence segment match a gold evidence unit?), sharing K.4's system prompt. One rubric, two
  templates: a judgment's ``item`` says which (``er:<gold passage id>`` / ``ep:<segment>``).

Replies. The server backends constrain every reply to the answer contract's JSON schema
(:data:`core.execution.prompts.ANSWER_SCHEMA`), so a judge's verdict usually arrives inside the
``answer`` (or ``explanation``) field; the parsers read a bare reply, a JSON object with the
rubric's key (``score`` / ``covered`` / ``matched``), or that object or a bare number inside
the answer contract. CRUX: "The output with incorrect format will be regarded as 0" (Fig. 8),
so an unreadable CRUX reply is rated 0 *and* flagged with a ``parse_error``; AuthTrace gives
no rule, so an unreadable AuthTrace reply has no rating (NaN) and a ``parse_error``, counted
wherever its numbers are shown. A failed call is never parsed (an error, not a rating).

Segments. AuthTrace's canonical evidence segments (seed 003 App. K.2, Table 11) are made by
:func:`canonical_segments`: clean, split into sentences, hard-split sentences over 180 tokens,
greedily merge to about 120 tokens (at most 180, at least 40; a short trailing segment joins
the one before when the two fit in 180), drop exact duplicates, keep at most 2,000. Tokens are
counted as the paper counts them: one per CJK character, one per run of Latin letters and
digits. The paper splits at Chinese sentence-ending punctuation and paragraph breaks; our
corpora are English, so ``. ! ?`` followed by a space end a sentence too (an adaptation).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from core.crux.metrics import JUDGE_TEMPLATE, JUDGE_TEMPLATE_VERSION

__all__ = [
    "AUTHTRACE_AC_SYSTEM",
    "AUTHTRACE_AC_USER",
    "AUTHTRACE_EP_USER",
    "AUTHTRACE_ER_USER",
    "AUTHTRACE_EVIDENCE_SYSTEM",
    "RUBRICS",
    "SEGMENT_MAX",
    "SEGMENT_MIN",
    "SEGMENT_TARGET",
    "MAX_SEGMENTS",
    "Rubric",
    "ac_from_score",
    "authtrace_messages",
    "canonical_segments",
    "count_tokens",
    "get_rubric",
    "parse_binary",
    "parse_crux",
    "parse_score03",
]

Message = dict[str, str]
#: What a parser returns: ``(rating or None, parse error or None)``.
Parsed = tuple[float | None, str | None]


# ------------------------------------------------------------------------ templates

#: AuthTrace AC judge, system prompt (seed 003 App. K.3).
AUTHTRACE_AC_SYSTEM = """\
You are a strict benchmark answer judge. You must complete two tasks:
1. Analyze the coverage of each gold_claim_unit (for diagnostics).
2. Assign a holistic 0--3 score based on the rubric (the final metric).
When scoring, you must consider two dimensions simultaneously:
- Dimension A: Coverage of gold claims.
- Dimension B: Whether the answer contains irrelevant, incorrect, or redundant content.
Output only JSON. Do not output anything else."""

#: AuthTrace AC judge, user template (seed 003 App. K.3).
AUTHTRACE_AC_USER = """\
Please evaluate the quality of the Predicted Answer. Step 1: Analyze claim coverage item by \
item For each gold_claim_unit, determine whether the Predicted Answer covers it:
- supported: The claim is explicitly and correctly covered.
- partial: The claim is only partially covered or expressed too vaguely.
- missing: The claim is not covered.
- contradicted: The Predicted Answer clearly contradicts this claim.
Step 2: Check for irrelevant content Check whether the Predicted Answer exhibits the \
following problems:
- Introduces topics or facts not asked by the question.
- Mixes in information from other articles or other people.
- Contains additional incorrect statements that contradict gold claims.
- Is lengthy and repetitive with large amounts of content unrelated to the core question.
Step 3: Assign a holistic 0--3 score based on the rubric Scoring criteria (considering both \
claim coverage and irrelevant content): 3 (Excellent):
  - All or nearly all core claims are correctly covered (supported).
  - The answer is focused and accurate, with no significant irrelevant or incorrect content.
2 (Good):
  - Most core claims are covered, with minor omissions or insufficient detail.
  - Or: Claim coverage is fairly complete, but includes some irrelevant content
    (not affecting core judgment).
1 (Partial):
  - Only about half or fewer claims are covered, with clear omissions.
  - Or: Contains substantial irrelevant/incorrect content that interferes with accuracy.
  - Or: Mentions some relevant information, but key arguments are missing or off-target.
0 (Incorrect):
  - Core claims are essentially uncovered.
  - Or: Contains critical factual errors or direct contradictions with claims.
  - Or: The answer is overwhelmed by irrelevant content; no useful information
    can be extracted.
  - Or: The answer is completely unrelated to the question.
Notes:
- Your primary basis for judgment is gold_claim_units.
- reference_answer is only for auxiliary understanding; do not bypass claims
  and score based on impression alone.
- Penalty for irrelevant content: A few extra background sentences (one or two
  lines of setup) should not cause a deduction; but if irrelevant content
  approaches or exceeds the volume of effective content, or contains factual
  errors, the score should be downgraded.
[Query] {query} [Gold Claim Units] {gold_claim_units_json} [Reference Answer] \
{reference_answer} [Predicted Answer] {predicted_answer} Please output:
{{
  "claim_judgments": [{{"claim": "...", "status": "supported|partial|
    missing|contradicted", "reason": "one sentence"}}],
  "irrelevant_content": {{"has_irrelevant": true/false,
    "description": "brief description or 'none'"}},
  "score": integer 0--3,
  "reason": "one sentence combining claim coverage and irrelevant content"
}}"""

#: AuthTrace ER / EP judges, shared system prompt (seed 003 App. K.4).
AUTHTRACE_EVIDENCE_SYSTEM = """\
You are a strict benchmark evidence judge. Requirements:
1. Evidence Recall: Only assess whether gold evidence is covered by the
   predicted context.
2. Evidence Precision: Only assess whether predicted evidence matches
   gold evidence.
3. Do not conflate answer correctness with evidence quality.
4. Output only JSON."""

#: AuthTrace ER judge, user template (seed 003 App. K.4).
AUTHTRACE_ER_USER = """\
Please determine: Is the given gold evidence unit covered by the predicted context? Coverage \
criteria:
1. Verbatim identity is not required.
2. Longer excerpts, shorter excerpts, or essentially equivalent source
   passages are acceptable.
3. As long as the predicted context contains a passage sufficient to carry
   the key information of this gold evidence, judge as covered=1.
4. Otherwise covered=0.
[Query] {query} [Gold Evidence Unit] {gold_evidence_unit_json} [Predicted Context Pack] \
{predicted_context_pack_json} Please output only JSON:
{{"covered": 0 or 1, "reason": "one sentence explanation"}}"""

#: AuthTrace EP judge, user template (seed 003 App. K.5).
AUTHTRACE_EP_USER = """\
Please determine: Does this predicted evidence unit match gold evidence? Matching criteria:
1. matched = 1: The predicted evidence unit can be aligned with, covers, or
   is essentially equivalent to at least one entry in gold_evidence_units.
2. matched = 0: The predicted evidence unit cannot be aligned with any
   gold evidence.
3. Do not automatically judge as 0 just because the predicted evidence unit
   contains extra context beyond the gold evidence; if it contains content
   that supports the query / gold evidence key information and the extra
   content is not clearly misleading, judge as matched = 1.
[Query] {query} [Gold Evidence Units] {gold_evidence_units_json} [Predicted Evidence Unit] \
{predicted_evidence_unit_json} Please output only JSON:
{{"matched": 0 or 1, "matched_gold_indices": [indices from 0; empty if none],
  "reason": "one sentence explanation"}}"""


# ------------------------------------------------------------------------ reply parsing


def _unwrap(text: str | None) -> tuple[str, Any]:
    """The reply's text and its JSON object (None when it is not one).

    A reply in the answer contract (``answer`` / ``explanation`` keys) is unwrapped: its
    ``answer`` string is the verdict's text, read as JSON when it is an object.
    """
    s = (text or "").strip()
    if s.startswith("```"):
        s = re.sub(r"^```[a-zA-Z]*\s*|\s*```$", "", s).strip()
    obj = _json_object(s)
    if isinstance(obj, dict) and "answer" in obj and "evidence_ids" in obj:
        inner = str(obj.get("answer") or "").strip()
        inner_obj = _json_object(inner)
        if inner_obj is None and not inner:  # a verdict put in the explanation instead
            inner = str(obj.get("explanation") or "").strip()
            inner_obj = _json_object(inner)
        return inner, inner_obj
    return s, obj


def _json_object(s: str) -> Any:
    if not s.startswith("{"):
        return None
    try:
        obj = json.loads(s)
    except ValueError:
        return None
    return obj if isinstance(obj, dict) else None


def _int_in(value: Any, lo: int, hi: int) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float) and float(value).is_integer() and lo <= value <= hi:
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        v = int(value)
        return v if lo <= v <= hi else None
    return None


def parse_crux(text: str | None) -> Parsed:
    """A CRUX 0..5 rating: the reply's first non-blank character if it is a digit 0..5.

    Same reading as :func:`core.crux.metrics.parse_rating` (a leading ``Rating:`` label and the
    answer
    contract tolerated); anything else is rated 0 as seed 002 Fig. 8 says, and flagged.
    """
    s, obj = _unwrap(text)
    if isinstance(obj, dict) and "rating" in obj:
        v = _int_in(obj["rating"], 0, 5)
        if v is not None:
            return float(v), None
    if s.lower().startswith("rating:"):
        s = s[7:].strip()
    if s and s[0] in "012345" and (len(s) == 1 or not s[1].isdigit()):
        return float(int(s[0])), None
    return 0.0, "not a 0-5 rating: regarded as 0 (seed 002 Fig. 8)"


def _parse_key(text: str | None, key: str, lo: int, hi: int) -> Parsed:
    s, obj = _unwrap(text)
    if isinstance(obj, dict):
        if key in obj:
            v = _int_in(obj[key], lo, hi)
            if v is not None:
                return float(v), None
            return None, f"{key} {obj[key]!r} is not an integer {lo}-{hi}"
        return None, f"no {key!r} in the reply's JSON"
    m = re.match(r"\s*(\d+)\b", s)
    if m and lo <= int(m.group(1)) <= hi:
        return float(int(m.group(1))), None
    return None, f"no {key} {lo}-{hi} in the reply"


def parse_score03(text: str | None) -> Parsed:
    """AuthTrace AC: the ``score`` (integer 0..3) of the judge's JSON; None when unreadable."""
    return _parse_key(text, "score", 0, 3)


def parse_binary(key: str) -> Callable[[str | None], Parsed]:
    """A parser of AuthTrace's binary verdicts: ``covered`` (ER) or ``matched`` (EP), 0/1."""

    def parse(text: str | None) -> Parsed:
        return _parse_key(text, key, 0, 1)

    return parse


def ac_from_score(score: float) -> float:
    """AuthTrace AC on 0..100 from the 0..3 rubric score: ``score / 3 x 100`` (seed 003 §3)."""
    return float(score) / 3.0 * 100.0


# ------------------------------------------------------------------------ rubrics


@dataclass(frozen=True, slots=True)
class Rubric:
    """A judge rubric: fixed templates with a version and a hash.

    Attributes:
        name: registry name (``crux-answerability`` ...).
        version: bumped whenever a template changes (judgments of another version never mix:
            a judge run records it and refuses to resume with another).
        templates: template name -> text (``system`` / ``user`` / ``er`` / ``ep`` ...).
        scale: ``(lowest, highest)`` rating.
        source: where the wording comes from (paper, appendix, figure), or that it was
            written here.
        parsers: template name of the user turn -> reply parser (``(rating, parse_error)``).
        description: one line for help texts and tables.
    """

    name: str
    version: str
    templates: Mapping[str, str]
    scale: tuple[int, int]
    source: str
    parsers: Mapping[str, Callable[[str | None], Parsed]] = field(default_factory=dict)
    description: str = ""

    @property
    def hash(self) -> str:
        """Hex SHA-256 of the rubric's name, version and templates (stored per judgment)."""
        blob = json.dumps([self.name, self.version, dict(sorted(self.templates.items()))])
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def parse(self, text: str | None, template: str) -> Parsed:
        """Parse a reply to the user turn ``template``."""
        return self.parsers[template](text)


def authtrace_messages(template: str, **fields: str) -> list[Message]:
    """The two chat turns of an AuthTrace judge call (``ac``, ``er`` or ``ep``)."""
    user = {"ac": AUTHTRACE_AC_USER, "er": AUTHTRACE_ER_USER, "ep": AUTHTRACE_EP_USER}[template]
    system = AUTHTRACE_AC_SYSTEM if template == "ac" else AUTHTRACE_EVIDENCE_SYSTEM
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": user.format(**fields)},
    ]


#: Registered rubrics by name.
RUBRICS: dict[str, Rubric] = {
    r.name: r
    for r in (
        Rubric(
            "crux-answerability",
            JUDGE_TEMPLATE_VERSION,
            {"user": JUDGE_TEMPLATE},
            (0, 5),
            "seed 002 App. A.1, Figure 8 (verbatim)",
            {"user": parse_crux},
            "CRUX answerability G(p, q) of a passage for a sub-question, 0-5",
        ),
        Rubric(
            "crux-coverage",
            "1",
            {"user": JUDGE_TEMPLATE},
            (0, 5),
            "seed 002 Figure 8 applied to the generated answer (§3.3: 'apply this formula to "
            "... the final RAG result y'); no separate prompt is published",
            {"user": parse_crux},
            "CRUX answer coverage: does the generated answer address sub-question q, 0-5",
        ),
        Rubric(
            "authtrace-correctness",
            "1",
            {"system": AUTHTRACE_AC_SYSTEM, "ac": AUTHTRACE_AC_USER},
            (0, 3),
            "seed 003 App. K.3 (English translation as printed)",
            {"ac": parse_score03},
            "AuthTrace answer correctness, holistic 0-3 claim rubric (AC = score/3 x 100)",
        ),
        Rubric(
            "authtrace-evidence",
            "1",
            {"system": AUTHTRACE_EVIDENCE_SYSTEM, "er": AUTHTRACE_ER_USER, "ep": AUTHTRACE_EP_USER},
            (0, 1),
            "seed 003 App. K.4 (ER) and K.5 (EP) (English translation as printed)",
            {"er": parse_binary("covered"), "ep": parse_binary("matched")},
            "AuthTrace evidence matching: gold unit covered by the pack (ER), segment matches "
            "gold (EP), 0/1",
        ),
    )
}


def get_rubric(name: str) -> Rubric:
    """The registered rubric ``name``.

    Raises:
        ValueError: an unknown name (the message lists the registered ones).
    """
    if name not in RUBRICS:
        raise ValueError(f"unknown rubric {name!r}; choose from {', '.join(RUBRICS)}")
    return RUBRICS[name]


# ------------------------------------------------------------------------ segments

#: Segment target, maximum and minimum length in tokens (seed 003 Table 11).
SEGMENT_TARGET = 120
SEGMENT_MAX = 180
SEGMENT_MIN = 40
#: Most predicted evidence segments judged per instance (seed 003 App. K.2).
MAX_SEGMENTS = 2000

_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[A-Za-z0-9]+")
_SENTENCE_END = re.compile(r"(?<=[\u3002\uff01\uff1f\uff1b])|(?<=[.!?])\s+")
_QUOTES = str.maketrans(
    {"\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'", "\u300c": '"', "\u300d": '"'}
)


def count_tokens(text: str) -> int:
    """Tokens as seed 003 App. K.2 counts them: CJK characters and Latin alphanumeric runs."""
    return len(_TOKEN.findall(text))


def _hard_split(sentence: str) -> list[str]:
    """A sentence over :data:`SEGMENT_MAX` tokens cut at token boundaries every 180 tokens."""
    spans = [m.start() for m in _TOKEN.finditer(sentence)]
    cuts = spans[SEGMENT_MAX::SEGMENT_MAX]
    pieces, start = [], 0
    for c in cuts:
        pieces.append(sentence[start:c].strip())
        start = c
    pieces.append(sentence[start:].strip())
    return [p for p in pieces if p]


def canonical_segments(documents: Sequence[str]) -> list[str]:
    """AuthTrace's canonical evidence segments of a pack's documents (seed 003 App. K.2).

    Args:
        documents: the texts of the pack, in pack order (each segmented on its own: a
            segment never spans two documents).

    Returns:
        The segments, duplicates removed (exact match after cleaning), at most
        :data:`MAX_SEGMENTS`.
    """
    out: list[str] = []
    seen: set[str] = set()
    for doc in documents:
        sentences: list[tuple[str, int]] = []
        for para in re.split(r"\n\s*\n|\n", str(doc).translate(_QUOTES)):
            para = " ".join(para.split())
            for sent in _SENTENCE_END.split(para):
                sent = sent.strip()
                if not sent:
                    continue
                n = count_tokens(sent)
                parts = _hard_split(sent) if n > SEGMENT_MAX else [sent]
                sentences.extend((p, count_tokens(p)) for p in parts)
        segs: list[tuple[str, int]] = []
        cur, cur_n = "", 0
        for sent, n in sentences:
            if cur and (cur_n >= SEGMENT_TARGET or cur_n + n > SEGMENT_MAX):
                segs.append((cur, cur_n))
                cur, cur_n = "", 0
            cur, cur_n = (f"{cur} {sent}" if cur else sent), cur_n + n
        if cur:
            if segs and cur_n < SEGMENT_MIN and segs[-1][1] + cur_n <= SEGMENT_MAX:
                last, last_n = segs.pop()
                cur, cur_n = f"{last} {cur}", last_n + cur_n
            segs.append((cur, cur_n))
        for seg, _ in segs:
            if seg not in seen:
                seen.add(seg)
                out.append(seg)
    return out[:MAX_SEGMENTS]
