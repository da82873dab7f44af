"""The ONCU release's side files: which files make one run, and what they say per answer.

A run of the ONCU artifact writes, in its ``results/`` folder, ``per_sample_metrics.csv`` (one
row per instance and method: the scored values), ``parsed_predictions.jsonl`` (the release's
parse of each reply: answer, evidence ids, explanation) and ``raw_model_responses.jsonl``
(each reply exactly as the model wrote it, ``raw_response``, with that parse as
``prediction`` and the run's metadata). Copied out of their folders the files carry the run's
name as a prefix: ``<run>.per_sample_metrics.csv`` and so on. :func:`group_release_files`
turns folders and files into one :class:`ReleaseFiles` per run; :func:`read_parsed` and
:func:`read_replies` read the two JSONL files, each bad line a
:class:`~core.types.DataError` naming the file, the line and the field.

What the release does not hold: the question and the passage texts (the run's
``resolved_config.json`` names the dataset file, ``dataset_path``, which is not part of the
results), and which passages a full-context or retrieved call showed (``intermediate`` keeps
only the retrieved chunks' count and lengths). So the shown ids are known for two conditions
only (:func:`shown_ids`): none for ``no_evidence``, the gold evidence for ``oracle``.

The replies are parsed again by this tool's parser (:func:`core.scoring.parsing.parse_reply`, with
those shown ids) and compared with the release's own parse, field by field
(:func:`parse_differences`); the import counts the replies that differ per run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.datasets.records import check_record, expect_object, jsonl_records
from core.scoring.parsing import parse_reply
from core.types import DataError

__all__ = [
    "CONFIG",
    "METRICS",
    "PARSE_FIELDS",
    "PARSED",
    "REPLIES",
    "ReleaseFiles",
    "group_release_files",
    "parse_differences",
    "read_parsed",
    "read_config",
    "read_replies",
    "release_parse",
    "shown_ids",
]

#: The file names of one run's ``results/`` folder (``<run>.`` before each when copied out).
METRICS = "per_sample_metrics.csv"
PARSED = "parsed_predictions.jsonl"
REPLIES = "raw_model_responses.jsonl"
CONFIG = "resolved_config.json"
_KINDS = (METRICS, PARSED, REPLIES, CONFIG)
#: Fields of a parse compared between the release and this tool.
PARSE_FIELDS = ("answer", "evidence_ids", "explanation", "parse_error")
_METHODS = ("no_evidence", "direct", "retrieve_then_read", "oracle")


@dataclass(frozen=True, slots=True)
class ReleaseFiles:
    """The files of one released run.

    Attributes:
        name: the run's name: the files' prefix (``<run>.per_sample_metrics.csv``), or the
            folder's name (its parent's for a folder named ``results``).
        metrics: the ``per_sample_metrics.csv``.
        parsed: the ``parsed_predictions.jsonl``, or None.
        replies: the ``raw_model_responses.jsonl``, or None.
        config: the ``resolved_config.json``, or None.
    """

    name: str
    metrics: Path
    parsed: Path | None = None
    replies: Path | None = None
    config: Path | None = None

    def files(self) -> list[Path]:
        """The files present, metrics first."""
        return [p for p in (self.metrics, self.parsed, self.replies, self.config) if p]


def _split(path: Path) -> tuple[str, str] | None:
    """``(prefix, kind)`` of a release file name (prefix ``""`` for a bare name), or None."""
    for kind in _KINDS:
        if path.name == kind:
            return "", kind
        if path.name.endswith("." + kind):
            return path.name[: -len(kind) - 1], kind
    return None


def _folder_name(folder: Path) -> str:
    folder = folder.resolve()
    return folder.parent.name if folder.name == "results" and folder.parent.name else folder.name


def _beside(metrics: Path, prefix: str) -> dict[str, Path]:
    """The side files of the same prefix in the metrics file's folder."""
    out = {}
    for kind in (PARSED, REPLIES, CONFIG):
        side = metrics.with_name(f"{prefix}.{kind}" if prefix else kind)
        if side.is_file():
            out[kind] = side
    return out


