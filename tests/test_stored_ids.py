"""``core.types.stored_ids``: the one reader of stored id-list cells (issue 37 item 4).

Seven modules had their own copy and disagreed on a string cell (one id, or none); each now
reads through this one function.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from core.types import stored_ids

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("cell", "ids"),
    [
        (None, []),
        (pd.NA, []),
        (float("nan"), []),
        ("", []),
        ("p0001", ["p0001"]),
        (["p0001", "p0002"], ["p0001", "p0002"]),
        (("p3",), ["p3"]),
        (np.array(["p1", "p2"], dtype=object), ["p1", "p2"]),
        ([1, "p2"], ["1", "p2"]),
        (7, []),
    ],
)
def test_every_kind_of_cell(cell, ids):
    assert stored_ids(cell) == ids


def test_no_module_keeps_a_copy():
    """No other function in core/ reads an id list the same way under another name."""
    copies = []
    for path in sorted((ROOT / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name in (
                "_ids",
                "_id_list",
                "id_list",
                "_as_list",
            ):
                copies.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    # core/attribution/metrics.py reads JSON-encoded lists from meta, core/datasets/results.py a CSV
    # cell and
    # core/datasets/release_files.py a checked JSON field:
    # other inputs, other readers
    others = {
        "core/attribution/metrics.py",
        "core/datasets/results.py",
        "core/datasets/release_files.py",
    }
    assert [c for c in copies if c.split(":")[0] not in others] == []
