"""Shared machinery of the dataset importers: files -> numbered records -> checked fields.

Every problem with the input becomes a ``DataError`` naming the file, the 1-based record number
(JSONL: the physical line number; JSON list: list index + 1) and the field path
(``question``, ``context[3][1][0]``, ``passages[2].text``). Nothing here raises anything else
for bad data, so a researcher's file either imports completely or fails with one line.

Limits (the one place they are set; README "Import limits" lists them): every string value of
a record (and every CSV cell of a results file) is at most ``MAX_FIELD_BYTES`` bytes of UTF-8, a
JSONL line is at most ``MAX_RECORD_BYTES`` bytes, and a ``context_length`` is an integer from 0
to ``MAX_CONTEXT_LENGTH`` (the store keeps it as a 32-bit integer). The byte limits are far
above any real benchmark record (a 128K-token context is about 0.7 MB) and stop a broken file
from exhausting memory.

The module also holds the metadata cells the importers derive from passages (evidence position,
gold-token fraction, fan-in, answer type) and ``make_instance``, which fills them in, so that
every format and the controlled generator build instances the same way.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from core.types import DataError, Instance, Passage

__all__ = [
    "CELL_FIELDS",
    "MAX_CONTEXT_LENGTH",
    "MAX_FIELD_BYTES",
    "MAX_RECORD_BYTES",
    "Fields",
    "SkipRecord",
    "check_record",
    "check_text",
    "context_tokens",
    "evidence_position",
    "expect_object",
    "fan_in",
    "gold_token_fraction",
    "infer_answer_type",
    "json_list_records",
    "jsonl_records",
    "make_instance",
    "neutral_id",
]

#: Largest string value (UTF-8 bytes) accepted anywhere in a record: 8 MiB.
MAX_FIELD_BYTES = 8 * 1024 * 1024
#: Largest JSONL line (bytes) read at all: 64 MiB.
MAX_RECORD_BYTES = 64 * 1024 * 1024
#: Largest ``context_length`` accepted: the store's 32-bit INTEGER column (2,147,483,647).
MAX_CONTEXT_LENGTH = 2**31 - 1
#: The string metadata cells a record may give (``make_instance`` derives absent ones).
CELL_FIELDS = (
    "answer_type",
    "reasoning_type",
    "evidence_position",
    "distractor_similarity",
    "evidence_density",
)

_BOM = b"\xef\xbb\xbf"
_WS = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile("[\udc80-\udcff]")
# json.loads joins a valid \ud83d\ude00 pair into one character; what is left is half a pair.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_LITERALS = ("true", "false", "null", "NaN", "Infinity", "-Infinity")
_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)")


class SkipRecord(Exception):
    """A well-formed record that cannot become an instance; it is listed, not imported.

    Attributes:
        reason: a few words, shown in the import summary.
    """

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class _Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...


# ---------------------------------------------------------------------------- files
def _check_file(path: str | Path) -> Path:
    p = Path(path)
    if not p.exists():
        raise DataError(str(path), None, None, "file not found")
    if p.is_dir():
        raise DataError(str(path), None, None, "is a directory, not a file")
    return p


def _open(path: str | Path) -> BinaryIO:
    p = _check_file(path)
    try:
        return p.open("rb")
    except OSError as exc:
        raise DataError(str(path), None, None, f"cannot read the file: {exc.strerror}") from exc


def _describe(value: Any) -> str:
    """A short description of a JSON value for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        number = repr(value)
        return f"the number {number if len(number) <= 40 else number[:37] + '...'}"
    if isinstance(value, str):
        short = value if len(value) <= 40 else value[:37] + "..."
        return f"the string {short!r}"
    if isinstance(value, list):
        return f"a list of {len(value)} items"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _json_reason(exc: json.JSONDecodeError, text: str, *, with_line: bool) -> str:
    """Reason for a JSON syntax error; says 'truncated' when the text ends inside a value."""
    # Truncated: nothing but whitespace after the error, or only the start of a literal
    # (``"is_gold": tru``). A JSON string cannot hold a raw newline, so "Unterminated string"
    # also means the text ended.
    truncated = exc.msg.startswith("Unterminated string")
    if len(text) - exc.pos <= 64:
        tail = text[exc.pos :].strip()
        truncated = truncated or not tail or any(lit.startswith(tail) for lit in _LITERALS)
    where = f"line {exc.lineno} column {exc.colno}" if with_line else f"column {exc.colno}"
    if truncated:
        return f"truncated JSON (the text ends inside a value: {exc.msg} at {where})"
    return f"invalid JSON: {exc.msg} at {where}"