def group_release_files(paths: Sequence[str | Path], beside: bool = True) -> list[ReleaseFiles]:
    """The runs named by ``paths``: folders and files grouped by run, in the order given.

    A folder contributes every run in it (``per_sample_metrics.csv`` and
    ``<run>.per_sample_metrics.csv``, with their side files). Files are grouped by folder and
    prefix; a ``per_sample_metrics.csv`` given alone takes the side files beside it (as the
    import always did with ``parsed_predictions.jsonl``). A file of another name is taken as
    a metrics CSV (its runs named after it, less its extension). ``beside=False`` takes only
    the files given (an upload folder holds other uploads' files too).

    Raises:
        DataError: a path that does not exist, a folder without a metrics file, a side file
            (``parsed_predictions`` / ``raw_model_responses``) without its metrics file, or a
            file given twice.
    """
    groups: dict[tuple[Path, str], dict[str, Path]] = {}
    named: dict[tuple[Path, str], str] = {}
    seen: set[Path] = set()

    def add(path: Path, prefix: str, kind: str, name: str | None = None) -> None:
        key = (path.parent.resolve(), prefix)
        group = groups.setdefault(key, {})
        if kind in group and group[kind].resolve() != path.resolve():
            raise DataError(str(path), None, None, f"a second {kind} of run {prefix!r}")
        group[kind] = path
        if name is not None:
            named.setdefault(key, name)

    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.iterdir() if p.is_file() and _split(p))
            metrics = [p for p in found if _split(p)[1] == METRICS]  # type: ignore[index]
            if not metrics:
                raise DataError(
                    str(path), None, None, f"no {METRICS} (nor <run>.{METRICS}) in this folder"
                )
            for p in found:
                prefix, kind = _split(p)  # type: ignore[misc]
                add(p, prefix, kind, prefix or _folder_name(path))
            continue
        if not path.exists():
            raise DataError(str(path), None, None, "file not found")
        if path.resolve() in seen:
            raise DataError(str(path), None, None, "given twice")
        seen.add(path.resolve())
        split = _split(path)
        if split is None:  # any other name: a metrics CSV, named after the file
            add(path, "\0" + path.name, METRICS, path.stem)
            continue
        prefix, kind = split
        # a bare name is named as a lone metrics CSV always was: after that file's stem
        add(path, prefix, kind, prefix or Path(METRICS).stem)
    out = []
    for key, group in groups.items():
        if METRICS not in group:
            side = next(iter(group.values()))
            raise DataError(
                str(side),
                None,
                None,
                f"no {METRICS} of this run among the files "
                f"(expected {side.with_name(_metrics_name(key[1]))})",
            )
        metrics = group[METRICS]
        if beside and not key[1].startswith("\0"):
            for kind, side in _beside(metrics, key[1]).items():
                group.setdefault(kind, side)
        out.append(
            ReleaseFiles(
                name=named[key],
                metrics=metrics,
                parsed=group.get(PARSED),
                replies=group.get(REPLIES),
                config=group.get(CONFIG),
            )
        )
    return out


def _metrics_name(prefix: str) -> str:
    return f"{prefix}.{METRICS}" if prefix else METRICS


def _key(rec: Any, file: str, line: int) -> tuple[str, str]:
    sid = rec["sample_id"].ident()
    method = rec["method"].text()
    if method not in _METHODS:
        raise DataError(
            file, line, "method", f"unknown method {method!r} (allowed: {', '.join(_METHODS)})"
        )
    return sid, method


def _records(path: Path) -> Iterable[tuple[int, Any]]:
    """Checked JSON objects of a JSONL file (an empty file has none)."""
    file = str(path)
    try:
        for line, obj in jsonl_records(path):
            check_record(file, line, obj)
            yield line, expect_object(file, line, obj)
    except DataError as err:
        if err.record is None and err.reason.startswith("empty file"):
            return
        raise


def _ids(field: Any) -> list[str]:
    return [item.text() for item in field.items()]


def _keyed(path: Path) -> Iterable[tuple[tuple[str, str], int, Any]]:
    """``((sample_id, method), line, record)`` per line; a key listed twice is refused."""
    file, first = str(path), {}
    for line, rec in _records(path):
        key = _key(rec, file, line)
        if key in first:
            raise DataError(
                file,
                line,
                "sample_id",
                f"(sample_id, method) {key!r} listed twice: first in record {first[key]}",
            )
        first[key] = line
        yield key, line, rec


