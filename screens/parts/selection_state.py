"""One selection state for the whole app (issue 36 item 2): the sidebar's values kept across pages.

Streamlit gives each page's widgets their own identity (the page's script hash is part of a
widget's id), so a sidebar widget drawn on another page starts from its default and the
previous page's value is dropped at the end of the run: the dataset alternated between pages
on every other click and the export preset was lost. The values are therefore kept apart
from the widgets, in ``global.kept``: every sidebar widget's value is recorded after it is
drawn (:func:`keep`), and on a page change the kept values are put back into the widgets' keys
before they are drawn (:func:`restore`). The URL then applies on top of them
(:mod:`screens.parts.url_state`), so a link, a drill-down and the back button win over the session.

The same values are written to the URL (:func:`write_url`: non-default values only), export
settings included (``preset``, ``width``, ``height``, ``font``, ``template``, ``scale``) and
the store path (``db``, when it is not the one the dashboard was started on).

Not a page: ``app.py`` routes with ``st.navigation`` (helpers in ``screens/`` are never listed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import streamlit as st

from core.export.render import PRESETS, TEMPLATES, ExportSettings
from core.figures.oncu import GROUP_KEY
from screens.parts import url_state

__all__ = [
    "EXPORT_PARAMS",
    "adopt_export",
    "keep",
    "keep_runs",
    "restore",
    "run_label",
    "set_value",
    "write_url",
]

_KEPT = "global.kept"
_DRAWN_ON = "global.drawn_on"
_DEFAULT = ExportSettings()
#: URL parameter -> (session key, default, converter) of the export settings.
EXPORT_PARAMS: dict[str, tuple[str, Any, Any]] = {
    "width": ("global.width", _DEFAULT.width, int),
    "height": ("global.height", _DEFAULT.height, int),
    "font": ("global.font_size", _DEFAULT.font_size, int),
    "scale": ("global.scale", _DEFAULT.scale, float),
}
#: The export widgets' ranges (the sidebar's number inputs): a linked value outside is refused.
EXPORT_RANGES = {"width": (100, 5000), "height": (100, 5000), "font": (4, 72), "scale": (0.25, 8.0)}


def _kept() -> dict[str, Any]:
    return st.session_state.setdefault(_KEPT, {})


def restore(page: str) -> None:
    """Put the kept sidebar values back into their widgets' keys when the page changed.

    Within one page the widgets' own values stand (a change the user just made, or a value a
    button set); only a page change (another page's widgets, another identity) restores.
    """
    ss = st.session_state
    if ss.get(_DRAWN_ON) == page:
        return
    ss[_DRAWN_ON] = page
    for key, value in _kept().items():
        ss[key] = list(value) if isinstance(value, list) else value


def keep(value: Any, key: str) -> Any:
    """Record ``value`` (a widget's, as it returns it) as the kept value of the sidebar widget
    ``key``; returns it."""
    _kept()[key] = list(value) if isinstance(value, list | tuple) else value
    return value


def keep_runs(chosen: Sequence[str], offered: Sequence[str]) -> None:
    """Keep the chosen runs, and the earlier chosen runs this page does not offer (a page that
    lists only DOLCE runs does not drop the conditions runs chosen on another page)."""
    earlier = _kept().get("global.runs") or []
    keep([*chosen, *(r for r in earlier if r not in offered and r not in chosen)], "global.runs")


def set_value(key: str, value: Any) -> None:
    """Set a sidebar value from code (a drill-down's dataset): the widget's key and the kept
    value, so that neither the page change nor the next draw undoes it."""
    st.session_state[key] = value
    keep(value, key)


def adopt_export() -> None:
    """Apply the URL's export settings (``preset``, ``template``, ``width``, ``height``,
    ``font``, ``scale``); a value out of range or unknown is one warning, ignored."""
    url_state.adopt("preset", "global.preset", [None, *PRESETS])
    url_state.adopt("template", "global.template", list(TEMPLATES))
    qp = st.query_params
    for param, (key, _, cast) in EXPORT_PARAMS.items():
        raw = qp.get(param)
        if raw is None:
            continue
        lo, hi = EXPORT_RANGES[param]
        try:
            value = cast(raw)
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            url_state.warn(param, [f"{raw} (not a number from {lo} to {hi})"])
            continue
        st.session_state[key] = value


def write_url(
    page: str,
    datasets: Sequence[str],
    runs: Sequence[str],
    filters: Mapping[str, Sequence[Any]],
    sb: Any,
    *,
    default_db: str,
) -> None:
    """Write the sidebar's selection to the URL (non-default values only) and show its link."""
    ss = st.session_state
    wanted: dict[str, str] = {}
    if ss.get("global.db") and str(ss["global.db"]) != default_db:
        wanted["db"] = str(ss["global.db"])
    dataset = ss.get("global.dataset")
    if dataset != (datasets[0] if datasets else None):
        wanted["dataset"] = url_state.ALL_DATASETS if dataset is None else str(dataset)
    if runs:
        wanted["runs"] = ",".join(runs)
    if ss.get("global.score_field") != "f1_relaxed":
        wanted["score"] = str(ss["global.score_field"])
    group = ss.get("global.group_key")
    if page in ("conditions", "case") and group and list(group) != list(GROUP_KEY.default):
        wanted["group"] = ",".join(group)
    for col, vals in filters.items():
        wanted[f"f.{col}"] = ",".join(str(v) for v in vals)
    if ss.get("global.preset"):
        wanted["preset"] = str(ss["global.preset"])
    if ss.get("global.template", _DEFAULT.template) != _DEFAULT.template:
        wanted["template"] = str(ss["global.template"])
    for param, (key, default, cast) in EXPORT_PARAMS.items():
        value = ss.get(key, default)
        if value is not None and cast(value) != default:
            wanted[param] = f"{cast(value):g}"
    # the Case view's instance belongs to the URL's dataset: dropped when the dataset changed
    linked = st.query_params.get("dataset", datasets[0] if datasets else None)
    linked = None if linked == url_state.ALL_DATASETS else linked
    keep_instance = page == "case" and linked == dataset
    owned = ["db", "dataset", "runs", "score", "group", "preset", "template", *EXPORT_PARAMS]
    owned += [] if keep_instance else ["instance"]
    url_state.write_back(wanted, owned)
    url_state.copy_link(sb, page)


def run_label(r: Any) -> str:
    """A run's name in the run pickers: name, model, and its status when not plainly done."""
    label = f"{r.run_id} · {r.model}" + (" (baseline)" if r.backend == "embedded" else "")
    status = str(getattr(r, "status", "") or "")
    errors = pd.to_numeric(getattr(r, "n_errors", 0), errors="coerce")
    errors = 0 if pd.isna(errors) else int(errors)
    if status and status != "done":
        label += f" · {status}"
    if errors:
        label += f" · {errors} failed calls"
    return label
