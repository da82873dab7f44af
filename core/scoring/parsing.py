"""Replies read into the answer contract as the ONCU protocol reads them (SPEC §5.1).

:func:`parse_reply` never raises. The contract is the published one (seed
``oncu_four_condition_protocol.txt`` §3 and its released parser, whose reading of the
release's 1,600 raw replies ``tests/test_parsing_protocol.py`` reproduces):

1. **Reasoning apart.** Reasoning blocks are removed before the answer is looked for and kept
   in :attr:`ParsedAnswer.reasoning`, never parsed as the answer: leading
   ``<think>...</think>`` / ``<thinking>`` / ``<reasoning>`` blocks (qwen3, deepseek-r1), text
   ended by a closing tag whose opening tag the chat template wrote (deepseek-r1 on vLLM), and
   the harmony format's analysis / commentary channels (gpt-oss on raw servers: the answer is
   the ``final`` channel). A reply that ends inside its reasoning (an opening tag never
   closed, harmony without a final channel) is the parse error :data:`REASONING_UNCLOSED`.
   Reasoning the server returns apart (Ollama ``thinking``, OpenAI-compatible
   ``reasoning_content``) never reaches this function (:attr:`core.backends.base.Reply.
   reasoning`).
2. **One complete JSON object.** The answer object is the first ``{`` of the reply at which a
   complete, strict JSON object starts (prose or a Markdown fence around it is fine; at most
   :data:`MAX_CANDIDATES` opening braces are tried). The reply is read whole, however long.
   A reply without one (cut off mid-JSON, Python-style ``{'answer': 'x'}``, trailing commas)
   is a parse error with an empty answer, as published; what a lenient reading finds there is
   kept in :attr:`ParsedAnswer.salvaged`, shown in the transcript, never scored.
3. **Fields.** ``answer`` is the one required key (exactly ``answer``; an object without it is
   the parse error ``missing field 'answer'``, and a value under another key such as
   ``final_answer`` is only salvaged). Its value: strings are stripped; null is ``""`` (as the
   release reads it, no parse error); numbers become text (``3.0`` -> ``"3"``, where the
   release would write ``"3.0"``); booleans ``"yes"`` / ``"no"``; a list its items joined by
   ``", "``. An answer that only names a passage (``passage_3``, ``section_78``) is blanked,
   as the release does, and salvaged. ``confidence`` (this tool's addition: ``"80%"`` -> 0.8,
   a value in (1, 100] is a percentage, clamped to [0, 1]; booleans, NaN and words give None)
   and ``explanation`` (text; missing -> ``""``) also accept a few aliases (``probability``,
   ``rationale``, ...): they are not scored.
4. **Evidence ids** (``evidence_ids``, exactly; scored): a list (a single string or integer is
   one item); an item is a passage id when, stripped, it is ``p`` + digits or digits, any
   case (``P3``, ``3``, ``p00003``), normalized to ``p`` + at least four digits (``p0003``).
   :attr:`ParsedAnswer.evidence_ids` keeps the passage ids that were shown (``known_ids``,
   each spelled as shown), de-duplicated in order, at most ``max_cited`` (3, the prompt's
   "zero to three"). Cited ids
   that were not shown and items that are not passage ids (``evaluation_754``,
   ``passage_id: p0004``) go to :attr:`ParsedAnswer.unshown_ids`, shown ids past the cap to
   :attr:`ParsedAnswer.over_cap_ids`; neither is scored. ``known_ids=None`` (the caller does
   not know what was shown) keeps every passage id, still capped.

An unparseable reply gives ``answer=""`` and a short ``parse_error``; it is scored as incorrect
and kept in every denominator (seed 000 §8.1). Differences from the release, all outside its
prompt's contract: the release records ``missing_fields:evidence_ids`` /
``missing_fields:explanation`` as a parse error while scoring the answer (here: no parse error,
the same answer and ids); non-string answers are coerced as above, not by Python's ``str``.
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.params import Param

__all__ = [
    "DEFAULT_MAX_CITED",
    "INTERNAL_ERROR",
    "MAX_CANDIDATES",
    "MAX_CITED",
    "REASONING_UNCLOSED",
    "ParsedAnswer",
    "parse_reply",
    "run_max_cited",
    "split_reasoning",
]

#: Opening braces tried by the object search before giving up (the release tries every one;
#: this bounds the time a pathological reply takes).
MAX_CANDIDATES = 256
# Opening braces the lenient salvage tries (brace matching in Python: slower per brace).
_SALVAGE_CANDIDATES = 16
#: Evidence ids kept for scoring: the ONCU prompt asks for "zero to three" (``--max-cited``).
DEFAULT_MAX_CITED = 3
#: ``--max-cited``: the cap, recorded in the run's ``options`` (as ``max_cited``) when not 3.
MAX_CITED = Param(
    "max_cited",
    int,
    DEFAULT_MAX_CITED,
    "cited passage ids scored per reply (the prompt's "
    "'zero to three'); shown ids cited past it are kept apart, not scored",
    minimum=1,
    section="seed 000 §3",
)
#: The parse error of a reply that ends inside its reasoning block.
REASONING_UNCLOSED = "reply ended inside its reasoning"
#: Prefix of the ``parse_error`` of a reply the parser itself failed on (a bug, not the
#: reply's fault): ``internal parser error: <exception type>``. No reply-caused error starts so.
INTERNAL_ERROR = "internal parser error: "

_STRICT = json.JSONDecoder()  # strict: no control characters inside strings, as json.loads
_PASSAGE_ID_RE = re.compile(r"[pP]?(\d{1,18})")  # fullmatch on the stripped item
_PASSAGE_ANSWER_RE = re.compile(r"(?:section|passage)_\d+", re.IGNORECASE)
_THINK_TAGS = ("think", "thinking", "reasoning")
_OPEN_RE = re.compile(r"\s*<(think|thinking|reasoning)>", re.IGNORECASE)
_CLOSE_RE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)
_HARMONY_RE = re.compile(
    r"<\|channel\|>\s*(\w+)[^<]*(?:<\|constrain\|>[^<]*)?<\|message\|>(.*?)"
    r"(?=<\|end\|>|<\|return\|>|<\|call\|>|<\|start\|>|\Z)",
    re.DOTALL,
)
_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
_CUT_ANSWER_RE = re.compile(r'"answer"\s*:\s*"((?:[^"\\]|\\.){0,500})"', re.IGNORECASE)

_ALIASES = {
    "answer": ("answer", "final_answer", "finalanswer"),
    "evidence_ids": (
        "evidence_ids",
        "evidenceids",
        "evidence_id",
        "evidence",
        "citations",
        "cited_ids",
        "passage_ids",
        "supporting_ids",
    ),
    "confidence": ("confidence", "confidence_score", "probability"),
    "explanation": ("explanation", "rationale", "reasoning", "reason"),
}


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """A reply read into the answer contract.

    Attributes:
        answer: the answer text (``""`` when unparseable).
        evidence_ids: the cited passage ids that are scored: shown in the call, normalized
            (``p0003``), de-duplicated, in order, at most ``max_cited``.
        confidence: self-reported confidence in [0, 1], or None when absent or invalid.
        explanation: the explanation text (``""`` when absent).
        parse_error: None, or a short reason the reply does not meet the contract.
        unshown_ids: cited ids that were not shown, or are not passage ids (as written), in
            order; not scored.
        over_cap_ids: shown ids cited past the ``max_cited`` cap, in order; not scored.
        salvaged: what a lenient reading found that the contract does not score (an answer
            in a reply that is not strict JSON, under another key, or naming a passage), one
            line for the transcript; ``""`` when nothing.
        reasoning: the reasoning removed from the reply before parsing (``""`` when none).
    """

    answer: str
    evidence_ids: tuple[str, ...] = ()
    confidence: float | None = None
    explanation: str = ""
    parse_error: str | None = None
    unshown_ids: tuple[str, ...] = ()
    over_cap_ids: tuple[str, ...] = ()
    salvaged: str = ""
    reasoning: str = ""

    @property
    def unknown_ids(self) -> tuple[str, ...]:
        """The former name of :attr:`unshown_ids`."""
        return self.unshown_ids

    def record(self) -> dict[str, Any]:
        """What a prediction's ``meta["parse"]`` keeps: the non-empty side fields."""
        out: dict[str, Any] = {}
        if self.unshown_ids:
            out["unshown_ids"] = list(self.unshown_ids)
        if self.over_cap_ids:
            out["over_cap_ids"] = list(self.over_cap_ids)
        if self.salvaged:
            out["salvaged"] = self.salvaged
        return out


