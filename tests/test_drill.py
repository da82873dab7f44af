"""Drill-downs list exactly the predictions behind the clicked element (issue 15, item 7).

On a fixture store (the released Qwen2.5-14B controlled and HotpotQA outputs of the ONCU paper,
``../shared/fixtures/oncu_release``, the embedded-reader demo on controlled-200, and DOLCE
probes and CUE-R interventions of that reader on four controlled-200 instances), every
registered figure is built for several selections; for every clickable point of every trace
that carries drill data, the point is turned into a cell as Streamlit reports a click
(``{"customdata": [...]}``, the figure serialized to JSON as the browser receives it), and
:func:`core.views.instances_behind` must list rows that match every key of the point, as many
as the point's n, and, where the point is a mean of a score, rows whose mean is the point's
value. A hand-checked case lists the failure-label segment the bug report named against the
published labels and a direct SQL query of the store.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from conftest import RELEASE_CONTROLLED, build_release_store, shared_fixture

from core.backends import make_backend
from core.datasets.results import import_results
from core.execution.runs import run_interventions, run_probes
from core.figures import Selection
from core.figures.drill import FRAME_KEY, cell_from_point, drill_spec, point_values
from core.oncu.metrics import BUCKET_LENGTH, DEFAULT_GROUP_KEY, EXACT_LENGTH, length_bucket
from core.store import Store
from core.views import common as views_common
from core.views import instances_behind
from core.views.catalog import figure_names, get_figure, get_table
from screens.parts.display import table_cell

#: Options that keep the retrieval and CRUX views small (other views ignore them).
_SMALL = {
    "max_instances": 8,
    "retrievers": ["lexical"],
    "ks": [1, 3],
    "crux_retrievers": ["lexical"],
    "crux_ks": [3],
}
#: The selections every figure is built for: one dataset each, two runs side by side (run
#: and condition must not swap), and another score field.
SELECTIONS = (
    Selection(dataset="controlled", options=_SMALL),
    Selection(dataset="hotpotqa", options=_SMALL),
    Selection(dataset="controlled-200", options=_SMALL),
    Selection(runs=("controlled", "hotpotqa"), options=_SMALL),
    Selection(dataset="controlled", score_field="em_strict", options=_SMALL),
)
#: The figures a page makes clickable (``show_figure`` with ``drill``): each must declare
#: its drill-down and have points on the fixture store.
DRILLED = {
    "condition_matrix",
    "oncu_audit",
    "failure_breakdown",
    "oncu_heatmap",
    "fanin_degradation",
    "dolce_lambda_k_map",
}
#: Mean-of-a-score points: figure -> (the trace's axis holding the score panel, scale).
MEANS = {"condition_matrix": ("x", 1.0), "fanin_degradation": ("x", 100.0)}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Iterator[Store]:
    """The fixture store, with the drill frames memoized per (selection, frame) so that the
    hundreds of clicks filter one frame each (the frame is what the figures' views build;
    the filtering is what is tested)."""
    path = tmp_path_factory.mktemp("drill") / "fixture.duckdb"
    store = build_release_store(path, hotpotqa=True, demo=True)
    reader = make_backend("embedded")
    run_probes(store, "controlled-200", reader, name="probes", limit=4)
    run_interventions(store, "controlled-200", reader, name="cuer", hardness=("hard",))
    frames: dict[tuple[str, str], pd.DataFrame] = {}
    build = views_common._drill_frame

    def memo(store: Store, selection: Selection, which: str) -> pd.DataFrame:
        key = (str(store.path), views_common.selection_key(selection), which)
        if key not in frames:
            frames[key] = build(store, selection, which)
        return frames[key].copy()

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(views_common, "_drill_frame", memo)
        yield store


@pytest.fixture(scope="module")
def off_grid(store, tmp_path_factory) -> Store:
    """The released controlled outputs with each instance's context length moved off the
    1K-2K-4K ladder (3,500-16,000 tokens, many distinct values): the default ONCU group key
    then groups by length bucket, and a drill-down must list every exact length in the
    clicked bucket."""
    rows = list(csv.DictReader(shared_fixture(RELEASE_CONTROLLED).open()))
    for r in rows:
        r["context_length"] = str(int(r["context_length"]) - int(r["sample_id"][-3:]) % 500)
    path = tmp_path_factory.mktemp("offgrid") / "controlled.per_sample_metrics.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    off = Store(path.with_suffix(".duckdb"))
    import_results(off, path, name="offgrid")
    return off


def _clicks(fig) -> Iterator[tuple[int, Any, dict[str, Any]]]:
    """Every clickable point as Streamlit reports it: ``(trace, point index, point)``, with
    the customdata taken from the figure's JSON (what the browser holds); a heatmap point's
    index is ``(row, column)``."""
    traces = json.loads(fig.to_json())["data"]
    for i, trace in enumerate(traces):
        custom = trace.get("customdata")
        if custom is None:
            continue
        assert isinstance(custom, list), f"trace {i}: customdata is not a list: {custom!r}"
        if trace["type"] == "heatmap":
            for r, row in enumerate(custom):
                for c, cell in enumerate(row):
                    yield i, (r, c), {"customdata": cell}
        else:
            for j, row in enumerate(custom):
                yield i, j, {"customdata": row}


def _value(trace, index: Any) -> float:
    """The plotted value of one point: y of a vertical bar or a scatter, x of a horizontal
    bar, z of a heatmap cell."""
    if trace.type == "heatmap":
        return float(np.asarray(trace.z, dtype=float)[index])
    if trace.type == "bar" and trace.orientation == "h":
        return float(trace.x[index])
    return float(trace.y[index])


def _matches(series: pd.Series, value: Any) -> pd.Series:
    """Independent of ``core.views``: None is missing, "" missing or empty, numbers by value."""
    if value is None:
        return series.isna()
    if value == "":
        return series.isna() | (series.astype(str) == "")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return pd.to_numeric(series, errors="coerce") == value
    return series.astype(str) == str(value)


#: At most this many points of one figure and selection are clicked, evenly spaced over every
#: trace, first and last included (a figure of exact lengths has hundreds of cells, each the
#: same query of another cell: 13 s for all of them).
MOST_CLICKS = 120


def _spread(items: list, most: int = MOST_CLICKS) -> list:
    """At most ``most`` of ``items``, evenly spaced, the first and the last included."""
    if len(items) <= most:
        return items
    picks = np.unique(np.linspace(0, len(items) - 1, most).round().astype(int))
    return [items[i] for i in picks]


def _exercise(store: Store, name: str, selection: Selection) -> dict[str, int]:
    """Click the points of figure ``name`` for ``selection`` (every one, or
    :data:`MOST_CLICKS` spread over them); return counts of what was checked (``points``,
    ``means``, ``nonempty``)."""
    try:
        fig, _ = get_figure(name).build(store, selection)
    except ValueError:  # nothing to show for this selection
        return {}
    spec = drill_spec(fig)
    if spec is None:
        return {}
    keys = spec["keys"]
    fixed = spec.get("fixed") or {}
    runs = set(store.runs_frame()["run_id"])
    seen: dict[str, int] = defaultdict(int)
    failure_totals: dict[tuple, list] = defaultdict(list)
    clicks = list(_clicks(fig))
    if name != "failure_breakdown":  # its segments are summed per (run, condition) below
        clicks = _spread(clicks)
    for t, index, point in clicks:
        got = point_values(fig, point)
        assert got is not None, f"{name} trace {t} point {index}: no drill data in {point}"
        values, n = got
        cell = cell_from_point(fig, point)
        assert cell[FRAME_KEY] == spec["frame"]
        assert {k: cell[k] for k in keys} == values
        assert all(cell[k] == v for k, v in fixed.items())
        if "run" in values:  # the key is a run of the store, never a condition
            assert values["run"] in runs, f"{name}: run={values['run']!r} is not a run"
        rows = instances_behind(store, selection, cell, limit=None)
        where = f"{name} {selection} trace {t} point {index} cell {cell}"
        assert len(rows) == n, f"{where}: {len(rows)} rows listed, the point says n={n}"
        for key, value in {**values, **fixed}.items():
            if key == "context_length" and fixed.get("length_cell") == "bucket":
                assert (length_bucket(rows[key]) == value).all(), f"{where}: another bucket"
            elif key in rows.columns:
                assert _matches(rows[key], value).all(), f"{where}: rows with another {key}"
        seen["points"] += 1
        seen["nonempty"] += bool(n)
        trace = fig.data[t]
        if name in MEANS and n and (trace.xaxis or "x") == MEANS[name][0]:
            mean = MEANS[name][1] * rows[selection.score_field].astype(float).mean()
            assert mean == pytest.approx(_value(trace, index), abs=1e-9), where
            seen["means"] += 1
        if name == "failure_breakdown":
            failure_totals[(values["run"], values["condition"])].append((n, _value(trace, index)))
    # a failure segment is n of the labelled predictions of its (run, condition), in percent
    for (run, cond), segs in failure_totals.items():
        total = sum(n for n, _ in segs)
        rows = instances_behind(
            store, selection, {"run": run, "condition": cond, "variant": ""}, limit=None
        )
        assert total == int(rows["failure_label"].notna().sum()), (run, cond)
        for n, pct in segs:
            assert pct == pytest.approx(100.0 * n / total, abs=1e-9), (run, cond, n)
    return dict(seen)


@pytest.mark.slow
@pytest.mark.parametrize("name", figure_names())
def test_every_point_of_every_figure_lists_exactly_its_predictions(store, name):
    checked = defaultdict(int)
    # a figure no page makes clickable is built for the first two selections only (one dataset
    # each): whether a figure declares a drill-down does not depend on the selection
    for selection in SELECTIONS if name in DRILLED else SELECTIONS[:2]:
        for k, v in _exercise(store, name, selection).items():
            checked[k] += v
    if name in DRILLED:
        assert checked["nonempty"] > 0, f"{name}: no clickable point on the fixture store"
        if name in MEANS:
            assert checked["means"] > 0
    else:
        assert not checked, f"{name} declares a drill-down but no page makes it clickable"


def test_the_failure_label_segment_of_a_run_and_condition(store):
    """The bug: Failure labels > a segment listed "0 predictions behind
    condition=hotpot-emb, run=full_context" (run and condition swapped, the label ignored)."""
    selection = Selection(runs=("controlled", "hotpotqa"))
    fig, _ = get_figure("failure_breakdown").build(store, selection)
    trace = next(t for t in fig.data if t.name == "integration")
    j = next(
        j
        for j, row in enumerate(trace.customdata)
        if row[0] == "controlled" and row[1] == "full_context"
    )
    point = {
        "customdata": json.loads(fig.to_json())["data"][list(fig.data).index(trace)]["customdata"][
            j
        ]
    }
    cell = cell_from_point(fig, point)
    assert cell == {
        "run": "controlled",
        "condition": "full_context",
        "failure_label": "integration",
        "variant": "",
        FRAME_KEY: "predictions",
    }
    rows = instances_behind(store, selection, cell, limit=None)
    # the published labels: the "direct" method (full context) of the released outputs
    published = sorted(
        r["sample_id"]
        for r in csv.DictReader(shared_fixture(RELEASE_CONTROLLED).open())
        if r["method"] == "direct" and r["failure_type"] == "evidence_integration_failure"
    )
    with duckdb.connect(str(store.path), read_only=True) as con:
        stored = sorted(
            x
            for (x,) in con.execute(
                "SELECT instance_id FROM scores WHERE run_id = 'controlled' AND condition = "
                "'full_context' AND variant = '' AND failure_label = 'integration'"
            ).fetchall()
        )
    assert len(published) == 20 and stored == published
    assert sorted(rows["instance_id"]) == published
    assert point["customdata"][-1] == 20
    assert set(rows["run"]) == {"controlled"} and set(rows["condition"]) == {"full_context"}
    assert set(rows["failure_label"]) == {"integration"}
    # the other run's segment of the same condition and label is its own 45 predictions
    other = instances_behind(store, selection, dict(cell, run="hotpotqa"), limit=None)
    assert len(other) == 45 and set(other["run"]) == {"hotpotqa"}