def _path_text(parts: Iterable[str | int]) -> str:
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def _walk_strings(obj: Any) -> Iterator[tuple[tuple[str | int, ...], str]]:
    """Every string (values and object keys) of a JSON value with its path, in document order.

    Iterative, so that a deeply nested record cannot exhaust the Python stack.
    """
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), obj)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            yield path, value
        elif isinstance(value, dict):
            children = list(value.items())
            for key, child in reversed(children):
                stack.append(((*path, key), child))
            for key, _ in children:
                yield (*path, key), key
        elif isinstance(value, list):
            for index in range(len(value) - 1, -1, -1):
                stack.append(((*path, index), value[index]))


def _utf8_size(text: str) -> int:
    if text.isascii():
        return len(text)
    # Encode in slices so that a huge non-ASCII string is not copied whole once more.
    step = 1 << 20
    chunks = range(0, len(text), step)
    return sum(len(text[i : i + step].encode("utf-8", "surrogatepass")) for i in chunks)


def check_text(file: str, record: int | None, field: str | None, text: str) -> None:
    """Reject one string that is over ``MAX_FIELD_BYTES`` or holds half a surrogate pair.

    Args:
        file: the file name, for the error.
        record: 1-based record number, for the error.
        field: the field's name or path, for the error.
        text: the string.

    Raises:
        DataError: naming the file, record and field.
    """
    if not text.isascii() and _LONE_SURROGATE.search(text):
        raise DataError(
            file,
            record,
            field,
            "a \\u escape names half of a UTF-16 surrogate pair (e.g. \\ud83d alone): "
            "not valid text",
        )
    # A str of at most MAX_FIELD_BYTES // 4 characters cannot be too large: skip the count.
    if len(text) > MAX_FIELD_BYTES // 4:
        size = _utf8_size(text)
        if size > MAX_FIELD_BYTES:
            raise DataError(
                file, record, field, f"field too large ({size:,} bytes > {MAX_FIELD_BYTES:,})"
            )


def check_record(file: str, record: int, obj: Any) -> None:
    """Reject a record with an oversized or non-Unicode string (checked before any mapping).

    Args:
        file: the file name, for the error.
        record: 1-based record number.
        obj: the parsed JSON value.

    Raises:
        DataError: naming the first string (value or key) over ``MAX_FIELD_BYTES``, or the
            first holding half of a UTF-16 surrogate pair (a JSON escape of one surrogate, cut
            from its partner): such a string is not text and cannot be stored.
    """
    for path, text in _walk_strings(obj):
        check_text(file, record, _path_text(path) or None, text)


def _surrogate_field(obj: Any) -> str | None:
    """Path of the first string holding an undecodable byte (decoded with surrogateescape)."""
    for path, text in _walk_strings(obj):
        if _SURROGATE.search(text):
            return _path_text(path) or None
    return None


def _parse_json(file: str, record: int, text: str, *, with_line: bool = False) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(file, record, None, _json_reason(exc, text, with_line=with_line)) from None
    except RecursionError:
        raise DataError(file, record, None, "invalid JSON: nested too deeply") from None
    except ValueError as exc:  # e.g. an integer with more than 4300 digits
        raise DataError(file, record, None, f"invalid JSON: {exc}") from None


