"""Length & position heatmap: the panels' rows line up (issue 36 item 5).

Every panel shows the same context lengths in the same order, labelled as in the hovers and
tables ("16,000", never "16k" beside "16000"); a length one condition lacks is an empty row in
its panel, never a row that shifts the others.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import demo_into

from core.selection import Selection
from core.store import Store
from core.views.catalog import get_figure


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    store = Store(tmp_path_factory.mktemp("heat") / "demo.duckdb")
    demo_into(store)
    return store


def _panels(fig):
    return [t for t in fig.data if t.type == "heatmap"]


def test_panels_share_rows_in_one_label_format(demo):
    spec = get_figure("oncu_heatmap")
    fig, _ = spec.build(demo, Selection(dataset="controlled-200"))
    panels = _panels(fig)
    assert len(panels) == 2
    rows = ["4,000", "8,000", "16,000"]
    assert all(list(t.y) == rows for t in panels)
    for axis in ("yaxis", "yaxis2"):
        assert list(fig.layout[axis].categoryarray) == rows, axis
        assert fig.layout[axis].type == "category"


def test_a_length_missing_from_one_panel_is_an_empty_row(demo):
    spec = get_figure("oncu_heatmap")
    frame = spec.view(demo, Selection(dataset="controlled-200"))
    drop = (frame["condition"] == "retrieved") & (frame["context_length"] == 8000)
    fig, _ = spec.plot(frame[~drop])
    full, retrieved = _panels(fig)
    assert list(full.y) == list(retrieved.y) == ["4,000", "8,000", "16,000"]
    z = np.asarray(retrieved.z, dtype=float)
    assert np.isnan(z[1]).all() and not np.isnan(z[0]).all()
