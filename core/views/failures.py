"""The failure browser's data: one filtered, sorted page of predictions and the list's counts.

The page lists the predictions of the selected runs across conditions, filtered and sorted in
DuckDB (:mod:`core.store.failure_rows`), one page at a time; the Case view steps through the
same list's instances (:func:`failure_neighbours`). Every value is cached by the store's data
version (:func:`core.views.common.cached`), so a run writing predictions refreshes the list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from core.scoring.parsing import REASONING_UNCLOSED
from core.selection import Selection
from core.store import Store
from core.store.failure_rows import (
    KINDS,
    OUTCOMES,
    SORTS,
    FailureFilter,
    filter_from_json,
    filter_to_json,
)
from core.store.reparse_rows import parse_counts
from core.views.common import cached, resolve_selection

__all__ = [
    "KINDS",
    "OUTCOMES",
    "PAGE_ROWS",
    "WINDOW_PAGES",
    "SORTS",
    "FailureFilter",
    "failure_facets",
    "failure_filter",
    "failure_neighbours",
    "failure_page",
    "parse_notes_by_run",
    "filter_from_json",
    "filter_to_json",
]

#: Rows on one page of the failure browser.
PAGE_ROWS = 50
#: Pages of the list read at once (:func:`failure_page`): paging inside them reads only a
#: page's text, not the whole filtered list again.
WINDOW_PAGES = 20


def failure_filter(
    store: Store,
    selection: Selection,
    *,
    runs: Sequence[str] | None = None,
    conditions: Sequence[str] = (),
    labels: Sequence[str] = (),
    outcomes: Sequence[str] = (),
    kinds: Sequence[str] = (),
    failures_only: bool = True,
    text: str = "",
    sort: str = "list",
) -> FailureFilter:
    """The failure browser's list for a sidebar selection and the page's own filters.

    The runs are the selection's (every run of its dataset, or of the store, when none is
    chosen; ``runs`` when the caller resolved them already), the metadata filters and the
    score field too.

    Raises:
        ValueError: a selected run is not in the store, or a bad sort, outcome or cell.
    """
    if runs is None:
        runs = resolve_selection(store, selection).runs
    filt = FailureFilter(
        runs=tuple(runs),
        conditions=tuple(conditions),
        labels=tuple(labels),
        outcomes=tuple(outcomes),
        kinds=tuple(kinds),
        failures_only=bool(failures_only),
        cells=_cells(selection.filters),
        text=str(text or ""),
        score_field=selection.score_field,
        sort=sort,
    )
    filt.check()
    return filt


def _cells(filters: Mapping[str, Sequence[Any]]) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """A selection's metadata filters as :attr:`FailureFilter.cells` (empty ones left out)."""
    return tuple((str(c), tuple(str(v) for v in vals)) for c, vals in filters.items() if vals)


def failure_facets(store: Store, runs: Sequence[str]) -> dict[str, list[str]]:
    """The conditions and failure labels stored for the runs (the page's filter choices)."""
    got = _keysets(store, runs)
    return {"conditions": list(got["conditions"]), "labels": list(got["labels"])}


def _keysets(store: Store, runs: Sequence[str]) -> dict[str, Any]:
    """:meth:`core.store.Store.failure_keysets` of the runs, cached.

    The facets, and whether the list can be read from the scores alone.
    """
    key = tuple(sorted(str(r) for r in runs))
    return cached(store, "failure_keysets", key, lambda: store.failure_keysets(key))


def failure_page(
    store: Store, filt: FailureFilter, offset: int = 0, limit: int = PAGE_ROWS
) -> dict[str, Any]:
    """One page of the list (:meth:`core.store.Store.failure_page`), cached.

    The list is read a window of :data:`WINDOW_PAGES` pages at a time
    (:meth:`core.store.Store.failure_window`: the filtered list made, counted and cut to the
    window's keys, the expensive half), cached; each page of the window then reads only its
    own rows' text (:meth:`core.store.Store.failure_rows`). The next page is a page of the
    same window, so it costs no pass over the store's predictions.

    Returns:
        ``{"rows": DataFrame, "counts": {"total", "correct", "wrong", "call failed",
        "unscored"}, "offset": int}``; an offset past the end is moved back to the last
        page (0 for an empty list).
    """
    offset, limit = max(0, int(offset)), max(1, int(limit))
    size = limit * WINDOW_PAGES
    start = offset - offset % size
    if offset + limit > start + size:  # a page across two windows: a window of its own
        start = offset
    key = filter_to_json(filt)
    keys, counts = cached(
        store,
        "failure_window",
        (key, start, size),
        lambda: store.failure_window(filt, start, size, _keysets(store, filt.runs)["scored_alike"]),
    )
    total = counts["total"]
    if offset and offset >= total:  # the list got shorter (a filter, a re-score)
        return failure_page(store, filt, max(0, (total - 1) // limit * limit), limit)
    mine = keys.iloc[offset - start : offset - start + limit]
    rows = cached(
        store, "failure_page", (key, offset, limit), lambda: store.failure_rows(mine, offset)
    )
    return {"rows": rows, "counts": counts, "offset": offset}


def failure_neighbours(
    store: Store, filt: FailureFilter, dataset: str, instance_id: str, around: int = 25
) -> dict[str, Any] | None:
    """Where an instance stands in the list's instances, with ``around`` on each side, cached.

    See :meth:`core.store.Store.failure_neighbours`; None when the instance is not listed.
    """
    key = (filter_to_json(filt), dataset, instance_id, int(around))
    return cached(
        store,
        "failure_neighbours",
        key,
        lambda: store.failure_neighbours(filt, dataset, instance_id, around),
    )


def parse_notes_by_run(store: Store, runs: Sequence[str]) -> dict[str, str]:
    """Per run, one line on what the parse set apart (SPEC §5.1), cached.

    Runs with nothing to say are left out. E.g. ``"12 replies cited 15 passages that were not
    shown (or not passage ids) · 3 replies ended inside their reasoning (parse errors)"``.
    """
    key = tuple(sorted(str(r) for r in runs))

    def build() -> dict[str, str]:
        with store.attached(read_only=True) as con:
            frame = parse_counts(con, key, REASONING_UNCLOSED)
        out = {}
        for r in frame.itertuples(index=False):
            parts = []
            if r.ids_unshown:
                parts.append(
                    f"{_n(r.replies_unshown, 'reply')} cited "
                    f"{_n(r.ids_unshown, 'passage')} that were not shown (or not "
                    "passage ids)"
                )
            if r.ids_over_cap:
                parts.append(
                    f"{_n(r.replies_over_cap, 'reply')} cited "
                    f"{_n(r.ids_over_cap, 'shown passage')} past the cap"
                )
            if r.reasoning_unclosed:
                parts.append(
                    f"{_n(r.reasoning_unclosed, 'reply')} ended inside "
                    "their reasoning (parse errors)"
                )
            if r.salvaged:
                parts.append(
                    f"{_n(r.salvaged, 'reply')} off the contract with a salvaged "
                    "answer (parse errors, not scored)"
                )
            if r.with_reasoning:
                parts.append(f"{_n(r.with_reasoning, 'reply')} with reasoning kept apart")
            if parts:
                out[str(r.run_id)] = " · ".join(parts)
        return out

    return cached(store, "parse_notes_by_run", key, build)


def _n(n: int, noun: str) -> str:
    n = int(n)
    plural = "replies" if noun == "reply" else noun + "s"
    return f"{n:,} {noun if n == 1 else plural}"