# ------------------------------------------------------------------------------- tables
@pytest.mark.parametrize(
    ("name", "selection"),
    [
        ("oncu_groups", Selection(dataset="controlled")),
        ("oncu_groups", Selection(dataset="hotpotqa")),
        ("length_position", Selection(dataset="controlled")),
        ("oncu_groups", Selection(runs=("controlled", "hotpotqa"))),
    ],
)
def test_a_selected_table_row_lists_exactly_its_predictions(store, name, selection):
    """Tables of plain predictions (``show_table(..., drill=True)``): every row's cell lists
    its n predictions, all with the row's key values and plain (no intervention rows)."""
    spec = get_table(name)
    table = spec.build(store, selection)
    assert len(table) > 0 and "n" in table.columns
    for i in range(len(table)):
        cell = table_cell(spec, table, i)
        assert cell["variant"] == "" and cell["run"] in selection.runs + ("controlled", "hotpotqa")
        rows = instances_behind(store, selection, cell, limit=None)
        assert len(rows) == int(table.iloc[i]["n"]), (name, cell)
        for key, value in cell.items():
            if key in rows.columns:
                assert _matches(rows[key], value).all(), (name, cell, key)
        assert (rows["variant"].fillna("") == "").all()


def test_a_table_row_cell_keeps_missing_cells_missing():
    """A NaN cell (HotpotQA has no context length) is None, numbers are plain Python."""
    spec = get_table("oncu_groups")
    table = pd.DataFrame(
        {
            "run": ["r"],
            "condition": ["oracle"],
            "context_length": [math.nan],
            "evidence_density": [np.float64(0.25)],
            "n": [np.int64(3)],
        }
    )
    cell = table_cell(spec, table, 0)
    assert cell == {
        "run": "r",
        "condition": "oracle",
        "context_length": None,
        "evidence_density": 0.25,
        "variant": "",
    }
    assert type(cell["evidence_density"]) is float


