"""The views layer: store + selection -> the frames behind the dashboard pages and ``export``.

Views load (the store's queries), filter (metadata cells), pair several runs of one dataset on
their common instances and cache (one cache keyed by the store's version, :func:`cached`);
figures (:mod:`core.figures`) draw what they return, and :mod:`core.views.catalog` pairs the two.
One module per area: :mod:`core.views.common` (shared helpers, the analysis frame, overview,
drill-down; what the pages call is re-exported here), :mod:`core.views.oncu`,
:mod:`core.views.cuer`, :mod:`core.views.dolce`, :mod:`core.views.fanin` (fan-in and CRUX),
:mod:`core.views.retrieval`, :mod:`core.views.case` (the Case view) and
:mod:`core.views.failures` (the failure browser). Nothing here imports
streamlit or writes SQL; metrics come from the method modules.
"""

from __future__ import annotations

from core.selection import Selection, selection_from_json, selection_to_json
from core.views.case import answer_diff, case_data, case_index
from core.views.common import (
    analysis,
    cached,
    error_digest,
    instances_behind,
    overview,
    resolve_selection,
    store_version,
    stored_runs,
)

__all__ = [
    "Selection",
    "analysis",
    "answer_diff",
    "cached",
    "case_data",
    "case_index",
    "error_digest",
    "instances_behind",
    "overview",
    "resolve_selection",
    "selection_from_json",
    "selection_to_json",
    "store_version",
    "stored_runs",
]
