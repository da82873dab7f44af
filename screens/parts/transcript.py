"""Case view parts: one prediction's transcript, and two predictions side by side.

Data is text (STYLE 14): every string from a dataset or a model goes through ``st.text``,
``st.code(language=None)`` or a dataframe; Markdown here is our own constant text, with data
only through :func:`core.views.case.md_escape` (ids and names).
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from core.views.case import error_text
from screens.parts.common import HELP
from screens.parts.markdown import md_escape

__all__ = ["prediction_label", "show_comparison", "show_passages", "show_transcript"]

_ROLE = {"gold": "green", "distractor": "orange", "conflicting": "red", "filler": "gray"}


def prediction_label(row: dict[str, Any]) -> str:
    """``run · condition [variant]`` (plain text: for select boxes, which show text)."""
    variant = f" [{row.get('variant')}]" if row.get("variant") else ""
    failed = " (failed call)" if error_text(row) else ""
    return f"{row.get('run')} · {row.get('condition')}{variant}{failed}"


def _num(value: Any, fmt: str = "{:.0f}") -> str:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "—"
    return "—" if v != v else fmt.format(v)


def show_transcript(row: dict[str, Any], t: dict[str, Any]) -> None:
    """What the model of ``row`` saw and said: messages, shown items, reply, parsed fields."""
    st.caption(  # text: numbers and escaped ids
        f"latency {_num(row.get('latency_ms'))} ms · prompt tokens "
        f"{_num(row.get('prompt_tokens'))} · completion tokens "
        f"{_num(row.get('completion_tokens'))} · "
        + ("served from the response cache" if row.get("cache_hit") is True else "called"),
        help="Latency: wall time of the call as the engine measured it. Tokens: as the "
        "backend reported them (— when it did not).",
    )
    error = error_text(row)
    if error:
        st.error("The call failed: its error stands in place of an answer (no answer, no score).")
        st.code(error, language=None, wrap_lines=True)
    else:
        fields = pd.DataFrame(
            [
                {
                    "answer": row.get("answer"),
                    "cited ids": ", ".join(_ids(row.get("cited_ids"))),
                    "confidence": row.get("confidence"),
                    "parse error": row.get("parse_error"),
                    "failure label": row.get("failure_label"),
                    "relaxed F1": row.get("f1_relaxed"),
                }
            ]
        )
        st.dataframe(
            fields,
            hide_index=True,
            column_config={
                "failure label": st.column_config.TextColumn(help=HELP["failure_label"])
            },
        )
        st.caption("Explanation (the model's own words)")
        st.text(row.get("explanation") or "(none)")
        _show_parse_notes(t.get("parse") or {})
    if t["messages"] is None:
        st.markdown("**Messages as sent**")
        st.info(md_escape(t["prompt_note"]))
    else:
        # drawn on demand: a full-context prompt is long, and its passages are listed below
        if st.toggle(
            "Show the messages as sent (system and user message)",
            key="case.show_messages",
            help=md_escape(t["prompt_note"]),
        ):
            st.caption(
                md_escape(t["prompt_note"]) + " Gold or distractor roles are never part of them."
            )
            for m in t["messages"]:
                st.caption(f"{md_escape(m['role'])} message")
                st.code(m["content"], language=None, wrap_lines=True)
    _show_items(row, t)
    st.markdown("**Raw response** (as stored)")
    if t["truncated_note"]:
        st.warning(md_escape(t["truncated_note"]))
    st.code(row.get("raw_response") or "", language=None, wrap_lines=True)


def _show_parse_notes(notes: dict[str, Any]) -> None:
    """What the parse set apart (cited ids not shown or past the cap, salvaged text) and the
    model's reasoning: shown as data, never scored."""
    for line in notes.get("lines") or []:
        st.warning(md_escape(line))
    if notes.get("reasoning_note"):
        with st.expander(
            "Model reasoning (" + md_escape(notes["reasoning_note"]) + "; never "
            "parsed as the answer)"
        ):
            st.text(notes.get("reasoning") or "(empty)")