# ------------------------------------------------------------------------- length cells
def _key(length: str) -> list[str]:
    return [length if k == "context_length" else k for k in DEFAULT_GROUP_KEY]


@pytest.mark.parametrize("length", ["context_length", EXACT_LENGTH, BUCKET_LENGTH])
def test_group_points_with_a_length_cell_list_their_predictions(off_grid, length):
    """ONCU group points and heatmap cells whose length cell is exact or a length bucket
    (the default key buckets these off-grid lengths) list exactly their n predictions."""
    selection = Selection(dataset="offgrid", options={"group_key": _key(length)})
    bucketed = length != EXACT_LENGTH
    for name in ("oncu_audit", "oncu_heatmap"):
        fig, _ = get_figure(name).build(off_grid, selection)
        assert (drill_spec(fig)["fixed"].get("length_cell") == "bucket") == bucketed, name
        checked = _exercise(off_grid, name, selection)
        assert checked["nonempty"] > 0, name
    for name in ("oncu_groups", "length_position"):
        spec = get_table(name)
        table = spec.build(off_grid, selection)
        for i in _spread(list(range(len(table)))):
            cell = table_cell(spec, table, i)
            assert (cell.get("length_cell") == "bucket") == bucketed
            rows = instances_behind(off_grid, selection, cell, limit=None)
            assert len(rows) == int(table.iloc[i]["n"]), (name, cell)
            if bucketed:
                assert set(length_bucket(rows["context_length"])) <= {cell["context_length"]}
    # a bucket spans several exact lengths
    cell = {
        "run": "offgrid",
        "condition": "oracle",
        "variant": "",
        "context_length": 4000,
        "length_cell": "bucket",
    }
    rows = instances_behind(off_grid, selection, cell, limit=None)
    assert rows["context_length"].nunique() > 1 and len(rows) == 67