# ---------------------------------------------------------------------------- JSONL
def jsonl_records(path: str | Path, digest: _Digest | None = None) -> Iterator[tuple[int, Any]]:
    """Parsed JSON values of a JSON Lines file, one per non-blank line, with the line number.

    The file is read line by line (never whole); blank lines are ignored; a UTF-8 byte-order
    mark is accepted.

    Args:
        path: the file.
        digest: optional hash object fed every byte read (for provenance).

    Yields:
        ``(line_number, value)``; the value is not checked further.

    Raises:
        DataError: missing or unreadable file, empty file, invalid UTF-8 (naming the line, the
            byte offset and, when it can, the field), invalid or truncated JSON, or a line longer
            than ``MAX_RECORD_BYTES``.
    """
    file = str(path)
    n_records = 0
    offset = 0
    with _open(path) as handle:
        lineno = 0
        while True:
            raw = handle.readline(MAX_RECORD_BYTES + 1)
            if not raw:
                break
            lineno += 1
            if len(raw) > MAX_RECORD_BYTES:
                raise DataError(
                    file, lineno, None, f"record too large (> {MAX_RECORD_BYTES:,} bytes)"
                )
            if digest is not None:
                digest.update(raw)
            start = offset
            offset += len(raw)
            if lineno == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM) :]
                start += len(_BOM)
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _bad_utf8_line(file, lineno, raw, start, exc) from None
            del raw
            if not line.strip():
                continue
            n_records += 1
            obj = _parse_json(file, lineno, line)
            del line
            yield lineno, obj
    if n_records == 0:
        raise DataError(
            file, None, None, "empty file" if offset == 0 else "empty file (only blank lines)"
        )


def _bad_utf8_line(
    file: str, lineno: int, raw: bytes, start: int, exc: UnicodeDecodeError
) -> DataError:
    field = None
    try:
        field = _surrogate_field(json.loads(raw.decode("utf-8", "surrogateescape")))
    except (ValueError, RecursionError):
        pass
    reason = (
        f"invalid UTF-8 at byte {start + exc.start:,} of the file "
        f"(byte {exc.start:,} of the line); the file must be UTF-8 encoded"
    )
    return DataError(file, lineno, field, reason)


# ---------------------------------------------------------------------------- JSON list
def json_list_records(path: str | Path, digest: _Digest | None = None) -> Iterator[tuple[int, Any]]:
    """Parsed elements of a file holding one JSON list of records, with their 1-based index.

    Elements are decoded one at a time, so an error names the record it is in.

    Args:
        path: the file.
        digest: optional hash object fed the file's bytes (for provenance).

    Yields:
        ``(index + 1, value)``; the value is not checked further.

    Raises:
        DataError: missing or unreadable file, empty file or empty list, a file that is not a
            JSON list, invalid UTF-8 (naming the record, field and byte offset), invalid or
            truncated JSON.
    """
    file = str(path)
    with _open(path) as handle:
        try:
            data = handle.read()
        except OSError as exc:
            raise DataError(file, None, None, f"cannot read the file: {exc.strerror}") from exc
    if digest is not None:
        digest.update(data)
    skip = len(_BOM) if data.startswith(_BOM) else 0
    try:
        text = data[skip:].decode("utf-8") if skip else data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _bad_utf8_list(file, data, skip, exc) from None
    del data
    for number, obj, _, _ in _scan_list(file, text):
        yield number, obj