def parse_reply(
    text: Any,
    known_ids: Iterable[str] | None = None,
    *,
    max_cited: int | None = DEFAULT_MAX_CITED,
) -> ParsedAnswer:
    """Parse a model reply into the answer contract; never raises.

    Args:
        text: the raw reply (non-strings are converted with ``str``; None is empty).
        known_ids: passage ids shown in the call (``()`` when none was shown: then no id is
            scored); None when the caller does not know (every passage id is kept).
        max_cited: evidence ids kept for scoring (None: no cap).

    Returns:
        The parsed answer; ``parse_error`` says why it does not meet the contract.
    """
    try:
        return _parse(text, known_ids, max_cited)
    except Exception as exc:
        return ParsedAnswer(answer="", parse_error=f"{INTERNAL_ERROR}{type(exc).__name__}")


def run_max_cited(options: Any) -> int:
    """The evidence-id cap a run recorded in its ``options`` (3 when none or unreadable)."""
    value = options.get("max_cited") if isinstance(options, Mapping) else None
    try:
        return DEFAULT_MAX_CITED if value is None else int(MAX_CITED.coerce(value))
    except ValueError:
        return DEFAULT_MAX_CITED


def split_reasoning(text: str) -> tuple[str, str, bool]:
    """``(reasoning, rest, unclosed)``: a reply's reasoning blocks and the text after them.

    ``unclosed`` is True when the reply ends inside its reasoning (``rest`` is then ``""``).
    A reply without reasoning gives ``("", text, False)``. See the module docstring (1).
    """
    if "<|channel|>" in text:
        parts = _HARMONY_RE.findall(text)
        if parts:
            final = [body for channel, body in parts if channel.lower() == "final"]
            thought = "\n".join(b.strip() for c, b in parts if c.lower() != "final")
            if not final:
                return thought, "", True
            return thought, final[-1], False
    thoughts: list[str] = []
    rest = text
    while (m := _OPEN_RE.match(rest)) is not None:
        close = re.compile(rf"</{m.group(1)}>", re.IGNORECASE).search(rest, m.end())
        if close is None:
            thoughts.append(rest[m.end() :].strip())
            return "\n".join(thoughts), "", True
        thoughts.append(rest[m.end() : close.start()].strip())
        rest = rest[close.end() :]
    if not thoughts:
        close = _CLOSE_RE.search(rest)
        # an opening tag the chat template wrote: only its closing tag is in the reply (a
        # closing tag inside the first JSON object is text of the answer)
        if close is not None and f"<{close.group(1).lower()}>" not in rest[: close.start()].lower():
            span = _first_object_span(rest)
            if span is None or not span[0] < close.start() < span[1]:
                thoughts.append(rest[: close.start()].strip())
                rest = rest[close.end() :]
    return "\n".join(thoughts), rest, False


