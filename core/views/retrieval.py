"""The retrieval-diagnostics view: the retrieval audit of the selection's dataset (SPEC §4)."""

from __future__ import annotations

import pandas as pd

from core.conditions import retrieval_audit
from core.figures.retrieval import (
    CHUNK_SIZE,
    KS,
    MAX_INSTANCES,
    OFFERED_KS,
    OVERLAP,
    RETRIEVERS,
)
from core.selection import Selection, option
from core.store import Store
from core.views.common import apply_filters, cached

__all__ = ["audit_dataset", "retrieval_audit_frames"]


def audit_dataset(store: Store, selection: Selection) -> str | None:
    """``selection.dataset``, else the first selected run's dataset, else the first dataset."""
    if selection.dataset:
        return selection.dataset
    if selection.runs:
        row = store.run_row(selection.runs[0])
        return None if row is None else row.get("dataset_id")
    names = store.dataset_names()
    return names[0] if names else None


def retrieval_audit_frames(store: Store, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_instance, aggregate)`` retrieval diagnostics of the selection's dataset.

    Metadata filters of the selection restrict the instances; at most ``max_instances`` (the
    first ones) are audited. Options: ``retrievers``, ``ks``, ``chunk_size``, ``overlap``,
    ``max_instances`` (:mod:`core.figures.retrieval`). Cached per store version.

    Raises:
        ValueError: unknown retriever, bad k, or an unavailable dense model.
    """
    name = audit_dataset(store, selection)
    if name is None:
        empty = pd.DataFrame(columns=["instance_id", "retriever", "k"])
        return empty, pd.DataFrame(columns=["retriever", "k", "n_instances"])

    cap = option(selection, MAX_INSTANCES)
    retrievers = tuple(option(selection, RETRIEVERS))
    chunk_size, overlap = option(selection, CHUNK_SIZE), option(selection, OVERLAP)
    ks = sorted({int(k) for k in option(selection, KS)})
    # every offered k is audited with the selected ones: each (retriever, k) row depends on
    # its k alone, so changing the top-k selection only picks other rows of this entry
    every_k = tuple(sorted({*ks, *OFFERED_KS})) if ks and ks[0] >= 1 else tuple(ks)
    filters = tuple(sorted((c, tuple(v)) for c, v in selection.filters.items()))

    def build() -> tuple[pd.DataFrame, pd.DataFrame]:
        if selection.filters:
            frame = apply_filters(store.instances_frame(name), selection.filters)
            ids = frame["instance_id"].head(cap).tolist()
        else:
            ids = store.list_instance_ids(name, cap)
        instances = store.load_instances(name, ids) if ids else []
        audit = retrieval_audit(
            instances, retrievers=retrievers, ks=every_k, chunk_size=chunk_size, overlap=overlap
        )
        return audit.per_instance, audit.aggregate

    key = (name, filters, cap, retrievers, chunk_size, overlap, every_k)
    per, agg = cached(store, "retrieval", key, build)
    per = per[per["k"].isin(ks)].reset_index(drop=True)
    agg = agg[agg["k"].isin(ks)].reset_index(drop=True)
    return per, agg
