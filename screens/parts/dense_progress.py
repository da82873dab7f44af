"""The dense retriever's embeddings on the Retrieval page: progress, estimate, stop, resume.

Issue 18 item 5: adding ``dense`` used to freeze the page behind a spinner for over a minute.
Before a dense or hybrid ranking, :func:`embeddings_ready` embeds the questions and chunks not
yet in the store in batches (:func:`core.retrieval.dense_fill.embed_into`), with a progress bar that
says how many are done and about how long the rest takes (from the speed measured so far), and
a Stop button. Each batch is written to the store, so a stop keeps what was embedded and
Resume goes on from there; later rankings (this page, ``export figure retrieval_curves``, the
next dashboard start) read the stored vectors.

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

import streamlit as st

from core.retrieval.dense_fill import embed_into
from core.selection import Selection
from core.views.retrieval import dense_todo, embedding_cache
from screens.parts.common import get_store
from screens.parts.markdown import md_escape

__all__ = ["embeddings_ready"]

_PAUSED = "retrieval.embed_paused"
#: Selections (store path, data version, selection) whose texts were all embedded.
_READY: set[tuple] = set()


def _duration(seconds: float) -> str:
    """``seconds`` in words a user reads at a glance (``45 s``, ``3 min``)."""
    if seconds < 90:
        return f"{max(1, round(seconds))} s"
    return f"{seconds / 60:.0f} min"


def embeddings_ready(selection: Selection) -> bool:
    """Whether every text a dense ranking of ``selection`` embeds is in the store.

    Embeds the missing ones first (progress, estimate, Stop), unless the user stopped it:
    then says how many are left, offers Resume, and returns False (the page shows no dense
    figure rather than a minute-long spinner). Selections without ``dense``/``hybrid``
    are ready at once.
    """
    store = get_store()
    key = (str(store.path), store.data_version(selection.dataset), repr(selection))
    if key in _READY:
        return True
    todo, total = dense_todo(store, selection)
    if not todo:
        _READY.add(key)  # vectors are never deleted: complete for this data version
        return True
    done = total - len(todo)
    if st.session_state.get(_PAUSED):
        st.info(
            f"Dense ranking stopped: {done:,} of {total:,} questions and chunks are embedded "
            "and kept in the store; Resume embeds the other "
            f"{len(todo):,} (lexical, iterative and oracle need no embeddings)."
        )
        if st.button("Resume embedding", key="retrieval.embed_resume", type="primary"):
            st.session_state[_PAUSED] = False
            st.rerun()
        return False
    stop_help = "Stop after the current batch; what is embedded stays in the store."
    if st.button("Stop", key="retrieval.embed_stop", icon=":material/stop_circle:", help=stop_help):
        st.session_state[_PAUSED] = True
        st.rerun()
    bar = st.progress(
        0.0,
        text=f"Dense ranking: embedding {len(todo):,} questions and chunks not yet in the "
        f"store ({done:,} of {total:,} already are) with all-MiniLM-L6-v2; loading the "
        "model ...",
    )

    def report(now: int, of: int, seconds: float) -> None:
        left = f", about {_duration(seconds / now * (of - now))} left" if now else ""
        bar.progress(
            now / of if of else 1.0,
            text=f"Dense ranking: embedded {now:,} of {of:,} questions and chunks{left}; "  # text:
            "each batch is kept in the store (Stop keeps them).",
        )

    cache = embedding_cache(store)
    try:
        embed_into(todo, cache, report)
    except ValueError as exc:  # the model's package is missing
        bar.empty()
        st.error(md_escape(str(exc)))
        return False
    bar.empty()
    if cache.unsaved:
        st.warning(
            f"{cache.unsaved:,} embeddings could not be written to the store (another process "
            "holds it); they are kept in memory for this ranking only."
        )
    return True