def _scan_list(file: str, text: str) -> Iterator[tuple[int, Any, int, int]]:
    """``(number, value, start, end)`` for each element of the JSON list held in ``text``."""
    decoder = json.JSONDecoder()
    size = len(text)
    i = _WS.match(text, 0).end()  # type: ignore[union-attr]
    if i == size:
        raise DataError(file, None, None, "empty file")
    if text[i] != "[":
        hint = " (a JSON Lines file? use the oncu-jsonl or jsonl format)" if text[i] == "{" else ""
        raise DataError(
            file, None, None, f"expected a JSON list of records, found {text[i]!r} first{hint}"
        )
    i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if i < size and text[i] == "]":
        raise DataError(file, None, None, "no records (the JSON list is empty)")
    number = 0
    while True:
        number += 1
        if i >= size:
            raise DataError(file, number, None, "truncated JSON (the file ends before this record)")
        try:
            obj, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise DataError(file, number, None, _json_reason(exc, text, with_line=True)) from None
        except RecursionError:
            raise DataError(file, number, None, "invalid JSON: nested too deeply") from None
        except ValueError as exc:
            raise DataError(file, number, None, f"invalid JSON: {exc}") from None
        yield number, obj, i, end
        i = _WS.match(text, end).end()  # type: ignore[union-attr]
        if i >= size:
            raise DataError(
                file, number, None, "truncated JSON (the file ends before the list is closed)"
            )
        if text[i] == ",":
            i = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
            continue
        if text[i] == "]":
            break
        line = text.count("\n", 0, i) + 1
        column = i - text.rfind("\n", 0, i)
        raise DataError(
            file,
            number,
            None,
            f"invalid JSON after this record: expected ',' or ']' at line {line} column {column}",
        )
    rest = _WS.match(text, i + 1).end()  # type: ignore[union-attr]
    if rest != size:
        line = text.count("\n", 0, rest) + 1
        raise DataError(file, None, None, f"invalid JSON: extra data after the list at line {line}")


def _bad_utf8_list(file: str, data: bytes, skip: int, exc: UnicodeDecodeError) -> DataError:
    """Locate undecodable bytes of a JSON-list file: byte offset, line, record and field."""
    bad = skip + exc.start
    # The prefix before the first bad byte is valid UTF-8 by definition, and surrogateescape
    # maps every later byte to one character, so ``pos`` is the bad byte's character index.
    pos = len(data[skip:bad].decode("utf-8"))
    text = data[skip:].decode("utf-8", "surrogateescape")
    line = text.count("\n", 0, pos) + 1
    record: int | None = None
    field: str | None = None
    try:
        for number, obj, start, end in _scan_list(file, text):
            if start <= pos < end:
                record, field = number, _surrogate_field(obj)
                break
            if start > pos:
                break
    except DataError as err:
        # The bad bytes sit in a record that does not parse; the scan stopped on it.
        record = err.record
    reason = f"invalid UTF-8 at byte {bad:,} (line {line}); the file must be UTF-8 encoded"
    return DataError(file, record, field, reason)


