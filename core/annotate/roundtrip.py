"""The blind annotation round trip: export a sample, import people's labels, report agreement.

Seed 000 App. A.6 validates the rule-based failure taxonomy (Table 24) on "a stratified sample
of 300 failed predictions ... drawn across datasets, models, evidence-availability conditions,
and rule-assigned failure categories", labelled by annotators "blind to the rule-based labels
and to each other's labels", and reports raw agreement, Cohen's κ, the label distributions and
the confusion matrices (Tables 25-26). Here:

* :func:`export_sample` draws a seeded sample of one run's failed predictions (rule label
  other than ``success``; ``--include-success`` adds the correct ones as their own stratum),
  stratified by condition × rule label with proportional allocation and at least one item per
  non-empty stratum when the sample is large enough, and writes it as CSV without any rule
  label (:data:`CSV_COLUMNS`; rows in item-id order, so the order says nothing either). Failed
  calls (``error`` set) have no rule label and are never drawn; their count is reported. The
  sample is recorded in the store (item id -> prediction, seed) so labels can come back.
* :func:`import_labels` reads ``item_id`` and ``label`` back for one annotator, checks every
  row against the rubric's vocabulary and the sample, and stores all of them or none.
* :func:`agreement_report` compares every pair of raters on the items both rated (the rule
  labels are the rater ``rule``), and all raters at once (Fleiss' κ, Krippendorff's α) when
  there are three or more.

Raters come from sources (:func:`register_rater_source`): a function ``(store, run, rubric)
-> {rater: {item_id: label}}``; the rule labels, the annotators and the judge runs are the
built-in ones.

The same commands serve every judge rubric (:mod:`core.annotate.judged`): an item is one
judgment item, the strata are condition × the stratifying judge's rating, the CSV adds a
column ``item`` with the judge's own prompt (no rating), labels are the rubric's scale, and
every judge run of the rubric is a rater ``judge:<run id>``. ``crux-answerability`` rates a
dataset's passages: its ``run`` is the judge run the sample is drawn from.
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
import random
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import pandas as pd

from core.annotate.judged import (
    PASSAGE_RUBRIC,
    judged_pool,
    judged_prompts,
)
from core.annotate.raters import (
    AMBIGUOUS,
    DEFAULT_RUBRIC,
    RUBRICS,
    RULE_RATER,
    RaterSource,
    Rubric,
    agreement_report,
    check_run,
    rater_labels,
    register_rater_source,
    rubric_of,
)
from core.export.outpaths import check_out_path
from core.export.tables import csv_text, safe_csv_cell
from core.scoring.rows import FAILURE_LABELS
from core.store import Store
from core.store.annotations import (
    annotation_labels,
    annotation_pool,
    export_fields,
    record_items,
    sampled_items,
    write_annotations,
)
from core.types import DataError, stored_ids

__all__ = [
    "AMBIGUOUS",
    "CSV_COLUMNS",
    "JUDGE_ITEM_COLUMN",
    "DEFAULT_RUBRIC",
    "RUBRICS",
    "RULE_RATER",
    "ExportSummary",
    "ImportSummary",
    "RaterSource",
    "Rubric",
    "agreement_report",
    "allocate",
    "check_annotator",
    "export_sample",
    "import_labels",
    "item_id",
    "rater_labels",
    "register_rater_source",
]

#: The columns of an exported sample, in order; ``label`` is left empty for the annotator.
CSV_COLUMNS = (
    "item_id",
    "run",
    "instance_id",
    "condition",
    "question",
    "gold_answer",
    "answer",
    "shown_passages",
    "cited_ids",
    "label",
)
#: An annotator's name: letters, digits and ``_.@-``, up to 64 characters.
_ANNOTATOR = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


#: The extra column of a judge rubric's sample: what the judge was asked, word for word.
JUDGE_ITEM_COLUMN = "item"


# ----------------------------------------------------------------------------- sampling
def item_id(run: str, instance_id: str, condition: str, variant: str, rubric: str) -> str:
    """The opaque id of one prediction under a rubric: ``i`` and 16 hex digits of a SHA-256.

    The same prediction gets the same id in every sample, so two exports never make two
    items of it; the id says nothing of its stratum.
    """
    text = "\x1f".join((run, instance_id, condition, variant, rubric))
    return "i" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def allocate(sizes: Mapping[Any, int], n: int) -> dict[Any, int]:
    """Proportional allocation of ``n`` items to strata of the given sizes.

    Largest-remainder (Hamilton) rounding of ``n * size / total``, ties broken by the strata's
    order; then every empty-handed stratum takes one item from the stratum most above its
    quota (ties: the larger allocation, then order), while ``n`` is at least the number of
    strata. ``n`` at or over the total takes every item.

    Args:
        sizes: stratum -> its number of candidates (> 0), in a fixed order.
        n: the sample size (>= 1).

    Returns:
        stratum -> items to draw (each at most its size; summing to ``min(n, total)``).
    """
    total = sum(sizes.values())
    if n >= total:
        return dict(sizes)
    keys = list(sizes)
    quota = {k: n * sizes[k] / total for k in keys}
    out = {k: math.floor(quota[k]) for k in keys}
    rest = n - sum(out.values())
    for k in sorted(keys, key=lambda k: (-(quota[k] - out[k]), keys.index(k)))[:rest]:
        out[k] += 1
    if n >= len(keys):
        for k in sorted((k for k in keys if out[k] == 0), key=lambda k: -quota[k]):
            donor = max(
                (d for d in keys if out[d] > 1),
                key=lambda d: (out[d] - quota[d], out[d], -keys.index(d)),
            )
            out[donor] -= 1
            out[k] += 1
    return out


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What :func:`export_sample` wrote.

    Attributes:
        path: the CSV file.
        n_items: items written.
        n_new: items not in the store's sample of this run before.
        n_pool: predictions the sample was drawn from.
        n_failed_calls: calls of the run that failed (no answer, no rule label; not drawn).
        n_success: correct predictions left out (the paper's sample is failures only).
        strata: ``(condition, rule label) -> (candidates, drawn)`` (under a judge rubric the
            stratifying judge's rating instead of the rule label).
        strata_by: what the strata's second key is: ``rule label`` or ``judge:<run id>``.
    """

    path: Path
    n_items: int
    n_new: int
    n_pool: int
    n_failed_calls: int
    n_success: int
    strata: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    strata_by: str = "rule label"


