"""Case view part: rerun one instance with a chosen perturbation, beside the original.

Data is text (STYLE 14): answers through ``st.text``, ids and errors through
:func:`core.views.case.md_escape` / :func:`core.views.case.md_code`.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import streamlit as st

from core.execution.rerun import (
    OPERATORS,
    RERUN_CONDITIONS,
    RerunRequest,
    base_shown_ids,
    rerun,
)
from screens.parts.common import HELP, clear_caches, get_store
from screens.parts.markdown import md_code, md_escape

__all__ = ["show_rerun"]


#: Command-line flags in a core error, and the fields of this form that set them.
_FLAGS = {
    "--base-url": "the Server URL field",
    "--host": "the Server URL field",
    "--model": "the Model field",
    "--top-k": "top-k",
}


def _form_words(message: str) -> str:
    """An error's first line with the command line's flags named as this form's fields."""
    line = message.splitlines()[0] if message else "error"
    for flag, field in _FLAGS.items():
        line = line.replace(flag, field)
    return line


def _num(value: object) -> str:
    """A score or confidence to three decimals; "—" when missing."""
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "—"
    return "—" if v != v else f"{v:.3f}"


def show_rerun(
    dataset: str, iid: str, runs: Sequence[str], preds: pd.DataFrame, passages: pd.DataFrame
) -> None:
    """The rerun form, the run it starts, and the original and perturbed answers with D."""
    st.subheader("Rerun with a perturbation")
    if not runs and preds.empty:
        st.info("Select a run to perturb.")
        return
    c = st.columns(2)
    base_run = c[0].selectbox(
        "Base run", sorted(set(preds["run"])) if not preds.empty else runs, key="case.base_run"
    )
    condition = c[1].selectbox("Base condition", RERUN_CONDITIONS, key="case.base_condition")
    shown = base_shown_ids(preds, base_run, condition) or list(passages["passage_id"])
    with st.form("case.rerun_form"):
        c = st.columns(2)
        operator = c[0].selectbox(
            "Operator",
            OPERATORS,
            help="remove / replace / duplicate a passage, move a "
            "passage to a position, or change retriever / top-k",
        )
        target = c[1].selectbox("Target passage (shown to the model)", shown)
        d = st.columns(5)
        hardness = d[0].selectbox("replace: hardness", ("hard", "medium", "easy"))
        position = d[1].selectbox("duplicate: position", ("end", "front", "after"))
        move_to = d[2].number_input("move: to index", 0, max(len(passages) - 1, 0), 0)
        retriever = d[3].selectbox(
            "retriever", ("lexical", "hybrid", "dense", "iterative", "oracle")
        )
        top_k = d[4].number_input("top-k", 1, 50, 3)
        e = st.columns(3)
        backend = e[0].selectbox("Backend (for imported runs)", ("embedded", "ollama", "openai"))
        model = e[1].text_input("Model (for imported runs)", "") or None
        host = (
            e[2].text_input(
                "Server URL (ollama / openai)",
                "",
                help="Empty: OLLAMA_HOST or OPENAI_BASE_URL, as for runs",
            )
            or None
        )
        go = st.form_submit_button("Run now", type="primary")
    if go:
        params = {
            "hardness": hardness,
            "position": position,
            "move_to": int(move_to),
            "retriever": retriever,
            "top_k": int(top_k),
        }
        st.session_state["case.rerun_req"] = RerunRequest(
            dataset, iid, base_run, condition, operator, target, params, backend, model, host
        )
    retry = st.session_state.pop("case.retry_now", False)  # set by the Retry button: same request
    req = st.session_state.get("case.rerun_req") if go or retry else None
    if req is not None:
        st.session_state.pop("case.rerun", None)  # a new request: the old result goes
        try:
            with st.spinner("Running ..."):
                st.session_state["case.rerun"] = rerun(get_store(), req)
            clear_caches()
        except (ValueError, RuntimeError) as exc:  # refused or failed: its error in its place
            st.session_state["case.rerun"] = {
                "refused": _form_words(str(exc)),
                "instance_id": iid,
                "operator": req.operator,
            }
    res = st.session_state.get("case.rerun")
    if res and res.get("refused") and res["instance_id"] == iid:
        st.error(
            f"**Rerun not made** ({md_escape(res['operator'])}): "
            f"{md_escape(res['refused'])}. Nothing was stored; change the operator, "
            "target or backend above and press Run now again."
        )
    elif res and res["original"].get("instance_id") == iid:
        left, right = st.columns(2)
        sides = ((left, "Original", res["original"]), (right, "Perturbed", res["perturbed"]))
        for col, title, row in sides:
            with col, st.container(border=True):
                variant = md_escape(row.get("variant") or "")
                st.markdown(f"**{title}** · {md_escape(row.get('condition'))} {variant}")  # text:
                if row.get("error"):  # a failed call has no answer: its error stands in its place
                    st.error(md_code(str(row["error"]).strip().splitlines()[0]))
                    continue
                st.text(f"Answer: {row.get('answer')}")
                st.caption(
                    f"cited {md_escape(row.get('cited_ids'))} · confidence "
                    f"{_num(row.get('confidence'))} · relaxed F1 "
                    f"{_num(row.get('f1_relaxed'))} · "
                    f"{md_escape(row.get('failure_label'))} · "
                    f"shown {len(row.get('input_passage_ids') or [])} items"
                )  # text:
        if res.get("error"):
            st.button(
                "Retry",
                key="case.retry",
                type="primary",
                on_click=lambda: st.session_state.update({"case.retry_now": True}),
            )
            st.metric("Trace divergence D", "—", help=HELP["trace_divergence"])
            st.caption("not computed: the call failed")
        else:
            diff = (
                " ".join(
                    {
                        "=": md_escape(t),
                        "-": f":red[~~{md_escape(t)}~~]",
                        "+": f":green[**{md_escape(t)}**]",
                    }[op]
                    for op, t in res["diff"]
                )
                or "(both empty)"
            )
            st.markdown(f"**Answer diff:** {diff}")  # text: every word escaped above
            st.metric(
                "Trace divergence D", f"{res['divergence']:.3f}", help=HELP["trace_divergence"]
            )
        if res.get("imported_original"):
            st.caption(
                f"Imported answer of {md_escape(base_run)}: "
                f"{md_escape(res['imported_original'].get('answer'))}; the comparison above "
                f"reruns both sides on {md_escape(res['run'])}."
            )
