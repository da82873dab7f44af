"""What the user selected: one record shared by the views, the figures, the pages and ``export``.

A :class:`Selection` names the dataset, runs, score field, metadata filters and the figure
options (``selection.options``). Figure options are declared once as :class:`core.params.Param`
next to their figure (``core/figures/<area>.py``); :func:`option` reads one from a selection
with the declaration's type check and default. Nothing here imports the store, the views or
the figures, so every layer can import it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.params import Param

__all__ = ["Selection", "option", "selection_from_json", "selection_to_json"]


@dataclass(frozen=True, slots=True)
class Selection:
    """What the user selected: the same object for a page and for ``export``.

    Attributes:
        dataset: dataset name, or None for every dataset of the selected runs.
        runs: run ids (several runs are shown side by side, paired by instance).
        score_field: answer score the view uses (``f1_relaxed`` by default).
        filters: metadata cell -> allowed values (e.g. ``{"reasoning_type": ["multi_hop"]}``).
        options: view-specific settings (thresholds, top-k, ...), JSON-serialisable.
    """

    dataset: str | None = None
    runs: tuple[str, ...] = ()
    score_field: str = "f1_relaxed"
    filters: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)


def option(selection: Selection, param: Param, *fallbacks: str) -> Any:
    """The value of a declared figure option in ``selection``, checked by its declaration.

    A missing, None or empty value (``""``, ``[]``) gives the declared default; the parameter
    named ``score_field`` reads :attr:`Selection.score_field`.

    Args:
        selection: the selection.
        param: the option's declaration.
        fallbacks: older option names read, in order, when ``param.name`` is not set.

    Returns:
        The converted value (a tuple for a ``multiple`` option), or the default.

    Raises:
        ValueError: the value does not fit the declaration (the message names the option).
    """
    if param.name == "score_field":
        return param.coerce(selection.score_field)
    value = None
    for name in (param.name, *fallbacks):
        value = selection.options.get(name)
        if not _unset(value):
            break
    if _unset(value):
        value = param.default
        if value is None:
            return None
    out = param.coerce(value)
    return tuple(out) if param.multiple else out


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, str | list | tuple) and len(value) == 0)


def selection_to_json(selection: Selection) -> str:
    """Canonical JSON of a selection (a hashable cache key)."""
    return json.dumps(
        {
            "dataset": selection.dataset,
            "runs": list(selection.runs),
            "score_field": selection.score_field,
            "filters": {k: list(v) for k, v in sorted(selection.filters.items())},
            "options": dict(selection.options),
        },
        sort_keys=True,
        default=str,
    )


def selection_from_json(text: str) -> Selection:
    """Inverse of :func:`selection_to_json`."""
    d = json.loads(text)
    return Selection(
        dataset=d.get("dataset"),
        runs=tuple(d.get("runs") or ()),
        score_field=d.get("score_field") or "f1_relaxed",
        filters={k: tuple(v) for k, v in (d.get("filters") or {}).items()},
        options=dict(d.get("options") or {}),
    )
