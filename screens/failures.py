"""Failure browser: every prediction of the selected runs in one filtered, sorted, paged table.

Filters (condition, failure label, outcome, free text; metadata cells in the sidebar) and the
sort run in DuckDB, one page of rows at a time (:mod:`core.views.failures`). Selecting a row
opens its instance in the Case view, whose Previous / Next buttons (and the keys j / k) then
step through this list's instances.
"""

from typing import Any

import streamlit as st

from core.annotate.roundtrip import DEFAULT_RUBRIC
from core.views import resolve_selection
from core.views.failures import (
    KINDS,
    OUTCOMES,
    PAGE_ROWS,
    SORTS,
    failure_facets,
    failure_filter,
    failure_page,
    parse_notes_by_run,
)
from screens.parts import failure_trail, url_state
from screens.parts.common import HELP, cached_call, get_store, sidebar
from screens.parts.judge_agreement_panel import show_human_agreement
from screens.parts.markdown import md_escape

OUTCOME_HELP = (
    "correct: failure label success (strict EM = 1), or strict EM = 1 where the condition has "
    "no label (no_evidence); wrong: any other label (parse included) or strict EM < 1; call "
    "failed: the call raised (server down, timeout), so there is no answer and no score, and "
    "it is never counted as wrong; unscored: no score stored yet. SPEC §6.4."
)
#: The page's own filters and their defaults (kept across visits to other pages).
_STATE = {
    "conditions": [],
    "labels": [],
    "outcomes": [],
    "kinds": ["answer"],
    "only": True,
    "text": "",
    "sort": "list",
}
KIND_HELP = (
    "What the listed predictions are: answer (a question answered under one of the four "
    "conditions, CUE-R base traces included), intervention (CUE-R interventions and Case-view "
    "reruns), probe (DOLCE probes). Probes and interventions are not failures of the task: "
    "they are listed only when chosen here. Empty: every kind."
)


def _url_filters(choices: dict) -> None:
    """Apply the page's own URL parameters (:mod:`screens.parts.url_state`); unknown values warn."""
    qp = st.query_params
    url_state.adopt("cond", "failures.conditions", choices["conditions"], multi=True)
    url_state.adopt("label", "failures.labels", choices["labels"], multi=True)
    url_state.adopt("outcome", "failures.outcomes", choices["outcomes"], multi=True)
    if qp.get("kind") == "*":
        ss["failures.kinds"] = []
    else:
        url_state.adopt("kind", "failures.kinds", choices["kinds"], multi=True)
    url_state.adopt("sort", "failures.sort", choices["sort"])
    if "q" in qp:
        ss["failures.text"] = qp["q"]
    if "only" in qp:
        ss["failures.only"] = qp["only"] != "0"
    page = qp.get("page", "")  # at most 18 digits: a longer number is no page (not a crash)
    if page.isascii() and page.isdigit() and len(page) <= 18 and int(page) >= 1:
        ss["failures.url_offset"] = (int(page) - 1) * PAGE_ROWS
        ss.pop("failures.last", None)  # the list is (re)entered at the linked page