def _neutral(text: str) -> str:
    """A cell as exported: :func:`safe_csv_cell`, a leading ``'`` doubled (exactly undone)."""
    return "'" + text if text.startswith("'") else safe_csv_cell(text)


def _restored(text: str) -> str:
    """The cell :func:`_neutral` was given (a cell it did not change comes back as it is)."""
    rest = text[1:]
    if text.startswith("'") and (rest.startswith("'") or safe_csv_cell(rest) == text):
        return rest
    return text


def _shown(ids: Any, passages: Mapping[str, tuple[str, str]], chars: int | None) -> str:
    """The passages a prediction was shown, in order: ``[id] title`` and the text."""
    blocks = []
    for pid in stored_ids(ids):
        title, text = passages.get(pid, ("", ""))
        if chars is not None and len(text) > chars:
            text = text[:chars] + " …"
        head = f"[{pid}] {title}".rstrip()
        blocks.append(f"{head}\n{text}" if text else head)
    return "\n\n".join(blocks)


def export_sample(
    store: Store,
    run: str,
    n: int,
    seed: int,
    out: Path,
    rubric: str = DEFAULT_RUBRIC,
    include_success: bool = False,
    passage_chars: int | None = None,
) -> ExportSummary:
    """Draw a seeded stratified sample of a run's predictions and write it for annotators.

    Strata are (condition, rule label) over the predictions with a rule label: failures only
    unless ``include_success``. :func:`allocate` sizes each stratum; within one, ``n_h``
    predictions are drawn with ``random.Random(seed)`` from the stratum's predictions sorted
    by (instance, condition, variant), strata in (condition, label) order. The items are
    recorded in the store before the file is written (an item sampled before keeps its
    first seed); the file is written whole or not at all.

    Args:
        store: the store.
        run: the run id.
        n: the sample size (>= 1); more than the pool takes the whole pool.
        seed: the random seed.
        out: the CSV file to write (replaced).
        rubric: the rubric: ``failure_taxonomy`` or a judge rubric that judges a run
            (:func:`_export_judged`).
        include_success: also sample correct predictions (rule label ``success``; the
            failure taxonomy only).
        passage_chars: cut each shown passage's text to this many characters (None: whole;
            a full-context prompt can exceed a spreadsheet's 32,767-character cell).

    Raises:
        StoreError: no such run.
        ValueError: ``n < 1``, ``passage_chars < 1``, an unknown rubric, a run without any
            prediction to sample.
    """
    rubric_of(rubric)
    if n < 1:
        raise ValueError(f"--sample must be at least 1, got {n}")
    if passage_chars is not None and passage_chars < 1:
        raise ValueError(f"--passage-chars must be at least 1, got {passage_chars}")
    out = check_out_path(out)  # before anything is read or written
    check_run(store, run)
    if rubric != DEFAULT_RUBRIC:
        return _export_judged(store, run, n, seed, out, rubric, passage_chars)
    pool, n_failed = annotation_pool(store, run)
    n_success = int((pool["failure_label"] == "success").sum())
    if not include_success:
        pool = pool[pool["failure_label"] != "success"]
    if pool.empty:
        what = "labelled" if include_success else "failed (rule label other than success)"
        raise ValueError(f"run '{run}' has no {what} predictions to sample")
    order = {label: i for i, label in enumerate(FAILURE_LABELS)}
    groups = {
        key: frame
        for key, frame in sorted(
            pool.groupby(["condition", "failure_label"], sort=False),
            key=lambda kv: (kv[0][0], order.get(kv[0][1], len(order)), kv[0][1]),
        )
    }
    counts, keys, items = _draw(groups, n, seed, run, rubric, "variant")
    n_new = _record_and_write(
        store, items, out, _csv_rows(store, run, items, passage_chars), CSV_COLUMNS
    )
    return ExportSummary(
        path=out,
        n_items=len(items),
        n_new=n_new,
        n_pool=len(pool),
        n_failed_calls=n_failed,
        n_success=0 if include_success else n_success,
        strata={k: (len(f), counts[k]) for k, f in groups.items()},
    )


