"""Judge runs through batch files (issue 21 item 1): export a judge run's calls, import its replies.

:func:`export_judge_batch` plans a judge run exactly as ``judge RUBRIC`` does
(:func:`core.judges.runs.plan_judgments`: the same messages, prompt hashes and judgment keys; the
run row through :func:`core.execution.runs.open_run` with the same judge configuration and options
as a
live ``--backend openai`` judge), leaves out the judgments stored already (a failed one is
exported again, as a live rerun makes it again), writes the rest as OpenAI Batch API request
lines whose body is what the live ``openai`` backend sends (:func:`core.batch.files.request_line`:
the answer contract's ``response_format`` included) and whose ``custom_id`` is the judgment key
(:func:`core.batch.files.judge_custom_id`), keeps each call's rubric template and prompt hash
(:mod:`core.store.batch_rows`), and marks the run ``waiting``.

:func:`import_judge_batch` checks every line of every file first (any bad line: one
:class:`core.batch.files.BatchFileError` naming file, line and field, store unchanged), then stores
each file in one transaction through :func:`core.judges.runs.judgment_row`, the live judge's own
row builder: the rubric's parser reads the reply (rating and parse flag), the raw reply is kept,
a failed line is stored as an error with no rating. A successful reply also goes to the response
cache under the key a live judge call would use. A judgment stored already is not stored again
(a second import adds nothing; a failed one is replaced by an answer imported later). After each
file the run's counts are refreshed (:meth:`core.store.Store.finish_judge_run`): ``done`` /
``partial`` / ``failed`` once every exported call has a reply, ``partial`` while some have none.
A ``crux-answerability`` run's judgments are CRUX's ratings, read as a live run's are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from core.backends.base import Reply
from core.batch.files import (
    BatchFileError,
    ResultLine,
    judge_custom_id,
    read_results,
    request_options,
    shard_paths,
)
from core.batch.runs import WAITING, BatchBackend, write_request_files
from core.execution.engine import cache_key, options_hash
from core.execution.runs import open_run
from core.judges.rubrics import get_rubric
from core.judges.runs import (
    PlannedJudgment,
    default_conditions,
    judge_config,
    judgment_row,
    plan_judgments,
)
from core.store import Store
from core.store.batch_rows import drop_judge_calls, judge_calls, save_judge_calls

__all__ = ["export_judge_batch", "import_judge_batch"]

_Key = tuple[str, str, str, str]


def export_judge_batch(
    store: Store,
    rubric: str,
    name: str,
    model: str,
    out: Path,
    *,
    dataset: str | None = None,
    run: str | None = None,
    conditions: Iterable[str] | None = None,
    passages: str = "gold",
    seed: int = 0,
    options: Mapping[str, Any] | None = None,
    shard_size: int | None = None,
) -> dict[str, Any]:
    """Plan judge run ``name`` and write its judgments not yet stored as batch request lines.

    Args:
        store: the store.
        rubric: a registered rubric (:data:`core.judges.rubrics.RUBRICS`).
        name: the judge run's id (new, or a stored one of the same configuration).
        model: the model name the batch runner serves.
        out: the file to write (``F.000.jsonl`` ... with ``shard_size``).
        dataset: the judged dataset (``crux-answerability``).
        run: the judged run (the other rubrics).
        conditions: the judged conditions (default :func:`core.judges.runs.default_conditions`).
        passages: ``gold`` or ``all`` (``crux-answerability``).
        seed: the generation seed of the request bodies.
        options: the run's recorded options, as a live ``judge RUBRIC --backend openai``
            records them (:func:`core.commands.run.run_options`).
        shard_size: most lines per file (:func:`core.batch.files.shard_paths`).

    Returns:
        ``{"run", "rubric", "n_calls", "files", "already_stored", "not_judged", "notes",
        "status"}``.

    Raises:
        RunBusyError: the judge run is running in another process.
        ValueError: see :func:`core.judges.runs.plan_judgments`; no model name; a bad shard
            size; a stored run of that name with another configuration.
    """
    rub = get_rubric(rubric)
    if not str(model or "").strip():
        raise ValueError("a batch file needs the model name the runner serves (--model NAME)")
    backend = BatchBackend(str(model).strip(), request_options(seed))
    shard_paths(out, 0, shard_size)  # a bad --shard-size fails before the run row
    conds = tuple(conditions or default_conditions(rub.name))
    ds, plan, info = plan_judgments(
        store, rub.name, dataset=dataset, run=run, conditions=conds, passages=passages
    )
    keys = [c.key for c in plan]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise ValueError(f"duplicate planned judgment {dup!r} in run '{name}'")
    with store.run_lock(name):
        new = store.run_row(name) is None
        open_run(
            store,
            backend,
            name,
            ds,
            options=options,
            retrieval={"judge": judge_config(rub, run, conds, passages)},
            kind="judge",
        )
        stored_ok = store.judgment_keys(name, ok_only=True)
        n_planned = len(store.judgment_keys(name, ok_only=False) | set(keys))
        todo = [c for c in plan if c.key not in stored_ok]
        lines = [(judge_custom_id(name, *c.key), c.messages) for c in todo]
        files = write_request_files(
            lines, backend.model, {**backend.options, **(options or {})}, out, shard_size
        )
        with store.write_batch() as con:
            if new:
                drop_judge_calls(con, name)  # a deleted run's calls are not this run's
            save_judge_calls(con, [_call_row(name, c) for c in todo])
            if todo:
                store.save_run({"run_id": name, "status": WAITING, "n_planned": n_planned}, con=con)
        status = (store.run_row(name) or {}).get("status")
    return {
        "run": name,
        "rubric": rub.name,
        "n_calls": len(todo),
        "files": [str(p) for p in files],
        "already_stored": len(plan) - len(todo),
        "not_judged": info["not_judged"],
        "notes": list(info["notes"]),
        "status": status,
    }


def _call_row(run_id: str, call: PlannedJudgment) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "target_run": call.target_run,
        "instance_id": call.instance_id,
        "condition": call.condition,
        "item": call.item,
        "template": call.template,
        "prompt_hash": call.prompt_hash,
    }


# --------------------------------------------------------------------------- import


def import_judge_batch(store: Store, run_id: str, paths: Iterable[Path]) -> dict[str, Any]:
    """Store the replies of batch output files in judge run ``run_id`` (module docstring).

    Returns:
        ``{"run", "files", "lines", "stored", "answers", "errors", "parse_errors",
        "already_stored", "missing", "status"}``, as :func:`core.batch.runs.import_batch`
        (``parse_errors``: replies the rubric's parser could not read).

    Raises:
        RunBusyError: the run is running in another process.
        BatchFileError: a bad line (file, line, field).
        ValueError: no such run, not a judge run, or one that exported no batch.
    """
    paths = [Path(p) for p in paths]
    with store.run_lock(run_id):
        row = store.run_row(run_id)
        if row is None:
            raise ValueError(f"no run '{run_id}' in {store.path}")
        if row.get("kind") != "judge":
            raise ValueError(f"run '{run_id}' is a {row.get('kind')} run, not a judge run")
        cfg = (row.get("retrieval") or {}).get("judge") or {}
        rub = get_rubric(str(cfg.get("rubric")))
        with store.attached(read_only=True) as con:
            exported = judge_calls(con, run_id)
        if not exported:
            raise ValueError(
                f"run '{run_id}' has no exported batch calls in {store.path}; write them with "
                "`python -m core batch export judge` first"
            )
        stored_all = store.judgment_keys(run_id, ok_only=False)
        stored_ok = store.judgment_keys(run_id, ok_only=True)
        files = [(p, _checked(p, run_id, exported)) for p in paths]
        judge_model = f"{row.get('backend')}:{row.get('model')}"
        model_id = str(row.get("model_digest") or row.get("model") or "")
        ohash = options_hash(row.get("options") or {})
        n_planned = int(row.get("n_planned") or len(exported))
        wall = float(row.get("wall_seconds") or 0.0)
        totals = dict.fromkeys(
            ("lines", "stored", "answers", "errors", "parse_errors", "already_stored"), 0
        )
        status = None
        for _path, lines in files:
            rows, cache = [], []
            for r in lines:
                key: _Key = r.key  # type: ignore[assignment]
                if key in stored_ok or (key in stored_all and r.error is not None):
                    totals["already_stored"] += 1
                    continue
                template, phash = exported[key]
                call = PlannedJudgment(*key, template, (), phash)
                rows.append(judgment_row(run_id, rub, judge_model, call, _reply(r), False, 0.0))
                if r.error is None:
                    cache.append(_cache_row(row, model_id, ohash, phash, r.text))
            totals["lines"] += len(lines)
            if not rows:
                continue
            stored_all |= {r.key for r in lines}  # type: ignore[misc]
            stored_ok |= {r.key for r in lines if r.error is None}  # type: ignore[misc]
            missing = sum(k not in stored_all for k in exported)
            with store.write_batch() as con:
                store.write_judgments(con, run_id, rows)
                if cache:
                    store.write_cache(con, pd.DataFrame(cache).drop_duplicates("cache_key"))
                status = store.finish_judge_run(
                    con, run_id, "done" if missing == 0 else "partial", n_planned, wall
                )
            totals["stored"] += len(rows)
            totals["errors"] += sum(x["error"] is not None for x in rows)
            totals["parse_errors"] += sum(
                x["error"] is None and x["parse_error"] is not None for x in rows
            )
        totals["answers"] = totals["stored"] - totals["errors"]
    return {
        "run": run_id,
        "files": len(paths),
        **totals,
        "missing": sum(k not in stored_all for k in exported),
        "status": status or (store.run_row(run_id) or {}).get("status"),
    }


def _reply(r: ResultLine) -> Reply:
    return Reply(
        text=r.text,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
        error=r.error,
    )


def _cache_row(
    run: Mapping[str, Any], model_id: str, ohash: str, phash: str, text: str
) -> dict[str, Any]:
    """The response-cache row a live judge call would write for this reply."""
    backend = str(run.get("backend") or "openai")
    return {
        "cache_key": cache_key(backend, model_id, ohash, phash),
        "backend": backend,
        "model": model_id,
        "options_hash": ohash,
        "prompt_hash": phash,
        "response": json.dumps({"text": text}),
    }


def _checked(path: Path, run_id: str, exported: Mapping[_Key, Any]) -> list[ResultLine]:
    """Every line of ``path``, each one a call the judge run exported."""
    lines = read_results(path, run_id, judge=True)
    for r in lines:
        if r.key not in exported:
            raise BatchFileError(
                str(path),
                r.line,
                "custom_id",
                f"judge run '{run_id}' exported no judgment {'/'.join(r.key)!r} "
                "(unknown custom_id)",
            )
    return lines