def _parse(text: Any, known_ids: Iterable[str] | None, max_cited: int | None) -> ParsedAnswer:
    if text is None:
        text = ""
    if not isinstance(text, str):
        text = str(text)
    reasoning, rest, unclosed = split_reasoning(text)
    if unclosed:
        return ParsedAnswer(answer="", parse_error=REASONING_UNCLOSED, reasoning=reasoning)
    rest = rest.strip()
    if not rest:
        error = "no answer after the reasoning" if reasoning else "empty reply"
        return ParsedAnswer(answer="", parse_error=error, reasoning=reasoning)
    obj = _first_object(rest)
    if obj is None:
        return ParsedAnswer(
            answer="",
            parse_error="no JSON object found",
            salvaged=_salvage(rest),
            reasoning=reasoning,
        )
    salvaged = ""
    if "answer" in obj:
        answer = "" if obj["answer"] is None else _text(obj["answer"])
        if _PASSAGE_ANSWER_RE.fullmatch(answer):
            salvaged, answer = f"answer {answer!r} names a passage, not an answer", ""
        error = None
    else:
        answer, error = "", "missing field 'answer'"
        found, value = _pick(obj, "answer")
        if found and value is not None:
            salvaged = f"answer {_text(value)[:300]!r} under another key than 'answer'"
    known = None if known_ids is None else _known(known_ids)
    ids, unshown, over = _evidence(obj.get("evidence_ids"), known, max_cited)
    if "evidence_ids" not in obj and not salvaged:
        found, value = _pick(obj, "evidence_ids")
        if found and value:
            salvaged = f"evidence under another key than 'evidence_ids': {_text(value)[:300]}"
    _, raw_conf = _pick(obj, "confidence")
    _, raw_expl = _pick(obj, "explanation")
    return ParsedAnswer(
        answer=answer,
        evidence_ids=ids,
        confidence=_confidence(raw_conf),
        explanation="" if raw_expl is None else _text(raw_expl),
        parse_error=error,
        unshown_ids=unshown,
        over_cap_ids=over,
        salvaged=salvaged,
        reasoning=reasoning,
    )