def _draw(
    groups: Mapping[Any, Any], n: int, seed: int, run: str, rubric: str, third: str
) -> tuple[dict[Any, int], list[tuple[str, str, str]], list[dict[str, Any]]]:
    """The seeded stratified draw: ``(counts per stratum, keys, item records)``.

    :func:`allocate` sizes each stratum; within one, ``n_h`` rows ``(instance_id, condition,
    <third>)`` are drawn with one ``random.Random(seed)``, strata in the given order. The
    third key (the prediction's variant, or the judged item) is stored as ``variant``.
    """
    counts = allocate({k: len(f) for k, f in groups.items()}, n)
    rng = random.Random(seed)
    keys: list[tuple[str, str, str]] = []
    for key, frame in groups.items():
        rows = list(frame[["instance_id", "condition", third]].itertuples(index=False))
        keys += [tuple(r) for r in rng.sample(rows, counts[key])]
    items = [
        {
            "item_id": item_id(run, i, c, v, rubric),
            "run_id": run,
            "instance_id": i,
            "condition": c,
            "variant": v,
            "rubric": rubric,
            "seed": int(seed),
        }
        for i, c, v in keys
    ]
    return counts, keys, items


def _export_judged(
    store: Store, run: str, n: int, seed: int, out: Path, rubric: str, passage_chars: int | None
) -> ExportSummary:
    """:func:`export_sample` under a judge rubric: items are the run's judgment items.

    Strata are (condition, the stratifying judge's rating or ``unrated``) in (condition,
    rating) order; the draw is :func:`export_sample`'s. Items keep the judged item in
    ``variant``; the CSV adds :data:`JUDGE_ITEM_COLUMN` before ``label``.

    Raises:
        ValueError: no judge run of the rubric judged the run.
    """
    pool, judge = judged_pool(store, run, rubric)
    if pool.empty and rubric == PASSAGE_RUBRIC:
        raise ValueError(
            f"'{run}' is not a {rubric} judge run with judgments: {rubric} rates a dataset's "
            f"passages, so --run names its judge run (python -m core judge {rubric} --dataset "
            "D --name RUN ...)"
        )
    if pool.empty:
        raise ValueError(
            f"no {rubric} judge run judged run '{run}': run `python -m core judge {rubric} "
            f"--run {run} --backend ...` first"
        )
    groups = dict(
        sorted(
            pool.groupby(["condition", "stratum"], sort=False), key=lambda kv: (kv[0][0], kv[0][1])
        )
    )
    counts, keys, items = _draw(groups, n, seed, run, rubric, "item")
    prompts = judged_prompts(store, run, rubric, keys)
    rows = _csv_rows(store, run, items, passage_chars, prompts)
    n_new = _record_and_write(
        store, items, out, rows, (*CSV_COLUMNS[:-1], JUDGE_ITEM_COLUMN, CSV_COLUMNS[-1])
    )
    return ExportSummary(
        path=out,
        n_items=len(items),
        n_new=n_new,
        n_pool=len(pool),
        n_failed_calls=0,
        n_success=0,
        strata={k: (len(f), counts[k]) for k, f in groups.items()},
        strata_by=f"judge:{judge}",
    )


