"""Agreement of attribution weights with CUE-R's remove operator (issue 40 item 4).

Both runs on the same 12 instances of controlled-200 with the embedded reader: CUE-R's base
trace is the lexical top-5 retrieval, so the attribution run ablates that same retrieved
context. The report's pairs are checked one by one against the two runs' own rows, and its
Spearman against scipy's on those pairs.
"""

from __future__ import annotations

import pytest
from scipy.stats import spearmanr

from core.attribution.report import analyze, attribution_report
from core.backends import EmbeddedReader
from core.cuer.metrics import intervention_pairs, load_pairs
from core.datasets.controlled import build_controlled
from core.execution.runs import run_attribution, run_interventions
from core.store import Store
from core.types import Dataset


def test_agreement_with_cuer_remove(tmp_path):
    store = Store(tmp_path / "a.duckdb")
    full = build_controlled(preset="controlled-200", seed=42, name="c12")
    store.write_dataset(Dataset("c12", full.source, full.builder, {}, full.instances[:12]))
    reader = EmbeddedReader()
    run_interventions(store, "c12", reader, name="cuer", top_k=5)
    run_attribution(store, "c12", reader, name="att", condition="retrieved", top_k=5, ablations=32)
    rep = attribution_report(store, "att", cuer_run="cuer", n_boot=50)
    ag = rep["agreement"]
    assert ag["cuer_run"] == "cuer" and ag["n_pairs"] >= 10 and ag["n_instances"] >= 6

    weights = analyze(store, "att", n_boot=50).passages.set_index(["instance_id", "passage_id"])
    pairs = intervention_pairs(load_pairs(store, ["cuer"]))
    for iid, pid, w, delta in ag["pairs"]:
        assert weights.loc[(iid, pid), "weight"] == pytest.approx(w)
        rows = pairs[
            (pairs["instance_id"] == iid)
            & (pairs["target"] == pid)
            & pairs["operator"].isin(["remove", "two_support"])
        ]
        assert delta in set(rows["delta_f1"])
    rho = spearmanr([p[2] for p in ag["pairs"]], [p[3] for p in ag["pairs"]]).statistic
    assert ag["spearman"] == pytest.approx(rho)
