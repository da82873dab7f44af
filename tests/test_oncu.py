"""ONCU groups, validity, clipping and summaries (SPEC §6.5) on a hand-built frame."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.oncu.metrics import (
    DEFAULT_GROUP_KEY,
    condition_contrast,
    failure_breakdown,
    oncu_groups,
    oncu_summary,
    sample_level_means,
)

_META = {
    "source": "controlled",
    "model": "m",
    "reasoning_type": "single_hop",
    "context_length": "4000",
    "evidence_density": "low",
    "distractor_similarity": "none",
}


def _rows(group, inst, scores, applicable=True, gold=("p1",)):
    """One prediction row per (condition, score); each group differs in evidence_position."""
    return [
        {
            **_META,
            "evidence_position": group,
            "instance_id": f"{group}-{inst}",
            "condition": cond,
            "f1_relaxed": s,
            "oracle_applicable": applicable,
            "gold_ids": list(gold),
        }
        for cond, s in scores.items()
    ]


def _frame() -> pd.DataFrame:
    rows = []
    # A: S_none = 0.1, S_oracle = 0.9, S_full = 0.5 -> raw 0.4/0.8 = 0.5;
    #    S_ret = 1.0 -> raw 0.9/0.8 = 1.125, clipped 1.0 (above oracle)
    rows += _rows("A", 1, {"no_evidence": 0.0, "oracle": 1.0, "full_context": 0.5, "retrieved": 1})
    rows += _rows("A", 2, {"no_evidence": 0.2, "oracle": 0.8, "full_context": 0.5, "retrieved": 1})
    # B: S_none = 0.5, S_oracle = 1.0, S_full = 0.25 -> raw -0.25/0.5 = -0.5, clipped 0 (below
    #    baseline); S_ret = 0.75 -> raw 0.5
    rows += _rows(
        "B", 1, {"no_evidence": 0.5, "oracle": 1.0, "full_context": 0.25, "retrieved": 0.75}
    )
    # C: S_oracle == S_none -> oracle_not_above_no_evidence
    rows += _rows("C", 1, {"no_evidence": 0.6, "oracle": 0.6, "full_context": 0.9, "retrieved": 0})
    # D: no no_evidence prediction -> missing_no_evidence
    rows += _rows("D", 1, {"oracle": 1.0, "full_context": 0.5, "retrieved": 0.5})
    # E: no oracle prediction -> missing_oracle
    rows += _rows("E", 1, {"no_evidence": 0.0, "full_context": 0.5, "retrieved": 0.5})
    # F: instance flagged not oracle-applicable (and so no oracle run) -> empty_oracle_evidence
    rows += _rows("F", 1, {"no_evidence": 0.0, "full_context": 0.5, "retrieved": 0.5}, False)
    # G: flagged applicable but without gold ids -> empty_oracle_evidence
    rows += _rows(
        "G", 1, {"no_evidence": 0.0, "oracle": 1.0, "full_context": 1.0, "retrieved": 1}, gold=()
    )
    return pd.DataFrame(rows)


def _group(groups, name, cond):
    g = groups[(groups["evidence_position"] == name) & (groups["condition"] == cond)]
    assert len(g) == 1
    return g.iloc[0]


def test_oncu_groups_values_and_clipping():
    groups = oncu_groups(_frame())
    assert len(groups) == 7 * 2  # one row per (group, contextual condition)
    a = _group(groups, "A", "full_context")
    assert (a["s_none"], a["s_oracle"], a["s_c"]) == pytest.approx((0.1, 0.9, 0.5))
    assert a["valid"] and a["invalid_reason"] is None
    assert a["oncu_raw"] == pytest.approx(0.5)
    assert a["oncu_clipped"] == pytest.approx(0.5)
    assert (a["n"], a["n_none"], a["n_oracle"]) == (2, 2, 2)
    above = _group(groups, "A", "retrieved")
    assert above["oncu_raw"] == pytest.approx(1.125)
    assert above["oncu_clipped"] == 1.0  # clipped at 1
    below = _group(groups, "B", "full_context")
    assert below["oncu_raw"] == pytest.approx(-0.5)
    assert below["oncu_clipped"] == 0.0  # clipped at 0
    assert set(DEFAULT_GROUP_KEY) <= set(groups.columns)


@pytest.mark.parametrize(
    ("group", "reason"),
    [
        ("C", "oracle_not_above_no_evidence"),
        ("D", "missing_no_evidence"),
        ("E", "missing_oracle"),
        ("F", "empty_oracle_evidence"),
        ("G", "empty_oracle_evidence"),
    ],
)
def test_oncu_invalid_reasons(group, reason):
    row = _group(oncu_groups(_frame()), group, "full_context")
    assert not row["valid"]
    assert row["invalid_reason"] == reason
    assert math.isnan(row["oncu_raw"]) and math.isnan(row["oncu_clipped"])


def test_oncu_n_gold_instead_of_gold_ids():
    df = _frame().drop(columns=["gold_ids"])
    df["n_gold"] = np.where(df["evidence_position"] == "G", 0, 1)
    row = _group(oncu_groups(df), "G", "full_context")
    assert row["invalid_reason"] == "empty_oracle_evidence"


def test_oncu_nan_scores_count_as_missing():
    df = _frame()
    df.loc[(df["evidence_position"] == "A") & (df["condition"] == "oracle"), "f1_relaxed"] = np.nan
    assert _group(oncu_groups(df), "A", "full_context")["invalid_reason"] == "missing_oracle"


def test_oncu_summary():
    s = oncu_summary(_frame()).set_index("condition")
    full, ret = s.loc["full_context"], s.loc["retrieved"]
    assert (full["valid_groups"], full["total_groups"]) == (2, 7)
    # clipped: A 0.5, B 0 -> 0.25; raw: (0.5 - 0.5) / 2 = 0
    assert full["oncu_clipped"] == pytest.approx(0.25)
    assert full["oncu_raw_mean"] == pytest.approx(0.0)
    # weighted: (0.4 + -0.25) / (0.8 + 0.5) = 0.15 / 1.3
    assert full["oncu_weighted"] == pytest.approx(0.15 / 1.3)
    assert (full["n_above_oracle"], full["n_below_baseline"]) == (0, 1)
    assert full["invalid_reasons"] == {
        "oracle_not_above_no_evidence": 1,
        "missing_no_evidence": 1,
        "missing_oracle": 1,
        "empty_oracle_evidence": 2,
    }
    # group-averaged S over valid groups: none (0.1 + 0.5)/2, oracle (0.9 + 1)/2, full
    # (0.5 + 0.25)/2
    assert (full["s_none"], full["s_oracle"], full["s_c"]) == pytest.approx((0.3, 0.95, 0.375))
    # bootstrap of the two clipped values {0.5, 0}: resample means {0, .25, .5} -> [0, 0.5]
    assert (full["oncu_ci_low"], full["oncu_ci_high"]) == (0.0, 0.5)
    # retrieved: clipped A 1.0, B 0.5 -> 0.75; raw (1.125 + 0.5)/2; weighted (0.9 + 0.25)/1.3
    assert ret["oncu_clipped"] == pytest.approx(0.75)
    assert ret["oncu_raw_mean"] == pytest.approx(0.8125)
    assert ret["oncu_weighted"] == pytest.approx(1.15 / 1.3)
    assert (ret["n_above_oracle"], ret["n_below_baseline"]) == (1, 0)
    # sample means over ALL predictions, invalid groups included
    # no_evidence: 0, .2, .5, .6, 0, 0, 0 over 7 rows = 1.3 / 7
    assert full["sample_means"]["no_evidence"] == pytest.approx(1.3 / 7)
    assert full["sample_means"]["full_context"] == pytest.approx(4.65 / 8)
    assert full["model"] == "m"


def test_oncu_summary_without_ci_and_unit_keys():
    df = _frame()
    df["run"] = "r1"
    df["dataset"] = "d1"
    s = oncu_summary(df, ci=False)
    assert list(s.columns[:4]) == ["run", "model", "dataset", "condition"]
    assert s["oncu_ci_low"].isna().all()


def test_oncu_validates_columns():
    with pytest.raises(ValueError, match="group key"):
        oncu_groups(_frame().drop(columns=["evidence_density"]))
    with pytest.raises(ValueError, match="score field"):
        oncu_groups(_frame(), score_field="em_strict")


def test_context_length_compared_as_given():
    df = _frame()
    df.loc[df["instance_id"] == "A-2", "context_length"] = "4K"  # A splits into two groups
    groups = oncu_groups(df)
    assert len(groups[groups["evidence_position"] == "A"]) == 4


def test_failure_breakdown():
    df = pd.DataFrame(
        {
            "model": "m",
            "condition": ["full_context"] * 4 + ["retrieved"] * 2 + ["no_evidence"],
            "failure_label": [
                "success",
                "success",
                "parse",
                "selection",
                "conversion",
                "localization",
                None,
            ],
        }
    )
    fb = failure_breakdown(df).set_index("condition")
    assert list(fb.index) == ["full_context", "retrieved"]
    assert fb.loc["full_context", "n"] == 4
    assert fb.loc["full_context", "success"] == 50.0
    assert fb.loc["full_context", "parse"] == 25.0
    assert fb.loc["full_context", "integration"] == 0.0
    assert fb.loc["retrieved", "localization"] == 50.0


def test_sample_level_means_with_ci():
    df = pd.DataFrame(
        {
            "model": "m",
            "condition": ["full_context"] * 2 + ["oracle"] * 2,
            "f1_relaxed": [0.0, 1.0, 1.0, 1.0],
            "ev_f1": [np.nan, 0.5, 1.0, 0.0],
            "parse_error": ["bad", None, "", None],
        }
    )
    m = sample_level_means(df, ci=True).set_index("condition")
    assert m.loc["full_context", "f1_relaxed"] == 0.5
    assert m.loc["full_context", "ev_f1"] == 0.5  # NaN skipped
    assert m.loc["full_context", "n"] == 2
    assert m.loc["full_context", "n_parse_error"] == 1
    # resample means of {0, 1}: {0, .5, 1} -> [0, 1]
    full = m.loc["full_context"]
    assert (full["f1_relaxed_ci_low"], full["f1_relaxed_ci_high"]) == (0.0, 1.0)
    # ev_f1 is {NaN, 0.5}: every resample with a finite cell has mean 0.5
    assert m.loc["full_context", "ev_f1_ci_low"] == 0.5
    assert m.loc["oracle", "f1_relaxed_ci_high"] == 1.0


def test_condition_contrast():
    df = _frame()
    c = condition_contrast(df, "retrieved", "full_context").iloc[0]
    # per instance retrieved - full: A1 .5, A2 .5, B .5, C -.9, D 0, E 0, F 0, G 0 -> 0.6 / 8
    assert c["n"] == 8
    assert c["mean"] == pytest.approx(0.6 / 8)
    d = np.array([0.5, 0.5, 0.5, -0.9, 0, 0, 0, 0])
    assert c["effect"] == pytest.approx(d.mean() / d.std(ddof=1))
    assert math.isnan(c["p_mcnemar"])
    df["em_strict"] = (df["f1_relaxed"] >= 1.0).astype(float)
    c = condition_contrast(df, "retrieved", "full_context", "em_strict").iloc[0]
    # discordant: retrieved-only correct A1, A2 (b = 2), full-only none (c = 0):
    # exact two-sided p = 2 * 0.5**2 = 0.5
    assert c["p_mcnemar"] == pytest.approx(0.5)
