"""Data behind the dashboard pages: selections, drill-downs, the case view, store overview.

Pages stay thin: they call these functions (through the cached wrappers of
``pages/common.py``) and render what comes back. Nothing here imports streamlit and nothing
here writes SQL (the store does); metrics come from the method modules.
"""

from __future__ import annotations

import difflib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from core.figures import Selection
from core.oncu import DEFAULT_GROUP_KEY, oncu_groups
from core.store import CELL_COLUMNS, Store

__all__ = [
    "FILTER_COLUMNS",
    "analysis",
    "DEMO_DATASET",
    "DEMO_RUN",
    "answer_diff",
    "build_demo",
    "apply_filters",
    "case_data",
    "instances_behind",
    "overview",
    "resolve_selection",
    "selection_from_json",
    "selection_to_json",
    "store_version",
    "trace_divergence",
]

#: Metadata cells offered as sidebar filters.
FILTER_COLUMNS = CELL_COLUMNS

_MEMO: OrderedDict[tuple, pd.DataFrame] = OrderedDict()
_MEMO_LOCK = threading.Lock()
_MEMO_SIZE = 4


def store_version(store: Store) -> tuple[int, int, int, int]:
    """A value that changes whenever the store file changes: (size, mtime) of file and WAL.

    Cached page data is keyed by it, so a run writing predictions invalidates the caches.
    """
    out: list[int] = []
    for p in (store.path, store.path.with_name(store.path.name + ".wal")):
        try:
            st = p.stat()
            out += [int(st.st_size), int(st.st_mtime_ns)]
        except OSError:
            out += [0, 0]
    return tuple(out)  # type: ignore[return-value]


def selection_to_json(selection: Selection) -> str:
    """Canonical JSON of a selection (a hashable cache key)."""
    return json.dumps(
        {
            "dataset": selection.dataset,
            "runs": list(selection.runs),
            "score_field": selection.score_field,
            "filters": {k: list(v) for k, v in sorted(selection.filters.items())},
            "options": dict(selection.options),
        },
        sort_keys=True,
        default=str,
    )


def selection_from_json(text: str) -> Selection:
    """Inverse of :func:`selection_to_json`."""
    d = json.loads(text)
    return Selection(
        dataset=d.get("dataset"),
        runs=tuple(d.get("runs") or ()),
        score_field=d.get("score_field") or "f1_relaxed",
        filters={k: tuple(v) for k, v in (d.get("filters") or {}).items()},
        options=dict(d.get("options") or {}),
    )


def resolve_selection(store: Store, selection: Selection) -> Selection:
    """The selection with its runs filled in: every run of the dataset when none is chosen.

    Raises:
        ValueError: a selected run is not in the store.
    """
    runs = store.runs_frame()
    known = set(runs["run_id"]) if not runs.empty else set()
    bad = [r for r in selection.runs if r not in known]
    if bad:
        raise ValueError(f"unknown run(s) {bad}; stored runs: {', '.join(sorted(known)) or '-'}")
    if selection.runs:
        return selection
    if selection.dataset is None:
        return replace(selection, runs=tuple(sorted(known)))
    mine = runs[runs["dataset_id"] == selection.dataset]["run_id"]
    return replace(selection, runs=tuple(sorted(mine)))


def apply_filters(df: pd.DataFrame, filters: Mapping[str, Sequence[Any]]) -> pd.DataFrame:
    """Rows whose metadata cells take one of the allowed values (compared as text).

    Raises:
        ValueError: a filter on a column the frame lacks (names the allowed ones).
    """
    out = df
    for col, allowed in filters.items():
        if not allowed:
            continue
        if col not in out.columns:
            raise ValueError(f"unknown filter column {col!r}; choose from {list(FILTER_COLUMNS)}")
        wanted = {str(v) for v in allowed}
        out = out[out[col].astype(str).isin(wanted)]
    return out


def _paired(df: pd.DataFrame) -> pd.DataFrame:
    """With several runs of one dataset, keep the instances every run has (paired views)."""
    if df.empty or df["run"].nunique() < 2 or df["dataset"].nunique() != 1:
        return df
    per_run = df.groupby("run")["instance_id"].agg(lambda s: set(s))
    common = set.intersection(*per_run.tolist())
    return df[df["instance_id"].isin(common)]