# ---------------------------------------------------------------------------- fields
class Fields:
    """Typed access to one JSON value of a record; each failure names the field's path.

    Attributes:
        file: file name, for errors.
        record: 1-based record number, for errors.
        value: the JSON value.
        path: path of the value inside the record (``""`` for the record itself).
    """

    __slots__ = ("file", "record", "value", "path")

    def __init__(self, file: str, record: int, value: Any, path: str = ""):
        self.file = file
        self.record = record
        self.value = value
        self.path = path

    def _child_path(self, key: str | int) -> str:
        if isinstance(key, int):
            return f"{self.path}[{key}]"
        return f"{self.path}.{key}" if self.path else key

    def error(self, reason: str) -> DataError:
        """A ``DataError`` about this value."""
        return DataError(self.file, self.record, self.path or None, reason)

    def _expect(self, what: str) -> DataError:
        return self.error(f"expected {what}, got {_describe(self.value)}")

    def has(self, key: str) -> bool:
        """True when the object has ``key`` with a non-null value."""
        return isinstance(self.value, dict) and self.value.get(key) is not None

    def get(self, key: str | int) -> Fields | None:
        """The child ``key`` (object key or list index); None when absent or null."""
        if isinstance(self.value, dict):
            value = self.value.get(key)
        elif isinstance(self.value, list) and isinstance(key, int) and 0 <= key < len(self.value):
            value = self.value[key]
        else:
            value = None
        if value is None:
            return None
        return Fields(self.file, self.record, value, self._child_path(key))

    def __getitem__(self, key: str | int) -> Fields:
        """The required child ``key``.

        Raises:
            DataError: when it is absent ("missing") or null ("is null").
        """
        child = self.get(key)
        if child is None:
            missing = isinstance(self.value, dict) and key not in self.value
            reason = "missing" if missing else "is null"
            raise DataError(self.file, self.record, self._child_path(key), reason)
        return child

    # -- conversions of this value
    def text(self) -> str:
        """The value as a string (strings only)."""
        if not isinstance(self.value, str):
            raise self._expect("a string")
        return self.value

    def answer(self) -> str:
        """The value as answer text: strings unchanged, JSON numbers in their string form.

        ``"None"``, ``"NA"``, ``"null"``, ``"nan"`` are answers like any other string.
        """
        value = self.value
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if isinstance(value, float) and math.isfinite(value):
            return repr(value)
        raise self._expect("a string or a number")

    def ident(self) -> str:
        """The value as an id: a non-empty string, or an integer in its string form."""
        value = self.value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise self._expect("a string or an integer id")
        if not value.strip():
            raise self.error("empty id")
        return value

    def integer(self, *, minimum: int | None = 0, maximum: int | None = None) -> int:
        """The value as an integer (integral JSON numbers only), within the given bounds."""
        value = self.value
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._expect("an integer")
        if minimum is not None and value < minimum:
            raise self.error(f"expected an integer >= {minimum}, got {value}")
        if maximum is not None and value > maximum:
            shown = str(value) if value < 10**40 else f"a {len(str(value))}-digit number"
            raise self.error(f"expected an integer <= {maximum:,}, got {shown}")
        return value

    def boolean(self) -> bool:
        """The value as a boolean (JSON true/false only)."""
        if not isinstance(self.value, bool):
            raise self._expect("true or false")
        return self.value

    def items(self) -> list[Fields]:
        """The elements of a list value."""
        if not isinstance(self.value, list):
            raise self._expect("a list")
        return [
            Fields(self.file, self.record, v, f"{self.path}[{i}]") for i, v in enumerate(self.value)
        ]

    def obj(self) -> dict[str, Any]:
        """The value as a JSON object (a shallow copy)."""
        if not isinstance(self.value, dict):
            raise self._expect("an object")
        return dict(self.value)

    # -- shortcuts for optional children
    def opt_text(self, key: str, default: str = "") -> str:
        """Optional string child; ``default`` when absent or null."""
        child = self.get(key)
        return default if child is None else child.text()

    def opt_items(self, key: str) -> list[Fields]:
        """Optional list child; empty when absent or null."""
        child = self.get(key)
        return [] if child is None else child.items()

    def opt_obj(self, key: str) -> dict[str, Any]:
        """Optional object child (a shallow copy); empty when absent or null."""
        child = self.get(key)
        return {} if child is None else child.obj()

    def cells(self, keys: Iterable[str] = CELL_FIELDS) -> dict[str, Any]:
        """The metadata cells the record gives, as ``make_instance`` keyword arguments.

        Args:
            keys: the string cells to read, in this order (the first bad one is reported).

        Returns:
            ``context_length`` (None when absent; else 0 to ``MAX_CONTEXT_LENGTH``), then each
            of ``keys`` (empty when absent).
        """
        length = self.get("context_length")
        cells: dict[str, Any] = {
            "context_length": (
                None if length is None else length.integer(maximum=MAX_CONTEXT_LENGTH)
            )
        }
        cells.update((key, self.opt_text(key)) for key in keys)
        return cells


def expect_object(file: str, record: int, obj: Any) -> Fields:
    """Wrap a record, which must be a JSON object."""
    if not isinstance(obj, dict):
        raise DataError(file, record, None, f"expected a JSON object, got {_describe(obj)}")
    return Fields(file, record, obj)


# ---------------------------------------------------------------------------- derived cells
def neutral_id(number: int) -> str:
    """The neutral passage id for a 1-based number: ``p0001``."""
    return f"p{number:04d}"


def infer_answer_type(answer: str, default: str) -> str:
    """``yes_no`` for yes/no, ``number`` when the answer is a number, else ``default``.

    Numbers: optional sign, digits with optional thousands commas, optional decimals
    (``1999``, ``9,984``, ``-3.5``); ``3,677 seated`` is not a number.
    """
    norm = answer.strip().lower()
    if norm in ("yes", "no"):
        return "yes_no"
    if _NUMBER.fullmatch(norm):
        return "number"
    return default