def _url_write(offset: int) -> None:
    """Write the page's filters and page number to the URL (defaults left out)."""
    joined = {"cond": "conditions", "label": "labels", "outcome": "outcomes"}
    for param, name in joined.items():
        url_state.set_param(param, ",".join(map(str, ss[f"failures.{name}"])) or None)
    kinds = ",".join(ss["failures.kinds"])  # answers by default; "*": every kind
    url_state.set_param("kind", None if kinds == "answer" else kinds or "*")
    url_state.set_param("sort", None if ss["failures.sort"] == "list" else ss["failures.sort"])
    url_state.set_param("q", ss["failures.text"] or None)
    url_state.set_param("only", None if ss["failures.only"] else "0")
    url_state.set_param("page", str(offset // PAGE_ROWS + 1) if offset else None)


url = url_state.applying()  # before the sidebar writes its part of the URL
selection = sidebar("failures")
st.title("Failure browser")
st.caption(
    "Every prediction of the selected runs, across conditions, filtered and sorted in "
    "the store. Select a row to open it in the Case view; its ◀ Previous / Next ▶ (keys "
    "k / j) then step through this list."
)
store, ss = get_store(), st.session_state
try:
    runs = resolve_selection(store, selection, cached_call("runs")).runs  # the sidebar's frame
except ValueError as exc:
    st.error(md_escape(exc))
    st.stop()
if not runs:
    st.info("No runs in the selection: launch or import one on the Runs page.")
    st.stop()
facets = failure_facets(store, runs)
choices = {
    "conditions": facets["conditions"],
    "labels": facets["labels"],
    "outcomes": list(OUTCOMES),
    "kinds": list(KINDS),
    "sort": list(SORTS),
}
for name, default in _STATE.items():
    value = ss.get(f"failures.{name}", ss.get(f"failures.keep.{name}", default))
    if name in ("conditions", "labels", "outcomes", "kinds"):  # values no longer offered go
        value = [v for v in value if v in choices[name]]
    elif name == "sort" and value not in SORTS:
        value = default
    ss[f"failures.{name}"] = value
if url:  # a link restores the list: cond, label, outcome, sort, q, only=0, page
    _url_filters(choices)

row1 = st.columns(5)
row1[0].multiselect(
    "Condition",
    choices["conditions"],
    key="failures.conditions",
    help="Only these conditions (empty: every condition of the kinds chosen beside).",
)
row1[4].multiselect("Kind", choices["kinds"], key="failures.kinds", help=KIND_HELP)
row1[1].multiselect(
    "Failure label",
    choices["labels"],
    key="failures.labels",
    help=HELP["failure_label"] + " Empty: any label, or none.",
)
row1[2].multiselect(
    "Outcome",
    choices["outcomes"],
    key="failures.outcomes",
    help=OUTCOME_HELP + " Empty: any outcome.",
)
row1[3].selectbox(
    "Sort",
    choices["sort"],
    key="failures.sort",
    format_func=lambda k: SORTS[k][0],
    help="Order of the list; ties in run, instance, condition order.",
)
row2 = st.columns([3, 1], vertical_alignment="bottom")
row2[0].text_input(
    "Search question and answer",
    key="failures.text",
    help="Case-insensitive text found in the question or the model's answer, "
    "taken literally (% and _ are plain characters).",
)
row2[1].toggle(
    "Failures only",
    key="failures.only",
    help="Only failed calls and predictions with a failure label other than "
    "success, as the Case view counts failures. The no-evidence baseline has no "
    "label: pick Outcome = wrong to list its wrong answers.",
)
st.caption(
    "Metadata cells (fan-in, reasoning type, context length, ...): *Filters (metadata "
    "cells)* in the sidebar. Score column: the sidebar's score field."
)
for name in _STATE:
    ss[f"failures.keep.{name}"] = ss[f"failures.{name}"]

filt = failure_filter(
    store,
    selection,
    runs=runs,
    conditions=ss["failures.conditions"],
    labels=ss["failures.labels"],
    outcomes=ss["failures.outcomes"],
    kinds=ss["failures.kinds"],
    failures_only=ss["failures.only"],
    text=ss["failures.text"],
    sort=ss["failures.sort"],
)
if ss.get("failures.last") != filt:  # another list: back to its first page
    ss["failures.last"], ss["failures.offset"] = filt, ss.pop("failures.url_offset", 0)
page = failure_page(store, filt, ss.get("failures.offset", 0))
ss["failures.offset"] = offset = page["offset"]
rows, counts = page["rows"], page["counts"]
_url_write(offset)
total = counts["total"]
nonce = ss.get("failures.nonce", 0)  # a new table after a case was opened: no selection


def _open_picked(event: Any) -> None:
    """Open the selected row's instance in the Case view (a row of this page's list)."""
    picked = ((event or {}).get("selection") or {}).get("rows") or []
    if picked and picked[0] < len(rows):
        ss["failures.nonce"] = nonce + 1
        failure_trail.open_case(
            filt, rows.iloc[picked[0]].to_dict(), selection.runs, cached_call("runs")
        )


# a row selected in the last run opens its case now, before the rest of the list is drawn
# again (the switch to the Case view drops it anyway; issue 36 item 9)
_open_picked(ss.get(f"failures.table.{nonce}"))

st.markdown(
    f"**{total:,} predictions** in this list: {counts['wrong']:,} wrong · "
    f"{counts['call failed']:,} call failed · {counts['correct']:,} correct · "
    f"{counts['unscored']:,} unscored",
    help=OUTCOME_HELP,
)
for run_id, line in parse_notes_by_run(store, runs).items():  # what the parse set apart
    st.caption(
        f"Run {md_escape(run_id)}: {md_escape(line)}. Not scored; each reply's are in "
        "its transcript (Case view)."
    )
if counts["call failed"]:
    n = counts["call failed"]
    st.warning(
        f"{n:,} failed call{'s' if n != 1 else ''} in this list: the call raised, so "
        "there is no answer and no score. Listed as *call failed* (never as wrong), with "
        "the error in the error column.",
        icon="⚠️",
    )


def _turn(by: int) -> None:
    """Move the page by ``by`` rows."""
    ss["failures.offset"] = max(0, ss.get("failures.offset", 0) + by)


nav = st.columns([1.3, 4, 1.1], vertical_alignment="center")
nav[0].button(
    "◀ Previous page",
    key="failures.prev",
    on_click=_turn,
    args=(-PAGE_ROWS,),
    disabled=offset == 0,
    use_container_width=True,
)
nav[1].caption(
    f"rows {offset + 1:,}–{offset + len(rows):,} of {total:,}"
    if total
    else "No prediction matches these filters."
)
nav[2].button(
    "Next page ▶",
    key="failures.next",
    on_click=_turn,
    args=(PAGE_ROWS,),
    disabled=offset + PAGE_ROWS >= total,
    use_container_width=True,
)

text = st.column_config.TextColumn
# a table, one row per line: the formatter would put each item on a line of its own
columns = {
    "row": st.column_config.NumberColumn("#", help="Place in the filtered, sorted list."),
    "run": text("run", help="The run (model, backend, settings) that made the prediction."),
    "dataset": text("dataset", help="The dataset of the instance."),
    "condition": text("condition", help="What the model was shown: no_evidence, full_context, "
                      "retrieved, oracle; intervention (CUE-R) and probe (DOLCE) calls."),
    "variant": text("variant", help="The intervention or probe variant; empty for the four "
                    "conditions."),
    "instance_id": text("instance", help="The instance; select the row to open it in the Case "
                        "view."),
    "question": text("question", help="The question (its first 300 characters)."),
    "answer": text("answer", help="The model's parsed answer (its first 300 characters); empty "
                   "for a failed call."),
    "gold": text("gold answer", help="The instance's gold answer (its first 300 characters; "
                 "the aliases are in the Case view). Never shown to a model."),
    "kind": text("kind", help=KIND_HELP),
    "explanation": text("explanation", help="The model's own explanation (its first 300 "
                        "characters; a released run's from its parsed predictions). Open the "
                        "row for the whole reply as the model wrote it."),
    "score": st.column_config.NumberColumn(selection.score_field, format="%.3f",
                                           help=f"{selection.score_field} of the prediction "
                                           "(the sidebar's score field); empty when unscored "
                                           "or the call failed. " + HELP["f1_relaxed"]),
    "outcome": text("outcome", help=OUTCOME_HELP),
    "failure_label": text("failure label", help=HELP["failure_label"]),
    "error": text("error", help="Why the call failed (its first 300 characters): no answer, no "
                  "score. Empty when the call returned."),
    "fan_in": st.column_config.NumberColumn("fan-in", help="Number of source documents the "
                                            "gold evidence comes from (instance metadata)."),
    "reasoning_type": text("reasoning type", help="The instance's reasoning type (instance "
                           "metadata)."),
}  # fmt: skip
shown = rows if rows["dataset"].nunique() > 1 else rows.drop(columns=["dataset"])
config = {k: v for k, v in columns.items() if k in shown.columns}
order = [
    c
    for c in (
        "row",
        "run",
        "dataset",
        "condition",
        "instance_id",
        "outcome",
        "failure_label",
        "score",
        "question",
        "answer",
        "gold",
        "explanation",
        "error",
        "fan_in",
        "reasoning_type",
        "variant",
        "kind",
    )
    if c in shown.columns
]
event = st.dataframe(
    shown,
    key=f"failures.table.{nonce}",
    hide_index=True,
    on_select="rerun",
    selection_mode="single-row",
    column_config=config,
    column_order=order,
)
# People's labels of the blind sample (issue 20; seed 000 App. A.6): only for annotated runs.
show_human_agreement(store, runs, DEFAULT_RUBRIC, key="failures")
_open_picked(event)
