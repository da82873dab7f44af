"""The failure browser's list in the Case view: Previous / Next through the filtered instances.

The failure browser (``screens/failures.py``) opens a case with the query parameter
``from=failures`` and keeps its list in the session (:func:`remember`) and in the link itself
(``list``, :func:`encode_trail`: a link opened in another browser steps the same list and
links back to the same browser view); the Case view then asks
:func:`steps` where its instance stands in that list and draws Previous / Next buttons that
step through it (:func:`step_buttons`). Only a window of the list around the instance is read
(:func:`core.views.failures.failure_neighbours`), kept in the session so that stepping within
it costs no query. :func:`step_keys` lets the keyboard press the Case view's buttons.

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core.views.failures import (
    FailureFilter,
    failure_neighbours,
    filter_from_json,
    filter_to_json,
)
from screens.parts import url_state
from screens.parts.common import CASE_PAGE, get_store

__all__ = [
    "FROM",
    "LIST",
    "back_link",
    "decode_trail",
    "encode_trail",
    "open_case",
    "remember",
    "step_buttons",
    "step_keys",
    "steps",
]

#: The query parameter value (``from``) that marks a case opened from the failure browser.
FROM = "failures"
#: The query parameter holding the list itself (:func:`encode_trail`).
LIST = "list"
_TRAIL = "failures.trail"
_DECODED = "failures.trail_decoded"
#: Most bytes a linked list may unpack to.
_MAX_TRAIL = 1_000_000
_WINDOW = "failures.window"
#: Instances read on each side of the current one (stepping inside them needs no query).
_AROUND = 25

#: Presses the Case view's Previous / Next buttons on ``k`` / ``j`` or the arrow keys (not
#: while typing in a field or moving in a table). Constant text: no data ever enters it.
_KEYS_JS = """<script>
(function () {
  if (window.__evidenceStepKeys) { return; }
  window.__evidenceStepKeys = true;
  document.addEventListener("keydown", function (e) {
    if (e.defaultPrevented || e.altKey || e.ctrlKey || e.metaKey) { return; }
    var t = e.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) { return; }
    if (t && t.closest && t.closest('[data-testid="stDataFrame"]')) { return; }
    var which = (e.key === "j" || e.key === "ArrowRight") ? "next"
      : (e.key === "k" || e.key === "ArrowLeft") ? "prev" : null;
    if (!which) { return; }
    var b = document.querySelector(".st-key-case-" + which + " button");
    if (!b || b.disabled) { return; }
    e.preventDefault();
    b.click();
  });
})();
</script>"""


def remember(
    filt: FailureFilter,
    runs_by_dataset: Mapping[str, Sequence[str]],
    back: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Keep the browser's list for the Case view; returns what was kept.

    Args:
        filt: the list.
        runs_by_dataset: dataset -> the runs the user chose in the sidebar (the Case view's
            ``runs`` parameter when it shows an instance of that dataset; none: every run).
        back: the failure browser's URL parameters (its link back from the Case view).
    """
    trail = {
        "filter": filter_to_json(filt),
        "runs": {str(k): [str(r) for r in v] for k, v in runs_by_dataset.items()},
        "back": {str(k): str(v) for k, v in (back or {}).items()},
    }
    st.session_state[_TRAIL] = trail
    return trail