def analysis(store: Store, selection: Selection) -> pd.DataFrame:
    """Scored predictions of the selected runs with their metadata, filtered and paired.

    One row per prediction (:meth:`core.store.Store.analysis_frame`), only the plain
    conditions' and interventions' rows as stored; several runs of one dataset are restricted
    to their common instances. Memoized per (store file version, runs) so the figures of one
    page share a single read.
    """
    sel = resolve_selection(store, selection)
    key = (str(store.path), store_version(store), sel.runs)
    with _MEMO_LOCK:
        frame = _MEMO.get(key)
        if frame is not None:
            _MEMO.move_to_end(key)
    if frame is None:
        frame = store.analysis_frame(sel.runs) if sel.runs else _empty_analysis()
        with _MEMO_LOCK:
            _MEMO[key] = frame
            while len(_MEMO) > _MEMO_SIZE:
                _MEMO.popitem(last=False)
    out = apply_filters(frame, sel.filters)
    return _paired(out)


def _empty_analysis() -> pd.DataFrame:
    cols = ["run", "model", "dataset", "instance_id", "condition", "variant", *DEFAULT_GROUP_KEY,
            "oracle_applicable", "n_gold", "parse_error", "confidence", "logprob_confidence",
            "em_strict", "f1_strict", "em_relaxed", "f1_relaxed", "soft_correct", "ev_precision",
            "ev_recall", "ev_f1", "citation_grounding", "title_grounding", "confidence_error",
            "failure_label"]  # fmt: skip
    return pd.DataFrame({c: pd.Series(dtype=object) for c in dict.fromkeys(cols)})


def instances_behind(
    store: Store, selection: Selection, cell: Mapping[str, Any], limit: int = 500
) -> pd.DataFrame:
    """The predictions behind one aggregate (a bar, heatmap cell, scatter point, table row).

    Args:
        store: the store.
        selection: the page's selection.
        cell: column -> value of the aggregate (e.g. ``{"run": ..., "condition": ...,
            "reasoning_type": ...}``); columns the frame lacks are ignored, NaN/None match
            missing values.
        limit: at most this many rows.

    Returns:
        Columns ``run``, ``dataset``, ``instance_id``, ``condition``, ``variant``, the score
        field, ``failure_label`` and the metadata cells, one row per prediction.
    """
    df = analysis(store, selection)
    mask = pd.Series(True, index=df.index)
    for col, value in cell.items():
        if col not in df.columns:
            continue
        if value is None or (isinstance(value, float) and math.isnan(value)):
            mask &= df[col].isna()
        else:
            mask &= df[col].astype(str) == str(value)
    cols = ["run", "dataset", "instance_id", "condition", "variant", selection.score_field,
            "failure_label", "reasoning_type", "context_length", "evidence_position",
            "distractor_similarity"]  # fmt: skip
    cols = [c for c in dict.fromkeys(cols) if c in df.columns]
    return df.loc[mask, cols].head(limit).reset_index(drop=True)


# ------------------------------------------------------------------------------ overview
def overview(store: Store) -> dict[str, Any]:
    """What is in the store: datasets, runs (status, progress) and prediction counts.

    Returns:
        ``{"path", "datasets": DataFrame(name, builder, n_instances, created_at),
        "runs": DataFrame(run_id, dataset_id, backend, model, status, n_planned, n_done,
        n_predictions, progress, created_at, finished_at), "n_predictions": int,
        "empty": bool}``.
    """
    ds = pd.DataFrame(
        [
            {"name": d.name, "builder": d.builder, "n_instances": d.n_instances,
             "created_at": d.created_at}  # fmt: skip
            for d in store.list_datasets()
        ],
        columns=["name", "builder", "n_instances", "created_at"],
    )
    runs = store.runs_frame()
    cols = ["run_id", "dataset_id", "backend", "model", "status", "n_planned", "n_done",
            "n_predictions", "created_at", "finished_at"]  # fmt: skip
    runs = runs[[c for c in cols if c in runs.columns]].copy() if not runs.empty else (
        pd.DataFrame(columns=cols))  # fmt: skip
    planned = pd.to_numeric(runs.get("n_planned"), errors="coerce")
    done = pd.to_numeric(runs.get("n_predictions"), errors="coerce")
    runs["progress"] = (done / planned.where(planned > 0)).clip(upper=1.0)
    return {
        "path": str(store.path),
        "datasets": ds,
        "runs": runs.reset_index(drop=True),
        "n_predictions": int(done.fillna(0).sum()) if len(runs) else 0,
        "empty": ds.empty and runs.empty,
    }


