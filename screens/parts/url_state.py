"""The view in the URL (issue 18 item 4): the sidebar's selection as query parameters.

Parameters (only values other than the defaults are written, so links stay short):

* ``dataset`` — a dataset name, ``*`` for "(all datasets)";
* ``runs`` — run names, comma-separated;
* ``score`` — the score field;
* ``group`` — the ONCU group key, comma-separated (Conditions & ONCU, Case view);
* ``f.<column>`` — a metadata filter, values comma-separated (e.g. ``f.reasoning_type=bridge``);
* ``db`` — the store path, when it is not the one the dashboard was started on;
* ``preset``, ``template``, ``width``, ``height``, ``font``, ``scale`` — the export settings
  (:mod:`screens.parts.selection_state`, which also keeps every sidebar value across page changes);
* ``instance`` — the Case view's instance (written by the Case view itself); ``from=failures``,
  ``list`` (the failure browser's list, packed) and ``condition`` — a case opened from the
  failure browser (:mod:`screens.parts.failure_trail`);
* ``tab`` — the open tab of Conditions & ONCU (``audit``, ``contrasts``, ``failures``,
  ``calibration``; the matrix, the default, is left out; written by that page);
* the failure browser's own list (written by that page): ``cond``, ``label``, ``outcome``
  (comma-separated), ``sort``, ``q`` (the search text), ``only=0`` (failures only off) and
  ``page`` (1-based).

Opening a URL (or changing the address bar) applies its parameters to the session before the
widgets are drawn; each value is checked against the options the widget offers, and an unknown
one is ignored with a one-line warning naming the parameter. After the sidebar is drawn the
current selection is written back, and the sidebar shows the page's link ("Copy link").

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode, urlsplit

import streamlit as st

from screens.parts.markdown import md_escape

__all__ = [
    "adopt",
    "adopt_filters",
    "adopt_named",
    "applying",
    "copy_link",
    "set_param",
    "warn",
    "write_back",
]

#: URL path of each page (``sidebar(page)`` name -> the ``st.navigation`` path).
PAGE_PATHS = {
    "overview": "",
    "conditions": "conditions",
    "length": "length_position",
    "retrieval": "retrieval",
    "fanin": "fanin",
    "interventions": "interventions",
    "dolce": "dolce",
    "failures": "failures",
    "case": "case_view",
    "runs": "runs",
}
#: The query parameters as this session last applied or wrote them.
_LAST = "global.url_last"
_SLOT = "global.url_slot"
#: The value of ``dataset`` that means "(all datasets)".
ALL_DATASETS = "*"


def _current() -> dict[str, str]:
    """The address bar's query parameters (the last value of a repeated one)."""
    return {k: str(v) for k, v in st.query_params.to_dict().items()}


def applying() -> bool:
    """Whether the URL's parameters are to be applied in this run: the page's first run in
    the session, or the address bar differs from what this session last applied or wrote."""
    return st.session_state.get(_LAST) != _current()


def warn(param: str, bad: Sequence[str]) -> None:
    """One warning naming the URL parameter and its unknown value(s), ignored."""
    shown = ", ".join(bad)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    st.warning(f"URL parameter {md_escape(param)}: unknown value {md_escape(shown)} ignored.")


def adopt(param: str, key: str, allowed: Sequence[Any], *, multi: bool = False) -> None:
    """Set session key ``key`` from URL parameter ``param`` when its value(s) are in ``allowed``.

    Values are compared as text (``str(option)``); the session gets the option itself. With
    ``multi`` the parameter is a comma-separated list: the known values are kept and the
    unknown ones named in one warning. Absent parameter: nothing changes.
    """
    raw = st.query_params.get(param)
    if raw is None:
        return
    by_text = {ALL_DATASETS if a is None else str(a): a for a in allowed}
    if not multi:
        adopt_named(param, key, by_text)
        return
    parts = [p for p in raw.split(",") if p]
    bad = [p for p in parts if p not in by_text]
    if bad:
        warn(param, bad)
    st.session_state[key] = [by_text[p] for p in dict.fromkeys(parts) if p in by_text]


def adopt_named(param: str, key: str, names: Mapping[str, Any]) -> None:
    """Set session key ``key`` to ``names[value]`` of URL parameter ``param`` (a short name
    for an option, such as a tab's); an unknown name is one warning. Absent: nothing changes."""
    raw = st.query_params.get(param)
    if raw is None:
        return
    if raw in names:
        st.session_state[key] = names[raw]
    else:
        warn(param, [raw])


def adopt_filters(values: Mapping[str, Sequence[Any]]) -> None:
    """Apply the ``f.<column>`` parameters to the filter widgets' keys (``global.f.<column>``);
    a column the sidebar offers no filter for is named in a warning."""
    for param in _current():
        if not param.startswith("f."):
            continue
        col = param[2:]
        if col in values and len(values[col]) > 1:
            adopt(param, f"global.f.{col}", list(values[col]), multi=True)
        else:
            warn(param, [col + " (no such filter)"])


def write_back(wanted: Mapping[str, str], owned: Sequence[str]) -> None:
    """Write ``wanted`` to the address bar: parameters in ``owned`` (and every ``f.*``) that
    ``wanted`` lacks are removed, others are kept (e.g. the Case view's ``instance``)."""
    qp = st.query_params
    for k in list(qp.keys()):
        if (k in owned or k.startswith("f.")) and k not in wanted:
            del qp[k]
    for k, v in wanted.items():
        if qp.get(k) != v:
            qp[k] = v
    st.session_state[_LAST] = _current()


def set_param(name: str, value: str | None) -> None:
    """Set (``None``: remove) one parameter, remember it as written, and redraw the link."""
    qp = st.query_params
    if value is None:
        if name in qp:
            del qp[name]
    elif qp.get(name) != value:
        qp[name] = value
    st.session_state[_LAST] = _current()
    slot = st.session_state.get(_SLOT)
    if slot is not None:
        _draw(slot, st.session_state.get("global.url_page", ""))


def page_url(page: str) -> str:
    """The link of ``page`` with the current query parameters (absolute when the browser's
    address is known, else from the server root)."""
    path = PAGE_PATHS.get(page, page)
    base = f"/{path}"
    try:
        full = st.context.url
    except Exception:
        full = None
    if full:
        parts = urlsplit(full)
        root = parts.path
        tail = f"/{path}" if path else ""
        if tail and root.endswith(tail):
            root = root[: -len(tail)]
        elif not tail:
            for p in PAGE_PATHS.values():
                if p and root.endswith(f"/{p}"):
                    root = root[: -len(p) - 1]
                    break
        base = f"{parts.scheme}://{parts.netloc}{root.rstrip('/')}/{path}"
    query = urlencode(_current(), safe=",*")
    return f"{base}?{query}" if query else base


def _draw(slot: Any, page: str) -> None:
    slot.code(page_url(page), language=None, wrap_lines=True)


def copy_link(sb: Any, page: str) -> None:
    """The sidebar's "Copy link" control: the page's URL in a code block (copy button)."""
    sb.caption("Link to this view (copy button on the right)")
    slot = sb.empty()
    st.session_state[_SLOT] = slot
    st.session_state["global.url_page"] = page
    _draw(slot, page)
