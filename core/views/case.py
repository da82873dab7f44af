"""The Case view's data: one instance end to end, its ONCU group, and answer diffs.

The trace divergence a Case-view rerun shows is :func:`core.cuer.trace_divergence` with the
instance's answer and reasoning type, exactly as the CUE-R analysis (and so the Interventions
page) computes it; there is no copy of the formula here.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pandas as pd

from core.oncu import DEFAULT_GROUP_KEY, oncu_groups
from core.selection import Selection
from core.store import Store
from core.store.analysis import GROUP_CELLS
from core.types import Instance
from core.views.common import analysis, pair_runs, resolve_selection

__all__ = ["answer_diff", "case_data", "md_escape"]


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
    return {"instance": info, "passages": passages, "predictions": preds, "groups": groups}


def _instance_groups(
    store: Store, sel: Selection, inst: Instance, score_field: str, key: Sequence[str]
) -> pd.DataFrame:
    cols = ["run", "condition", "s_none", "s_oracle", "s_c", "oncu_raw", "oncu_clipped",
            "valid", "invalid_reason", "n"]  # fmt: skip
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
    runs = store.runs_frame(live=False)
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


_MD_SPECIAL = set("\\`*_{}[]()<>#+-.!|~:$")


def md_escape(text: object) -> str:
    """``text`` with every Markdown (and Streamlit directive / LaTeX) character escaped.

    For model or dataset text placed inside ``st.markdown`` (STYLE 14: data is text).
    """
    return "".join("\\" + ch if ch in _MD_SPECIAL else ch for ch in str(text))