# ----------------------------------------------------------------------------- case view
def case_data(
    store: Store,
    dataset: str,
    instance_id: str,
    runs: Sequence[str] = (),
    score_field: str = "f1_relaxed",
    group_key: Sequence[str] | None = None,
) -> dict[str, Any]:
    """One instance end to end, for the Case view (gold labels are for the user's eyes only).

    Args:
        store: the store.
        dataset: dataset name.
        instance_id: the instance.
        runs: runs whose predictions to show (all runs of the dataset when empty).
        score_field: score used for the ONCU group values.
        group_key: ONCU group key (default :data:`core.oncu.DEFAULT_GROUP_KEY`).

    Returns:
        ``instance`` (dict of the instance's fields), ``passages`` (DataFrame passage_id,
        ord, title, text, role, is_gold, n_tokens), ``predictions`` (DataFrame: run,
        condition, variant, answer, cited_ids, input_passage_ids, confidence, the score
        columns, failure_label, parse_error, error, latency_ms, cache_hit), and ``groups``
        (DataFrame: the instance's ONCU group per run and contextual condition with s_none,
        s_oracle, s_c, oncu_raw, oncu_clipped, valid, invalid_reason).

    Raises:
        ValueError: unknown dataset or instance.
    """
    found = store.load_instances(dataset, [instance_id])
    if not found:
        raise ValueError(f"no instance {instance_id!r} in dataset {dataset!r}")
    inst = found[0]
    passages = pd.DataFrame(
        [
            {"passage_id": p.passage_id, "ord": p.ord, "title": p.title, "text": p.text,
             "role": p.role, "is_gold": p.is_gold, "n_tokens": p.n_tokens}  # fmt: skip
            for p in inst.passages
        ],
        columns=["passage_id", "ord", "title", "text", "role", "is_gold", "n_tokens"],
    )
    sel = resolve_selection(store, Selection(dataset=dataset, runs=tuple(runs)))
    if group_key:
        sel = replace(sel, options={**sel.options, "group_key": tuple(group_key)})
    preds = store.instance_predictions(sel.runs, instance_id) if sel.runs else pd.DataFrame()
    groups = _instance_groups(store, sel, inst, score_field)
    info = {
        "dataset": dataset,
        "instance_id": inst.instance_id,
        "question": inst.question,
        "gold_answer": inst.gold_answer,
        "answer_aliases": list(inst.answer_aliases),
        "answer_type": inst.answer_type,
        "reasoning_type": inst.reasoning_type,
        "context_length": inst.context_length,
        "evidence_position": inst.evidence_position,
        "distractor_similarity": inst.distractor_similarity,
        "evidence_density": inst.evidence_density,
        "fan_in": inst.fan_in,
        "oracle_applicable": inst.oracle_applicable,
        "source": inst.source,
        "gold_ids": list(inst.gold_ids),
    }
    return {"instance": info, "passages": passages, "predictions": preds, "groups": groups}


def _instance_groups(
    store: Store, sel: Selection, inst: Any, score_field: str
) -> pd.DataFrame:
    cols = ["run", "condition", "s_none", "s_oracle", "s_c", "oncu_raw", "oncu_clipped",
            "valid", "invalid_reason", "n"]  # fmt: skip
    if not sel.runs:
        return pd.DataFrame(columns=cols)
    df = analysis(store, replace(sel, filters={}))
    df = df[df["variant"].fillna("") == ""]
    if df.empty:
        return pd.DataFrame(columns=cols)
    mine = df[df["instance_id"] == inst.instance_id]
    if mine.empty:
        return pd.DataFrame(columns=cols)
    # the instance's group = the rows sharing its group-key cells (per run)
    key = tuple(sel.options.get("group_key") or DEFAULT_GROUP_KEY)
    mask = pd.Series(False, index=df.index)
    for row in mine.drop_duplicates("run").itertuples(index=False):
        m = df["run"] == row.run
        for k in key:
            m &= df[k].astype(str) == str(getattr(row, k))
        mask |= m
    g = oncu_groups(df[mask], score_field=score_field, group_key=key)
    return g[[c for c in cols if c in g.columns]].reset_index(drop=True)