def _csv_rows(
    store: Store,
    run: str,
    items: Sequence[Mapping[str, Any]],
    passage_chars: int | None,
    prompts: Mapping[tuple[str, str, str], str] | None = None,
) -> list[list[str]]:
    """The CSV rows of the sampled items, in item-id order.

    With ``prompts`` (a judge rubric) the judged item is the prediction's (instance,
    condition, variant '') and its prompt goes in the column before ``label``.
    """
    judged = prompts is not None
    keys = [(it["instance_id"], it["condition"], "" if judged else it["variant"]) for it in items]
    preds, passages = export_fields(store, run, keys)
    # a passage rubric's items are no prediction: the instance's question and gold answer
    questions = {} if len(preds) == len(set(keys)) else _questions(store, run)
    texts: dict[str, dict[str, tuple[str, str]]] = {}
    for row in passages.itertuples(index=False):
        texts.setdefault(row.instance_id, {})[row.passage_id] = (_text(row.title), _text(row.text))
    by_key = {(r.instance_id, r.condition, r.variant): r for r in preds.itertuples(index=False)}
    rows = []
    for it, key in sorted(zip(items, keys, strict=True), key=lambda x: x[0]["item_id"]):
        p = by_key.get(key) or _passage_item(it, questions)
        cited = stored_ids(p.cited_ids)
        cells = [
            it["item_id"],
            run,
            key[0],
            key[1],
            _text(p.question),
            _text(p.gold_answer),
            _text(p.answer),
            _shown(p.input_passage_ids, texts.get(key[0], {}), passage_chars),
            ";".join(map(str, cited)),
            "",
        ]
        if prompts is not None:
            cells.insert(-1, prompts.get((key[0], key[1], it["variant"]), ""))
        rows.append([_neutral(c) for c in cells])
    return rows


def _questions(store: Store, run: str) -> dict[str, tuple[str, str]]:
    """``instance_id -> (question, gold answer)`` of the run's dataset."""
    row = store.run_row(run) or {}
    frame = store.instances_frame(str(row.get("dataset_id") or ""))
    return {
        str(r.instance_id): (_text(r.question), _text(r.gold_answer))
        for r in frame.itertuples(index=False)
    }


