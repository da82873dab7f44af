"""Existing experiment outputs: import them as runs, and (re)score any run from its predictions.

The ONCU release writes one ``per_sample_metrics.csv`` per experiment (one row per instance and
method). Importing it creates the instances when the store lacks them, one run per model, and
the predictions; the file's own score columns are ignored and every prediction is re-scored
with the project's scorer (SPEC §3.3, §6).

The file is read with the ``csv`` module over the open file, so every valid CSV (RFC 4180)
imports as written: a quoted cell keeps its line breaks (LF, CR LF), quotes, commas,
form feeds and U+2028 exactly. Bad input is one ``DataError`` naming the file, the record (the
data row: the header is not counted, blank lines are) and the column; nothing is written then.
Limits are those of ``core.datasets.records``: a cell is at most ``MAX_FIELD_BYTES`` bytes of
UTF-8, ``context_length`` at most ``MAX_CONTEXT_LENGTH``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa

from core.datasets.release_csv import (
    INSTANCE_COLUMNS,
    ONCU_METHODS,
    instances_from_rows,
    quoted_short,
    read_oncu_csv,
    split_ids,
)
from core.datasets.release_files import (
    PARSE_FIELDS,
    ReleaseFiles,
    group_release_files,
    parse_differences,
    read_config,
    read_parsed,
    read_replies,
    shown_ids,
)
from core.datasets.sniff import format_hint
from core.names import check_name
from core.scoring.rows import SCORE_COLUMNS, score_arrow, stored_differs_by_column
from core.scoring.vector import AnswerForms, inputs_from_arrow, score_table
from core.store import Store, StoreError
from core.store.rescore_rows import rescore_batches
from core.types import DataError, Dataset

__all__ = [
    "INSTANCE_COLUMNS",
    "ONCU_METHODS",
    "RESULT_FORMATS",
    "ResultsImport",
    "default_name",
    "group_release_files",
    "import_results",
    "parse_check_text",
    "score_runs",
]

RESULT_FORMATS = ("oncu-release",)


#: Rows per Arrow batch when :func:`score_runs` re-scores stored predictions.
SCORE_BATCH_ROWS = 200_000
_SCORE_KEY = ("run_id", "instance_id", "condition", "variant")
_SUFFIX = ".per_sample_metrics.csv"


@dataclass(frozen=True, slots=True)
class ResultsImport:
    """What an import wrote.

    Attributes:
        dataset: dataset the runs belong to.
        created_dataset: True when the instances were created from the file.
        runs: run ids written (one per model).
        n_rows: prediction rows read.
        n_instances: distinct instances.
        n_explained: predictions given an explanation by the side files.
        n_replies: predictions given their raw reply (``raw_model_responses.jsonl``).
        parse_check: this tool's parse of the raw replies against the release's
            (:func:`parse_check_text`); empty without raw replies.
    """

    dataset: str
    created_dataset: bool
    runs: tuple[str, ...]
    n_rows: int
    n_instances: int
    n_explained: int = 0
    n_replies: int = 0
    parse_check: dict = field(default_factory=dict)

    def summary(self) -> str:
        """One line for the CLI."""
        made = "created" if self.created_dataset else "reused"
        line = (
            f"read {self.n_rows} predictions of {self.n_instances} instances; {made} dataset "
            f"'{self.dataset}'; runs: {', '.join(self.runs)} (re-scored)"
        )
        if self.n_explained:
            line += f"; explanations: {self.n_explained}"
        if self.parse_check:
            line += "; " + parse_check_text(self.parse_check)
        return line


def parse_check_text(check: dict) -> str:
    """One phrase: raw replies read and on how many this tool's parse differs, by field.

    ``check``: ``n_rows``, ``n_replies``, ``n_differs`` and ``by_field`` (field -> count), as
    an import stores it in the run's ``options["parse_check"]``.
    """
    by = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in check["by_field"].items() if v)
    text = f"raw replies: {check['n_replies']} of {check['n_rows']}"
    text += (
        f"; this tool's parser differs from the release's parse on {check['n_differs']} ({by})"
        if check["n_differs"]
        else "; this tool's parser agrees with the release's parse on every reply"
    )
    return text


def default_name(path: str | Path) -> str:
    """The import name of a results file given no ``--name``: its file name less the suffix.

    ``x/hotpotqa_qwen25_14b_200.per_sample_metrics.csv`` -> ``hotpotqa_qwen25_14b_200``; a file
    not named ``*.per_sample_metrics.csv`` loses its last extension.
    """
    p = Path(path)
    if p.name.endswith(_SUFFIX) and p.name != _SUFFIX:
        return p.name[: -len(_SUFFIX)]
    return p.stem


@dataclass(frozen=True, slots=True)
class _Side:
    """What a run's side files add: per (sample_id, method) the release's parse and reply."""

    parsed: dict[tuple[str, str], dict]
    replies: dict[tuple[str, str], dict]
    config: dict


def _side_files(files: ReleaseFiles, df: pd.DataFrame) -> _Side:
    """Read the side files of a run and check each line names a row of the metrics CSV.

    Raises:
        DataError: a bad line (file, line, field), a line whose (sample_id, method) is not in
            the metrics file, or a reply whose ``model_name`` differs from its row's.
    """
    parsed = read_parsed(files.parsed) if files.parsed else {}
    replies = read_replies(files.replies) if files.replies else {}
    config = read_config(files.config) if files.config else {}
    model_of = dict(
        zip(zip(df["sample_id"], df["method"], strict=True), df["model_name"], strict=True)
    )
    for path, found in ((files.parsed, parsed), (files.replies, replies)):
        for key, rec in found.items():
            if key not in model_of:
                raise DataError(
                    str(path),
                    rec["line"],
                    "sample_id",
                    f"(sample_id, method) {key!r} is not in {files.metrics.name}",
                )
            model = rec.get("model_name")
            if model is not None and model != model_of[key]:
                raise DataError(
                    str(path),
                    rec["line"],
                    "model_name",
                    f"{quoted_short(model)} here but {quoted_short(model_of[key])} in "
                    f"{files.metrics.name} for {key!r}",
                )
    return _Side(parsed, replies, config)


def import_results(
    store: Store,
    path: str | Path | ReleaseFiles,
    name: str | None = None,
    fmt: str = "oncu-release",
    dataset: str | None = None,
    replace: bool = False,
    with_runs: str | None = None,
) -> ResultsImport:
    """Import one released run as runs (one per model), re-scored, in one transaction.

    Args:
        store: the target store.
        path: the run's ``per_sample_metrics.csv`` (its side files beside it are read too),
            its ``results/`` folder, or its files grouped
            (:func:`core.datasets.release_files.group_release_files`). ``parsed_predictions.jsonl``
            adds the explanations; ``raw_model_responses.jsonl`` the raw replies, which are
            parsed again by :func:`core.scoring.parsing.parse_reply` and compared with the release's
            parse (counted per run in ``options["parse_check"]`` and the run's notes).
            Answers and cited ids are the metrics file's (the release's scored values).
        name: import name: the dataset name when instances are created, and the run id (or
            ``NAME/MODEL`` when the file holds several models); None -> the run's name (the
            file name less ``.per_sample_metrics.csv``, or the folder's name).
        fmt: ``oncu-release``.
        dataset: attach the predictions to this stored dataset instead of creating one; every
            sample id must exist in it.
        replace: replace existing runs / a created dataset of the same name.
        with_runs: with ``replace``, what becomes of the created dataset's other runs
            (:meth:`core.store.Store.write_dataset`); its runs of this import are replaced.

    Raises:
        DataError: a file is malformed (names file, record and field); nothing is written.
        ValueError: unknown format, or a name ``core.names.check_name`` refuses.
        StoreError: names are taken (without ``replace``) or the dataset is missing.
    """
    if fmt not in RESULT_FORMATS:
        raise ValueError(f"unknown results format '{fmt}' (allowed: {', '.join(RESULT_FORMATS)})")
    files = path if isinstance(path, ReleaseFiles) else _one_run(Path(path))
    path = files.metrics
    name = files.name if name is None else name
    check_name("dataset" if dataset is None else "run", name)
    try:
        df = read_oncu_csv(path)
        side = _side_files(files, df)
    except DataError as exc:  # a dataset file chosen as results: say which format it is
        hint = format_hint(path, "results", fmt)
        if hint is None:
            raise
        raise DataError(str(path), None, None, hint) from exc
    models = list(dict.fromkeys(df["model_name"]))
    run_ids = {m: name if len(models) == 1 else f"{name}/{m}" for m in models}
    for model, run_id in run_ids.items():
        try:
            check_name("run", run_id)
        except ValueError as exc:
            first = int(df.loc[df["model_name"] == model, "_record"].iloc[0])
            raise DataError(str(path), first, "model_name", str(exc)) from None
    target = dataset or name
    created = dataset is None
    frames = {m: _prediction_frame(df[df["model_name"] == m], r, side) for m, r in run_ids.items()}
    checks = {m: _parse_check(f) for m, (f, _) in frames.items()}
    with store.transaction() as con:
        if created:
            ds = Dataset(
                name=target,
                source=str(df["source"].iloc[0]),
                builder="import:oncu-release-results",
                builder_params={"file": str(path), "format": fmt},
                instances=tuple(instances_from_rows(df)),
            )
            store.insert_dataset(
                con, ds, replace=replace, with_runs=with_runs, replacing=tuple(run_ids.values())
            )
        else:
            _check_instances(con, store, path, df, target)
        for model, run_id in run_ids.items():
            if store.run_exists(con, run_id) and not replace:
                raise StoreError(
                    f"run '{run_id}' already exists in {store.path}; choose another --name "
                    "or pass --replace"
                )
            store.delete_run_results(con, [run_id])
            frame, _ = frames[model]
            notes = f"imported from {path.name}; scores recomputed"
            if checks[model]:
                notes += "; " + parse_check_text(checks[model])
            options = {
                "source_file": str(path),
                "format": fmt,
                "files": [str(p) for p in files.files()],
            }
            if checks[model]:
                options["parse_check"] = checks[model]
            if side.config:
                options["release_config"] = side.config
            store.insert_run(
                con,
                {
                    "run_id": run_id,
                    "dataset_id": target,
                    "backend": "imported",
                    "model": model,
                    "options": options,
                    "kind": "imported",
                    "status": "running",  # finished below, once its predictions are in
                    "n_planned": len(frame),
                    "n_done": len(frame),
                    "notes": notes,
                },
            )
            store.write_predictions(con, frame, replace=True)
            store.finish_run(run_id, "done", len(frame), con=con)  # partial/failed on errors
        score_runs(store, list(run_ids.values()), con=con)
    return ResultsImport(
        dataset=target,
        created_dataset=created,
        runs=tuple(run_ids.values()),
        n_rows=len(df),
        n_instances=int(df["sample_id"].nunique()),
        n_explained=sum(n for _, n in frames.values()),
        n_replies=sum(c.get("n_replies", 0) for c in checks.values()),
        parse_check=_merged_checks(list(checks.values()), len(df)),
    )


def _one_run(path: Path) -> ReleaseFiles:
    """The run of a metrics CSV (with its side files) or of a folder holding one run."""
    groups = group_release_files([path])
    if len(groups) != 1:
        names = ", ".join(g.name for g in groups)
        raise DataError(
            str(path),
            None,
            None,
            f"holds {len(groups)} runs ({names}): import "
            "each one (the command line takes the folder and imports every run)",
        )
    return groups[0]


def _parse_check(frame: pd.DataFrame) -> dict:
    """Raw replies of a run's predictions and where this tool's parse differs (per field)."""
    metas = [json.loads(m) for m in frame["meta"] if m]
    checked = [m["release"] for m in metas if "reply_line" in m.get("release", {})]
    if not checked:
        return {}
    by_field = {f: sum(f in m["parse_differs"] for m in checked) for f in PARSE_FIELDS}
    return {
        "n_rows": len(frame),
        "n_replies": len(checked),
        "n_differs": sum(bool(m["parse_differs"]) for m in checked),
        "by_field": by_field,
    }


def _merged_checks(checks: list[dict], n_rows: int) -> dict:
    done = [c for c in checks if c]
    if not done:
        return {}
    return {
        "n_rows": n_rows,
        "n_replies": sum(c["n_replies"] for c in done),
        "n_differs": sum(c["n_differs"] for c in done),
        "by_field": {f: sum(c["by_field"][f] for c in done) for f in PARSE_FIELDS},
    }


def _check_instances(
    con: duckdb.DuckDBPyConnection, store: Store, path: Path, df: pd.DataFrame, dataset: str
) -> None:
    stored = store.instance_ids(con, dataset)
    if not stored:
        raise StoreError(f"no dataset named '{dataset}' in {store.path}")
    for n, sid in zip(df["_record"], df["sample_id"], strict=True):
        if sid not in stored:
            reason = f"'{sid}' is not in dataset '{dataset}'"
            raise DataError(str(path), int(n), "sample_id", reason)


def _prediction_frame(part: pd.DataFrame, run_id: str, side: _Side) -> tuple[pd.DataFrame, int]:
    """The run's prediction rows and how many carry an explanation.

    Answer and cited ids are the metrics file's. ``explanation``: the parsed predictions'
    (else the reply's parse); ``raw_response``: the reply as the model wrote it (None without
    ``raw_model_responses.jsonl``); ``input_passage_ids``: what the release says was shown
    (:func:`core.datasets.release_files.shown_ids`: nothing for no evidence, the gold ids for the
    oracle, NULL where the release does not say). ``meta["release"]``: the release's parse,
    where it came from, this tool's parse of the reply and the fields that differ.
    """
    rows = []
    explained = 0
    for row in part.itertuples(index=False):
        key = (row.sample_id, row.method)
        parsed, reply = side.parsed.get(key), side.replies.get(key)
        parse_error = getattr(row, "parse_error", "") or None
        gold = split_ids(row.gold_evidence_ids)
        shown = shown_ids(row.method, gold)
        explanation = None
        release: dict = {}
        if parsed is not None:
            explanation = parsed["explanation"]
            release["parsed_line"] = parsed["line"]
        if reply is not None:
            if explanation is None:
                explanation = reply["prediction"]["explanation"]
            mine, differs = parse_differences(
                reply["raw_response"], reply["prediction"], parse_error, shown
            )
            release.update(
                {
                    "reply_line": reply["line"],
                    "parse": reply["prediction"],
                    "prompt_hash": reply["prompt_hash"],
                    "protocol": reply["protocol"],
                    "intermediate": reply["intermediate"],
                    "tool_parse": mine,
                    "parse_differs": differs,
                    "shown_ids_known": shown is not None,
                }
            )
        explained += bool(explanation)
        rows.append(
            {
                "run_id": run_id,
                "instance_id": row.sample_id,
                "condition": ONCU_METHODS[row.method],
                "variant": "",
                "answer": row.predicted_answer,
                "cited_ids": split_ids(row.predicted_evidence_ids),
                "input_passage_ids": None if shown is None else list(shown),
                "explanation": explanation,
                "raw_response": None if reply is None else reply["raw_response"],
                "parse_error": parse_error,
                "meta": json.dumps({"release": release}, ensure_ascii=False) if release else None,
            }
        )
    return pd.DataFrame(rows), explained


def score_runs(
    store: Store,
    run_ids: Sequence[str],
    con: duckdb.DuckDBPyConnection | None = None,
    batch_rows: int = SCORE_BATCH_ROWS,
) -> int:
    """Recompute the ``scores`` rows of the runs from their predictions; returns the count.

    The predictions stream from DuckDB as Arrow batches of ``batch_rows`` rows, each with
    its stored score row (:func:`core.store.rescore_rows.rescore_batches`: the rows of
    :meth:`core.store.Store.scoring_batches`, no Python object per value), each scored by
    :func:`core.scoring.vector.score_table` (equal to the per-row reference; one
    :class:`~core.scoring.vector.AnswerForms` for all batches, so each distinct answer
    string is normalized once). Only what differs is written
    (:meth:`core.store.Store.rewrite_scores`: changed rows updated in place, new keys
    inserted, stale keys deleted), all in one
    transaction, so the store never holds half of a re-score; re-scoring unchanged data
    writes next to nothing. With ``con`` it runs inside the caller's transaction; otherwise
    in its own.
    """
    if con is None:
        with store.transaction() as own:
            return score_runs(store, run_ids, con=own, batch_rows=batch_rows)
    # changed rows by the score columns written: per batch only those some changed row of the
    # batch differs in (in the others each of its changed rows equals its stored row), so a
    # scorer change that moves one column keeps one column of the changed rows, not twelve
    changed: dict[tuple[str, ...], list[pa.Table]] = {}
    fresh: list[pa.Table] = []
    rows = kept = 0
    forms = AnswerForms()  # each distinct answer string normalized once, not once a batch
    for batch in rescore_batches(con, run_ids, batch_rows):
        if batch.num_rows == 0:
            continue
        inputs = inputs_from_arrow(batch)
        scores = score_arrow(batch) if inputs is None else score_table(inputs, forms)
        had = batch.column("stored_").to_numpy(zero_copy_only=False)  # never null
        by_column = stored_differs_by_column(scores, batch)
        differs = by_column.any(axis=0) & had
        rows += batch.num_rows
        kept += int(had.sum())
        if differs.any():
            dirty = np.array(SCORE_COLUMNS)[by_column[:, differs].any(axis=1)].tolist()
            # matched by the stored row's rowid: no key strings kept or joined
            changed.setdefault(tuple(dirty), []).append(
                pa.Table.from_arrays(
                    [batch.column("stored_rowid"), *(scores.column(c) for c in dirty)],
                    names=["stored_rowid", *dirty],
                ).filter(differs)
            )
        if not had.all():
            fresh.append(
                pa.Table.from_arrays(
                    [batch.column(k) for k in _SCORE_KEY] + scores.columns,
                    names=[*_SCORE_KEY, *scores.column_names],
                ).filter(~had)
            )
    if rows == 0:
        return 0
    # one rewrite per set of columns written (usually one); the new keys with the last, so
    # each call finds the runs' stored rows as the re-score read them (no stale key deleted
    # twice)
    updates = [_concat(parts) for parts in changed.values()] or [pa.table({})]
    for i, update in enumerate(updates):
        last = i == len(updates) - 1
        store.rewrite_scores(con, run_ids, update, _concat(fresh) if last else pa.table({}), kept)
    return rows


def _concat(parts: list[pa.Table]) -> pa.Table:
    """The parts as one table (an empty one without columns when there are none)."""
    # permissive: a batch scored by the per-row reference may type an all-NULL column null
    return pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({})