def _pick(obj: dict[str, Any], name: str) -> tuple[bool, Any]:
    """The value of field ``name`` under its exact key or an alias (any case)."""
    if name in obj:
        return True, obj[name]
    fields = {str(k).strip().lower(): v for k, v in obj.items()}
    for alias in _ALIASES[name]:
        if alias in fields:
            return True, fields[alias]
    return False, None


# ----------------------------------------------------------------------- finding the object


def _first_object(text: str) -> dict[str, Any] | None:
    """The first complete strict JSON object at an opening brace (the release's search)."""
    found = _first_object_at(text)
    return None if found is None else found[0]


def _first_object_span(text: str) -> tuple[int, int] | None:
    """Where :func:`_first_object` finds its object: ``(start, end)``, or None."""
    found = _first_object_at(text)
    return None if found is None else found[1]


def _first_object_at(text: str) -> tuple[dict[str, Any], tuple[int, int]] | None:
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_CANDIDATES:
        tries += 1
        try:
            value, end = _STRICT.raw_decode(text, start)
        except (ValueError, RecursionError):
            value = None
        if isinstance(value, dict):
            return value, (start, end)
        start = text.find("{", start + 1)
    return None


def _salvage(text: str) -> str:
    """What a lenient reading finds in a reply without a strict JSON object (not scored)."""
    obj = _lenient_object(text)
    if obj is not None:
        found, value = _pick(obj, "answer")
        if found and value is not None:
            return f"answer {_text(value)[:300]!r} in a reply that is not strict JSON"
        return ""
    m = _CUT_ANSWER_RE.search(text)
    if m is not None:
        try:
            value = json.loads(f'"{m.group(1)}"')
        except ValueError:
            value = m.group(1)
        return f"answer {value!r} in an incomplete JSON object"
    return ""


def _lenient_object(text: str) -> dict[str, Any] | None:
    obj = _load(text)
    if obj is not None:
        return obj
    for match in _FENCE_RE.finditer(text):
        obj = _load(match.group(2))
        if obj is not None:
            return obj
    start = text.find("{")
    tries = 0
    while start != -1 and tries < _SALVAGE_CANDIDATES:
        tries += 1
        end = _balanced_end(text, start)
        if end is not None:
            obj = _load(text[start : end + 1])
            if obj is not None:
                return obj
        start = text.find("{", start + 1)
    return None


