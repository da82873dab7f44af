"""ONCU group guardrails (issue 15 item 6): length buckets, the small-grid rule, group sizes,
the small-group warning with a coarser key, missing (NaN) scores, per-instance ONCU.

The HotpotQA checks use the real 53-record fixture (``../shared/fixtures/hotpotqa``) imported
from its original file (exact token counts as ``context_length``) and run with the embedded
baseline reader on the four conditions; they skip when ``../shared`` is absent.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import shared_fixture

from core.oncu.metrics import (
    BUCKET_LENGTH,
    DEFAULT_GROUP_KEY,
    EXACT_LENGTH,
    GRID_MAX_VALUES,
    LENGTH_BOUNDARIES,
    LENGTH_LADDER,
    coarser_group_key,
    group_size_distribution,
    length_bucket,
    on_length_grid,
    oncu_groups,
    oncu_summary,
    resolve_length_cell,
)

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
FOUR = ["no_evidence", "full_context", "retrieved", "oracle"]
_EXACT_KEY = tuple(EXACT_LENGTH if k == "context_length" else k for k in DEFAULT_GROUP_KEY)


# ------------------------------------------------------------------------- length bucket
@pytest.mark.parametrize(
    ("length", "bucket"),
    [
        # hand-checked: boundaries at the geometric means 1000 * 2 ** (i + 0.5)
        (1, 1000),
        (759, 1000),
        (1000, 1000),
        (1414, 1000),
        (1415, 2000),
        (2000, 2000),
        (2237, 2000),
        (2828, 2000),
        (2829, 4000),
        (4000, 4000),
        (5656, 4000),
        (5657, 8000),
        (8000, 8000),
        (11313, 8000),
        (11314, 16000),
        (16000, 16000),
        (22627, 16000),
        (22628, 32000),
        (32000, 32000),
        (45254, 32000),
        (45255, 64000),
        (90509, 64000),
        (90510, 128000),
        (128000, 128000),
        (500000, 128000),
    ],
)
def test_length_bucket_hand_checked(length, bucket):
    assert length_bucket([length])[0] == bucket
    assert length_bucket([str(length)])[0] == bucket  # lengths read as text bucket the same


def test_length_bucket_boundaries_and_missing():
    assert LENGTH_LADDER == (1000, 2000, 4000, 8000, 16000, 32000, 64000, 128000)
    assert [round(b, 1) for b in LENGTH_BOUNDARIES] == [
        1414.2,
        2828.4,
        5656.9,
        11313.7,
        22627.4,
        45254.8,
        90509.7,
    ]
    # a value exactly on a boundary goes up
    assert length_bucket([1000 * math.sqrt(2)])[0] == 2000
    out = length_bucket([None, float("nan"), "4K", 0, -5])
    assert np.isnan(out).all()


def test_preset_lengths_are_fixed_points_so_preset_grids_never_change():
    from core.datasets.controlled import LENGTHS, PRESETS, preset_cells

    for preset in PRESETS:
        lengths = sorted({c["context_length"] for c in preset_cells(preset)})
        assert list(length_bucket(lengths)) == lengths, preset
    assert list(length_bucket(list(LENGTHS))) == list(LENGTHS)


# ----------------------------------------------------------------------------- grid rule
def _frame(lengths, per_value=1):
    rows = []
    for i, n in enumerate(lengths):
        for r in range(per_value):
            rows.append({"instance_id": f"i{i}-{r}", "context_length": n})
    return pd.DataFrame(rows)


def test_small_grid_rule():
    grid = [1000 + 250 * i for i in range(GRID_MAX_VALUES)]
    assert on_length_grid(_frame(grid, per_value=2))  # 12 values, 2 instances each
    assert not on_length_grid(_frame(grid + [9999], per_value=2))  # 13 distinct values
    assert not on_length_grid(_frame([759, 801, 860, 1306, 2237]))  # one instance per value
    assert on_length_grid(_frame([4000, 8000, 16000], per_value=67))  # the controlled grid
    assert on_length_grid(_frame(["4K", "8K", "12K"]))  # labels: compared as given
    assert on_length_grid(pd.DataFrame({"instance_id": ["a"], "context_length": [None]}))


def test_resolve_length_cell():
    exact = _frame(range(700, 760))  # 60 exact token counts
    assert resolve_length_cell(exact, DEFAULT_GROUP_KEY) == "bucket"
    assert resolve_length_cell(exact, _EXACT_KEY) == "exact"
    assert resolve_length_cell(_frame([4000, 8000], 5), DEFAULT_GROUP_KEY) == "exact"
    assert resolve_length_cell(_frame([4000, 8000], 5), ("source", BUCKET_LENGTH)) == "bucket"
    assert resolve_length_cell(exact, ("source",)) is None
    with pytest.raises(ValueError, match="one length cell"):
        resolve_length_cell(exact, ("context_length", BUCKET_LENGTH))


# ------------------------------------------------------------------ groups on a toy frame
def _scored(lengths, scores=None):
    """Four conditions per instance; position alternates front/end."""
    rows = []
    for i, n in enumerate(lengths):
        s = (scores or {}).get(
            i, {"no_evidence": 0.0, "oracle": 1.0, "full_context": 0.5, "retrieved": 1.0}
        )
        for cond, v in s.items():
            rows.append(
                {
                    "source": "toy",
                    "model": "m",
                    "reasoning_type": "multi_hop",
                    "context_length": n,
                    "evidence_position": "front",
                    "evidence_density": "low",
                    "distractor_similarity": "none",
                    "instance_id": f"i{i}",
                    "condition": cond,
                    "f1_relaxed": v,
                    "gold_ids": ["p1"],
                }
            )
    return pd.DataFrame(rows)


def test_default_key_buckets_exact_lengths_and_exact_key_keeps_them():
    lengths = [700 + 37 * i for i in range(14)] + [1500, 1600, 2100]  # 17 distinct
    df = _scored(lengths)
    auto = oncu_groups(df)
    assert sorted(set(auto["context_length"])) == [1000, 2000]
    assert set(auto["length_cell"]) == {"bucket"}
    sizes = auto.drop_duplicates("context_length").set_index("context_length")["n_instances"]
    assert sizes.to_dict() == {1000: 14, 2000: 3}  # 700..1181 -> 1K; 1500, 1600, 2100 -> 2K
    exact = oncu_groups(df, group_key=_EXACT_KEY)
    assert len(exact) == 2 * 17 and set(exact["length_cell"]) == {"exact"}
    assert sorted(set(exact["context_length"])) == sorted(lengths)


def test_data_on_a_grid_keeps_its_exact_lengths():
    df = _scored([4000] * 5 + [8000] * 5 + [12000] * 5)  # 12000 is not a ladder value
    auto = oncu_groups(df)
    assert sorted(set(auto["context_length"])) == [4000, 8000, 12000]
    assert set(auto["length_cell"]) == {"exact"}
    pd.testing.assert_frame_equal(
        auto.drop(columns="length_cell"),
        oncu_groups(df, group_key=_EXACT_KEY).drop(columns="length_cell"),
    )


def test_missing_scores_are_counted_and_skipped_never_zero():
    df = _scored([4000] * 3)
    df.loc[(df["instance_id"] == "i0") & (df["condition"] == "full_context"), "f1_relaxed"] = np.nan
    g = oncu_groups(df).set_index("condition")
    assert (g.loc["full_context", "n"], g.loc["full_context", "missing"]) == (3, 1)
    assert g.loc["full_context", "s_c"] == pytest.approx(0.5)  # mean of the two scored
    assert g.loc["retrieved", "missing"] == 0
    s = oncu_summary(df, ci=False).set_index("condition")
    assert (s.loc["full_context", "n"], s.loc["full_context", "missing"]) == (3, 1)
    assert s.loc["full_context", "oncu_clipped"] == pytest.approx(0.5)


def test_group_size_distribution_hand_values():
    d = group_size_distribution([1, 1, 1, 2, 3, 4, 5, 28])
    assert {k: d[k] for k in ("n=1", "n=2-4", "n>=5")} == {"n=1": 3, "n=2-4": 3, "n>=5": 2}
    assert (d["median"], d["small"], d["groups"], d["warning"]) == (2.5, 6, 8, True)
    half = group_size_distribution([1, 5])  # exactly half small: no warning ("most")
    assert not half["warning"]
    assert not group_size_distribution([])["warning"]


def test_summary_warns_and_the_coarser_key_fixes_it():
    # 12 instances, each its own evidence position -> 12 one-instance groups
    df = _scored([4000] * 12)
    df["evidence_position"] = df["instance_id"]
    s = oncu_summary(df, ci=False).iloc[0]
    assert s["small_group_warning"] and s["small_groups"] == s["valid_groups"] == 12
    assert s["group_sizes"] == {"n=1": 12, "n=2-4": 0, "n>=5": 0}
    assert s["median_group_size"] == 1.0
    coarser = s["coarser_group_key"]
    assert "evidence_position" not in coarser and "context_length" in coarser
    again = oncu_summary(df, ci=False, group_key=coarser).iloc[0]
    assert not again["small_group_warning"] and again["coarser_group_key"] is None
    assert again["total_groups"] == 1 and again["median_group_size"] == 12
    assert coarser_group_key(df, coarser) is None


def test_per_instance_oncu_is_the_instance_id_key():
    df = _scored(
        [4000] * 3,
        scores={0: {"no_evidence": 0.0, "oracle": 1.0, "full_context": 0.25, "retrieved": 1.0}},
    )
    g = oncu_groups(df, group_key=("instance_id",))
    full = g[g["condition"] == "full_context"].set_index("instance_id")
    assert full["oncu_raw"].to_dict() == {"i0": 0.25, "i1": 0.5, "i2": 0.5}
    assert (full["n_instances"] == 1).all() and "length_cell" not in g.columns


# ----------------------------------------------------------------- the HotpotQA fixture
@pytest.fixture(scope="module")
def hotpot_store(tmp_path_factory):
    """The 53 real HotpotQA records, embedded baseline reader, four conditions."""
    from core.backends import make_backend
    from core.datasets.importers import read_dataset
    from core.execution.runs import run_conditions
    from core.store import Store

    path = shared_fixture(HOTPOT)
    db = tmp_path_factory.mktemp("hotpot") / "hp.duckdb"
    store = Store(db)
    store.write_dataset(read_dataset(path, fmt="hotpotqa", name="hp").dataset)
    run_conditions(store, "hp", make_backend("embedded"), FOUR, name="hp-emb")
    return db


def test_hotpotqa_default_key_has_fewer_than_20_groups(hotpot_store):
    from core.store import Store

    frame = Store(hotpot_store).analysis_frame(["hp-emb"])
    assert frame["context_length"].nunique() == 52  # exact token counts 235 .. 2237 (860 twice)
    # before (the exact length): one group per instance
    before = oncu_summary(frame, ci=False, group_key=_EXACT_KEY).set_index("condition")
    assert before["total_groups"].tolist() == [53, 53]
    assert (
        before.loc["full_context", "group_sizes"]["n=1"]
        == before.loc["full_context", "valid_groups"]
    )
    assert before["small_group_warning"].all()
    # identical to per-instance ONCU: every exact-length group is one instance
    per_inst = oncu_summary(frame, ci=False, group_key=("instance_id",)).set_index("condition")
    assert before["oncu_clipped"].tolist() == pytest.approx(per_inst["oncu_clipped"].tolist())
    # after: the default key buckets (49 instances -> 1K, 4 -> 2K)
    after = oncu_summary(frame, ci=False).set_index("condition")
    assert after["total_groups"].tolist() == [10, 10]
    assert (after["total_groups"] < 20).all()
    assert set(after["length_cell"]) == {"bucket"}
    assert BUCKET_LENGTH in after.loc["full_context", "group_key"]
    g = oncu_groups(frame)
    assert sorted(set(g["context_length"])) == [1000, 2000]
    assert (
        g.drop_duplicates(["context_length", "reasoning_type", "evidence_position"])[
            "n_instances"
        ].sum()
        == 53
    )
    assert after["small_group_warning"].all()  # 8 of 10 groups still hold < 5 instances
    coarser = after.loc["full_context", "coarser_group_key"]
    fixed = oncu_summary(frame, ci=False, group_key=coarser)
    assert not fixed["small_group_warning"].any()


def test_hotpotqa_length_position_table_uses_the_buckets(hotpot_store):
    from core.figures.oncu import length_position_table
    from core.store import Store

    frame = Store(hotpot_store).analysis_frame(["hp-emb"])
    t = length_position_table(frame)
    assert sorted(set(t["context_length"])) == [1000, 2000]  # 2 rows, not 53
    assert set(t["length_cell"]) == {"bucket"} and (t["missing"] == 0).all()


def test_bucket_drill_down_lists_the_exact_lengths_of_the_bucket(hotpot_store):
    from core.figures import Selection
    from core.store import Store
    from core.views import instances_behind

    sel = Selection(dataset="hp", runs=("hp-emb",))
    rows = instances_behind(
        Store(hotpot_store),
        sel,
        {
            "run": "hp-emb",
            "condition": "oracle",
            "context_length": 2000,
            "length_cell": "bucket",
        },
    )
    assert sorted(rows["context_length"]) == [1679, 1954, 2149, 2237]


def test_report_oncu_shows_sizes_warning_and_coarser_key(hotpot_store, capsys):
    from core.cli import main

    assert main(["report", "oncu", "--db", str(hotpot_store)]) == 0
    out = capsys.readouterr().out
    assert "n=1: 3, n=2-4: 3, n>=5: 2; median 2" in out
    assert "length_bucket" in out  # the group key that ran
    assert "WARNING: hp-emb full_context: 6 of 8 valid ONCU groups have fewer than 5" in out
    assert "try a coarser key: --group-key " in out
    assert main(["report", "oncu", "--db", str(hotpot_store), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["total_groups"] for r in rows} == {10}
    for r in rows:
        assert r["small_group_warning"] is True and r["missing"] == 0 and r["n"] == 53
        assert r["group_sizes"] == {"n=1": 3, "n=2-4": 3, "n>=5": 2}
        assert r["coarser_group_key"] and "evidence_position" not in r["coarser_group_key"]
    key = ",".join(_EXACT_KEY)
    assert main(["report", "oncu", "--db", str(hotpot_store), "--json", "--group-key", key]) == 0
    assert {r["total_groups"] for r in json.loads(capsys.readouterr().out)} == {53}


def test_conditions_page_warns_and_one_click_switches_to_the_coarser_key(
    hotpot_store: Path, monkeypatch
):
    from conftest import open_page, open_tab

    at = open_page(monkeypatch, hotpot_store, "screens/conditions.py", "hp")
    assert any("Most valid ONCU groups are tiny" in w.value for w in at.warning)
    summary = next(d.value for d in at.dataframe if "oncu_clipped" in d.value.columns)
    assert summary["total_groups"].tolist() == [10, 10]
    assert "missing" in summary.columns and "group_sizes" in summary.columns
    button = next(b for b in at.button if b.key == "oncu.coarser")
    button.click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert "evidence_position" not in at.multiselect(key="global.group_key").value
    assert not any("Most valid ONCU groups are tiny" in w.value for w in at.warning)
    # per-instance ONCU, in the audit tab: one row per (instance, contextual condition)
    open_tab(at, "ONCU audit")
    per = next(
        d.value
        for d in at.dataframe
        if "instance_id" in d.value.columns and "oncu_raw" in d.value.columns
    )
    assert len(per) == 2 * 53


def test_length_page_has_bucket_rows_and_the_warning(hotpot_store: Path, monkeypatch):
    from conftest import open_page

    at = open_page(monkeypatch, hotpot_store, "screens/length_position.py", "hp")
    assert any("Most valid ONCU groups are tiny" in w.value for w in at.warning)
    table = next(d.value for d in at.dataframe if "evidence_position" in d.value.columns)
    assert sorted(set(table["context_length"])) == [1000, 2000]
    at.radio(key="global.length_cell").set_value("exact").run()
    assert not at.exception, [e.value for e in at.exception]
    table = next(d.value for d in at.dataframe if "evidence_position" in d.value.columns)
    assert table["context_length"].nunique() == 52
