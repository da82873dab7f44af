"""The Case view's data: one instance end to end, its ONCU group, and answer diffs.

The trace divergence a Case-view rerun shows is :func:`core.cuer.metrics.trace_divergence` with the
instance's answer and reasoning type, exactly as the CUE-R analysis (and so the Interventions
page) computes it; there is no copy of the formula here.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from core.cuer.metrics import trace_divergence
from core.oncu.metrics import DEFAULT_GROUP_KEY, oncu_groups
from core.selection import Selection
from core.store import Store
from core.store.analysis import GROUP_CELLS
from core.types import Instance, stored_ids
from core.views.common import analysis, pair_runs, resolve_selection, stored_runs
from core.views.markdown import md_code, md_escape
from core.views.transcript import transcript

__all__ = [
    "answer_diff",
    "case_data",
    "case_index",
    "compare_predictions",
    "error_text",
    "md_code",
    "md_escape",
]


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
        group_key: ONCU group key (default :data:`core.oncu.metrics.DEFAULT_GROUP_KEY`).

    Returns:
        ``instance`` (dict of the instance's fields), ``passages`` (DataFrame passage_id,
        ord, title, text, role, is_gold, n_tokens), ``predictions`` (DataFrame: run,
        condition, variant, answer, cited_ids, input_passage_ids, confidence, the score
        columns, failure_label, parse_error, error, latency_ms, cache_hit), and ``groups``
        (DataFrame: the instance's ONCU group per run and contextual condition with s_none,
        s_oracle, s_c, oncu_raw, oncu_clipped, valid, invalid_reason), and ``transcripts``
        (one :func:`core.views.transcript.transcript` per prediction row, in row order).

    Raises:
        ValueError: unknown dataset or instance.
    """
    found = store.load_instances(dataset, [instance_id])
    if not found:
        raise ValueError(f"no instance {instance_id!r} in dataset {dataset!r}")
    inst = found[0]
    passages = pd.DataFrame(
        [
            {
                "passage_id": p.passage_id,
                "ord": p.ord,
                "title": p.title,
                "text": p.text,
                "role": p.role,
                "is_gold": p.is_gold,
                "n_tokens": p.n_tokens,
            }
            for p in inst.passages
        ],
        columns=["passage_id", "ord", "title", "text", "role", "is_gold", "n_tokens"],
    )
    sel = resolve_selection(store, Selection(dataset=dataset, runs=tuple(runs)))
    key = tuple(group_key) if group_key else DEFAULT_GROUP_KEY
    preds = store.instance_predictions(sel.runs, instance_id) if sel.runs else pd.DataFrame()
    groups = _instance_groups(store, sel, inst, score_field, key)
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
    run_rows = {r: store.run_row(r) for r in (set(preds["run"]) if not preds.empty else ())}
    records = preds.to_dict("records") if not preds.empty else []
    base = {r["run"]: r for r in records if r["condition"] == "retrieved" and not r.get("variant")}
    trans = [
        transcript(inst, row, run_rows.get(row["run"]), base.get(row["run"])) for row in records
    ]
    return {
        "instance": info,
        "passages": passages,
        "predictions": preds,
        "groups": groups,
        "transcripts": trans,
    }


def case_index(store: Store, dataset: str, runs: Sequence[str] = ()) -> pd.DataFrame:
    """The Case view's instance picker: each instance with its question and whether it failed.

    An instance *failed* when a prediction of the selected runs (all runs of the dataset
    when none are selected) is a failed call (``error`` set) or carries a failure label other
    than ``success`` (SPEC §6.4); variants (interventions, probes) are left out.

    Returns:
        DataFrame ``instance_id, question, n_predictions, n_failed`` in dataset order (the
        first 5,000 instances).
    """
    sel = resolve_selection(store, Selection(dataset=dataset, runs=tuple(runs)))
    return store.instance_outcomes(dataset, list(sel.runs))


