"""Existing experiment outputs: import them as runs, and (re)score any run from its predictions.

The ONCU release writes one ``per_sample_metrics.csv`` per experiment (one row per instance and
method). Importing it creates the instances when the store lacks them, one run per model, and
the predictions; the file's own score columns are ignored and every prediction is re-scored
with the project's scorer (SPEC §3.3, §6).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

from core.scoring import score_frame
from core.store import Store, StoreError
from core.types import DataError, Dataset, Instance, Passage

__all__ = [
    "ONCU_METHODS",
    "RESULT_FORMATS",
    "ResultsImport",
    "import_results",
    "score_runs",
]

RESULT_FORMATS = ("oncu-release",)

#: ONCU release method names -> the project's canonical conditions.
ONCU_METHODS = {
    "no_evidence": "no_evidence",
    "direct": "full_context",
    "retrieve_then_read": "retrieved",
    "oracle": "oracle",
}

_REQUIRED = (
    "sample_id", "model_name", "method", "source", "reasoning_type", "answer_type",
    "context_length", "evidence_position", "evidence_density", "distractor_similarity",
    "gold_answer", "predicted_answer", "gold_evidence_ids", "predicted_evidence_ids",
)  # fmt: skip
_MAX_FIELD = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ResultsImport:
    """What an import wrote.

    Attributes:
        dataset: dataset the runs belong to.
        created_dataset: True when the instances were created from the file.
        runs: run ids written (one per model).
        n_rows: prediction rows read.
        n_instances: distinct instances.
    """

    dataset: str
    created_dataset: bool
    runs: tuple[str, ...]
    n_rows: int
    n_instances: int

    def summary(self) -> str:
        """One line for the CLI."""
        made = "created" if self.created_dataset else "reused"
        return (
            f"read {self.n_rows} predictions of {self.n_instances} instances; {made} dataset "
            f"'{self.dataset}'; runs: {', '.join(self.runs)} (re-scored)"
        )


def _ids(value: str) -> list[str]:
    return [x.strip() for x in value.split(";") if x.strip()]


def _flag(cell: str) -> bool:
    """``cue_applicable`` cell: only an explicit false/0/no marks an instance not applicable."""
    return cell.strip().lower() not in ("false", "0", "no")


def _read_oncu_csv(path: Path) -> pd.DataFrame:
    """Read and validate a per_sample_metrics.csv; every cell is text ("None" is an answer)."""
    if not path.exists():
        raise DataError(str(path), None, None, "file not found")
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise DataError(str(path), None, None, f"cannot read file: {exc.strerror}") from exc
    if not raw.strip():
        raise DataError(str(path), None, None, "empty file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n")  # header is line 1 -> record = line - 1
        raise DataError(str(path), line or None, None, f"not UTF-8 (byte {exc.start})") from exc
    csv.field_size_limit(max(_MAX_FIELD * 2, csv.field_size_limit()))
    rows = list(csv.reader(text.splitlines()))
    header, body = rows[0], rows[1:]
    missing = [c for c in _REQUIRED if c not in header]
    if missing:
        raise DataError(str(path), None, missing[0], "required column missing")
    for n, row in enumerate(body, start=1):
        if len(row) != len(header):
            raise DataError(
                str(path), n, None, f"has {len(row)} columns, header has {len(header)}"
            )
    df = pd.DataFrame(body, columns=header, dtype=object)
    for n, row in enumerate(df.itertuples(index=False), start=1):
        rec = row._asdict()
        for col in _REQUIRED:
            if len(rec[col]) > _MAX_FIELD:
                raise DataError(
                    str(path), n, col, f"field too large ({len(rec[col]):,} > {_MAX_FIELD:,})"
                )
        if rec["method"] not in ONCU_METHODS:
            raise DataError(
                str(path), n, "method",
                f"unknown method '{rec['method']}' (allowed: {', '.join(ONCU_METHODS)})",
            )  # fmt: skip
        if not rec["sample_id"]:
            raise DataError(str(path), n, "sample_id", "empty")
        if not rec["context_length"].lstrip("-").isdigit():
            raise DataError(
                str(path), n, "context_length", f"not an integer: '{rec['context_length']}'"
            )
    dup = df.duplicated(["model_name", "sample_id", "method"], keep="first")
    if dup.any():
        n = int(dup.to_numpy().argmax()) + 1
        raise DataError(str(path), n, "sample_id", "duplicate (model_name, sample_id, method)")
    if df.empty:
        raise DataError(str(path), None, None, "no data rows")
    return df


def _instances_from_rows(df: pd.DataFrame) -> list[Instance]:
    """One instance per sample id from its first row (gold answer, gold ids, metadata cells)."""
    out = []
    for row in df.drop_duplicates("sample_id").itertuples(index=False):
        gold = _ids(row.gold_evidence_ids)
        passages = tuple(
            Passage(passage_id=pid, ord=i, title="", text="", doc_id=pid, role="gold",
                    is_gold=True)
            for i, pid in enumerate(gold)
        )  # fmt: skip
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


def _attachments(path: Path) -> dict[tuple[str, str], dict]:
    """``<prefix>.parsed_predictions.jsonl`` beside the CSV: explanations by (sample, method)."""
    prefix = path.name.removesuffix(".per_sample_metrics.csv")
    side = path.with_name(prefix + ".parsed_predictions.jsonl")
    found: dict[tuple[str, str], dict] = {}
    if prefix == path.name or not side.exists():
        return found
    with side.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(str(side), n, None, f"invalid JSON: {exc.msg}") from exc
            found[(str(rec.get("sample_id")), str(rec.get("method")))] = rec
    return found


def import_results(
    store: Store,
    path: str | Path,
    name: str,
    fmt: str = "oncu-release",
    dataset: str | None = None,
    replace: bool = False,
) -> ResultsImport:
    """Import a results file as runs (one per model), re-scored, in one transaction.

    Args:
        store: the target store.
        path: the results file (``*.per_sample_metrics.csv`` of the ONCU release).
        name: import name: the dataset name when instances are created, and the run id (or
            ``NAME/MODEL`` when the file holds several models).
        fmt: ``oncu-release``.
        dataset: attach the predictions to this stored dataset instead of creating one; every
            sample id must exist in it.
        replace: replace existing runs / a created dataset of the same name.

    Raises:
        DataError: the file is malformed (names file, record and field); nothing is written.
        StoreError: names are taken (without ``replace``) or the dataset is missing.
    """
    if fmt not in RESULT_FORMATS:
        raise ValueError(f"unknown results format '{fmt}' (allowed: {', '.join(RESULT_FORMATS)})")
    path = Path(path)
    df = _read_oncu_csv(path)
    extra = _attachments(path)
    models = list(dict.fromkeys(df["model_name"]))
    run_ids = {m: name if len(models) == 1 else f"{name}/{m}" for m in models}
    target = dataset or name
    created = dataset is None
    with store.transaction() as con:
        if created:
            ds = Dataset(
                name=target,
                source=str(df["source"].iloc[0]),
                builder="import:oncu-release-results",
                builder_params={"file": str(path), "format": fmt},
                instances=tuple(_instances_from_rows(df)),
            )
            store.insert_dataset(con, ds, replace=replace)
        else:
            _check_instances(con, store, path, df, target)
        for model, run_id in run_ids.items():
            if store.run_exists(con, run_id) and not replace:
                raise StoreError(
                    f"run '{run_id}' already exists in {store.path}; choose another --name "
                    "or pass --replace"
                )
            store.delete_run_results(con, [run_id])
            part = df[df["model_name"] == model]
            store.insert_run(
                con,
                {
                    "run_id": run_id,
                    "dataset_id": target,
                    "backend": "imported",
                    "model": model,
                    "options": {"source_file": str(path), "format": fmt},
                    "kind": "imported",
                    "status": "running",  # finished below, once its predictions are in
                    "n_planned": len(part),
                    "n_done": len(part),
                    "notes": f"imported from {path.name}; scores recomputed",
                },
            )
            store.write_predictions(con, _prediction_frame(part, run_id, extra), replace=True)
            store.finish_run(run_id, "done", len(part), con=con)  # partial/failed on errors
        score_runs(store, list(run_ids.values()), con=con)
    return ResultsImport(
        dataset=target,
        created_dataset=created,
        runs=tuple(run_ids.values()),
        n_rows=len(df),
        n_instances=int(df["sample_id"].nunique()),
    )


def _check_instances(
    con: duckdb.DuckDBPyConnection, store: Store, path: Path, df: pd.DataFrame, dataset: str
) -> None:
    stored = store.instance_ids(con, dataset)
    if not stored:
        raise StoreError(f"no dataset named '{dataset}' in {store.path}")
    for n, sid in enumerate(df["sample_id"], start=1):
        if sid not in stored:
            raise DataError(str(path), n, "sample_id", f"'{sid}' is not in dataset '{dataset}'")


def _prediction_frame(
    part: pd.DataFrame, run_id: str, extra: dict[tuple[str, str], dict]
) -> pd.DataFrame:
    rows = []
    for row in part.itertuples(index=False):
        side = extra.get((row.sample_id, row.method), {})
        parse_error = getattr(row, "parse_error", "") or None
        rows.append(
            {
                "run_id": run_id,
                "instance_id": row.sample_id,
                "condition": ONCU_METHODS[row.method],
                "variant": "",
                "answer": row.predicted_answer,
                "cited_ids": _ids(row.predicted_evidence_ids),
                "explanation": side.get("explanation"),
                "raw_response": json.dumps(side, ensure_ascii=False) if side else None,
                "parse_error": parse_error,
            }
        )
    return pd.DataFrame(rows)


def score_runs(
    store: Store, run_ids: Sequence[str], con: duckdb.DuckDBPyConnection | None = None
) -> int:
    """Recompute the ``scores`` rows of the runs from their predictions; returns the count.

    With ``con`` it runs inside the caller's transaction; otherwise in its own.
    """
    if con is None:
        with store.transaction() as own:
            return score_runs(store, run_ids, con=own)
    frame = store.scoring_frame(run_ids, con=con)
    if frame.empty:
        return 0
    scores = score_frame(frame)
    out = pd.concat(
        [frame[["run_id", "instance_id", "condition", "variant"]], scores], axis=1
    )
    store.delete_scores(con, run_ids)
    return store.write_scores(con, out, replace=True)
