"""Attribution runs (issue 40): the planner, the targets, the Lasso surrogate, the stored calls.

The Lasso is checked against scikit-learn's ``Lasso`` / ``LassoCV`` (an independent
implementation) and against its own optimality (KKT) conditions; Spearman against scipy.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy.stats import spearmanr
from sklearn.linear_model import Lasso, LassoCV
from sklearn.model_selection import KFold

from core.attribution.metrics import (
    ablation_tables,
    fit_surrogate,
    fit_surrogates,
    lasso,
    lasso_path_cv,
    ranked_passages,
    retention,
    spearman,
)
from core.attribution.plan import (
    ablation_masks,
    ablation_variant,
    attribution_settings,
    pick_instances,
    plan_attribution,
    plan_topk_drop,
    shown_evidence,
    topk_variant,
)
from core.datasets.controlled import build_controlled
from core.oncu.conditions import plan_conditions
from core.types import Instance, Passage


@pytest.fixture(scope="module")
def inst() -> Instance:
    return build_controlled(preset="controlled-200", seed=42, name="c").instances[0]


def _design(seed: int = 1, n: int = 32, p: int = 12) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = (rng.random((n, p)) < 0.5).astype(float)
    y = 0.8 * x[:, 3] + 0.3 * x[:, 7] + rng.normal(0, 0.1, n)
    return x, y


# ------------------------------------------------------------------------------ planner


def test_masks_are_seeded_by_seed_and_instance():
    a = ablation_masks("q1", 5, 32, 0.5, 0)
    assert a.shape == (32, 5) and a.dtype == bool
    assert np.array_equal(a, ablation_masks("q1", 5, 32, 0.5, 0))
    assert not np.array_equal(a, ablation_masks("q2", 5, 32, 0.5, 0))
    assert not np.array_equal(a, ablation_masks("q1", 5, 32, 0.5, 1))
    big = ablation_masks("q1", 50, 4000, 0.3, 0)
    assert abs(big.mean() - 0.3) < 0.01


def test_plan_names_masks_and_shares_the_condition_prompt(inst):
    calls = plan_attribution(inst, ablations=8, keep=0.5, seed=3)
    assert [c.variant for c in calls][0] == "full"
    assert sorted(c.variant for c in calls[1:]) == [ablation_variant(i) for i in range(8)]
    assert ablation_variant(7) == "abl:0007" and topk_variant(2) == "top2drop"
    full = calls[0]
    (cond,) = plan_conditions([inst], ["full_context"])
    # the unablated call is the four-condition prompt: a conditions run's reply is reused
    assert full.prompt_hash == cond.prompt_hash
    assert full.condition == "full_context"
    order = [p.passage_id for p in inst.passages]
    assert full.meta["attribution"]["passages"] == order
    masks = ablation_masks(inst.instance_id, len(order), 8, 0.5, 3)
    for c in calls[1:]:
        m = c.meta["attribution"]
        mask = masks[m["index"]]
        assert m["mask"] == "".join("1" if b else "0" for b in mask)
        kept = [pid for pid, b in zip(order, mask, strict=True) if b]
        assert m["kept"] == kept and list(c.input_passage_ids) == kept
        assert m["seed"] == 3 and m["keep"] == 0.5
        user = c.messages[1]["content"]
        assert all(f"[passage_id: {pid}]" in user for pid in kept)
        assert not any(f"[passage_id: {pid}]" in user for pid in set(order) - set(kept))
    texts = [c.meta["attribution"]["mask"] for c in calls[1:]]
    assert texts == sorted(texts, reverse=True)  # shared prefixes adjacent


def test_retrieved_and_oracle_conditions(inst):
    shown = shown_evidence(inst, "retrieved", top_k=3)
    calls = plan_attribution(inst, condition="retrieved", ablations=4, shown=shown)
    (cond,) = plan_conditions([inst], ["retrieved"], top_k=3)
    assert calls[0].prompt_hash == cond.prompt_hash
    oracle = plan_attribution(inst, condition="oracle", ablations=4)
    assert oracle[0].meta["attribution"]["passages"] == list(inst.gold_ids)
    nogold = Instance(
        **{
            **{f: getattr(inst, f) for f in inst.__slots__},
            "passages": tuple(p for p in inst.passages if not p.is_gold),
        }
    )
    assert plan_attribution(nogold, condition="oracle", ablations=4) == []


def test_topk_drop_and_ranking(inst):
    shown = shown_evidence(inst, "full_context")
    order = [p.passage_id for p in inst.passages]
    call = plan_topk_drop(inst, "full_context", shown, [order[2], order[0]], 2)
    assert call.variant == "top2drop"
    assert call.meta["attribution"]["dropped"] == [order[2], order[0]]
    assert list(call.input_passage_ids) == [pid for pid in order if pid not in order[:3:2]]
    assert plan_topk_drop(inst, "full_context", shown, [order[0]], 2) is None


def test_settings_refuse_bad_values_and_logprob():
    assert attribution_settings()["target"] == "retention"
    with pytest.raises(ValueError, match="keep"):
        attribution_settings(keep=1.5)
    with pytest.raises(ValueError, match="condition"):
        attribution_settings(condition="no_evidence")


def test_pick_instances(inst):
    ds = build_controlled(preset="controlled-200", seed=42, name="c").instances
    assert [i.instance_id for i in pick_instances(ds, "3")] == [i.instance_id for i in ds[:3]]
    two = f"{ds[5].instance_id},{ds[1].instance_id}"
    assert [i.instance_id for i in pick_instances(ds, two)] == [
        ds[1].instance_id,
        ds[5].instance_id,
    ]
    with pytest.raises(ValueError, match="nope"):
        pick_instances(ds, "nope")


# ------------------------------------------------------------------------------ targets


def test_retention_is_answer_f1_against_the_unablated_answer():
    assert retention("Paris", "Paris") == 1.0
    assert retention("the Paris city", "Paris") == pytest.approx(2 / 3)  # P 1/2, R 1
    assert retention("London", "Paris") == 0.0
    assert retention("", "Paris") == 0.0
    assert math.isnan(retention("Paris", ""))  # nothing to retain
    assert math.isnan(retention("Paris", None))


# ------------------------------------------------------------------------------ Lasso


@pytest.mark.parametrize("alpha", [0.002, 0.01, 0.05, 0.2])
def test_lasso_matches_scikit_learn(alpha):
    x, y = _design()
    b, w = lasso(x, y, alpha, tol=1e-12)
    ref = Lasso(alpha=alpha, tol=1e-12, max_iter=1_000_000).fit(x, y)
    assert np.allclose(w[0], ref.coef_, atol=1e-6)
    assert b[0] == pytest.approx(ref.intercept_, abs=1e-6)
    loose = lasso(x, y, alpha)[1]  # the default stopping rule (gap <= 1e-4 var(y))
    assert np.allclose(loose[0], ref.coef_, atol=1e-3)


def test_lasso_meets_its_kkt_conditions():
    x, y = _design(seed=4, p=20)
    alpha = 0.02
    b, w = lasso(x, y, alpha, tol=1e-12)
    grad = (x - x.mean(0)).T @ (y - b[0] - x @ w[0]) / len(y)
    on = w[0] != 0
    assert np.allclose(grad[on], alpha * np.sign(w[0][on]), atol=1e-6)
    assert (np.abs(grad[~on]) <= alpha + 1e-9).all()


def test_weighted_lasso_equals_resampled_rows():
    x, y = _design(seed=2)
    counts = np.random.default_rng(0).multinomial(32, np.full(32, 1 / 32))
    rows = np.repeat(np.arange(32), counts)
    b1, w1 = lasso(x, y, 0.01, counts[None].astype(float), tol=1e-12)
    ref = Lasso(alpha=0.01, tol=1e-12, max_iter=1_000_000).fit(x[rows], y[rows])
    assert np.allclose(w1[0], ref.coef_, atol=1e-6)


def test_cross_validated_alpha_matches_lasso_cv():
    for seed in (1, 2, 3):
        x, y = _design(seed=seed)
        alpha, oof, grid = lasso_path_cv(x, y)
        assert grid[0] == pytest.approx(np.abs((x - x.mean(0)).T @ (y - y.mean())).max() / 32)
        assert grid[-1] == pytest.approx(grid[0] * 1e-2)
        ref = LassoCV(alphas=grid, cv=KFold(5), tol=1e-10, max_iter=100_000).fit(x, y)
        assert alpha == pytest.approx(ref.alpha_)
        assert np.isfinite(oof).all()


def test_spearman_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.random(30), rng.random(30)
    b[:5] = b[0]  # ties
    assert spearman(a, b) == pytest.approx(spearmanr(a, b).statistic)
    assert math.isnan(spearman([1, 1, 1, 1], [1, 2, 3, 4]))
    assert math.isnan(spearman([1, 2], [1, 2]))


def test_surrogate_recovers_a_known_reader_and_says_what_it_cannot_know():
    masks = ablation_masks("x", 6, 64, 0.5, 0)
    masks[:, 5] = True  # always kept
    y = masks[:, 1].astype(float)
    s = fit_surrogate([f"p{i}" for i in range(6)], masks, y, n_boot=200)
    assert s.weights[1] == pytest.approx(1.0, abs=0.05) and s.ci_low[1] > 0.5
    assert all(s.ci_low[j] <= 0 <= s.ci_high[j] for j in (0, 2, 3, 4))
    assert s.notes[5] == "always kept" and math.isnan(s.weights[5])
    assert s.lds > 0.8 and s.reason == ""  # a 0/1 target: ties cap Spearman below 1
    assert ranked_passages(s)[0] == "p1"
    const = fit_surrogate(["a", "b"], masks[:, :2], np.ones(64))
    assert "constant targets" in const.reason and math.isnan(const.lds)
    assert list(const.weights) == [0.0, 0.0]
    few = fit_surrogate(["a", "b"], masks[:5, :2], y[:5])
    assert "5 answered ablations" in few.reason and math.isnan(few.weights[0])


# ------------------------------------------------------------------------------ stored calls


def _row(variant, answer, mask=None, error=None, **extra):
    meta = {"attribution": {"mask": mask, **extra}}
    return {
        "instance_id": "q1",
        "condition": "full_context",
        "variant": variant,
        "answer": answer,
        "cited_ids": ["p0002"],
        "error": error,
        "meta": json.dumps(meta),
        "soft_correct": 1.0 if answer == "yes" else 0.0,
    }


def test_ablation_tables_leave_failed_calls_out_and_count_them():
    rows = [
        _row("full", "yes", "111", passages=["p0001", "p0002", "p0003"]),
        _row("abl:0000", "yes", "010"),
        _row("abl:0001", "no", "101"),
        _row("abl:0002", None, "110", error="HTTP 500"),
        _row("top1drop", "no", "101", k=1, dropped=["p0002"]),
    ]
    (t,) = ablation_tables(pd.DataFrame(rows))
    assert t.passages == ("p0001", "p0002", "p0003")
    assert t.n_planned == 3 and t.n_failed == 1
    assert t.masks.tolist() == [[False, True, False], [True, False, True]]
    assert t.y.tolist() == [1.0, 0.0]  # never a 0 for the failed call
    assert t.full_target == 1.0 and t.full_cited == ("p0002",)
    assert t.drops == {1: (("p0002",), 0.0)}
    (c,) = ablation_tables(pd.DataFrame(rows), "correct")
    assert c.y.tolist() == [1.0, 0.0]
    failed = [_row("full", None, "111", error="x", passages=["p0001", "p0002", "p0003"]), *rows[1:]]
    (f,) = ablation_tables(pd.DataFrame(failed))
    assert f.full_failed and "unablated call failed" in f.reason
    with pytest.raises(ValueError, match="forced continuation"):
        ablation_tables(pd.DataFrame(rows), "logprob")


def test_passage_segments_of_chunks_are_dropped_with_their_passage():
    p = tuple(Passage(f"p000{i}", i - 1, f"T{i}", f"text {i}", f"d{i}") for i in (1, 2))
    inst = Instance(instance_id="q", question="q?", gold_answer="a", passages=p)
    calls = plan_attribution(inst, ablations=16, seed=0)
    for c in calls[1:]:
        assert list(c.input_passage_ids) == c.meta["attribution"]["kept"]


def test_a_fit_depends_on_neither_its_batch_nor_the_row_order():
    rng = np.random.default_rng(5)
    items = []
    for p in (6, 20, 45):
        m = rng.random((32, p)) < 0.5
        y = np.where(m[:, 1] | m[:, 2], 1.0, 0.0) * rng.uniform(0.5, 1.0, 32)
        items.append(([f"p{j}" for j in range(p)], m, y))
    together = fit_surrogates(items, n_boot=50, keys=["a", "b", "c"])
    alone = fit_surrogates(items[1:2], n_boot=50, keys=["b"])[0]
    # the same up to float rounding (a batch is padded to its widest design)
    assert np.allclose(together[1].weights, alone.weights, atol=1e-9)
    assert np.allclose(together[1].ci_low, alone.ci_low, atol=1e-9)
    assert together[1].alpha == alone.alpha
    assert together[1].lds == pytest.approx(alone.lds, abs=1e-9)
    rows = [_row("full", "yes", "111", passages=["p0001", "p0002", "p0003"])]
    rows += [
        _row(f"abl:{i:04d}", "yes" if i % 3 else "no", mask)
        for i, mask in enumerate(["010", "101", "110", "011", "001", "100", "111", "000"])
    ]
    a = ablation_tables(pd.DataFrame(rows))[0]
    b = ablation_tables(pd.DataFrame(rows[::-1]))[0]
    assert np.array_equal(a.masks, b.masks) and np.array_equal(a.y, b.y)
