"""End to end: fanin-grid through the engine with the embedded reader, then the CLI reports."""

from __future__ import annotations

import json

import pytest
from scipy.stats import pearsonr

from core.backends import EmbeddedReader
from core.cli import main
from core.datasets.controlled import build_controlled
from core.execution.runs import run_conditions
from core.retrieval.retrievers import retrieval_diagnostics, retrieve
from core.store import Store


@pytest.fixture(scope="module")
def grid_store(tmp_path_factory) -> Store:
    store = Store(tmp_path_factory.mktemp("fanin") / "store.duckdb")
    store.write_dataset(build_controlled("fanin-grid", seed=42))
    summary = run_conditions(
        store,
        "fanin-grid",
        EmbeddedReader(),
        ["retrieved", "oracle", "full_context"],
        name="emb",
        retriever="lexical",
        top_k=3,
    )
    assert summary.errors == 0 and summary.executed == 3 * 144
    return store


def _cli_json(capsys, *argv) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_fanin_report_shows_ac_and_er_falling_with_fan_in(grid_store, capsys):
    out = _cli_json(
        capsys,
        "report",
        "fanin",
        "--db",
        str(grid_store.path),
        "--runs",
        "emb",
        "--json",
        "--resamples",
        "1000",
    )
    rows = {(r["condition"], r["bucket"]): r for r in out["by_bucket"]}
    single, low, high = (rows[("retrieved", b)] for b in ("single", "low", "high"))
    assert (single["n"], low["n"], high["n"]) == (24, 48, 72)
    # ER falls bucket by bucket; AC never rises and collapses at high fan-in.
    assert single["er"] > low["er"] > high["er"]
    assert single["ac"] >= low["ac"] > high["ac"]
    assert single["ac"] - high["ac"] > 30
    deg = {r["condition"]: r for r in out["degradation"]}
    assert deg["retrieved"]["rel_degradation"] < -0.5
    assert deg["retrieved"]["rel_degradation"] == pytest.approx(
        (high["ac"] - single["ac"]) / single["ac"]
    )
    # Construction loss: retrieved drops more than the oracle's synthesis baseline.
    assert deg["retrieved"]["construction_loss_pp"] == pytest.approx(
        100 * (deg["retrieved"]["rel_degradation"] - deg["oracle"]["rel_degradation"])
    )
    assert deg["retrieved"]["construction_loss_pp"] < 0
    # Per exact fan-in: the least-squares slope of AC on fan-in is negative.
    pts = [(r["fan_in"], r["ac"]) for r in out["by_fan_in"] if r["condition"] == "retrieved"]
    assert [f for f, _ in pts] == [1, 2, 3, 4, 5, 6]
    mf = sum(f for f, _ in pts) / 6
    ma = sum(a for _, a in pts) / 6
    assert sum((f - mf) * (a - ma) for f, a in pts) < 0
    # The oracle pack is the gold evidence: ER = EP = 1 at every fan-in.
    assert all(
        rows[("oracle", b)]["er"] == 1.0 == rows[("oracle", b)]["ep"]
        for b in ("single", "low", "high")
    )
    # Per-instance rows drill down to the numbers: retrieved high-bucket AC is their mean.
    inst = [
        r for r in out["per_instance"] if r["condition"] == "retrieved" and r["bucket"] == "high"
    ]
    assert len(inst) == 72
    assert sum(r["ac"] for r in inst) / 72 == pytest.approx(high["ac"])
    # Pearson r as seed 003 Fig. 3: the retrieved system x 3 buckets, oracle and full context
    # left out (and said so).
    corr = out["correlation"]
    assert corr["er_ac"]["n"] == 3 and corr["points_level"] == "bucket"
    assert corr["systems"] == ["emb:retrieved"] and corr["levels"] == ["single", "low", "high"]
    assert corr["excluded"] == {"oracle": 3, "full_context": 3}
    pts = corr["points"]
    assert corr["er_ac"]["r"] == pytest.approx(
        pearsonr([p["er"] for p in pts], [p["ac"] for p in pts]).statistic
    )
    every = _cli_json(
        capsys,
        "report",
        "fanin",
        "--db",
        str(grid_store.path),
        "--runs",
        "emb",
        "--json",
        "--no-instances",
        "--resamples",
        "200",
        "--points",
        "fan_in",
        "--r-include-oracle",
        "--r-include-full-context",
    )
    assert every["correlation"]["er_ac"]["n"] == 18  # 3 systems with packs x 6 fan-ins
    assert every["correlation"]["excluded"] == {}


def test_fanin_report_text_and_errors(grid_store, capsys):
    assert main(["report", "fanin", "--db", str(grid_store.path), "--runs", "emb"]) == 0
    text = capsys.readouterr().out
    assert "emb:retrieved" in text and "relative degradation" in text and "ER-AC r =" in text
    assert (
        "Pearson r over 3 (system, bucket) points: 1 system (emb:retrieved) x buckets "
        "single, low, high; left out: oracle (3 points"
    ) in text
    assert (
        main(
            [
                "report",
                "fanin",
                "--db",
                str(grid_store.path),
                "--runs",
                "emb",
                "--r-include-oracle",
                "--resamples",
                "100",
            ]
        )
        == 0
    )
    assert "over 6 (system, bucket) points: 2 systems" in capsys.readouterr().out
    assert main(["report", "fanin", "--db", str(grid_store.path), "--runs", "nope"]) == 1
    assert "no runs matching 'nope'" in capsys.readouterr().err


