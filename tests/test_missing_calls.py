"""Errors are not answers (issue 15 item 3): CUE-R, DOLCE and fan-in aggregates.

A failed call (``error`` set, every score NaN) is missing: each aggregate equals the one of the
frame without that row, with ``missing`` = 1 beside ``n``. A parse error (score 0, no
``error``) is an answer: it stays in ``n`` as 0.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from core.cuer.metrics import (
    intervention_pairs,
    paired_deltas,
    role_counts,
    synergy,
    utility_profile,
)
from core.dolce import fit_dolce, outcomes_from_probes
from core.fanin.metrics import fanin_analysis
from core.figures.cuer import divergence_figure, paired_heatmap_figure, utility_profile_figure
from core.figures.fanin import (
    fanin_buckets_table,
    fanin_degradation_figure,
    fanin_degradation_table,
    fanin_pairs_table,
)

NAN = math.nan


def _drop_counts(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=[c for c in df.columns if c == "missing" or c.startswith("missing")])


# ====================================================================== CUE-R


def _cue(iid, cond, variant, *, corr, f1=None, error=None, answer="a", cited=("p1",), conf=0.9):
    f1 = corr if f1 is None else f1
    scored = conf is not None and not math.isnan(corr)  # CE needs a confidence and a score
    return {
        "run": "r",
        "instance_id": iid,
        "condition": cond,
        "variant": variant,
        "answer": answer,
        "cited_ids": list(cited),
        "confidence": conf,
        "error": error,
        "meta": None,
        "soft_correct": corr,
        "f1_relaxed": f1,
        "title_grounding": corr,
        "confidence_error": abs(conf - corr) if scored else NAN,
        "answer_type": "entity",
        "reasoning_type": "single_hop",
    }


def _cue_frame() -> pd.DataFrame:
    rows = [
        _cue("a", "retrieved", "", corr=1.0),
        _cue("a", "intervention", "remove|p1", corr=0.0, answer="unknown", cited=(), conf=0.1),
        _cue("b", "retrieved", "", corr=1.0),
        _cue("b", "intervention", "remove|p1", corr=1.0),
        # a parse error: the model answered, unparseably -> scored 0, stays in n
        _cue("c", "retrieved", "", corr=1.0),
        _cue("c", "intervention", "remove|p1", corr=0.0, answer=None, cited=(), conf=None),
    ]
    return pd.DataFrame(rows)


def _with_failed_intervention() -> pd.DataFrame:
    failed = _cue(
        "d",
        "intervention",
        "remove|p1",
        corr=NAN,
        error="HTTP 500",
        answer=None,
        cited=(),
        conf=None,
    )
    return pd.concat(
        [_cue_frame(), pd.DataFrame([_cue("d", "retrieved", "", corr=1.0), failed])],
        ignore_index=True,
    )


def test_cuer_failed_intervention_is_missing_not_zero():
    clean, dirty = _cue_frame(), _with_failed_intervention()
    # without "d" at all the base has 3 answered traces; with "d" the base has 4 (its base call
    # succeeded) and the remove pair of "d" is missing
    pairs = intervention_pairs(dirty)
    gone = pairs[pairs["instance_id"] == "d"].iloc[0]
    assert bool(gone["missing"]) and math.isnan(gone["delta_corr"])
    assert math.isnan(gone["trace_divergence"]) and pd.isna(gone["primary_role"])

    prof = utility_profile(dirty, n_resamples=200).aggregate.set_index("operator")
    ref = utility_profile(clean, n_resamples=200).aggregate.set_index("operator")
    assert (prof.loc["remove", "n"], prof.loc["remove", "missing"]) == (3, 1)
    assert (ref.loc["remove", "n"], ref.loc["remove", "missing"]) == (3, 0)
    # hand-checked: correctness of remove = (0 + 1 + 0) / 3, the parse error counted as 0
    assert prof.loc["remove", "correctness"] == pytest.approx(1 / 3)
    assert prof.loc["remove", "answer_f1"] == ref.loc["remove", "answer_f1"]
    assert prof.loc["remove", "trace_divergence"] == ref.loc["remove", "trace_divergence"]

    deltas = paired_deltas(pairs, n_resamples=300).aggregate
    ref_d = paired_deltas(intervention_pairs(clean), n_resamples=300).aggregate
    # n per metric: the parse error has no confidence, so no confidence error (n 2)
    assert list(deltas["n"]) == list(ref_d["n"]) == [3, 3, 3, 2, 3]
    assert set(deltas["missing"]) == {1} and set(ref_d["missing"]) == {0}
    pd.testing.assert_frame_equal(_drop_counts(deltas), _drop_counts(ref_d))
    # (1 - 0) + (1 - 1) + (1 - 0) over 3 pairs
    corr = deltas.set_index("metric").loc["correctness"]
    assert corr["delta"] == pytest.approx(2 / 3)

    roles = role_counts(pairs).aggregate
    ref_r = role_counts(intervention_pairs(clean)).aggregate
    assert list(roles["n"]) == list(ref_r["n"]) and int(roles["n"].sum()) == 3
    assert set(roles["missing"]) == {1}


def test_cuer_failed_base_makes_every_pair_of_it_missing():
    frame = _cue_frame()
    failed_base = _cue(
        "d", "retrieved", "", corr=NAN, error="timeout", answer=None, cited=(), conf=None
    )
    dirty = pd.concat(
        [frame, pd.DataFrame([failed_base, _cue("d", "intervention", "remove|p1", corr=1.0)])],
        ignore_index=True,
    )
    prof = utility_profile(dirty, n_resamples=200).aggregate.set_index("operator")
    ref = utility_profile(frame, n_resamples=200).aggregate.set_index("operator")
    for op in ("original", "remove"):
        assert (prof.loc[op, "n"], prof.loc[op, "missing"]) == (3, 1)
        for m in ("correctness", "answer_f1", "trace_divergence"):
            assert prof.loc[op, m] == pytest.approx(ref.loc[op, m])
    # the intervention answered, but without its base there is no delta
    assert bool(intervention_pairs(dirty).set_index("instance_id").loc["d", "missing"])


def test_cuer_synergy_counts_failed_ablation_as_missing():
    def two(iid, orig, one, two_, both, error=None):
        return [
            _cue(iid, "retrieved", "", corr=1.0, f1=orig),
            _cue(iid, "intervention", "two_support:1|p1", corr=1.0, f1=one),
            _cue(iid, "intervention", "two_support:2|p2", corr=1.0, f1=two_),
            _cue(
                iid,
                "intervention",
                "two_support:both|p1+p2",
                corr=1.0,
                f1=NAN if error else both,
                error=error,
            ),
        ]

    clean = two("a", 1.0, 1.0, 1.0, 0.0) + two("b", 1.0, 0.5, 0.0, 0.0)
    dirty = clean + two("c", 1.0, 1.0, 1.0, 0.0, error="HTTP 503")
    got = synergy(intervention_pairs(pd.DataFrame(dirty))).aggregate.iloc[0]
    ref = synergy(intervention_pairs(pd.DataFrame(clean))).aggregate.iloc[0]
    assert (got["n"], got["missing"]) == (2, 1) and (ref["n"], ref["missing"]) == (2, 0)
    for col in (
        "mean_drop_1",
        "mean_drop_both",
        "mean_synergy",
        "pct_positive_synergy",
        "pct_strong_complementary",
    ):
        assert got[col] == pytest.approx(ref[col])
    assert got["pct_positive_synergy"] == pytest.approx(50.0)  # a: synergy 1; b: 0


def test_cuer_figures_show_missing_beside_n():
    dirty = _with_failed_intervention()
    pairs = intervention_pairs(dirty)
    result = {
        "pairs": pairs.assign(dataset="d"),
        "profile": utility_profile(dirty, pairs, n_resamples=100),
        "deltas": paired_deltas(pairs, n_resamples=100),
    }
    fig, agg = utility_profile_figure(result)
    remove = next(t for t in fig.data if t.name == "remove")
    assert "n=3, missing=1" in remove.hovertemplate
    fig, _ = paired_heatmap_figure(result)
    assert "n=3, missing=1" in fig.data[0].customdata[0][0]
    fig, data = divergence_figure(result)
    assert len(data) == 3 and "missing=1" in fig.data[0].hovertext


def test_cuer_figures_do_not_depend_on_the_order_pairs_are_stored_in():
    """Two builds of one store may return the pairs in another order: the profile and the
    divergence figures keep their boxes, colours and CIs (colours depend on the set of
    labels, CIs resample each group in instance order)."""
    dirty = _with_failed_intervention()

    def figures(rows: pd.DataFrame) -> list:
        pairs = intervention_pairs(rows)
        result = {
            "pairs": pairs.assign(dataset="d"),
            "profile": utility_profile(rows, pairs, n_resamples=100),
            "deltas": paired_deltas(pairs, n_resamples=100),
        }
        out = []
        for make in (utility_profile_figure, divergence_figure):
            fig, _ = make(result)
            out.append(
                [
                    (
                        t.name,
                        t.marker.color,
                        tuple(t.y),
                        tuple(t.error_y.array) if t.type == "bar" else None,
                    )
                    for t in fig.data
                ]
            )
        return out

    reversed_rows = dirty.iloc[::-1].reset_index(drop=True)
    assert figures(reversed_rows) == figures(dirty)


# ====================================================================== DOLCE


def _probe_rows() -> list[dict]:
    """Two problems, L = 10; answered iff the span is long enough (C >= 2)."""
    rows = []
    for iid in ("a", "b"):
        for c in (0, 1, 2, 5, 10):
            for start in range(4):
                ok = c >= 2
                rows.append(
                    {
                        "run": "r",
                        "dataset": "d",
                        "instance_id": iid,
                        "variant": f"C={c}|start={start}",
                        "meta": '{"L": 10}',
                        "answer": "Paris" if ok else "unanswerable",
                        "error": None,
                        "f1_relaxed": 1.0 if ok else 0.0,
                        "question": "q",
                    }
                )
    return rows


def _failed_probe(iid: str, c: int) -> dict:
    return {
        "run": "r",
        "dataset": "d",
        "instance_id": iid,
        "variant": f"C={c}|start=9",
        "meta": '{"L": 10}',
        "answer": None,
        "error": "HTTP 500",
        "f1_relaxed": NAN,
        "question": "q",
    }


def test_dolce_failed_probe_is_missing_not_a_failed_probe():
    clean = pd.DataFrame(_probe_rows())
    dirty = pd.DataFrame([*_probe_rows(), _failed_probe("a", 5)])
    fit = fit_dolce(outcomes_from_probes(dirty, keep_missing=True), scenario="COW")
    ref = fit_dolce(outcomes_from_probes(clean, keep_missing=True), scenario="COW")
    p = fit.problems.set_index("problem")
    assert (p.loc["a", "n_obs"], p.loc["a", "missing"]) == (20, 1)
    assert (p.loc["b", "n_obs"], p.loc["b", "missing"]) == (20, 0)
    pd.testing.assert_frame_equal(_drop_counts(fit.problems), _drop_counts(ref.problems))
    # the observed success rate at C = 5 stays 4 / 4 (the failed call is not a 0)
    curve = fit.curves[(fit.curves["problem"] == "a") & (fit.curves["C"] == 5)].iloc[0]
    assert (curve["n"], curve["missing"], curve["obs_p1"]) == (4, 1, 1.0)
    pd.testing.assert_frame_equal(_drop_counts(fit.curves), _drop_counts(ref.curves))
    t = fit.tasks.iloc[0]
    assert (t["n"], t["missing"], t["n_obs"], t["missing_probes"]) == (2, 0, 40, 1)
    pd.testing.assert_frame_equal(_drop_counts(fit.tasks), _drop_counts(ref.tasks))


def test_dolce_problem_without_an_answered_probe_is_counted():
    dirty = pd.DataFrame([*_probe_rows(), _failed_probe("z", 5), _failed_probe("z", 10)])
    fit = fit_dolce(outcomes_from_probes(dirty, keep_missing=True), scenario="COW")
    assert list(fit.problems["problem"]) == ["a", "b"]
    t = fit.tasks.iloc[0]
    assert (t["n"], t["missing"], t["missing_probes"]) == (2, 1, 2)


def test_dolce_stored_zero_of_a_failed_call_is_not_an_outcome():
    # a row stored before issue 15 (error set, score 0) is still missing
    old = _failed_probe("a", 5) | {"f1_relaxed": 0.0}
    out = outcomes_from_probes(pd.DataFrame([*_probe_rows(), old]), keep_missing=True)
    assert int(out["score"].isna().sum()) == 1
    assert len(outcomes_from_probes(pd.DataFrame([*_probe_rows(), old]))) == 40


def test_dolce_parse_error_stays_a_failed_probe():
    parse = _failed_probe("a", 5) | {"error": None, "f1_relaxed": 0.0, "answer": None}
    fit = fit_dolce(
        outcomes_from_probes(pd.DataFrame([*_probe_rows(), parse]), keep_missing=True),
        scenario="COW",
    )
    p = fit.problems.set_index("problem")
    assert (p.loc["a", "n_obs"], p.loc["a", "missing"]) == (21, 0)
    curve = fit.curves[(fit.curves["problem"] == "a") & (fit.curves["C"] == 5)].iloc[0]
    assert (curve["n"], curve["obs_p1"], curve["obs_p0"]) == (5, 0.8, 0.2)


# ====================================================================== fan-in


def _fan(iid, cond, fan, score, *, error=None, run="r"):
    gold = [f"{iid}g{i}" for i in range(fan)]
    return {
        "run": run,
        "model": "m",
        "dataset": "d",
        "instance_id": iid,
        "condition": cond,
        "input_passage_ids": gold[:1] + ["x"],
        "cited_ids": gold[:1],
        "gold_ids": gold,
        "fan_in": fan,
        "error": error,
        "f1_relaxed": score,
    }


def _fan_rows() -> list[dict]:
    return [
        _fan("s1", "retrieved", 1, 1.0),
        _fan("s2", "retrieved", 1, 0.5),
        _fan("h1", "retrieved", 4, 0.5),
        _fan("h2", "retrieved", 5, 0.25),
        _fan("s1", "oracle", 1, 1.0),
        _fan("s2", "oracle", 1, 1.0),
        _fan("h1", "oracle", 4, 0.5),
        _fan("h2", "oracle", 5, 1.0),
    ]


def test_fanin_failed_call_is_missing_not_zero():
    clean = pd.DataFrame(_fan_rows())
    dirty = pd.DataFrame(
        [
            *_fan_rows(),
            _fan("s3", "retrieved", 1, NAN, error="HTTP 500"),
            _fan("s3", "oracle", 1, 1.0),
        ]
    )
    # r over exact fan-in with the oracle: enough points for r on this small frame
    got = fanin_analysis(dirty, points="fan_in", include_oracle=True, n_resamples=200)
    ref = fanin_analysis(clean, points="fan_in", include_oracle=True, n_resamples=200)
    b = got.by_bucket.set_index(["condition", "bucket"])
    assert (b.loc[("retrieved", "single"), "n"], b.loc[("retrieved", "single"), "missing"]) == (
        2,
        1,
    )
    assert (b.loc[("retrieved", "all"), "n"], b.loc[("retrieved", "all"), "missing"]) == (4, 1)
    # hand-checked: AC single = 100 x (1.0 + 0.5) / 2; the failed call is not a 0
    assert b.loc[("retrieved", "single"), "ac"] == pytest.approx(75.0)
    rb = ref.by_bucket.set_index(["condition", "bucket"])
    for col in ("ac", "er", "ep", "ac_ci_low", "ac_ci_high"):
        assert b.loc[("retrieved", "single"), col] == pytest.approx(
            rb.loc[("retrieved", "single"), col]
        )
    row = got.per_instance[
        (got.per_instance["instance_id"] == "s3") & (got.per_instance["condition"] == "retrieved")
    ].iloc[0]
    assert bool(row["missing"]) and math.isnan(row["ac"]) and math.isnan(row["er"])
    d = got.degradation.set_index("condition").loc["retrieved"]
    rd = ref.degradation.set_index("condition").loc["retrieved"]
    assert (d["n_single"], d["missing_single"], d["n_high"], d["missing_high"]) == (2, 1, 2, 0)
    assert d["rel_degradation"] == pytest.approx(rd["rel_degradation"])
    assert d["construction_loss_pp"] == pytest.approx(rd["construction_loss_pp"])
    a = got.attribution.set_index("condition").loc["retrieved"]
    assert (a["n"], a["missing"], a["n_failures"]) == (4, 1, 1)  # h2: AC 25
    o = got.overlap.iloc[0]
    assert (o["n_common"], o["missing"]) == (4, 1)
    assert got.correlation["er_ac"]["r"] == pytest.approx(ref.correlation["er_ac"]["r"])
    # tables and figure show missing beside n
    assert list(fanin_buckets_table(got).columns[3:5]) == ["n", "missing"]
    table = fanin_degradation_table(got).set_index("condition")
    assert (table.loc["retrieved", "n"], table.loc["retrieved", "missing"]) == (4, 1)
    assert table.loc["retrieved", "missing single"] == 1
    assert fanin_pairs_table(got).iloc[0]["missing"] == 1
    fig, _ = fanin_degradation_figure(got)
    texts = [t for tr in fig.data if tr.text is not None for t in tr.text]
    assert any("n=2, missing=1" in t for t in texts)


def test_fanin_stored_zero_of_a_failed_call_is_missing():
    # rows scored before issue 15 (error set, score 0) are missing as well
    dirty = pd.DataFrame([*_fan_rows(), _fan("s3", "retrieved", 1, 0.0, error="timeout")])
    b = fanin_analysis(dirty, n_resamples=100).by_bucket.set_index(["condition", "bucket"])
    assert (b.loc[("retrieved", "single"), "n"], b.loc[("retrieved", "single"), "missing"]) == (
        2,
        1,
    )
    assert b.loc[("retrieved", "single"), "ac"] == pytest.approx(75.0)


def test_fanin_parse_error_stays_in_n_as_zero():
    parse = _fan("s3", "retrieved", 1, 0.0)  # no error: the model answered, unparseably
    got = fanin_analysis(pd.DataFrame([*_fan_rows(), parse]), n_resamples=100)
    b = got.by_bucket.set_index(["condition", "bucket"])
    assert (b.loc[("retrieved", "single"), "n"], b.loc[("retrieved", "single"), "missing"]) == (
        3,
        0,
    )
    assert b.loc[("retrieved", "single"), "ac"] == pytest.approx(50.0)
    a = got.attribution.set_index("condition").loc["retrieved"]
    assert (a["n"], a["missing"], a["n_failures"]) == (5, 0, 2)


def test_fanin_all_missing_cell_is_listed_with_n_zero():
    rows = [*_fan_rows(), _fan("t1", "retrieved", 3, NAN, error="HTTP 500")]
    f = fanin_analysis(pd.DataFrame(rows), n_resamples=100).by_fan_in
    cell = f[(f["condition"] == "retrieved") & (f["fan_in"] == 3)].iloc[0]
    assert (cell["n"], cell["missing"]) == (0, 1) and np.isnan(cell["ac"])
