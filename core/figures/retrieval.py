"""Figures and tables of the retrieval-only diagnostics (SPEC §4; seed 000 App. A.10-A.13).

Per (instance, retriever family, k): recall of gold passage ids, full-chain coverage, evidence
F1, distractor rate and passages per context, from :func:`core.conditions.retrieval_audit`.
Options read from ``selection.options``: ``retrievers`` (default lexical, hybrid, oracle;
``dense`` loads a sentence-transformers model), ``ks`` (default 1, 2, 3, 5, 10),
``chunk_size`` (220), ``overlap`` (40) and ``max_instances`` (2,000: ranking every chunk of
every instance is the costly part; ``n_instances`` in the table says how many were audited).
The dataset is ``selection.dataset``, else the
dataset of the first selected run.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from core.figures import Selection, register_figure, register_table

__all__ = [
    "DEFAULT_KS",
    "DEFAULT_MAX_INSTANCES",
    "DEFAULT_RETRIEVERS",
    "RETRIEVAL_METRICS",
    "retrieval_audit_frames",
    "retrieval_grid_table",
]

#: Retriever families shown by default (dense needs a model load; add it in the options).
DEFAULT_RETRIEVERS = ("lexical", "hybrid", "oracle")
#: Retrieval budgets shown by default.
DEFAULT_KS = (1, 2, 3, 5, 10)
#: Instances audited at most (the first ones in dataset order; the table says how many).
DEFAULT_MAX_INSTANCES = 2000
#: Metrics drawn as curves (name -> axis title).
RETRIEVAL_METRICS = {
    "recall": "gold recall",
    "full_chain_coverage": "full-chain coverage",
    "distractor_rate": "distractor rate",
}


def _dataset(store: Any, selection: Selection) -> str | None:
    if selection.dataset:
        return selection.dataset
    if selection.runs:
        row = store.run_row(selection.runs[0])
        return None if row is None else row.get("dataset_id")
    names = store.dataset_names()
    return names[0] if names else None


def retrieval_audit_frames(store: Any, selection: Selection) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(per_instance, aggregate)`` retrieval diagnostics of the selection's dataset.

    Metadata filters of the selection restrict the instances.

    Raises:
        ValueError: unknown retriever, bad k, or an unavailable dense model.
    """
    from core.conditions import retrieval_audit
    from core.views import apply_filters

    name = _dataset(store, selection)
    if name is None:
        empty = pd.DataFrame(columns=["instance_id", "retriever", "k"])
        return empty, pd.DataFrame(columns=["retriever", "k", "n_instances"])
    opts = selection.options
    cap = int(opts.get("max_instances", DEFAULT_MAX_INSTANCES))
    if selection.filters:
        frame = apply_filters(store.instances_frame(name), selection.filters)
        ids = frame["instance_id"].head(cap).tolist()
    else:
        ids = store.list_instance_ids(name, cap)
    instances = store.load_instances(name, ids) if ids else []
    audit = retrieval_audit(
        instances,
        retrievers=tuple(opts.get("retrievers") or DEFAULT_RETRIEVERS),
        ks=tuple(opts.get("ks") or DEFAULT_KS),
        chunk_size=int(opts.get("chunk_size", 220)),
        overlap=int(opts.get("overlap", 40)),
    )
    return audit.per_instance, audit.aggregate


def retrieval_grid_table(store: Any, selection: Selection) -> pd.DataFrame:
    """Mean retrieval diagnostics per (retriever family, k)."""
    return retrieval_audit_frames(store, selection)[1]


@register_table(
    "retrieval_grid",
    title="Retriever family x top-k",
    description="Per retriever and k, averaged over instances: recall of gold passage ids, "
    "full-chain coverage (all gold ids retrieved), evidence F1, distractor rate (retrieved ids "
    "labelled distractor/conflicting) and distinct passages per context. Recall, coverage "
    "and F1 average over instances with gold evidence.",
    reference="SPEC §4; seed 000 App. A.10-A.13, Table 32",
)
def _retrieval_grid_table(store: Any, selection: Selection) -> pd.DataFrame:
    return retrieval_grid_table(store, selection)


@register_figure(
    "retrieval_curves",
    title="Recall, chain coverage and distractor rate vs top-k",
    description="One line per retriever family; x = number of retrieved chunks k.",
    reference="SPEC §4; seed 000 App. A.10-A.13",
)
def retrieval_curves_figure(store: Any, selection: Selection) -> tuple[Any, pd.DataFrame]:
    """Three panels (recall, full-chain coverage, distractor rate) against k per retriever."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    agg = retrieval_grid_table(store, selection)
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(RETRIEVAL_METRICS.values()))
    palette = {"lexical": "#1f77b4", "dense": "#9467bd", "hybrid": "#ff7f0e",
               "iterative": "#8c564b", "oracle": "#2ca02c"}  # fmt: skip
    for name, d in agg.groupby("retriever", sort=False):
        for col, metric in enumerate(RETRIEVAL_METRICS, start=1):
            fig.add_trace(
                go.Scatter(
                    x=d["k"], y=d[metric], mode="lines+markers", name=str(name),
                    legendgroup=str(name), showlegend=col == 1,
                    line={"color": palette.get(str(name)),
                          "dash": "dot" if name == "oracle" else "solid"},
                    hovertemplate="k=%{x}: %{y:.3f}<extra>" + str(name) + "</extra>",
                ),
                row=1, col=col,
            )  # fmt: skip
    fig.update_xaxes(title_text="k", type="log" if len(agg) and agg["k"].max() > 10 else None)
    fig.update_yaxes(range=[0, 1.05])
    fig.update_layout(legend_title_text="retriever", margin={"t": 40})
    return fig, agg
