"""Tolerant parsing of model replies into the answer contract (SPEC §5.1).

:func:`parse_reply` never raises. It looks for one JSON object, in this order:

1. the whole reply (surrounding whitespace ignored);
2. the first Markdown code fence (```json ... ``` or ``` ... ```) whose content is an object;
3. the first balanced ``{...}`` (brace matching that skips braces inside JSON strings) that
   parses; at most :data:`MAX_CANDIDATES` opening braces are tried.

Each candidate is read as strict JSON, then as JSON with trailing commas removed, then as a
Python literal (``{'answer': 'x'}``, ``True``/``None``), which small models sometimes emit.

Coercion (decisions, documented here because scores depend on them):

- keys are matched case-insensitively, with a few aliases (``final_answer``; ``evidence``,
  ``citations``, ``cited_ids``, ``passage_ids``, ``evidence_id``); a missing ``answer`` is a
  parse error (the contract's one required field), other missing fields take empty values;
- ``answer``: strings are stripped; numbers become text (``3.0`` -> ``"3"``); booleans become
  ``"yes"`` / ``"no"``; a list becomes its items joined by ``", "``; null is a parse error;
- ``evidence_ids``: a list or a string split on commas, semicolons and whitespace; each item
  naming a passage (``p3``, ``P0003``, ``[passage_id: p0003]``) becomes the neutral form
  ``p0003`` (at least four digits); other non-empty items are kept as given; duplicates are
  dropped, order kept;
- ``unknown_ids``: the ids not in ``known_ids`` (the ids shown in the prompt); without
  ``known_ids``, the ids not of the neutral form ``p`` + four or more digits. They stay in
  ``evidence_ids`` (scored as wrong citations) and are flagged here;
- ``confidence``: a number or numeric string; ``"80%"`` -> 0.8; a value in (1, 100] is read as
  a percentage (80 -> 0.8); then clamped to [0, 1] (150 -> 1.0, -0.2 -> 0.0). Booleans, NaN,
  infinities and words (``"high"``) are invalid and give None, without a parse error;
- ``explanation``: text (non-strings are JSON-encoded); missing -> ``""``.

An unparseable reply gives ``answer=""`` and a short ``parse_error``; it is scored as incorrect
and kept in every denominator (seed 000 §8.1).
"""

from __future__ import annotations

import ast
import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = ["INTERNAL_ERROR", "MAX_CANDIDATES", "ParsedAnswer", "parse_reply"]

#: Opening braces tried by the balanced-object search before giving up.
MAX_CANDIDATES = 64
# Replies longer than this are cut before searching (a contract reply is a few hundred bytes).
_MAX_CHARS = 200_000