def _show_items(row: dict[str, Any], t: dict[str, Any]) -> None:
    items = t["items"]
    st.markdown(
        f"**Evidence shown, in prompt order** ({len(items)} items)",
        help="Rank: position in the prompt (for the retrieved condition, the "
        "retriever's rank). Score: the retriever's score of the chunk (none for "
        "passages shown whole). Roles and the gold badge are for you only: the model "
        "saw passage ids, titles and texts.",
    )
    if not items:
        st.caption(
            "No evidence: the question only."
            if row.get("condition") == "no_evidence"
            else "The store does not say which passages this call showed (imported "
            "results keep only the answer)."
        )
    for it in items:
        badges = [f"**#{it['rank']}**"]
        if it["score"] is not None:
            badges.append(f"score {it['score']:.3f}")
        if it["chunk_id"]:
            badges.append(md_escape(it["chunk_id"]))
        for pid, role in zip(it["passage_ids"], it["roles"], strict=True):
            color = _ROLE.get(role, "gray")
            badges.append(f"{md_escape(pid)} :{color}-badge[{md_escape(role)}]")
        if it["cited"]:
            badges.append(f":blue-badge[cited by the model: {md_escape(', '.join(it['cited']))}]")
        if it["contains_answer"]:
            badges.append(":violet-badge[contains the answer]")
        with st.container(border=True):
            st.markdown(" · ".join(badges))  # text: each badge's data escaped above
            titles = [x for x in it["titles"] if x]
            if titles and not it["chunk_id"]:
                st.text("Title: " + " / ".join(titles))
            st.text(it["text"])


def show_comparison(case: dict[str, Any], a: int, b: int, cmp: dict[str, Any]) -> None:
    """Predictions ``a`` and ``b`` side by side with the answer diff and D (``cmp``)."""
    preds = case["predictions"]
    cols = st.columns(2)
    for col, i, name in ((cols[0], a, "A"), (cols[1], b, "B")):
        row = preds.iloc[i].to_dict()
        with col, st.container(border=True):
            st.markdown(f"**{name}**")  # text: A or B
            st.text(prediction_label(row))
            error = error_text(row)
            if error:
                st.error("Failed call: no answer.")
                st.code(error, language=None, wrap_lines=True)
                continue
            st.text(f"Answer: {row.get('answer')}")
            label = row.get("failure_label")
            st.text(
                f"Cited: {', '.join(_ids(row.get('cited_ids'))) or '(none)'} · confidence "
                f"{_num(row.get('confidence'), '{:.2f}')} · failure label "
                f"{label if isinstance(label, str) else '—'}"
            )
    if cmp["failed"]:
        st.metric("D (A vs B)", "—", help=HELP["trace_divergence"])
        st.caption("not computed: a call failed")
        return
    diff = (
        " ".join(
            {
                "=": md_escape(x),
                "-": f":red[~~{md_escape(x)}~~]",
                "+": f":green[**{md_escape(x)}**]",
            }[op]
            for op, x in cmp["diff"]
        )
        or "(both empty)"
    )
    st.markdown(f"**Answers, word by word (A → B):** {diff}")  # text: words escaped
    st.metric("D (A vs B)", f"{cmp['divergence']:.3f}", help=HELP["trace_divergence"])


def show_passages(passages: pd.DataFrame, preds: pd.DataFrame) -> None:
    """The instance's passages with their roles (for the user) and who cited them."""
    cited: dict[str, list[str]] = {}
    for row in preds.itertuples() if not preds.empty else []:
        for pid in _ids(row.cited_ids):
            tag = f"{row.run} {row.condition}" + (f":{row.variant}" if row.variant else "")
            cited.setdefault(pid, []).append(tag)
    only_marked = st.toggle(
        "Only gold / distractor / conflicting / cited passages", value=True, key="case.only_marked"
    )
    for p in passages.itertuples():
        if only_marked and p.role == "filler" and p.passage_id not in cited:
            continue
        badge = f":{_ROLE.get(p.role, 'gray')}-badge[{md_escape(p.role)}]"
        with st.container(border=True):
            st.markdown(f"{badge} **{md_escape(p.passage_id)}**")  # text: the role escaped
            st.text(f"Title: {p.title}")
            if p.passage_id in cited:
                st.text("Cited by: " + ", ".join(sorted(set(cited[p.passage_id]))))
            st.text(p.text[:1200] + (" …" if len(p.text) > 1200 else ""))


def _ids(value: Any) -> list[str]:
    if value is None or isinstance(value, str | float):
        return []
    return [str(v) for v in list(value)]
