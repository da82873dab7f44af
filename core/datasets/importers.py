"""Benchmark files -> a ``Dataset`` (pure: no store; SPEC §3.3).

``read_dataset(path, fmt, name)`` reads a whole file, validates every record and returns the
dataset with what happened: records read, instances made, records skipped with the reason.

Rules shared by every format (details in docs/JSONL_SCHEMA.md):
- malformed input raises ``DataError`` (file, 1-based record, field, reason) and nothing is
  returned: missing or unreadable file, empty file, invalid UTF-8, invalid or truncated JSON,
  a record that is not an object, a required field that is missing or null, a field of the
  wrong type, a string longer than ``MAX_FIELD_BYTES``, two records with the same instance id;
- a well-formed record that cannot be used (empty question, empty answer, no passages) is
  skipped and listed in ``ImportResult.skipped``; a file whose records are all skipped is an
  error, since an empty dataset is never what the user meant;
- text stays text: answers such as ``"None"``, ``"NA"``, ``"null"`` and ``"nan"`` are answers;
  answers given as JSON numbers become their string form.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.datasets.hotpotqa import hotpotqa_instance, twowiki_instance
from core.datasets.jsonl import jsonl_instance
from core.datasets.longbench import longbench_instance
from core.datasets.oncu_jsonl import oncu_instance
from core.datasets.records import (
    MAX_FIELD_BYTES,
    MAX_RECORD_BYTES,
    Fields,
    SkipRecord,
    check_record,
    expect_object,
    json_list_records,
    jsonl_records,
)
from core.datasets.sniff import format_hint
from core.names import check_name
from core.types import DataError, Dataset, Instance

__all__ = [
    "FORMATS",
    "MAX_FIELD_BYTES",
    "MAX_RECORD_BYTES",
    "ImportResult",
    "read_dataset",
]

#: Accepted ``fmt`` values of ``read_dataset``.
FORMATS = ("hotpotqa", "2wiki", "oncu-jsonl", "jsonl", "longbench")

_Reader = Callable[[str | Path, Any], Iterator[tuple[int, Any]]]
_Mapper = Callable[[Fields], Instance]
# fmt -> (reader, record mapper, field holding the instance id)
_FORMATS: dict[str, tuple[_Reader, _Mapper, str]] = {
    "hotpotqa": (json_list_records, hotpotqa_instance, "_id"),
    "2wiki": (json_list_records, twowiki_instance, "_id"),
    "oncu-jsonl": (jsonl_records, oncu_instance, "id"),
    "jsonl": (jsonl_records, jsonl_instance, "id"),
    "longbench": (jsonl_records, longbench_instance, "_id"),
}


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What reading a benchmark file produced.

    Attributes:
        dataset: the dataset, one instance per usable record, in file order.
        n_read: records read (JSONL: non-blank lines; JSON: list elements).
        skipped: ``(record number, reason)`` for each well-formed record left out.
    """

    dataset: Dataset
    n_read: int
    skipped: tuple[tuple[int, str], ...]

    @property
    def n_written(self) -> int:
        """Instances in the dataset."""
        return len(self.dataset.instances)

    def summary(self) -> str:
        """One line: ``read N records, wrote M instances, skipped K (reason: count, ...)``."""
        line = f"read {self.n_read} records, wrote {self.n_written} instances, "
        line += f"skipped {len(self.skipped)}"
        if self.skipped:
            counts = Counter(reason for _, reason in self.skipped)
            line += " (" + ", ".join(f"{r}: {n}" for r, n in counts.most_common()) + ")"
        return line


def read_dataset(path: str | Path, fmt: str, name: str) -> ImportResult:
    """Read a benchmark file into a dataset, all or nothing.

    Args:
        path: the file (JSON list for ``hotpotqa`` / ``2wiki``; JSON Lines for ``oncu-jsonl``
            / ``jsonl`` / ``longbench``).
        fmt: one of ``FORMATS``.
        name: the dataset name.

    Returns:
        The dataset with the counts of records read and the skipped records.

    Raises:
        ValueError: unknown ``fmt``, or a ``name`` that ``core.names.check_name`` refuses
            (empty, over ``NAME_MAX`` characters, or with a control character).
        DataError: the file or one of its records is malformed (names file, record, field).
    """
    if fmt not in _FORMATS:
        raise ValueError(f"unknown format {fmt!r}; allowed: {', '.join(FORMATS)}")
    check_name("dataset", name)
    try:
        return _read_dataset(path, fmt, name)
    except DataError as exc:  # a file of a recognizable other format: say which
        hint = format_hint(path, "dataset", fmt)
        if hint is None:
            raise
        raise DataError(str(path), None, None, hint) from exc


def _read_dataset(path: str | Path, fmt: str, name: str) -> ImportResult:
    reader, mapper, id_field = _FORMATS[fmt]
    file = str(path)
    digest = hashlib.sha256()
    instances: list[Instance] = []
    skipped: list[tuple[int, str]] = []
    first_record: dict[str, int] = {}
    n_read = 0
    for number, obj in reader(path, digest):
        n_read += 1
        check_record(file, number, obj)
        try:
            inst = mapper(expect_object(file, number, obj))
        except SkipRecord as skip:
            skipped.append((number, skip.reason))
            continue
        if inst.instance_id in first_record:
            first = first_record[inst.instance_id]
            raise DataError(
                file,
                number,
                id_field,
                f"duplicate instance id {inst.instance_id!r} (first used by record {first})",
            )
        first_record[inst.instance_id] = number
        instances.append(inst)
    if not instances:
        counts = Counter(reason for _, reason in skipped)
        why = ", ".join(f"{r}: {n}" for r, n in counts.most_common())
        raise DataError(file, None, None, f"no usable records: all {n_read} skipped ({why})")
    sources = {inst.source for inst in instances}
    dataset = Dataset(
        name=name,
        source=sources.pop() if len(sources) == 1 else fmt,
        builder=f"import:{fmt}",
        builder_params={
            "file": file,
            "format": fmt,
            "sha256": digest.hexdigest(),
            "n_read": n_read,
            "n_skipped": len(skipped),
        },
        instances=tuple(instances),
    )
    return ImportResult(dataset=dataset, n_read=n_read, skipped=tuple(skipped))