def test_crux_report_on_fanin_grid(grid_store, capsys):
    out = _cli_json(
        capsys,
        "report",
        "crux",
        "--db",
        str(grid_store.path),
        "--dataset",
        "fanin-grid",
        "--retrievers",
        "lexical,oracle",
        "--k",
        "1,3",
        "--json",
        "--resamples",
        "500",
    )
    assert out["answerability_source"] == "gold"
    agg = {(r["retriever"], r["k"]): r for r in out["aggregate"]}
    assert set(agg) == {("lexical", 1), ("lexical", 3), ("oracle", 1), ("oracle", 3)}
    # The oracle's first chunk is the greedy-ideal one: alpha-nDCG@1 = 1 for every instance.
    assert agg[("oracle", 1)]["alpha_ndcg"] == pytest.approx(1.0)
    for k in (1, 3):
        assert agg[("oracle", k)]["coverage"] >= agg[("lexical", k)]["coverage"]
    assert agg[("lexical", 3)]["coverage"] > agg[("lexical", 1)]["coverage"]
    # With answerability derived from gold, Cov(Z) is the retrieval audit's gold recall.
    recall = {
        inst.instance_id: retrieval_diagnostics(inst, retrieve(inst, "lexical", 3))["recall"]
        for inst in grid_store.load_instances("fanin-grid")
    }
    per = [r for r in out["per_context"] if (r["retriever"], r["k"]) == ("lexical", 3)]
    assert len(per) == 144
    for r in per:
        assert r["coverage"] == pytest.approx(recall[r["instance_id"]])


# ------------------------------------------------------------------- figures, tables, page


def test_registered_fanin_and_crux_views_show_the_report_numbers(grid_store):
    from core.fanin.metrics import fanin_report
    from core.figures import Selection
    from core.views.catalog import get_figure, get_table

    sel = Selection(dataset="fanin-grid", runs=("emb",), options={"n_resamples": 300})
    res = fanin_report(grid_store, ["emb"], n_resamples=300)
    fig, data = get_figure("fanin_degradation").build(grid_store, sel)
    ret = data[data["condition"] == "retrieved"].set_index("fan_in")
    ref = res.by_fan_in[res.by_fan_in["condition"] == "retrieved"].set_index("fan_in")
    assert list(ret.index) == [1, 2, 3, 4, 5, 6]
    assert ret["ac"].tolist() == pytest.approx(ref["ac"].tolist())
    assert {t.name for t in fig.data if t.name} == {"full_context", "oracle", "retrieved"}
    fig, pts = get_figure("fanin_scatter").build(grid_store, sel)
    assert len(pts) == 3 and "ER-AC: r = " in fig.layout.annotations[0].text
    assert "Pearson r over 3 (system, bucket) points" in fig.layout.annotations[-1].text
    with_oracle = Selection(
        dataset="fanin-grid", runs=("emb",), options={"n_resamples": 300, "r_include_oracle": True}
    )
    _, pts = get_figure("fanin_scatter").build(grid_store, with_oracle)
    assert len(pts) == 6 and set(pts["condition"]) == {"retrieved", "oracle"}
    deg = get_table("fanin_degradation").build(grid_store, sel).set_index("condition")
    want = res.degradation.set_index("condition")
    assert deg.loc["retrieved", "rel. drop %"] == round(
        100 * want.loc["retrieved", "rel_degradation"], 1
    )
    assert deg.loc["retrieved", "construction loss pp"] == round(
        want.loc["retrieved", "construction_loss_pp"], 1
    )
    buckets = get_table("fanin_buckets").build(grid_store, sel)
    assert set(buckets["bucket"]) == {"single", "low", "high", "all"}
    assert len(get_table("fanin_pairs").build(grid_store, sel)) == 3
    # Metadata filters restrict the instances: comparison questions only (8 per fan-in).
    only = Selection(
        dataset="fanin-grid",
        runs=("emb",),
        filters={"reasoning_type": ("comparison",)},
        options={"n_resamples": 200},
    )
    _, data = get_figure("fanin_degradation").build(grid_store, only)
    assert set(data["n"]) == {8}
    # CRUX under the names the Retrieval page renders.
    crux = Selection(
        dataset="fanin-grid",
        options={"crux_retrievers": ["oracle"], "crux_ks": [1], "n_resamples": 200},
    )
    fig, agg = get_figure("crux_coverage").build(grid_store, crux)
    assert agg["alpha_ndcg"].tolist() == pytest.approx([1.0])
    assert get_table("crux_table").build(grid_store, crux)["n"].tolist() == [144]


def test_fanin_page_renders(grid_store, monkeypatch):
    from conftest import open_page

    at = open_page(monkeypatch, grid_store.path, "screens/fanin.py", "fanin-grid")
    tables = {tuple(df.value.columns): df.value for df in at.dataframe}
    deg = next(v for k, v in tables.items() if "rel. drop %" in k).set_index("condition")
    assert deg.loc["retrieved", "rel. drop %"] < -50
    assert any("construction loss pp" in k for k in tables)
    assert len(at.get("plotly_chart")) == 2
    # The r settings: bucket points without the oracle by default; including it is a click.
    assert at.selectbox(key="fanin.points").value == "bucket"
    assert not at.checkbox(key="fanin.r_include_oracle").value

    def scatter_spec() -> str:
        return next(c.proto.spec for c in at.get("plotly_chart") if "ER-AC: r = " in c.proto.spec)

    assert "Pearson r over 3 (system, bucket) points" in scatter_spec()
    at.checkbox(key="fanin.r_include_oracle").check().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(at.get("plotly_chart")) == 2
    assert "Pearson r over 6 (system, bucket) points" in scatter_spec()
