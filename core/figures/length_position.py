"""ONCU over length and position: the heatmap, the length curves and the scaling tables."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from core.figures import (
    SCORE_FIELD,
    color_for,
    drill,
    empty_figure,
    titled,
)
from core.oncu.metrics import (
    DEFAULT_GROUP_KEY,
    LENGTH_RULE,
    ONCU_CONDITIONS,
    SCALING_DISTANCES,
    oncu_groups,
    scaling_length_wide,
)
from core.params import Param
from core.types import CONDITIONS

__all__ = [
    "CONDITIONS_OPTION",
    "CONDITION_LABELS",
    "GROUP_KEY",
    "PLAIN",
    "SCALING_DISTANCE",
    "condition_order",
    "length_position_table",
    "oncu_groups_table",
    "oncu_heatmap_figure",
    "oncu_length_curves_figure",
    "scaling_contrasts_table",
    "scaling_length_table",
    "scaling_regression_table",
]


#: Display names of the conditions (figures and tables).
CONDITION_LABELS = {
    "no_evidence": "No evidence",
    "full_context": "Full context",
    "retrieved": "Retrieved",
    "oracle": "Oracle",
}


#: Contextual conditions of the ONCU views.
CONDITIONS_OPTION = Param(
    "conditions",
    str,
    ONCU_CONDITIONS,
    "contextual conditions of the ONCU views",
    choices=tuple(CONDITIONS),
    multiple=True,
    section="SPEC §6.5",
)


#: Metadata cells of an ONCU group.
GROUP_KEY = Param(
    "group_key",
    str,
    DEFAULT_GROUP_KEY,
    "metadata cells that define an ONCU group. " + LENGTH_RULE,
    multiple=True,
    section="SPEC §6.5; seed 000 §3.3; issue 15 item 6",
)


def condition_order(df: pd.DataFrame, col: str = "condition") -> pd.DataFrame:
    """``df`` sorted by the canonical condition order (then by run)."""
    rank = {c: i for i, c in enumerate(CONDITIONS)}
    if df.empty or col not in df.columns:
        return df
    key = df[col].map(lambda c: rank.get(c, len(rank)))
    return (
        df.assign(_k=key)
        .sort_values(["_k"] + [c for c in ("run",) if c in df])
        .drop(columns="_k")
        .reset_index(drop=True)
    )


#: Drill-downs of these figures list plain-condition predictions only (no intervention rows).
PLAIN = {"variant": ""}


def oncu_groups_table(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    conditions: Sequence[str] = CONDITIONS_OPTION.default,
    group_key: Sequence[str] = GROUP_KEY.default,
) -> pd.DataFrame:
    """Per-group ONCU with its validity audit (one row per group and contextual condition).

    Columns of :func:`core.oncu.metrics.oncu_groups` (``n``, ``missing``, ``n_instances``, the
    length
    cell as ``context_length`` with ``length_cell``) plus ``status``. ``group_key=("instance_id",)``
    gives per-instance ONCU.
    """
    if df.empty:
        return pd.DataFrame(columns=["run", "condition", "valid", "invalid_reason"])
    g = oncu_groups(df, score_field=score_field, group_key=tuple(group_key))
    g = g[g["condition"].isin(tuple(conditions))]
    g = g.assign(
        status=np.select(
            [~g["valid"], g["oncu_raw"] > 1, g["oncu_raw"] < 0],
            ["invalid", "above_oracle", "below_baseline"],
            default="in_band",
        )
    )
    return g.reset_index(drop=True)


# ---------------------------------------------------------------- length and position
def length_position_table(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    conditions: Sequence[str] = CONDITIONS_OPTION.default,
    group_key: Sequence[str] = GROUP_KEY.default,
) -> pd.DataFrame:
    """Mean clipped ONCU over valid groups per (run, condition, context length, position).

    Groups use the ONCU group key; the cell value averages the valid groups whose length and
    evidence position match (SPEC §6.7). ``context_length`` is the group's length cell (the
    length bucket where the auto rule bucketed, see ``length_cell``); ``missing`` counts the
    NaN-scored predictions among ``n``.
    """
    g = oncu_groups_table(df, score_field=score_field, conditions=conditions, group_key=group_key)
    cols = [
        "run",
        "condition",
        "context_length",
        "evidence_position",
        "oncu_clipped",
        "oncu_raw",
        "valid_groups",
        "total_groups",
        "n",
        "missing",
        "length_cell",
    ]
    if g.empty or "context_length" not in g.columns or "evidence_position" not in g.columns:
        return pd.DataFrame(columns=cols)
    keys = ["run", "condition", "context_length", "evidence_position"]
    agg = g.groupby(keys, dropna=False, sort=True).agg(
        oncu_clipped=("oncu_clipped", "mean"),
        oncu_raw=("oncu_raw", "mean"),
        valid_groups=("valid", "sum"),
        total_groups=("valid", "size"),
        n=("n", "sum"),
        missing=("missing", "sum"),
    )
    out = agg.reset_index()
    out["valid_groups"] = out["valid_groups"].astype(int)
    out["n"] = out["n"].astype(int)
    out["missing"] = out["missing"].astype(int)
    out["length_cell"] = g["length_cell"].iloc[0] if "length_cell" in g.columns else None
    out["context_length"] = pd.to_numeric(out["context_length"], errors="coerce")
    return condition_order(out.sort_values(keys).reset_index(drop=True))


def _position_order(values: Any) -> list[str]:
    named = ["front", "middle", "end", "scattered"]
    vals = sorted({str(v) for v in values})
    return [v for v in named if v in vals] + [v for v in vals if v not in named]


def oncu_heatmap_figure(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    conditions: Sequence[str] = CONDITIONS_OPTION.default,
    group_key: Sequence[str] = GROUP_KEY.default,
) -> tuple[go.Figure, pd.DataFrame]:
    """Heatmap panels (one per contextual condition) of clipped ONCU, length x position."""
    t = length_position_table(
        df, score_field=score_field, conditions=conditions, group_key=group_key
    )
    if t.empty:
        return empty_figure("No valid ONCU groups for this selection"), t
    run = str(t["run"].iloc[0])
    t1 = t[t["run"] == run]
    conds = [c for c in CONDITIONS if c in set(t1["condition"])]
    positions = _position_order(t1["evidence_position"])
    lengths = sorted(set(t1["context_length"].dropna().astype(int)))
    fig = make_subplots(
        rows=1,
        cols=len(conds),
        shared_yaxes=True,
        subplot_titles=[CONDITION_LABELS.get(c, c) for c in conds],
    )
    for i, cond in enumerate(conds, start=1):
        d = t1[t1["condition"] == cond]
        z = d.pivot_table(
            index="context_length",
            columns="evidence_position",
            values="oncu_clipped",
            aggfunc="mean",
        )
        z = z.reindex(index=lengths, columns=positions)
        cells = d.assign(
            context_length=d["context_length"].astype(int),
            evidence_position=d["evidence_position"].astype(str),
        ).set_index(["context_length", "evidence_position"])
        custom = [[_heat_cell(cells, run, cond, n, pos) for pos in positions] for n in lengths]
        fig.add_trace(
            go.Heatmap(
                z=z.to_numpy(float),
                x=positions,
                y=[f"{n:,}" for n in lengths],
                customdata=custom,
                zmin=0,
                zmax=1,
                colorscale="Viridis",
                showscale=i == len(conds),
                colorbar={"title": "ONCU"},
                hovertemplate="length %{y}, position %{x}: %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=i,
        )
    bucketed = "length_cell" in t1.columns and (t1["length_cell"] == "bucket").any()
    fig.update_yaxes(
        title_text="context length bucket (tokens)" if bucketed else "context length (tokens)",
        row=1,
        col=1,
    )
    # every panel: the same rows in the same order (a length missing from one panel is an
    # empty row there, never a shifted one), labelled as in the hovers and the tables
    fig.update_yaxes(
        type="category", categoryorder="array", categoryarray=[f"{n:,}" for n in lengths]
    )
    fig.update_layout(margin={"t": 40}, title_text=f"run {run}" if t["run"].nunique() > 1 else None)
    titled(fig, "evidence position", legend_below=False)
    drill.declare(fig, _HEAT_KEYS, fixed=PLAIN | drill.length_fixed(t1))
    return fig, t1.reset_index(drop=True)


#: What identifies a heatmap cell (drill-down keys).
_HEAT_KEYS = ("run", "condition", "context_length", "evidence_position")


def _heat_cell(cells: pd.DataFrame, run: str, cond: str, length: int, pos: str) -> list[Any]:
    """The customdata of one heatmap cell: ``[run, condition, length, position, n]``."""
    key = (length, pos)
    n = int(cells.loc[key, "n"].sum()) if key in cells.index else 0
    return [str(run), str(cond), int(length), str(pos), n]


def oncu_length_curves_figure(
    df: pd.DataFrame,
    *,
    score_field: str = SCORE_FIELD.default,
    conditions: Sequence[str] = CONDITIONS_OPTION.default,
    group_key: Sequence[str] = GROUP_KEY.default,
) -> tuple[go.Figure, pd.DataFrame]:
    """Per-length curves of clipped ONCU over evidence position."""
    t = length_position_table(
        df, score_field=score_field, conditions=conditions, group_key=group_key
    )
    if t.empty:
        return empty_figure("No valid ONCU groups for this selection"), t
    positions = _position_order(t["evidence_position"])
    lengths = sorted(set(t["context_length"].dropna().astype(int)))
    # one panel per run (two a row): the curves of different runs would share colour and dash
    runs = list(dict.fromkeys(t["run"].astype(str)))
    ncols = min(len(runs), 2)
    nrows = -(-len(runs) // ncols)
    # positions labelled under the bottom row only: a run's title is not on the ticks above it
    fig = make_subplots(
        rows=nrows,
        cols=ncols,
        shared_xaxes=True,
        vertical_spacing=0.4 / nrows,
        subplot_titles=runs if len(runs) > 1 else None,
    )
    shown: set[str] = set()  # one legend entry per length · condition
    for (run, cond), d in t.groupby(["run", "condition"], sort=False):
        row, col = divmod(runs.index(str(run)), ncols)
        for n in lengths:
            e = d[d["context_length"] == n].set_index("evidence_position").reindex(positions)
            label = f"{n:,} · {CONDITION_LABELS.get(cond, cond)}"
            fig.add_trace(
                go.Scatter(
                    x=positions,
                    y=e["oncu_clipped"],
                    mode="lines+markers",
                    name=label,
                    legendgroup=label,
                    showlegend=label not in shown,
                    line={
                        "color": color_for(n, "length", lengths),
                        "dash": "solid" if cond == "full_context" else "dash",
                    },
                    hovertemplate=f"{run} · {label}<br>%{{x}}: %{{y:.3f}}<extra></extra>",
                ),
                row=row + 1,
                col=col + 1,
            )
            shown.add(label)
    fig.update_xaxes(categoryorder="array", categoryarray=positions)
    if len(runs) % ncols:  # an odd last row: the panel over the gap keeps its labels
        fig.update_xaxes(showticklabels=True, row=nrows - 1, col=ncols)
    fig.update_yaxes(range=[0, 1.05])
    bottom_left = (nrows - 1) * ncols + 1  # the shared x title under the bottom-left panel
    fig.update_layout(
        {f"xaxis{bottom_left if bottom_left > 1 else ''}_title_text": "evidence position"},
        yaxis_title_text="clipped ONCU",
    )
    fig.update_layout(margin={"t": 30}, legend_title_text="length · condition")
    titled(fig)
    return fig, t


# ------------------------------------------------------ scaling statistics (SPEC §6.7)
#: The distance term of the scaling regression.
SCALING_DISTANCE = Param(
    "scaling_distance",
    str,
    "middle",
    "distance term of the scaling OLS: middle = "
    "|position fraction - 0.5| (default); end = 1 - position fraction, the published "
    "specification (collinear with the position term: the pseudo-inverse splits the slope)",
    choices=SCALING_DISTANCES,
    section="SPEC §6.7; seed 000 Table 30",
)


def scaling_length_table(report: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Seed 000 Table 10 layout: mean clipped ONCU per run, one column per condition x length.

    ``report`` is :func:`core.oncu.metrics.scaling_report`'s (the view
    :func:`core.views.oncu.scaling_result`); :func:`core.oncu.metrics.scaling_length_wide` arranges
    it; ``note`` names the (condition, length) cells without a valid group.
    """
    return scaling_length_wide(report["by_length"])


def scaling_contrasts_table(report: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Seed 000 Table 29 scaling rows per run: 4K - 32K, final decile, retrieved - full.

    Paired over matched length x position cells with a bootstrap CI, standardized effect,
    p (normal approximation by default; ``p_test`` names it) and Holm-adjusted p across every
    run's contrasts (:func:`core.oncu.metrics.scaling_report`); ``note`` says what is missing.
    """
    return report["contrasts"].copy()  # the report is cached: hand out a copy


def scaling_regression_table(report: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Seed 000 Table 30 scaling OLS per (run, condition) over the length x position cells.

    :func:`core.oncu.metrics.scaling_regression`: coefficient, SE, t, p per term (normal
    approximation by default; ``p_test`` names it), ``p_bh`` (Benjamini-Hochberg across every
    row of the table), R², cells used (``n``), cells left out (``left_out``) and ``note``.
    """
    return report["regression"].copy()  # the report is cached: hand out a copy