def answer_diff(a: str | None, b: str | None) -> list[tuple[str, str]]:
    """Word-level diff of two answers: ``[(op, text)]`` with op ``=``, ``-`` (only in a) or
    ``+`` (only in b)."""
    wa, wb = (a or "").split(), (b or "").split()
    out: list[tuple[str, str]] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        if tag == "equal":
            out.append(("=", " ".join(wa[i1:i2])))
            continue
        if i2 > i1:
            out.append(("-", " ".join(wa[i1:i2])))
        if j2 > j1:
            out.append(("+", " ".join(wb[j1:j2])))
    return out


def trace_divergence(
    cited_a: Sequence[str] | None,
    cited_b: Sequence[str] | None,
    answer_a: str | None,
    answer_b: str | None,
    conf_a: float | None,
    conf_b: float | None,
) -> float:
    """CUE-R trace divergence between an original and a perturbed trace (SPEC §7).

    ``D = 0.5 * (1 - |E ∩ E'| / |E ∪ E'|) + 0.3 * 1[answer changed] + 0.2 * |c - c'|``; the
    Jaccard term is 0 when both evidence sets are empty, answers are compared
    relaxed-normalized, confidences clamped to [0, 1] (a missing one counts as 0). Uses
    :func:`core.cuer.trace_divergence` when the CUE-R module provides it.
    """
    try:
        from core.cuer import trace_divergence as cuer_td  # type: ignore[attr-defined]
    except ImportError:
        cuer_td = None
    if cuer_td is not None:
        try:
            return float(cuer_td(cited_a, cited_b, answer_a, answer_b, conf_a, conf_b))
        except TypeError:
            pass  # another signature: fall back to the SPEC formula below
    from core.scoring import normalize_relaxed

    ea, eb = set(cited_a or ()), set(cited_b or ())
    union = ea | eb
    jac = 0.0 if not union else 1.0 - len(ea & eb) / len(union)
    changed = normalize_relaxed(answer_a or "") != normalize_relaxed(answer_b or "")

    def _c(x: float | None) -> float:
        if x is None or (isinstance(x, float) and math.isnan(x)):
            return 0.0
        return min(max(float(x), 0.0), 1.0)

    return 0.5 * jac + 0.3 * float(changed) + 0.2 * abs(_c(conf_a) - _c(conf_b))


# ---------------------------------------------------------------------------------- demo
DEMO_DATASET = "controlled-200"
DEMO_RUN = "demo-embedded"


def build_demo(store: Store, progress: Any = None) -> dict[str, Any]:
    """Build the demo store: controlled-200 (seed 42) and the embedded baseline reader on the
    four conditions (lexical top-3), through :func:`core.engine.run_conditions`.

    Idempotent: an existing dataset is reused and a stored run continues where it stopped.

    Args:
        store: the store.
        progress: ``callable(fraction: float, text: str)`` for a progress bar, or None.

    Returns:
        ``{"dataset", "run", "summary"}`` (the run summary as a dict).
    """
    from core.backends import make_backend
    from core.engine import run_conditions

    def say(frac: float, text: str) -> None:
        if progress is not None:
            progress(min(max(frac, 0.0), 1.0), text)

    if DEMO_DATASET not in store.dataset_names():
        from core.datasets.controlled import build_controlled

        say(0.0, f"generating the demo dataset {DEMO_DATASET} ...")
        store.write_dataset(build_controlled(preset=DEMO_DATASET, seed=42, name=DEMO_DATASET))
    say(0.1, "running the embedded baseline reader on the four conditions ...")

    def on_progress(p: Any) -> None:
        frac = p.done / p.total if p.total else 1.0
        say(0.1 + 0.9 * frac, f"embedded baseline: {p.done}/{p.total} calls ({p.rate:.0f}/s)")

    summary = run_conditions(
        store,
        DEMO_DATASET,
        make_backend("embedded"),
        ("no_evidence", "full_context", "retrieved", "oracle"),
        name=DEMO_RUN,
        progress=on_progress,
        notes="demo: embedded extractive baseline reader (not a language model)",
    )
    say(1.0, "demo ready")
    return {"dataset": DEMO_DATASET, "run": DEMO_RUN, "summary": summary.to_dict()}