def read_parsed(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``parsed_predictions.jsonl``: per (sample_id, method) the release's parse.

    Each line: ``sample_id``, ``method``; ``explanation`` a string or null; ``answer`` (a
    string or number) and ``evidence_ids`` (a list of strings) when present.

    Returns:
        ``{"line", "explanation", "answer", "evidence_ids"}`` per key (None where absent).

    Raises:
        DataError: naming the file, the line and the field.
    """
    found = {}
    for key, line, rec in _keyed(path):
        found[key] = {
            "line": line,
            "explanation": rec["explanation"].text() if rec.has("explanation") else None,
            "answer": rec["answer"].answer() if rec.has("answer") else None,
            "evidence_ids": _ids(rec["evidence_ids"]) if rec.has("evidence_ids") else None,
        }
    return found


def read_replies(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """``raw_model_responses.jsonl``: per (sample_id, method) the reply and the release's parse.

    Each line: ``sample_id``, ``method``, ``raw_response`` (a string), ``prediction`` (an
    object: ``answer`` a string or number, ``evidence_ids`` a list of strings,
    ``explanation`` a string or null); ``model_name``, ``prompt_hash``,
    ``prompt_protocol_version`` strings and ``intermediate`` an object when present.

    Returns:
        ``{"line", "model_name", "raw_response", "prediction", "prompt_hash", "protocol",
        "intermediate"}`` per key.

    Raises:
        DataError: naming the file, the line and the field.
    """
    found = {}
    for key, line, rec in _keyed(path):
        pred = rec["prediction"]
        pred.obj()
        found[key] = {
            "line": line,
            "model_name": rec.opt_text("model_name") or None,
            "raw_response": rec["raw_response"].text(),
            "prediction": {
                "answer": pred["answer"].answer(),
                "evidence_ids": _ids(pred["evidence_ids"]),
                "explanation": pred.opt_text("explanation"),
            },
            "prompt_hash": rec.opt_text("prompt_hash") or None,
            "protocol": rec.opt_text("prompt_protocol_version") or None,
            "intermediate": rec.opt_obj("intermediate"),
        }
    return found


def read_config(path: Path) -> dict[str, Any]:
    """``resolved_config.json`` as an object (kept with the run).

    Raises:
        DataError: not valid JSON, or not an object.
    """
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(str(path), None, None, f"not a readable JSON file: {exc}") from None
    if not isinstance(obj, dict):
        raise DataError(str(path), None, None, "expected a JSON object")
    return obj


def shown_ids(method: str, gold_ids: Sequence[str]) -> tuple[str, ...] | None:
    """The passage ids a release call showed, where the release says: None when it does not.

    ``no_evidence`` shows nothing (``()``); ``oracle`` shows the gold evidence; the
    full-context and retrieved calls' shown ids are not in the release (None).
    """
    if method == "no_evidence":
        return ()
    if method == "oracle":
        return tuple(gold_ids)
    return None


def parse_differences(
    raw_response: str,
    release: dict[str, Any],
    release_error: str | None,
    known_ids: Sequence[str] | None,
) -> tuple[dict[str, Any], list[str]]:
    """Parse a released reply with this tool's parser; name the fields that differ from the release.

    Args:
        raw_response: the reply as the model wrote it.
        release: the release's parse (``answer``, ``evidence_ids``, ``explanation``).
        release_error: the release's parse error (the CSV's ``parse_error``; None or empty
            when it parsed).
        known_ids: the ids shown (:func:`shown_ids`); None when the release does not say.

    Returns:
        ``(parse, differs)``: this tool's parse as plain JSON (``answer``, ``evidence_ids``,
        ``explanation``, ``parse_error``, and ``unshown_ids`` / ``over_cap_ids`` /
        ``salvaged`` when the parser gives them) and the names of :data:`PARSE_FIELDS` that
        differ (answers and explanations compared after stripping surrounding blanks;
        evidence ids in order; parse errors by whether there is one).
    """
    got = parse_reply(raw_response, known_ids=known_ids)
    mine: dict[str, Any] = {
        "answer": got.answer,
        "evidence_ids": list(got.evidence_ids),
        "explanation": got.explanation,
        "parse_error": got.parse_error,
    }
    for extra in ("unshown_ids", "over_cap_ids", "salvaged"):
        value = getattr(got, extra, None)
        if value:
            mine[extra] = list(value)
    differs = []
    if (got.answer or "").strip() != str(release.get("answer") or "").strip():
        differs.append("answer")
    if list(got.evidence_ids) != list(release.get("evidence_ids") or []):
        differs.append("evidence_ids")
    if (got.explanation or "").strip() != str(release.get("explanation") or "").strip():
        differs.append("explanation")
    if bool(got.parse_error) != bool((release_error or "").strip()):
        differs.append("parse_error")
    return mine, differs


def release_parse(meta: Any) -> dict[str, Any] | None:
    """The release's parse of an imported prediction beside this tool's, from its ``meta``.

    Args:
        meta: the prediction's ``meta`` (JSON text or a dict; None).

    Returns:
        None when the prediction carries no raw reply from a release; else ``{"differs":
        [field, ...], "rows": [{"field", "release", "this tool"}, ...], "note"}`` (one row
        per :data:`PARSE_FIELDS` item, values as text; ``note`` says why evidence ids differ
        when the release does not record what the call showed, else ``""``).
    """
    if isinstance(meta, str):
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError:
            return None
    release = meta.get("release") if isinstance(meta, dict) else None
    if not isinstance(release, dict) or "tool_parse" not in release:
        return None
    theirs, mine = release.get("parse") or {}, release["tool_parse"]

    def text(value: Any) -> str:
        if isinstance(value, list):
            return ", ".join(map(str, value)) or "(none)"
        return "(none)" if value in (None, "") else str(value)

    rows = [
        {
            "field": f.replace("_", " "),
            "release": text(theirs.get(f)),
            "this tool": text(mine.get(f)),
        }
        for f in PARSE_FIELDS
    ]
    for extra in ("unshown_ids", "over_cap_ids", "salvaged"):
        if mine.get(extra):
            rows.append(
                {"field": extra.replace("_", " "), "release": "-", "this tool": text(mine[extra])}
            )
    differs = list(release.get("parse_differs") or [])
    note = ""
    if "evidence_ids" in differs and release.get("shown_ids_known") is False:
        note = (
            "The release does not record which passages this call showed, so this tool's "
            "parse keeps every cited passage id; the release's parser kept only the ids "
            "that were shown."
        )
    return {"differs": differs, "rows": rows, "note": note}
