"""The ONCU group guardrails of the Conditions and Length & position pages (issue 15 item 6).

The sidebar's length-cell control, the group-size line and the small-group warning with its
one-click coarser key. Not a page: ``app.py`` routes with ``st.navigation``.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core import views
from core.oncu.metrics import BUCKET_LENGTH, DEFAULT_GROUP_KEY, EXACT_LENGTH, LENGTH_RULE
from core.selection import Selection
from screens.parts.common import cached_call
from screens.parts.display import with_options
from screens.parts.markdown import md_escape as esc
from screens.parts.selection_state import keep

__all__ = ["oncu_group_guard"]


def oncu_group_guard(selection: Selection, summary: pd.DataFrame | None = None) -> Selection:
    """ONCU group guardrails (issue 15 item 6): the length-cell control, the group-size
    distribution and the small-group warning with a one-click coarser key.

    Renders an "ONCU length cell" control in the sidebar (auto / exact / bucket, shared by
    the pages as ``global.length_cell``) and returns the selection with its group key
    resolved (the sidebar's key, else ``global.group_key`` set by the coarser-key button, else
    the default). With ``summary`` (the ``oncu_summary`` table of the returned selection;
    fetched when None) it shows each row's group sizes and, where most valid groups hold
    fewer than 5 instances, a warning with a button that switches to the coarser key.
    """
    ss = st.session_state
    rules = {"auto": "context_length", "exact": EXACT_LENGTH, "bucket": BUCKET_LENGTH}
    ss.setdefault("global.length_cell", "auto")
    with st.sidebar.expander("ONCU length cell"):
        rule = st.radio(
            "Context length in the group key",
            list(rules),
            key="global.length_cell",
            format_func={
                "auto": "auto (exact on a small grid, else bucket)",
                "exact": "exact length",
                "bucket": "length bucket",
            }.get,
            help=LENGTH_RULE,
        )
    keep(rule, "global.length_cell")
    base = selection.options.get("group_key") or ss.get("global.group_key") or DEFAULT_GROUP_KEY
    key = tuple(rules[rule] if k == "context_length" else k for k in base)
    if key != tuple(DEFAULT_GROUP_KEY):
        selection = with_options(selection, group_key=key)
    if summary is None:
        try:
            summary = cached_call(
                "table", name="oncu_summary", sel=views.selection_to_json(selection)
            )
        except ValueError:
            summary = pd.DataFrame()
    if summary is None or summary.empty or "small_group_warning" not in summary.columns:
        return selection
    first = summary.iloc[0]
    st.caption(
        # text: every data part escaped
        f"ONCU group key: {esc(', '.join(first['group_key'])) or '(unit only)'}; valid groups' "
        "sizes (instances): "
        + "; ".join(
            f"{esc(r.run)} · {esc(r.condition)}: "
            + ", ".join(f"{esc(k)} {v}" for k, v in r.group_sizes.items())
            + f", median {r.median_group_size:g}"
            for r in summary.itertuples()
        ),
        help=LENGTH_RULE,
    )
    warn = summary[summary["small_group_warning"].astype(bool)]
    if warn.empty:
        return selection
    lines = [
        f"{esc(r.run)} · {esc(r.condition)}: {r.small_groups} of {r.valid_groups}"
        for r in warn.itertuples()
    ]
    st.warning(
        "**Most valid ONCU groups are tiny** (fewer than 5 instances): "  # text: lines escaped
        + "; ".join(lines)
        + ". The headline averages them; use a coarser group key.",
        icon=":material/warning:",
    )
    coarser = warn.iloc[0]["coarser_group_key"]
    if coarser:
        cells = [k for k in coarser if k not in rules.values()]
        length = next((name for name, tok in rules.items() if tok in coarser), None)

        def switch() -> None:
            ss["global.group_key"] = [
                k if k not in rules.values() else "context_length" for k in coarser
            ]
            if length is not None and length != "auto":
                ss["global.length_cell"] = length

        label = esc(", ".join(cells + ([f"length ({length})"] if length else [])))
        gone = [k for k in first["group_key"] if k not in coarser and k not in rules.values()]
        label += f" (drops {esc(', '.join(gone))})" if gone else ""
        st.button(
            f"Use coarser key: {label}",
            on_click=switch,
            key="oncu.coarser",
            icon=":material/compress:",
            type="primary",
        )
    return selection
