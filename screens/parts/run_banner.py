"""The run-level banner above a page: how many calls of the shown runs failed (issue 36 item 11).

Shown where it applies (the sidebar's runs; a Case-view rerun's runs only when chosen; never
on the Case view, whose answers table shows the instance's own failed calls) and dismissable
until more calls fail.

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import streamlit as st

from screens.parts.markdown import md_escape

__all__ = ["error_banner"]


def error_banner(runs: Sequence[str], errors: Callable[[list[str]], dict[str, Any]]) -> None:
    """Say loudly, above the page, how many calls of the runs failed and the usual error.

    Failed calls (the server was unreachable, refused or timed out) are errors, not answers:
    no score, no failure label, left out of every aggregate as missing. ``errors(runs)`` is
    the cached :func:`core.views.error_digest` of the runs.
    """
    digest = errors(sorted(runs))
    if not digest["errors"]:
        return
    hidden = st.session_state.setdefault("global.banner_hidden", set())
    mark = (tuple(sorted(runs)), digest["errors"])  # new failures show the banner again
    if mark in hidden:
        return
    n, calls = digest["errors"], digest["calls"]
    every = n >= calls > 0
    text = (
        f"{n} of {calls} calls of the selected runs failed"
        + (" (every call)" if every else "")
        + ": they are errors, not answers, so they have no scores and every number on this "
        f"page leaves them out (missing). Most frequent ({digest['top_n']}x): "
        f"{md_escape(digest['top'])} — resume the run on the Runs page to make them again."
    )
    (st.error if every else st.warning)(text, icon="⚠️")
    st.button(
        "Hide this notice",
        key="global.banner_hide",
        on_click=hidden.add,
        args=(mark,),
        help="Until more calls of these runs fail; the counts stay in the runs' rows.",
    )