def _gold_spans(passages: Iterable[Passage]) -> tuple[list[float], int, int]:
    """Relative midpoints of the gold passages, gold tokens and total tokens."""
    total = gold = 0
    spans: list[tuple[int, int]] = []
    for p in passages:
        n = p.n_tokens
        if p.is_gold:
            spans.append((total, n))
            gold += n
        total += n
    mids = [(start + n / 2) / total for start, n in spans] if total else []
    return mids, gold, total


def evidence_position(passages: Iterable[Passage]) -> str:
    """Where the gold passages sit in the context: front / middle / end / scattered / unknown.

    Each gold passage is placed by the relative token offset of its midpoint (tokens =
    whitespace tokens of title + text, over the passages in order) and falls into the first,
    second or last third of the context. All gold passages in one third -> that third's name;
    gold passages in different thirds -> ``scattered``; no gold or no tokens -> ``unknown``.
    """
    mids, _, total = _gold_spans(passages)
    if not mids or not total:
        return "unknown"
    thirds = {min(2, int(m * 3)) for m in mids}
    if len(thirds) > 1:
        return "scattered"
    return ("front", "middle", "end")[thirds.pop()]


# make_instance's ``evidence_position`` parameter shadows the function.
_derived_position = evidence_position


def gold_token_fraction(passages: Iterable[Passage]) -> float | None:
    """Share of the context's whitespace tokens that are in gold passages (None: no tokens)."""
    _, gold, total = _gold_spans(passages)
    return round(gold / total, 4) if total else None


def fan_in(passages: Iterable[Passage]) -> int:
    """Number of distinct ``doc_id`` among the gold passages (SPEC §3.1)."""
    return len({p.doc_id for p in passages if p.is_gold})


def context_tokens(passages: Iterable[Passage]) -> int:
    """Whitespace tokens of all passages (title + text)."""
    return sum(p.n_tokens for p in passages)


def make_instance(
    instance_id: str,
    question: str,
    answer: str,
    passages: tuple[Passage, ...],
    *,
    source: str,
    metadata: dict[str, Any],
    aliases: tuple[str, ...] = (),
    answer_type: str = "",
    default_answer_type: str = "string",
    reasoning_type: str = "",
    context_length: int | None = None,
    evidence_position: str = "",
    distractor_similarity: str = "",
    evidence_density: str = "",
    oracle_applicable: bool | None = None,
) -> Instance:
    """Build an instance, deriving every metadata cell that is not given.

    Args:
        instance_id: unique id within the dataset.
        question: the question shown to the model.
        answer: the gold answer.
        passages: the ordered passages.
        source: where the instance comes from.
        metadata: the instance's metadata (kept as given).
        aliases: further accepted answers.
        answer_type: given answer type; empty -> ``infer_answer_type(answer,
            default_answer_type)``.
        default_answer_type: what ``infer_answer_type`` falls back to.
        reasoning_type: given reasoning type; empty -> ``unknown``.
        context_length: given context length; None -> whitespace tokens of the passages.
        evidence_position: given position; empty -> derived from the gold passages by thirds.
        distractor_similarity: given similarity; empty -> ``unknown``.
        evidence_density: given density; empty -> ``unknown``.
        oracle_applicable: given flag; None -> whether any passage is gold.

    Returns:
        The instance; ``fan_in`` is always the number of distinct gold ``doc_id``.
    """
    return Instance(
        instance_id=instance_id,
        question=question,
        gold_answer=answer,
        passages=passages,
        answer_aliases=aliases,
        answer_type=answer_type or infer_answer_type(answer, default_answer_type),
        reasoning_type=reasoning_type or "unknown",
        context_length=context_tokens(passages) if context_length is None else context_length,
        evidence_position=evidence_position or _derived_position(passages),
        distractor_similarity=distractor_similarity or "unknown",
        evidence_density=evidence_density or "unknown",
        fan_in=fan_in(passages),
        oracle_applicable=(
            any(p.is_gold for p in passages) if oracle_applicable is None else oracle_applicable
        ),
        source=source,
        metadata=metadata,
    )
