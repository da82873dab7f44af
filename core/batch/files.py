"""OpenAI Batch files: the request lines a run's calls become and the result lines read back.

Pure functions, no store: :mod:`core.batch.runs` plans the calls and stores the answers.

The request line of one call (the OpenAI Batch API input format, which vLLM's
``python -m vllm.entrypoints.openai.run_batch`` and Ray Data LLM pipelines read too)::

    {"custom_id": "<run>/<instance>/<condition>/<variant>", "method": "POST",
     "url": "/v1/chat/completions",
     "body": {"model": M, "messages": [...], "temperature": 0.0, "seed": 0,
              "max_tokens": 1024, "response_format": {"type": "json_schema",
              "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": true}}}}

``custom_id`` is the prediction key (:func:`custom_id`): its four parts joined by ``/``, each
percent-encoded where it holds ``/`` or ``%`` (and nothing else), so it reads as the key and
:func:`parse_custom_id` splits it back unambiguously (a judge call's ``custom_id`` is its
judgment key, five parts: :func:`judge_custom_id`). The body is what the ``openai`` backend
sends live (:class:`core.backends.openai_compat.OpenAIBackend`), without streaming and
log-probabilities.

A result line (``vllm.entrypoints.openai.run_batch.BatchRequestOutput``, the OpenAI Batch API's
output file)::

    {"id": "...", "custom_id": "...", "response": {"status_code": 200, "request_id": "...",
     "body": {"choices": [{"message": {"content": "..."}}], "usage": {...}}}, "error": null}

A line whose ``error`` is set or whose ``status_code`` is not 200 is a failed call
(:attr:`ResultLine.error`): it is stored as an error, never scored as an answer. A line that is
not of this shape is refused whole (:class:`BatchFileError`, naming the file, the line and the
field).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from core.backends.support import reasoning_text
from core.execution.prompts import ANSWER_SCHEMA
from core.names import ellipsize
from core.types import DataError

__all__ = [
    "BatchFileError",
    "MAX_TOKENS",
    "ResultLine",
    "URL",
    "custom_id",
    "judge_custom_id",
    "parse_custom_id",
    "parse_judge_custom_id",
    "read_results",
    "request_line",
    "request_options",
    "result_line",
    "shard_paths",
]

#: The endpoint every request line names.
URL = "/v1/chat/completions"
#: ``max_tokens`` of every request: the ``openai`` backend's default (a live run sends it too).
MAX_TOKENS = 1024
#: Characters :func:`custom_id` leaves as they are: everything but ``/`` and ``%``.
_SAFE = "".join(chr(c) for c in range(32, 127) if chr(c) not in "/%")


class BatchFileError(DataError):
    """A bad line of a batch file: ``FILE: line N: field F: what is wrong`` in one line."""

    def __init__(self, file: str, line: int | None, field: str | None, reason: str):
        super().__init__(file, line, field, reason)
        where = [self.file]
        if line is not None:
            where.append(f"line {line}")
        if field is not None:
            where.append(f"field {field}")
        self.args = (": ".join(where) + ": " + reason.replace("\n", " "),)

    def __str__(self) -> str:
        return str(self.args[0])


# --------------------------------------------------------------------------- requests


def custom_id(run_id: str, instance_id: str, condition: str, variant: str) -> str:
    """The ``custom_id`` of a call: its prediction key, ``run/instance/condition/variant``.

    Each part is percent-encoded only where it holds ``/`` or ``%`` (or characters outside
    printable ASCII), so ids read as they are and :func:`parse_custom_id` inverts it.
    """
    return "/".join(quote(str(p), safe=_SAFE) for p in (run_id, instance_id, condition, variant))


def parse_custom_id(text: str) -> tuple[str, str, str, str]:
    """``(run, instance, condition, variant)`` of a :func:`custom_id`.

    Raises:
        ValueError: ``text`` is not four ``/``-separated parts with a run, an instance and a
            condition.
    """
    parts = text.split("/")
    if len(parts) != 4 or not all(parts[:3]):
        raise ValueError(
            f"{text[:80]!r} is not a prediction key run/instance/condition/variant "
            "(written by `batch export`)"
        )
    run, inst, cond, variant = (unquote(p, errors="strict") for p in parts)
    return run, inst, cond, variant


def judge_custom_id(
    run_id: str, target_run: str, instance_id: str, condition: str, item: str
) -> str:
    """The ``custom_id`` of a judge call: ``judge_run/target_run/instance/condition/item``.

    The judgment's key (:attr:`core.judges.runs.PlannedJudgment.key`) after its run, encoded
    as :func:`custom_id` encodes a prediction key; five parts, so a prediction's four-part id
    never reads as a judgment's. ``target_run`` and ``condition`` are empty when a dataset's
    passages are judged (``crux-answerability``).
    """
    parts = (run_id, target_run, instance_id, condition, item)
    return "/".join(quote(str(p), safe=_SAFE) for p in parts)


def parse_judge_custom_id(text: str) -> tuple[str, str, str, str, str]:
    """``(judge run, target run, instance, condition, item)`` of a :func:`judge_custom_id`.

    Raises:
        ValueError: ``text`` is not five ``/``-separated parts with a run, an instance and an
            item.
    """
    parts = text.split("/")
    if len(parts) != 5 or not (parts[0] and parts[2] and parts[4]):
        raise ValueError(
            f"{text[:80]!r} is not a judgment key run/target_run/instance/condition/item "
            "(written by `batch export judge`)"
        )
    run, target, inst, cond, item = (unquote(p, errors="strict") for p in parts)
    return run, target, inst, cond, item


def request_options(seed: int = 0) -> dict[str, Any]:
    """The generation options of a batch run: those a live ``openai`` run records.

    ``temperature`` 0, ``seed`` and ``max_tokens`` :data:`MAX_TOKENS`, as
    :class:`core.backends.openai_compat.OpenAIBackend` reports them (its ``options``), so a run
    exported as a batch can be continued live, and the other way round.
    """
    return {"temperature": 0.0, "seed": int(seed), "max_tokens": MAX_TOKENS}


def request_line(
    cid: str, model: str, messages: Sequence[Mapping[str, str]], options: Mapping[str, Any]
) -> str:
    """One request line (JSON text, no newline) of an OpenAI Batch input file.

    Args:
        cid: the call's :func:`custom_id`.
        model: the model name the batch runner serves.
        messages: the call's chat messages.
        options: the run's generation options (:func:`request_options`).
    """
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "temperature": float(options.get("temperature", 0.0)),
        "seed": int(options.get("seed", 0)),
        "max_tokens": int(options.get("max_tokens", MAX_TOKENS)),
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA, "strict": True},
        },
    }
    line = {"custom_id": cid, "method": "POST", "url": URL, "body": body}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":"))


def shard_paths(out: Path, n_lines: int, shard_size: int | None) -> list[Path]:
    """The files ``n_lines`` request lines go to: ``out`` itself, or ``F.000.jsonl`` ...

    Without ``shard_size`` (or with ``n_lines`` within it) every line goes to ``out``; else
    ``ceil(n_lines / shard_size)`` shards named after ``out`` (``F.jsonl`` -> ``F.000.jsonl``,
    ``F.001.jsonl`` ...), each holding ``shard_size`` lines but the last.

    Raises:
        ValueError: ``shard_size`` below 1.
    """
    if shard_size is not None and int(shard_size) < 1:
        raise ValueError(f"--shard-size must be at least 1, got {shard_size}")
    if shard_size is None or n_lines <= int(shard_size):
        return [out]
    n = math.ceil(n_lines / int(shard_size))
    width = max(3, len(str(n - 1)))
    stem, suffix = (out.stem, out.suffix) if out.suffix else (out.name, ".jsonl")
    return [out.with_name(f"{stem}.{i:0{width}d}{suffix}") for i in range(n)]


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ResultLine:
    """One answered (or failed) call read from a batch output file.

    Attributes:
        line: 1-based line number in its file.
        key: ``(instance_id, condition, variant)`` from the ``custom_id``; a judge call's
            ``(target_run, instance_id, condition, item)`` (:func:`judge_custom_id`).
        text: the reply's ``choices[0].message.content`` ("" for a failed call).
        error: why the call failed (non-200 status, ``error`` set, no content), else None.
        prompt_tokens: ``usage.prompt_tokens`` when given.
        completion_tokens: ``usage.completion_tokens`` when given.
        logprobs: ``choices[0].logprobs.content`` when given.
        batch_id: the line's ``id`` (the runner's request id), when given.
        reasoning: a reasoning model's thoughts returned apart from the content
            (``message.reasoning_content`` or ``message.reasoning``), stored apart and never
            parsed as the answer, as for a live reply.
    """

    line: int
    key: tuple[str, ...]
    text: str
    error: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    logprobs: tuple[Mapping[str, Any], ...] | None = None
    batch_id: str | None = None
    reasoning: str | None = None


def read_results(
    path: Path, run_id: str, name: str | None = None, *, judge: bool = False
) -> list[ResultLine]:
    """Read and check every line of a batch output file (nothing is stored here).

    Blank lines are skipped. Each line must be a JSON object with a ``custom_id`` of run
    ``run_id`` (:func:`custom_id`; each key once per file) and either a ``response`` with a
    ``status_code`` (200: a ``body`` with ``choices[0].message``) or an ``error``.

    Args:
        path: the file.
        run_id: the run the lines must belong to.
        name: the file's name in error messages (default: ``path`` as given).
        judge: the lines answer a judge run's calls (:func:`judge_custom_id`).

    Raises:
        BatchFileError: the first bad line (file, line, field, what is wrong).
        FileNotFoundError: no such file.
    """
    where = str(name if name is not None else path)
    out: list[ResultLine] = []
    seen: dict[tuple[str, ...], int] = {}
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise BatchFileError(where, n, None, f"not UTF-8 ({exc.reason})") from None
            got = result_line(text, n, run_id, where, judge=judge)
            first = seen.setdefault(got.key, n)
            if first != n:
                raise BatchFileError(where, n, "custom_id", f"repeats line {first}'s call")
            out.append(got)
    return out


def result_line(text: str, n: int, run_id: str, where: str, *, judge: bool = False) -> ResultLine:
    """One checked :class:`ResultLine` from the JSON text of line ``n`` of file ``where``.

    Raises:
        BatchFileError: see :func:`read_results`.
    """

    def bad(field: str | None, reason: str) -> BatchFileError:
        return BatchFileError(where, n, field, reason)

    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise bad(None, f"not JSON ({ellipsize(exc.args[0] if exc.args else exc)})") from None
    except RecursionError:
        raise bad(None, "nested too deeply to read (arrays or objects inside each other)") from None
    if not isinstance(obj, dict):
        raise bad(None, f"a JSON {type(obj).__name__}, not an object")
    cid = obj.get("custom_id")
    if not isinstance(cid, str):
        raise bad("custom_id", "missing or not a string")
    try:
        run, *parts = parse_judge_custom_id(cid) if judge else parse_custom_id(cid)
    except ValueError as exc:
        raise bad("custom_id", str(exc)) from None
    if run != run_id:
        raise bad("custom_id", f"a call of run {run!r}, not of run {run_id!r}")
    batch_id = obj.get("id")
    if batch_id is not None and not isinstance(batch_id, str):
        raise bad("id", "not a string")
    key = tuple(parts)
    response = obj.get("response")
    error = obj.get("error")
    if response is not None and not isinstance(response, dict):
        raise bad("response", f"a JSON {type(response).__name__}, not an object")
    if response is None and error is None:
        raise bad("response", "missing (and no error given)")
    status = 200 if response is None else response.get("status_code", 200)
    if isinstance(status, bool) or not isinstance(status, int):
        raise bad("response.status_code", "not an integer")
    body = None if response is None else response.get("body")
    if body is not None and not isinstance(body, dict):
        raise bad("response.body", f"a JSON {type(body).__name__}, not an object")
    if error is not None or status != 200 or response is None:
        return ResultLine(n, key, "", _failure(status, error, body), batch_id=batch_id)
    if body is None:
        raise bad("response.body", "missing on a status 200 line")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise bad("response.body.choices", "missing, empty or not a list of objects")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise bad("response.body.choices[0].message", "missing or not an object")
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise bad("response.body.usage", "not an object")
    tokens = []
    for name in ("prompt_tokens", "completion_tokens"):
        value = (usage or {}).get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad(f"response.body.usage.{name}", "not an integer")
        tokens.append(value)
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise bad("response.body.choices[0].message.content", "not a string")
    reasoning = reasoning_text(message)
    if content is None and reasoning:  # cut off inside its reasoning: a parse error, as live
        content = ""
    if content is None:  # as the live backend: a reply without text is a failed call
        reason = choices[0].get("finish_reason")
        return ResultLine(
            n,
            key,
            "",
            f"batch reply lacks message.content (finish_reason {reason!r})",
            tokens[0],
            tokens[1],
            batch_id=batch_id,
        )
    lp = choices[0].get("logprobs")
    lp_tokens = lp.get("content") if isinstance(lp, dict) else None
    logprobs = (
        tuple(t for t in lp_tokens if isinstance(t, dict)) if isinstance(lp_tokens, list) else None
    )
    return ResultLine(
        n, key, content, None, tokens[0], tokens[1], logprobs or None, batch_id, reasoning
    )


def _failure(status: int, error: Any, body: Mapping[str, Any] | None) -> str:
    """The stored error of a failed line: its status and the runner's message."""
    msg = _message(error)
    if msg is None and body is not None:
        msg = _message(body.get("error"))
    head = f"batch: HTTP {status}" if status != 200 else "batch: failed"
    return f"{head}: {msg}" if msg else head


def _message(error: Any) -> str | None:
    """The text of an ``error`` as the runners write it (a string or a nested object)."""
    if error is None:
        return None
    if isinstance(error, str):
        return error.strip() or None
    if isinstance(error, dict):
        inner = error.get("error")
        if isinstance(inner, dict | str):
            return _message(inner)
        for field in ("message", "msg", "detail"):
            if isinstance(error.get(field), str) and error[field].strip():
                code = error.get("code")
                return f"{error[field].strip()}" + (f" ({code})" if code else "")
    return json.dumps(error, ensure_ascii=False, default=str)[:500]