def _load(candidate: str) -> dict[str, Any] | None:
    """``candidate`` read leniently: JSON with control characters, trailing commas, Python."""
    candidate = candidate.strip()
    if not candidate or len(candidate) > 100_000:
        return None
    value: Any = None
    for attempt in (candidate, _TRAILING_COMMA_RE.sub(r"\1", candidate)):
        try:
            value = json.loads(attempt, strict=False)
            break
        except (ValueError, RecursionError):
            continue
    else:
        if candidate[:1] in "{[" and len(candidate) < 20_000:
            try:
                value = ast.literal_eval(candidate)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                return None
    if isinstance(value, list):
        value = next((v for v in value if isinstance(v, dict)), None)
    return value if isinstance(value, dict) else None


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the brace closing the one at ``start``; braces inside strings are skipped."""
    depth = 0
    quote = ""
    escaped = False
    for i in range(start, min(len(text), start + 100_000)):
        ch = text[i]
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch == '"' or (ch == "'" and _opens_py_string(text, i)):
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _opens_py_string(text: str, i: int) -> bool:
    # A single quote opens a string only after a JSON-ish delimiter ({'a': 'b'}), so that
    # apostrophes in words ("don't") do not swallow the rest of the reply.
    j = i - 1
    while j >= 0 and text[j] in " \t\r\n":
        j -= 1
    return j >= 0 and text[j] in "{[,:"


# ------------------------------------------------------------------------------ coercion


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(_text(v) for v in value if v is not None)
    if value is None:
        return ""
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return str(value)


def _passage_id(item: Any) -> str | None:
    """``item`` as a neutral passage id (``p0003``), or None when it is not one."""
    m = _PASSAGE_ID_RE.fullmatch(str(item).strip())
    return None if m is None else f"p{int(m.group(1)):04d}"


def _known(known_ids: Iterable[str]) -> dict[str, str]:
    """The shown ids by their normal form (``p0003``), each as the dataset spells it."""
    out: dict[str, str] = {}
    for k in known_ids:
        pid = _passage_id(k)
        if pid is not None:
            out.setdefault(pid, str(k))
    return out


def _evidence(
    raw: Any, known: Mapping[str, str] | None, cap: int | None
) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(scored, unshown, over_cap)`` ids of an ``evidence_ids`` value (module docstring 4)."""
    if raw is None:
        items: list[Any] = []
    elif isinstance(raw, (str, int)):  # one id (bool is an int: never a passage id)
        items = [raw]
    elif isinstance(raw, (list, tuple, dict)):
        items = list(raw)
    else:
        items = []
    kept: dict[str, None] = {}
    unshown: dict[str, None] = {}
    over: dict[str, None] = {}
    for item in items:
        if item is None:
            continue
        pid = _passage_id(item)
        if pid is None:
            written = item if isinstance(item, str) else json.dumps(item, default=str)
            written = written.strip()[:200]
            if written:
                unshown.setdefault(written, None)
        elif known is not None and pid not in known:
            unshown.setdefault(pid, None)
        elif (pid := pid if known is None else known[pid]) in kept:  # the dataset's spelling
            continue
        elif cap is not None and len(kept) >= cap:
            over.setdefault(pid, None)
        else:
            kept[pid] = None
    return tuple(kept), tuple(unshown), tuple(over)


def _confidence(raw: Any) -> float | None:
    if raw is None or isinstance(raw, bool):
        return None
    percent = False
    if isinstance(raw, str):
        s = raw.strip()
        if s.endswith("%"):
            percent, s = True, s[:-1].strip()
        try:
            value = float(s)
        except ValueError:
            return None
    elif isinstance(raw, (int, float)):
        value = float(raw)
    else:
        return None
    if not math.isfinite(value):
        return None
    if percent or 1.0 < value <= 100.0:
        value /= 100.0
    return min(max(value, 0.0), 1.0)
