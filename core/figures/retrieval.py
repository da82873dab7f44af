"""Figures and tables of the retrieval-only diagnostics (SPEC §4; seed 000 App. A.10-A.13).

Per (instance, retriever family, k): recall of gold passage ids, full-chain coverage, evidence
F1, distractor rate and passages per context, from :func:`core.oncu.conditions.retrieval_audit`
(run by :func:`core.views.retrieval.retrieval_audit_frames`, which returns ``(per_instance,
aggregate)``). Options (declared below, read by the view): ``retrievers`` (default lexical and
oracle, which export in seconds; ``dense`` and ``hybrid`` embed every chunk with a
sentence-transformers model, minutes on a CPU the first time, then the vectors are kept in the
store and reused: :mod:`core.store.embeddings`, :mod:`core.retrieval.dense_fill`), ``ks`` (default
1, 2, 3, 5,
10), ``chunk_size`` (220), ``overlap`` (40) and ``max_instances`` (2,000: ranking every chunk
of every instance is the costly part; ``n_instances`` in the table says how many were
audited). The dataset is ``selection.dataset``, else the dataset of the first selected run.
"""

from __future__ import annotations

import html
import textwrap
from dataclasses import replace

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures import color_for, empty_figure, titled
from core.params import Param
from core.retrieval.retrievers import CHUNK_SIZE, OVERLAP, TOP_K, retriever_param

__all__ = [
    "CHUNK_SIZE",
    "DEFAULT_KS",
    "DEFAULT_MAX_INSTANCES",
    "DEFAULT_RETRIEVERS",
    "KS",
    "MAX_INSTANCES",
    "OFFERED_KS",
    "OVERLAP",
    "RETRIEVAL_METRICS",
    "RETRIEVERS",
    "missing_note",
    "retrieval_curves_figure",
    "retrieval_grid_table",
]

#: Retriever families shown by default: the cheap ones (``dense`` / ``hybrid`` embed every
#: chunk the first time; add them with ``--option retrievers='["lexical","dense"]'``).
DEFAULT_RETRIEVERS = ("lexical", "oracle")
#: Retrieval budgets shown by default.
DEFAULT_KS = (1, 2, 3, 5, 10)
#: Retrieval budgets the Retrieval page offers (the view audits all of them at once, so a
#: change of the top-k selection reads rows already computed).
OFFERED_KS = (1, 2, 3, 5, 8, 10, 16, 20)
#: Instances audited at most (the first ones in dataset order; the table says how many).
DEFAULT_MAX_INSTANCES = 2000
#: Metrics drawn as curves (name -> axis title).
RETRIEVAL_METRICS = {
    "recall": "gold recall",
    "full_chain_coverage": "full-chain coverage",
    "distractor_rate": "distractor rate",
}
#: Retriever families audited (the retriever knob of :mod:`core.retrieval` as a list).
RETRIEVERS = replace(
    retriever_param().many(
        DEFAULT_RETRIEVERS,
        "retriever families (default the cheap lexical and oracle; add dense or hybrid with "
        '--option retrievers=\'["lexical","dense"]\': every chunk is embedded once, '
        "then the vectors are kept in the store and reused)",
    ),
    name="retrievers",
)
#: Retrieval budgets k (the top-k knob of :mod:`core.retrieval` as a list).
KS = replace(TOP_K.many(DEFAULT_KS, "retrieval budgets k (chunks)"), name="ks")
#: Instances audited at most.
MAX_INSTANCES = Param(
    "max_instances",
    int,
    DEFAULT_MAX_INSTANCES,
    "instances audited at most (the first ones)",
    minimum=1,
)

Frames = tuple[pd.DataFrame, pd.DataFrame]


def retrieval_grid_table(frames: Frames) -> pd.DataFrame:
    """Mean retrieval diagnostics per (retriever family, k): the aggregate of ``frames``."""
    return frames[1]


def missing_note(agg: pd.DataFrame) -> str | None:
    """Why instances were left out of the audit (no passage text), with the count; else None."""
    if "missing" not in agg.columns:
        return None
    reasons = agg["missing"].dropna()
    return str(reasons.iloc[0]) if len(reasons) else None


def _wrapped(text: str, width: int = 100) -> str:
    return "<br>".join(textwrap.wrap(html.escape(text), width))


def retrieval_curves_figure(frames: Frames) -> tuple[go.Figure, pd.DataFrame]:
    """Three panels (recall, full-chain coverage, distractor rate) against k per retriever.

    Instances without passage text are not ranked (:func:`core.views.retrieval.audit_with_text`):
    with none left the figure says why instead of drawing; otherwise a note under the panels
    counts them.
    """
    agg = retrieval_grid_table(frames)
    note = missing_note(agg)
    if note and len(agg) and not agg["n_instances"].any():
        return empty_figure(_wrapped(f"Missing: {note}")), agg
    fig = make_subplots(rows=1, cols=3, subplot_titles=list(RETRIEVAL_METRICS.values()))
    names = list(agg["retriever"].unique())
    for name, d in agg.groupby("retriever", sort=False):
        for col, metric in enumerate(RETRIEVAL_METRICS, start=1):
            fig.add_trace(
                go.Scatter(
                    x=d["k"],
                    y=d[metric],
                    mode="lines+markers",
                    name=str(name),
                    legendgroup=str(name),
                    showlegend=col == 1,
                    line={
                        "color": color_for(name, "retriever", names),
                        "dash": "dot" if name == "oracle" else "solid",
                    },
                    hovertemplate="k=%{x}: %{y:.3f}<extra>" + str(name) + "</extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_xaxes(title_text="k", type="log" if len(agg) and agg["k"].max() > 10 else None)
    fig.update_yaxes(range=[0, 1.05])
    fig.update_layout(legend_title_text="retriever", margin={"t": 40})
    titled(fig, y="mean over instances")
    if note:
        text = _wrapped(f"Left out: {note}", 130)
        fig.add_annotation(
            text=text,
            showarrow=False,
            xref="paper",
            yref="paper",
            x=0.0,
            y=-0.25,
            xanchor="left",
            yanchor="top",
            align="left",
            font={"size": 11},
        )
        fig.update_layout(margin={"b": 80 + 16 * (text.count("<br>") + 1)})
    return fig, agg
