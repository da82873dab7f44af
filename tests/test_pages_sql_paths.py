"""The faster data paths of the Retrieval and Interventions pages give the old numbers.

Issue 17: the retrieval view audits every offered top-k once (a top-k change reads rows
already computed) and the CUE-R view caches its frames by what they are built from (not by
the whole selection, which every figure extends with its own options). Each path is compared
with the computation it replaces, on a small store.
"""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from core.backends import EmbeddedReader
from core.cuer.metrics import intervention_pairs, load_pairs, paired_deltas, role_counts
from core.datasets.controlled import build_controlled
from core.execution.runs import run_interventions
from core.figures.retrieval import OFFERED_KS
from core.oncu.conditions import retrieval_audit
from core.selection import Selection
from core.store import Store
from core.types import Dataset
from core.views.common import clear_cache
from core.views.cuer import cuer_result
from core.views.retrieval import retrieval_audit_frames


def _small(n: int) -> Dataset:
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    picks = [full.instances[i] for i in (0, 50, 100, 150, 1, 51)[:n]]
    return Dataset("small", full.source, full.builder, full.builder_params, tuple(picks))


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """Six controlled instances with a CUE-R run of the embedded reader."""
    s = Store(tmp_path_factory.mktemp("paths") / "store.duckdb")
    s.write_dataset(_small(6))
    run_interventions(
        s,
        "small",
        EmbeddedReader(),
        name="cr",
        operators=("remove", "duplicate"),
        positions=("front",),
        two_support=False,
        zero_retrieval=False,
    )
    return s


@pytest.mark.parametrize("ks", [(1, 3), (2, 8, 20), (4,), (3, 25)])
def test_retrieval_view_equals_the_direct_audit(store: Store, ks: tuple[int, ...]) -> None:
    clear_cache()
    sel = Selection(dataset="small", options={"retrievers": ["lexical", "oracle"], "ks": list(ks)})
    per, agg = retrieval_audit_frames(store, sel)
    direct = retrieval_audit(store.load_instances("small"), ("lexical", "oracle"), ks)
    pd.testing.assert_frame_equal(per, direct.per_instance, check_dtype=False)
    # every instance has passage text: none left out (n_no_text, missing: issue 36 item 1)
    assert (agg["n_no_text"] == 0).all() and agg["missing"].isna().all()
    agg = agg.drop(columns=["n_no_text", "missing"])
    pd.testing.assert_frame_equal(agg, direct.aggregate, check_dtype=False)
    assert sorted(set(agg["k"])) == sorted(ks) and set(agg["n_instances"]) == {6}


def test_retrieval_view_reuses_the_audit_across_offered_ks(store: Store) -> None:
    clear_cache()
    a = Selection(dataset="small", options={"retrievers": ["lexical"], "ks": [1]})
    retrieval_audit_frames(store, a)
    from core.views import common

    n = len(common._CACHE)
    retrieval_audit_frames(store, replace(a, options={"retrievers": ["lexical"], "ks": [8, 16]}))
    assert len(common._CACHE) == n  # an offered k: no new entry
    retrieval_audit_frames(store, replace(a, options={"retrievers": ["lexical"], "ks": [7]}))
    assert len(common._CACHE) == n + 1  # not offered: audited with the offered ones
    assert 7 not in OFFERED_KS


def test_retrieval_view_rejects_bad_k(store: Store) -> None:
    with pytest.raises(ValueError):
        retrieval_audit_frames(store, Selection(dataset="small", options={"ks": [0, 3]}))


def test_cuer_view_equals_the_direct_frames_and_ignores_other_options(store: Store) -> None:
    clear_cache()
    sel = Selection(dataset="small", options={"eps": 0.05, "tau": 0.5})
    got = cuer_result(store, sel)
    other = cuer_result(store, replace(sel, options={**sel.options, "drill": "x", "ks": [3]}))
    assert other is got  # options the frames do not read share the entry
    preds = load_pairs(store, ["cr"])
    pairs = intervention_pairs(preds, 0.05, 0.5, got["correctness_axis"])
    pairs.insert(1, "dataset", "small")
    assert len(got["pairs"]) == len(pairs) > 0
    pd.testing.assert_frame_equal(got["pairs"], pairs)
    for name, direct in (("roles", role_counts(pairs)), ("deltas", paired_deltas(pairs))):
        pd.testing.assert_frame_equal(got[name].per_instance, direct.per_instance)
        pd.testing.assert_frame_equal(got[name].aggregate, direct.aggregate)
    changed = cuer_result(store, replace(sel, options={**sel.options, "eps": 0.2}))
    assert changed is not got