def _passage_item(it: Mapping[str, Any], questions: Mapping[str, tuple[str, str]]) -> Any:
    """The CSV fields of a passage rubric's item (``<sq id>|<passage id>``).

    The instance's question and gold answer, no answer, the judged passage shown.
    """
    question, gold = questions.get(str(it["instance_id"]), ("", ""))
    passage = str(it["variant"]).rpartition("|")[2]
    return SimpleNamespace(
        question=question,
        gold_answer=gold,
        answer="",
        cited_ids=None,
        input_passage_ids=[passage] if passage else [],
    )


def _text(value: Any) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else str(value)


def _record_and_write(
    store: Store,
    items: Sequence[Mapping[str, Any]],
    path: Path,
    rows: Sequence[Sequence[str]],
    header: Sequence[str],
) -> int:
    """Write the CSV and record the sampled items: both or neither; returns new items.

    The file is written whole to a temporary file beside ``path`` first; it is renamed into
    place inside the items' transaction, so a failed write (disk full, a path that cannot be
    written) stores no item and a failed store write leaves no file.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as fh:
            fh.write(csv_text([header, *rows]))
            fh.flush()
            os.fsync(fh.fileno())
        return record_items(store, items, then=lambda: tmp.replace(path))
    finally:
        tmp.unlink(missing_ok=True)


def _is_missing(value: Any) -> bool:
    """None, pandas' NA or a float NaN."""
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


# ------------------------------------------------------------------------------ import
@dataclass(frozen=True, slots=True)
class ImportSummary:
    """What :func:`import_labels` did.

    Attributes:
        n_new: labels stored for items this annotator had not labelled.
        n_unchanged: rows whose label was stored already (nothing written).
        n_replaced: stored labels changed (``replace`` only).
        n_blank: rows without a label, skipped (``allow_blank`` only).
    """

    n_new: int
    n_unchanged: int
    n_replaced: int
    n_blank: int


@contextmanager
def _field_limit(limit: int) -> Iterator[None]:
    """``csv.field_size_limit`` raised to ``limit`` inside the block, then restored.

    A shown-passages cell can be longer than the default 131,072 characters.
    """
    old = csv.field_size_limit()
    csv.field_size_limit(max(old, limit))
    try:
        yield
    finally:
        csv.field_size_limit(old)


def _read_rows(path: Path) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """The header and ``(record number, cells)`` of the non-blank data rows.

    Record numbers count data rows from 1 after the header (a blank row counts).

    Raises:
        DataError: a missing or unreadable file, invalid UTF-8 or CSV, no ``item_id`` or
            ``label`` column, a column named twice, a row with another column count, no rows.
    """
    file = str(path)
    if not path.is_file():
        raise DataError(file, None, None, "file not found" if not path.exists() else "not a file")
    header: list[str] | None = None
    rows: list[tuple[int, list[str]]] = []
    record = 0
    try:
        with (
            _field_limit(path.stat().st_size + 2),
            path.open(encoding="utf-8-sig", newline="") as fh,
        ):
            reader = csv.reader(fh)
            while True:
                try:
                    row = next(reader)
                except StopIteration:
                    break
                except csv.Error as exc:
                    raise DataError(
                        file, record + 1 if header else None, None, f"invalid CSV: {exc}"
                    ) from None
                if header is None:
                    if any(c.strip() for c in row):
                        header = [c.strip() for c in row]
                    continue
                record += 1
                if not any(c.strip() for c in row):
                    continue
                if len(row) != len(header):
                    raise DataError(
                        file, record, None, f"has {len(row)} columns, the header has {len(header)}"
                    )
                rows.append((record, row))
    except UnicodeDecodeError as exc:
        raise DataError(file, None, None, f"invalid UTF-8 at byte {exc.start:,}") from None
    except OSError as exc:
        raise DataError(file, None, None, f"cannot read the file: {exc.strerror}") from None
    if header is None:
        raise DataError(file, None, None, "empty file")
    for name in ("item_id", "label"):
        if header.count(name) != 1:
            what = "required column missing" if name not in header else "column named twice"
            raise DataError(file, None, name, f"{what} (the header is: {', '.join(header)})"[:300])
    if not rows:
        raise DataError(file, None, None, "no data rows")
    return header, rows


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "…")


