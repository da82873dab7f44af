"""The ONCU release's metrics CSV read and checked: header, rows, fields, the instances it names."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from core.datasets.records import MAX_CONTEXT_LENGTH, MAX_FIELD_BYTES, check_text
from core.types import DataError, Instance, Passage

__all__ = [
    "INSTANCE_COLUMNS",
    "ONCU_METHODS",
    "split_ids",
    "instances_from_rows",
    "read_oncu_csv",
    "quoted_short",
]


#: ONCU release method names -> the project's canonical conditions.
ONCU_METHODS = {
    "no_evidence": "no_evidence",
    "direct": "full_context",
    "retrieve_then_read": "retrieved",
    "oracle": "oracle",
}


_REQUIRED = (
    "sample_id",
    "model_name",
    "method",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "gold_answer",
    "predicted_answer",
    "gold_evidence_ids",
    "predicted_evidence_ids",
)


#: Columns that describe the instance, not the prediction: every row of one ``sample_id``
#: must agree on them (the instance is built from them), else the file is refused.
INSTANCE_COLUMNS = (
    "gold_answer",
    "gold_evidence_ids",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "cue_applicable",
)


# ASCII digits only: str.isdigit() also takes "²" or "٣", which are not a length.
_DIGITS = re.compile(r"[0-9]+")


def split_ids(value: str) -> list[str]:
    """The ids of a ``;``-separated CSV cell."""
    return [x.strip() for x in value.split(";") if x.strip()]


def _flag(cell: str) -> bool:
    """``cue_applicable`` cell: only an explicit false/0/no marks an instance not applicable."""
    return cell.strip().lower() not in ("false", "0", "no")


def quoted_short(text: str, n: int = 40) -> str:
    """``text`` quoted, cut to ``n`` characters with an ellipsis."""
    return repr(text if len(text) <= n else text[: n - 3] + "...")


# ---------------------------------------------------------------------------- CSV reading
@contextmanager
def _csv_field_limit(limit: int) -> Iterator[None]:
    """``csv.field_size_limit`` set to ``limit`` (characters) inside the block, then restored.

    The limit is process-wide, so it is raised only while a results file is read.
    """
    old = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _locate(text: str) -> tuple[int, str | None]:
    """``(data record, column name)`` of the position just after ``text`` (a file prefix).

    Record 0 is the header (the first non-blank row); blank rows after it count as records.
    """
    with _csv_field_limit(max(len(text) + 2, csv.field_size_limit())):
        rows = list(csv.reader(io.StringIO(text + "x", newline="")))
    first = next((i for i, row in enumerate(rows) if row), len(rows) - 1)
    record, column = len(rows) - 1 - first, len(rows[-1]) - 1
    header = rows[first]
    return record, (header[column] if record and column < len(header) else None)


def _bad_utf8(path: Path) -> DataError:
    """The error for a results file that is not UTF-8: byte offset, record and column."""
    raw = path.read_bytes()
    skip = 3 if raw.startswith(b"\xef\xbb\xbf") else 0
    try:
        raw[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        start = exc.start
    else:  # pragma: no cover - called only after a decode error
        return DataError(str(path), None, None, "invalid UTF-8; the file must be UTF-8 encoded")
    record, field = _locate(raw[skip : skip + start].decode("utf-8"))
    reason = f"invalid UTF-8 at byte {skip + start:,} of the file; the file must be UTF-8 encoded"
    if not record:
        reason += " (in the header)"
    return DataError(str(path), record or None, field, reason)


def _oversized_cell(path: Path, header: list[str], record: int, start_line: int) -> DataError:
    """Name the column of a cell longer than the csv limit: re-read that one record in full.

    The re-read holds at most the rest of the file, as a whole-file read would.
    """
    with _csv_field_limit(max(path.stat().st_size + 2, csv.field_size_limit())):
        with path.open(encoding="utf-8-sig", newline="") as fh:
            for _ in range(start_line):
                fh.readline()
            row = next(csv.reader(fh), [])
    for i, cell in enumerate(row):
        column = header[i] if i < len(header) else f"column {i + 1}"
        try:
            check_text(str(path), record, column, cell)
        except DataError as err:
            return err
    return DataError(str(path), record, None, f"field too large (> {MAX_FIELD_BYTES:,} bytes)")


def _check_header(file: str, header: list[str]) -> None:
    for i, name in enumerate(header):
        check_text(file, None, f"header column {i + 1}", name)
    seen: dict[str, int] = {}
    for i, name in enumerate(header, start=1):
        if name in seen:
            raise DataError(
                file,
                None,
                name,
                f"column named twice in the header (columns {seen[name]} and {i})",
            )
        seen[name] = i
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise DataError(file, None, missing[0], "required column missing")


def _csv_rows(path: Path) -> tuple[list[str], list[int], list[list[str]]]:
    """Header, record numbers and cells of the non-blank data rows (each cell size-checked).

    Raises:
        DataError: missing, unreadable or empty file, invalid UTF-8, invalid CSV, a header
            without a required column or naming one twice, a row whose column count differs
            from the header's, a cell over ``MAX_FIELD_BYTES``.
    """
    file = str(path)
    if not path.exists():
        raise DataError(file, None, None, "file not found")
    if path.is_dir():
        raise DataError(file, None, None, "is a directory, not a file")
    header: list[str] | None = None
    numbers: list[int] = []
    body: list[list[str]] = []
    record = 0
    quick = MAX_FIELD_BYTES // 4  # a cell of at most this many characters cannot be too large
    try:
        with _csv_field_limit(MAX_FIELD_BYTES), path.open(encoding="utf-8-sig", newline="") as fh:
            reader = csv.reader(fh)
            while True:
                start_line = reader.line_num
                try:
                    row = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    at = record + 1 if header is not None else None
                    if "field larger than field limit" in str(exc):
                        raise _oversized_cell(path, header or [], at or 0, start_line) from None
                    raise DataError(file, at, None, f"invalid CSV: {exc}") from None
                if header is None:
                    if any(cell.strip() for cell in row):
                        header = row
                        _check_header(file, header)
                    continue
                record += 1
                if not row:
                    continue  # a blank line
                if len(row) != len(header):
                    raise DataError(
                        file, record, None, f"has {len(row)} columns, header has {len(header)}"
                    )
                if max(map(len, row)) > quick:
                    for name, cell in zip(header, row, strict=True):
                        check_text(file, record, name, cell)
                numbers.append(record)
                body.append(row)
    except UnicodeDecodeError:
        raise _bad_utf8(path) from None
    except OSError as exc:
        raise DataError(file, None, None, f"cannot read the file: {exc.strerror}") from None
    if header is None:
        raise DataError(file, None, None, "empty file")
    if not body:
        raise DataError(file, None, None, "no data rows")
    return header, numbers, body


def _context_length(file: str, record: int, cell: str) -> None:
    if not _DIGITS.fullmatch(cell):
        raise DataError(
            file,
            record,
            "context_length",
            f"expected a whole number 0..{MAX_CONTEXT_LENGTH:,} in ASCII digits, got "
            f"{quoted_short(cell)}",
        )
    if len(cell.lstrip("0")) > 10 or int(cell) > MAX_CONTEXT_LENGTH:
        shown = cell if len(cell) <= 20 else f"a {len(cell)}-digit number"
        raise DataError(
            file,
            record,
            "context_length",
            f"expected an integer <= {MAX_CONTEXT_LENGTH:,} (the store's 32-bit limit), "
            f"got {shown}",
        )


def read_oncu_csv(path: Path) -> pd.DataFrame:
    """Read and validate a per_sample_metrics.csv; every cell is text ("None" is an answer).

    Returns:
        One row per prediction, every column as in the file, plus ``_record`` (the row's
        record number, for later errors).
    """
    file = str(path)
    header, numbers, body = _csv_rows(path)
    df = pd.DataFrame(body, columns=header, dtype=object)
    col = {name: i for i, name in enumerate(header)}
    shared = [c for c in INSTANCE_COLUMNS if c in col]
    first_of: dict[str, tuple[int, list[str]]] = {}
    keys: dict[tuple[str, str, str], int] = {}
    for n, row in zip(numbers, body, strict=True):
        method, sid, model = row[col["method"]], row[col["sample_id"]], row[col["model_name"]]
        if method not in ONCU_METHODS:
            raise DataError(
                file,
                n,
                "method",
                f"unknown method {quoted_short(method)} (allowed: {', '.join(ONCU_METHODS)})",
            )
        if not sid:
            raise DataError(file, n, "sample_id", "empty")
        if not model.strip():
            raise DataError(file, n, "model_name", "empty")
        _context_length(file, n, row[col["context_length"]])
        gold = split_ids(row[col["gold_evidence_ids"]])
        if len(set(gold)) != len(gold):
            twice = next(g for g in gold if gold.count(g) > 1)
            raise DataError(
                file,
                n,
                "gold_evidence_ids",
                f"passage id {quoted_short(twice)} listed twice: each gold passage id once",
            )
        key = (model, sid, method)
        if key in keys:
            raise DataError(
                file,
                n,
                "sample_id",
                f"duplicate (model_name, sample_id, method) {key!r}: first in record {keys[key]}",
            )
        keys[key] = n
        values = [row[col[c]] for c in shared]
        if sid not in first_of:
            first_of[sid] = (n, values)
            continue
        first, seen = first_of[sid]
        for name, old, new in zip(shared, seen, values, strict=True):
            if old != new:
                raise DataError(
                    file,
                    n,
                    name,
                    f"sample_id {quoted_short(sid)} has {name} {quoted_short(new)} here but "
                    f"{quoted_short(old)} "
                    f"in record {first}: one sample has one {name}",
                )
    df["_record"] = numbers
    return df


def instances_from_rows(df: pd.DataFrame) -> list[Instance]:
    """One instance per sample id from its first row (gold answer, gold ids, metadata cells)."""
    out = []
    for row in df.drop_duplicates("sample_id").itertuples(index=False):
        gold = split_ids(row.gold_evidence_ids)
        passages = tuple(
            Passage(passage_id=pid, ord=i, title="", text="", doc_id=pid, role="gold", is_gold=True)
            for i, pid in enumerate(gold)
        )
        out.append(
            Instance(
                instance_id=row.sample_id,
                question="",
                gold_answer=row.gold_answer,
                passages=passages,
                answer_type=row.answer_type,
                reasoning_type=row.reasoning_type,
                context_length=int(row.context_length),
                evidence_position=row.evidence_position,
                distractor_similarity=row.distractor_similarity,
                evidence_density=row.evidence_density,
                fan_in=len(set(gold)),
                oracle_applicable=bool(gold) and _flag(getattr(row, "cue_applicable", "")),
                source=row.source,
                metadata={
                    "imported_from": "oncu-release results",
                    "note": "question and passage texts are not in a results file; gold "
                    "passages carry ids only and fan-in counts distinct gold ids",
                },
            )
        )
    return out