def encode_trail(trail: Mapping[str, Any]) -> str:
    """The kept list as one URL parameter (``list``): compressed JSON in URL-safe base64, so a
    Case-view link opened in another browser steps through the same list (issue 36 item 9)."""
    raw = json.dumps(trail, sort_keys=True, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode().rstrip("=")


def decode_trail(text: str) -> dict[str, Any]:
    """The list of :func:`encode_trail`'s text, its filter checked like the page's own.

    Raises:
        ValueError: not such a list (one line).
    """
    try:
        packed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        unpacker = zlib.decompressobj()
        raw = unpacker.decompress(packed, _MAX_TRAIL)
        if unpacker.unconsumed_tail:
            raise ValueError("too long")
        trail = json.loads(raw)
        filt = filter_from_json(trail["filter"])
        filt.check()
        runs = {str(k): [str(r) for r in v] for k, v in dict(trail.get("runs") or {}).items()}
        back = {str(k): str(v) for k, v in dict(trail.get("back") or {}).items()}
    except (ValueError, TypeError, KeyError, AttributeError, zlib.error) as exc:
        raise ValueError(f"not a failure browser list ({exc.__class__.__name__})") from exc
    return {"filter": filter_to_json(filt), "runs": runs, "back": back}


def _trail() -> dict[str, Any] | None:
    """The list the Case view steps: the URL's ``list`` (a link), else the session's."""
    kept = st.session_state.get(_TRAIL)
    text = st.query_params.get(LIST)
    if not text:
        return kept
    if st.session_state.get(_DECODED, (None,))[0] == text:
        return st.session_state[_DECODED][1]
    try:
        trail = decode_trail(text)
    except ValueError as exc:
        url_state.warn(LIST, [str(exc)])
        return kept
    st.session_state[_DECODED] = (text, trail)
    st.session_state[_TRAIL] = trail
    return trail


def back_link() -> None:
    """The Case view's link back to the failure browser, with the list's own parameters."""
    trail = _trail() or {}
    st.page_link(
        "screens/failures.py",
        label="Back to the failure browser",
        icon=":material/list:",
        query_params=trail.get("back") or None,
    )


def open_case(
    filt: FailureFilter, row: Mapping[str, Any], chosen: Sequence[str], runs: pd.DataFrame
) -> None:
    """Open a listed prediction's instance in the Case view, which then steps this list.

    Args:
        filt: the browser's list.
        row: the selected row (``dataset``, ``instance_id``, ``condition``).
        chosen: the runs chosen in the sidebar (none: every run of the row's dataset).
        runs: the stored runs (``run_id``, ``dataset_id``), to group ``chosen`` by dataset.
    """
    dataset_of = dict(zip(runs["run_id"], runs["dataset_id"], strict=True)) if len(runs) else {}
    by_dataset: dict[str, list[str]] = {}
    for run in chosen:
        by_dataset.setdefault(str(dataset_of.get(run)), []).append(str(run))
    trail = remember(filt, by_dataset, back=st.query_params.to_dict())
    params = {
        "dataset": str(row["dataset"]),
        "instance": str(row["instance_id"]),
        "condition": str(row["condition"]),
        "from": FROM,
        LIST: encode_trail(trail),
    }
    if by_dataset.get(params["dataset"]):
        params["runs"] = ",".join(by_dataset[params["dataset"]])
    st.switch_page(CASE_PAGE, query_params=params)


def steps(dataset: str, instance_id: str) -> dict[str, Any] | None:
    """Where the Case view's instance stands in the failure browser's list.

    None unless the case was opened from the failure browser (``from=failures``) and the
    instance is in its list; else ``{"position", "total", "previous", "next"}`` with each
    neighbour None or ``{"dataset", "instance_id", "run", "condition"}``.
    """
    if st.query_params.get("from") != FROM:
        return None
    trail = _trail()
    if not trail:
        return None
    key = (trail["filter"], dataset, instance_id)
    window = st.session_state.get(_WINDOW)
    found = _find(window, key)
    if found is None:
        got = failure_neighbours(
            get_store(), filter_from_json(trail["filter"]), dataset, instance_id, around=_AROUND
        )
        if got is None:
            return None
        window = {"filter": trail["filter"], "total": got["total"], "rows": got["window"]}
        st.session_state[_WINDOW] = window
        found = _find(window, key)
        if found is None:
            return None
    rows, j = window["rows"], found
    return {
        "position": rows[j]["position"],
        "total": window["total"],
        "previous": rows[j - 1] if j > 0 else None,
        "next": rows[j + 1] if j + 1 < len(rows) else None,
    }


def _find(window: Mapping[str, Any] | None, key: tuple[str, str, str]) -> int | None:
    """The index of the instance in a kept window, when both its neighbours are known there."""
    if not window or window["filter"] != key[0]:
        return None
    rows = window["rows"]
    for j, row in enumerate(rows):
        if (row["dataset"], row["instance_id"]) != key[1:]:
            continue
        first_ok = j > 0 or row["position"] == 1
        last_ok = j + 1 < len(rows) or row["position"] == window["total"]
        return j if first_ok and last_ok else None
    return None


def _go(entry: Mapping[str, Any]) -> None:
    """Show ``entry`` (a listed instance) in the Case view: its dataset, runs and condition."""
    qp = st.query_params
    trail = _trail() or {}
    runs = (trail.get("runs") or {}).get(entry["dataset"]) or []
    qp["dataset"] = entry["dataset"]
    qp["instance"] = entry["instance_id"]
    qp["condition"] = entry["condition"]
    if runs:
        qp["runs"] = ",".join(runs)
    elif "runs" in qp:
        del qp["runs"]
    st.session_state["case.instance"] = entry["instance_id"]


def step_buttons(prev_slot: Any, next_slot: Any, where: Mapping[str, Any]) -> None:
    """The Case view's Previous / Next buttons stepping through the failure browser's list."""
    prev_slot.button(
        "◀ Previous",
        key="case.prev",
        on_click=_go,
        args=(where["previous"],),
        disabled=where["previous"] is None,
        use_container_width=True,
        help="The failure browser's previous instance (key k or ←).",
    )
    next_slot.button(
        "Next ▶",
        key="case.next",
        on_click=_go,
        args=(where["next"],),
        disabled=where["next"] is None,
        use_container_width=True,
        help="The failure browser's next instance (key j or →).",
    )


def step_keys() -> None:
    """Let ``j`` / ``→`` and ``k`` / ``←`` press the Case view's Next and Previous buttons."""
    st.html(_KEYS_JS, unsafe_allow_javascript=True)