def _instance_groups(
    store: Store, sel: Selection, inst: Instance, score_field: str, key: Sequence[str]
) -> pd.DataFrame:
    cols = [
        "run",
        "condition",
        "s_none",
        "s_oracle",
        "s_c",
        "oncu_raw",
        "oncu_clipped",
        "valid",
        "invalid_reason",
        "n",
    ]
    if not sel.runs:
        return pd.DataFrame(columns=cols)
    df = _group_rows(store, sel, inst, key)
    df = df[df["variant"].fillna("") == ""]
    if df.empty:
        return pd.DataFrame(columns=cols)
    mine = df[df["instance_id"] == inst.instance_id]
    if mine.empty:
        return pd.DataFrame(columns=cols)
    # the instance's group = the rows sharing its group-key cells (per run)
    mask = pd.Series(False, index=df.index)
    for row in mine.drop_duplicates("run").itertuples(index=False):
        m = df["run"] == row.run
        for k in key:
            m &= df[k].astype(str) == str(getattr(row, k))
        mask |= m
    g = oncu_groups(df[mask], score_field=score_field, group_key=tuple(key))
    return g[[c for c in cols if c in g.columns]].reset_index(drop=True)


def _group_rows(store: Store, sel: Selection, inst: Instance, key: Sequence[str]) -> pd.DataFrame:
    """The analysis rows :func:`_instance_groups` picks from, read in DuckDB where it can.

    The rows of instances sharing the instance's cells of ``key`` (the group is made of
    those), paired as :func:`core.views.common.analysis` pairs the whole frame: several runs
    of one dataset keep the instances every run has, so a run of the selection without this
    instance leaves it no group. Keys with cells that are not instance columns read the whole
    analysis frame (cached) instead.
    """
    cells = [k for k in key if k != "model"]
    if any(k not in GROUP_CELLS for k in cells):
        return analysis(store, replace(sel, filters={}))
    dataset = sel.dataset or ""
    df = store.analysis_frame(sel.runs, same_cells=(dataset, inst.instance_id, cells))
    runs = stored_runs(store)
    runs = runs[runs["run_id"].isin(list(sel.runs))]
    scored = runs[pd.to_numeric(runs["n_predictions"], errors="coerce").fillna(0) > 0]
    if len(scored) >= 2 and scored["dataset_id"].nunique() == 1:
        have = set(df.loc[df["instance_id"] == inst.instance_id, "run"])
        if not set(scored["run_id"]) <= have:
            return df.iloc[0:0]  # some run lacks the instance: not among the paired ones
    return pair_runs(df)


def answer_diff(a: str | None, b: str | None) -> list[tuple[str, str]]:
    """Word-level diff of two answers.

    Returns:
        ``[(op, text)]`` with op ``=``, ``-`` (only in a) or ``+`` (only in b).
    """
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


def compare_predictions(case: dict[str, Any], a: int, b: int) -> dict[str, Any]:
    """Two predictions of one instance side by side: the answer diff and the divergence D.

    Args:
        case: :func:`case_data`'s result.
        a: row position of the first prediction in ``case["predictions"]``.
        b: row position of the second.

    Returns:
        ``diff`` (:func:`answer_diff` of a's and b's answers) and ``divergence``
        (:func:`core.cuer.metrics.trace_divergence` with the instance's answer and reasoning type,
        as the CUE-R analysis computes it), both None when either call failed (an error is
        no answer), and ``failed`` (which sides failed: ``"a"``, ``"b"``).
    """
    preds = case["predictions"]
    ra, rb = preds.iloc[a].to_dict(), preds.iloc[b].to_dict()
    failed = [k for k, r in (("a", ra), ("b", rb)) if error_text(r)]
    if failed:
        return {"diff": None, "divergence": None, "failed": failed}
    inst = case["instance"]
    d = trace_divergence(
        stored_ids(ra.get("cited_ids")),
        stored_ids(rb.get("cited_ids")),
        ra.get("answer"),
        rb.get("answer"),
        _num(ra.get("confidence")),
        _num(rb.get("confidence")),
        answer_type=inst.get("answer_type"),
        reasoning_type=inst.get("reasoning_type"),
    )
    return {
        "diff": answer_diff(ra.get("answer"), rb.get("answer")),
        "divergence": float(d),
        "failed": [],
    }


def error_text(row: Mapping[str, Any]) -> str:
    """A prediction row's error text, ``""`` when the call did not fail (NULL / NaN / blank)."""
    value = row.get("error")
    return value.strip() if isinstance(value, str) else ""


def _num(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if out != out else out