_FENCE_RE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[^\n]*\n?(.*?)```", re.DOTALL)
_TRAILING_COMMA_RE = re.compile(r",(\s*[}\]])")
_PID_RE = re.compile(r"(?<![A-Za-z0-9])[pP]\s*0*(\d{1,9})(?![0-9])")
_NEUTRAL_RE = re.compile(r"p\d{4,}")
_SPLIT_RE = re.compile(r"[,;\s]+")
_NONE_WORDS = frozenset({"none", "null", "n/a", "na", "nil", "-", "[]"})

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


#: Prefix of the ``parse_error`` of a reply the parser itself failed on (a bug, not the
#: reply's fault): ``internal parser error: <exception type>``. No reply-caused error starts so.
INTERNAL_ERROR = "internal parser error: "


@dataclass(frozen=True, slots=True)
class ParsedAnswer:
    """A reply read into the answer contract.

    Attributes:
        answer: the answer text (``""`` when unparseable).
        evidence_ids: cited passage ids, normalized (``p0003``), de-duplicated, in order.
        confidence: self-reported confidence in [0, 1], or None when absent or invalid.
        explanation: the explanation text (``""`` when absent).
        parse_error: None, or a short reason the reply does not meet the contract.
        unknown_ids: cited ids that were not shown (see module docstring); kept in
            ``evidence_ids`` too.
    """

    answer: str
    evidence_ids: tuple[str, ...] = ()
    confidence: float | None = None
    explanation: str = ""
    parse_error: str | None = None
    unknown_ids: tuple[str, ...] = ()


def parse_reply(text: Any, known_ids: Iterable[str] | None = None) -> ParsedAnswer:
    """Parse a model reply into the answer contract; never raises.

    Args:
        text: the raw reply (non-strings are converted with ``str``; None is empty).
        known_ids: passage ids shown in the prompt, to flag citations of anything else.

    Returns:
        The parsed answer; ``parse_error`` says why it does not meet the contract.
    """
    try:
        return _parse(text, known_ids)
    except Exception as exc:  # noqa: BLE001 - the contract: a reply never crashes a run
        return ParsedAnswer(answer="", parse_error=f"{INTERNAL_ERROR}{type(exc).__name__}")


def _parse(text: Any, known_ids: Iterable[str] | None) -> ParsedAnswer:
    if text is None:
        text = ""
    if not isinstance(text, str):
        text = str(text)
    text = text.strip()[:_MAX_CHARS]
    if not text:
        return ParsedAnswer(answer="", parse_error="empty reply")
    obj = _find_object(text)
    if obj is None:
        return ParsedAnswer(answer="", parse_error="no JSON object found")
    fields = {str(k).strip().lower(): v for k, v in obj.items()}

    def pick(name: str) -> tuple[bool, Any]:
        for alias in _ALIASES[name]:
            if alias in fields:
                return True, fields[alias]
        return False, None

    has_answer, raw_answer = pick("answer")
    _, raw_ids = pick("evidence_ids")
    _, raw_conf = pick("confidence")
    _, raw_expl = pick("explanation")
    known = None if known_ids is None else {str(k) for k in known_ids}
    ids = _ids(raw_ids)
    if known is None:
        unknown = tuple(i for i in ids if not _NEUTRAL_RE.fullmatch(i))
    else:
        unknown = tuple(i for i in ids if i not in known)
    error = None
    if not has_answer:
        error = "missing field 'answer'"
    elif raw_answer is None:
        error = "field 'answer' is null"
    return ParsedAnswer(
        answer=_text(raw_answer) if error is None else "",
        evidence_ids=ids,
        confidence=_confidence(raw_conf),
        explanation="" if raw_expl is None else _text(raw_expl),
        parse_error=error,
        unknown_ids=unknown,
    )


# ----------------------------------------------------------------------- finding the object


def _load(candidate: str) -> dict[str, Any] | None:
    candidate = candidate.strip()
    if not candidate:
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


def _find_object(text: str) -> dict[str, Any] | None:
    obj = _load(text)
    if obj is not None:
        return obj
    for match in _FENCE_RE.finditer(text):
        obj = _load(match.group(2))
        if obj is not None:
            return obj
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_CANDIDATES:
        tries += 1
        end = _balanced_end(text, start)
        if end is not None:
            obj = _load(text[start : end + 1])
            if obj is not None:
                return obj
        start = text.find("{", start + 1)
    return None


def _balanced_end(text: str, start: int) -> int | None:
    """Index of the brace closing the one at ``start``; braces inside strings are skipped."""
    depth = 0
    quote = ""
    escaped = False
    for i in range(start, len(text)):
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


def _ids(raw: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        items: list[Any] = [raw]
    elif isinstance(raw, (list, tuple)):
        items = list(raw)
    else:
        items = [raw]
    out: dict[str, None] = {}
    for item in items:
        if item is None or isinstance(item, bool):
            continue
        if isinstance(item, dict):
            item = next((v for k, v in item.items() if "id" in str(k).lower()), None)
            if item is None:
                continue
        text = _text(item)
        found = [f"p{int(d):04d}" for d in _PID_RE.findall(text)]
        if found:
            for pid in found:
                out.setdefault(pid, None)
            continue
        for part in _SPLIT_RE.split(text.strip("[](){}\"' ")):
            part = part.strip("[](){}\"' ")
            if part and part.lower() not in _NONE_WORDS:
                out.setdefault(part, None)
    return tuple(out)


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
