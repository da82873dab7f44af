"""What a file looks like, from its first bytes: names the format when an import of another fails.

A researcher who picks the wrong format (the HotpotQA JSON as released results, a results CSV
as a dataset) gets the reader's error about a field, which says nothing of the real cause. The
importers call :func:`format_hint` when they fail and, when the file is recognizably another
format, the one-line error says so and names the format to choose.

Only cheap, unambiguous signs are used (the first 64 KiB): the keys of the first record of a
JSON list or of JSON Lines, the header of a CSV. Nothing is guessed from content beyond them.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import NamedTuple

__all__ = ["Hint", "format_hint", "sniff"]

#: Bytes read to recognize a file.
_HEAD = 64 * 1024


class Hint(NamedTuple):
    """A recognized format: ``kind`` (``dataset`` or ``results``), ``fmt`` and its name."""

    kind: str
    fmt: str
    label: str

    def advice(self) -> str:
        """What to choose instead, for the command line and the Runs page alike."""
        command = "import dataset" if self.kind == "dataset" else "import results"
        return (
            f"this looks like {self.label}; choose format {self.fmt} "
            f"({command} --format {self.fmt})"
        )


_HOTPOT = {"_id", "question", "answer", "supporting_facts", "context"}
_RELEASE = {"sample_id", "model_name", "method", "gold_answer", "predicted_answer"}
_LONGBENCH = {"input", "context", "answers", "dataset"}


def _first_json_record(head: str) -> dict | None:
    """The first object of a JSON list (read incrementally from a cut head), or None."""
    text = head.lstrip()
    if not text.startswith("["):
        return None
    decoder = json.JSONDecoder()
    i = 1
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    try:
        obj, _ = decoder.raw_decode(text, i)
    except (ValueError, RecursionError):  # not JSON, or nested past Python's limit
        return None
    return obj if isinstance(obj, dict) else None


def _first_jsonl_record(head: str) -> dict | None:
    line = head.lstrip().split("\n", 1)[0]
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def sniff(path: str | Path) -> Hint | None:
    """The format ``path`` recognizably is, or None (unreadable, or no clear sign)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read(_HEAD)
    except OSError:
        return None
    head = raw.decode("utf-8", errors="replace").lstrip("\ufeff")
    first = _first_json_record(head)
    if first is not None:
        keys = set(first)
        if _HOTPOT <= keys:
            if "evidences" in keys or "entity_ids" in keys:
                return Hint(
                    "dataset",
                    "2wiki",
                    "a 2WikiMultihopQA file (a JSON list of records "
                    "with _id, question, answer, supporting_facts, context, evidences)",
                )
            return Hint(
                "dataset",
                "hotpotqa",
                "a HotpotQA file (a JSON list of records with "
                "_id, question, answer, supporting_facts, context)",
            )
        return None
    record = _first_jsonl_record(head)
    if record is not None:
        if _LONGBENCH <= set(record):
            return Hint(
                "dataset",
                "longbench",
                "a LongBench file (JSON Lines with input, context, answers, dataset)",
            )
        return None
    try:
        header = next(csv.reader(io.StringIO(head.split("\n", 1)[0])))
    except (StopIteration, csv.Error):
        return None
    if _RELEASE <= {h.strip() for h in header}:
        return Hint(
            "results",
            "oncu-release",
            "released ONCU results (a per_sample_metrics.csv "
            "with sample_id, model_name, method, gold_answer, predicted_answer)",
        )
    return None


def format_hint(path: str | Path, kind: str, fmt: str) -> str | None:
    """The advice when ``path`` is recognizably not ``kind`` / ``fmt``, else None."""
    hint = sniff(path)
    if hint is None or (hint.kind, hint.fmt) == (kind, fmt):
        return None
    if hint.kind == kind == "dataset" and {hint.fmt, fmt} == {"hotpotqa", "2wiki"}:
        return None  # the two share a layout; each reader takes the other's file
    return hint.advice()