def check_annotator(name: str) -> str:
    """``name`` if it can name an annotator, else ``ValueError`` saying why."""
    if not _ANNOTATOR.fullmatch(name):
        raise ValueError(
            f"annotator {_short(name)}: use 1-64 letters, digits and _.@- (starting with a "
            "letter or digit)"
        )
    if name == RULE_RATER:
        raise ValueError(f"annotator '{RULE_RATER}' is the rule labels' rater; choose another")
    return name


def import_labels(
    store: Store,
    path: Path,
    run: str,
    annotator: str,
    rubric: str = DEFAULT_RUBRIC,
    replace: bool = False,
    allow_blank: bool = False,
) -> ImportSummary:
    """Read one annotator's labels from an exported sample and store them, all or none.

    Only ``item_id`` and ``label`` are read (other columns may be changed or dropped). Cells
    are read back as exported (:func:`_restored` undoes the spreadsheet neutralization);
    surrounding spaces are ignored. Every row is checked before anything is written.

    Args:
        store: the store.
        path: the CSV file.
        run: the run the sample was drawn from.
        annotator: the annotator's name (not ``rule``).
        rubric: the rubric (its vocabulary is the allowed labels).
        replace: change labels this annotator gave before (else a different label is an
            error; the same label is counted as unchanged).
        allow_blank: skip rows without a label (counted) instead of failing.

    Raises:
        DataError: naming the file, the record (data row) and the field: an empty, unknown
            or repeated item id; a blank label (unless ``allow_blank``); a label not in the
            rubric's vocabulary; a label differing from this annotator's stored one (unless
            ``replace``).
        StoreError: no such run.
        ValueError: a bad annotator name or rubric.
    """
    vocab = rubric_of(rubric).labels
    check_annotator(annotator)
    check_run(store, run)
    file = str(path)
    header, rows = _read_rows(path)
    col_item, col_label = header.index("item_id"), header.index("label")
    known = set(sampled_items(store, run, rubric)["item_id"])
    stored = annotation_labels(store, run, rubric)
    before = dict(
        stored.loc[stored["annotator"] == annotator, ["item_id", "label"]].itertuples(
            index=False, name=None
        )
    )
    seen: dict[str, int] = {}
    new: dict[str, str] = {}
    changed: dict[str, str] = {}
    unchanged = blank = 0
    for record, cells in rows:
        item = _restored(cells[col_item].strip())
        label = _restored(cells[col_label].strip())
        if not item:
            raise DataError(file, record, "item_id", "empty; keep the item ids of the export")
        if item not in known:
            raise DataError(
                file,
                record,
                "item_id",
                f"no item {_short(item)} in the {rubric} sample of run '{run}'",
            )
        if item in seen:
            raise DataError(file, record, "item_id", f"repeats record {seen[item]}")
        seen[item] = record
        if not label:
            if allow_blank:
                blank += 1
                continue
            raise DataError(file, record, "label", "blank; label every row (or pass --allow-blank)")
        if label not in vocab:
            raise DataError(
                file,
                record,
                "label",
                f"{_short(label)} is not a label of {rubric}; expected one of: {', '.join(vocab)}",
            )
        old = before.get(item)
        if old is None:
            new[item] = label
        elif old == label:
            unchanged += 1
        elif replace:
            changed[item] = label
        else:
            raise DataError(
                file,
                record,
                "label",
                f"{annotator} labelled this item {old!r} before, not {label!r}; pass --replace "
                "to change it",
            )
    try:
        write_annotations(store, run, annotator, new, changed, file)
    except duckdb.ConstraintException:
        raise ValueError(
            f"{file}: labels of {annotator} were stored meanwhile by another import; run again"
        ) from None
    return ImportSummary(len(new), unchanged, len(changed), blank)
