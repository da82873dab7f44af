"""ONCU and sample means computed in the store (core.oncu.cells) equal the frame's.

The reference is the frame path, :func:`core.oncu.metrics.oncu_summary` and
:func:`core.oncu.metrics.sample_level_means` on :meth:`core.store.Store.analysis_frame`,
which the released tables pin bit for bit. Counts must be equal; means equal to 1e-12
(the store sums with compensation, the frame in its own order); resampled CIs of small
cells and multinomial CIs of value counts equal to the bit.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from conftest import build_release_store, study_into

from core.oncu.cells import MEAN_SCORES, store_oncu_summary, store_sample_means
from core.oncu.metrics import oncu_summary, sample_level_means
from core.store import Store

_COUNTS = (
    "valid_groups",
    "total_groups",
    "n",
    "missing",
    "n_above_oracle",
    "n_below_baseline",
    "small_groups",
)
_MEANS = ("oncu_clipped", "oncu_raw_mean", "oncu_weighted", "s_none", "s_oracle", "s_c")


def _runs(store: Store) -> list[str]:
    return sorted(store.runs_frame()["run_id"])


def _same_summary(got: pd.DataFrame, want: pd.DataFrame) -> None:
    assert len(got) == len(want) and len(want), (len(got), len(want))
    keys = ["run", "condition"]
    got = got.sort_values(keys).reset_index(drop=True)
    want = want.sort_values(keys).reset_index(drop=True)
    assert list(got.columns) == list(want.columns)
    for c in (*keys, *_COUNTS, "invalid_reasons", "group_key", "length_cell", "group_sizes"):
        assert got[c].tolist() == want[c].tolist(), c
    assert got["coarser_group_key"].tolist() == want["coarser_group_key"].tolist()
    for c in (*_MEANS, "oncu_ci_low", "oncu_ci_high", "median_group_size"):
        np.testing.assert_allclose(got[c], want[c], rtol=1e-12, atol=1e-12, err_msg=c)
    for a, b in zip(got["sample_means"], want["sample_means"], strict=True):
        assert a.keys() == b.keys()
        for k in a:
            assert math.isclose(a[k], b[k], rel_tol=1e-12, abs_tol=1e-12) or (
                math.isnan(a[k]) and math.isnan(b[k])
            ), (k, a[k], b[k])


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Store:
    return build_release_store(tmp_path_factory.mktemp("cells") / "s.duckdb", hotpotqa=True)


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Store:
    return study_into(Store(tmp_path_factory.mktemp("cells") / "study.duckdb"))


@pytest.mark.parametrize("field", ["f1_relaxed", "em_strict"])
@pytest.mark.parametrize(
    "key",
    [
        ("source", "model", "reasoning_type", "context_length", "evidence_position",
         "evidence_density", "distractor_similarity"),
        ("reasoning_type", "length_bucket"),
        ("context_length_exact", "evidence_position"),
        (),
    ],
)  # fmt: skip
def test_the_store_summary_is_the_frame_summary(release, field, key):
    runs = _runs(release)
    frame = release.analysis_frame(runs)
    want = oncu_summary(frame, field, key, n_resamples=400)
    got = store_oncu_summary(release, runs, field, key, n_resamples=400)
    _same_summary(got, want)


def test_the_store_summary_on_the_study_store(study):
    runs = _runs(study)
    frame = study.analysis_frame(runs)
    conditions = tuple(c for c in frame["condition"].unique() if c not in ("no_evidence", "oracle"))
    want = oncu_summary(frame, "f1_relaxed", conditions=conditions, n_resamples=300)
    got = store_oncu_summary(study, runs, "f1_relaxed", conditions=conditions, n_resamples=300)
    _same_summary(got, want)
    # the coarser key is searched on the store's census as on the frame's rows
    assert got["coarser_group_key"].notna().any() == want["coarser_group_key"].notna().any()


@pytest.mark.parametrize("method", ["auto", "multinomial"])
def test_the_store_sample_means_are_the_frame_means(release, study, method):
    for store in (release, study):
        runs = _runs(store)
        want = sample_level_means(store.analysis_frame(runs), ci=True, n_resamples=300,
                                  ci_method=method)  # fmt: skip
        got = store_sample_means(store, runs, ci=True, n_resamples=300, ci_method=method)
        assert list(got.columns) == list(want.columns)
        keys = ["run", "model", "dataset", "condition"]
        assert got[keys].values.tolist() == want[keys].values.tolist()
        for c in ("n", "missing", "n_parse_error", "ci_method"):
            assert got[c].tolist() == want[c].tolist(), c
        for c in MEAN_SCORES:
            np.testing.assert_allclose(got[c], want[c], rtol=1e-12, atol=1e-13, err_msg=c)
            # resampled from the same values in the same order, or drawn from the same counts
            unbinned = got["ci_method"] != "multinomial-binned"
            for side in ("low", "high"):
                col = f"{c}_ci_{side}"
                assert got.loc[unbinned, col].equals(want.loc[unbinned, col]), col


@pytest.mark.parametrize("sampled", [False, True])
def test_a_large_cell_is_drawn_from_its_counts(tmp_path, monkeypatch, sampled):
    """Cells above RESAMPLE_MAX: the multinomial CI from the store's value counts, to the bit;
    a column of many distinct values binned in the store close to the frame's bins. The
    same where a sample of the rows tells which columns to count (a study's millions)."""
    import core.store.cell_rows as cell_rows
    from core.stats.inference import RESAMPLE_MAX

    if sampled:
        monkeypatch.setattr(cell_rows, "_SAMPLED_ROWS", 0)
    store = Store(tmp_path / "big.duckdb")
    n = RESAMPLE_MAX + 500
    _write_run(store, n)
    runs = ["big"]
    want = sample_level_means(store.analysis_frame(runs), ci=True, n_resamples=500)
    got = store_sample_means(store, runs, ci=True, n_resamples=500)
    assert set(got["ci_method"]) == {"multinomial-binned"}
    for c in ("em_strict", "f1_relaxed"):  # few distinct values: exact counts
        for side in ("low", "high"):
            assert got[f"{c}_ci_{side}"].equals(want[f"{c}_ci_{side}"]), c
    # confidence_error: 2,500 distinct values, binned in the store; ev_f1: 500 distinct
    # values, counted in the store and binned here (bin means are sums: last bits)
    for c in ("confidence_error", "ev_f1"):
        for side in ("low", "high"):
            col = f"{c}_ci_{side}"
            np.testing.assert_allclose(got[col], want[col], rtol=1e-9, err_msg=col)
    for c in MEAN_SCORES:
        np.testing.assert_allclose(got[c], want[c], rtol=1e-12, err_msg=c)
    assert got["missing"].tolist() == want["missing"].tolist() == [n // 97 + 1] * 2
    # ONCU's group cells skip the NaN scores as the frame's means do
    frame = store.analysis_frame(runs)
    cells = store.group_cells(runs, ["f1_relaxed"], []).sort_values("condition")
    by = frame.groupby("condition")["f1_relaxed"]
    assert cells["scored_f1_relaxed"].tolist() == by.count().tolist()
    np.testing.assert_allclose(cells["total_f1_relaxed"], by.sum(), rtol=1e-12)


def _same_census(store: Store, runs: list[str], cells: list[str], plain: bool = True) -> bool:
    """The group pass's census, where it derives one, is the census; whether it did."""
    derived = store.group_pass(runs, ["f1_relaxed"], cells, plain=plain)[1]
    if derived is None:
        return False
    (got, same), (want, same_too) = derived, store.group_census(runs, cells, plain=plain)
    got, want = (x.sort_values(["run", *cells]).reset_index(drop=True) for x in (got, want))
    assert list(got.columns) == list(want.columns)
    for c in want.columns:
        assert got[c].astype(str).tolist() == want[c].astype(str).tolist(), c
    assert same == same_too
    return True


def test_the_census_is_derived_from_the_group_counts_only_where_it_follows(tmp_path, study):
    """Where every instance of a group has a row in some condition, the group pass's counts
    are the census; where one lacks every row, no census is derived (a pass of its own)."""
    for _, mine in study.runs_frame().groupby("dataset_id"):
        for cells in (["reasoning_type", "context_length"], []):
            for plain in (True, False):  # with variants' rows: not one row per instance
                _same_census(study, sorted(mine["run_id"]), cells, plain)
    store = Store(tmp_path / "big.duckdb")
    _write_run(store, 300)
    cells = ["context_length", "evidence_position"]
    assert _same_census(store, ["big"], cells)
    assert _same_census(store, ["big"], cells, plain=False)  # no variant: the same
    with store.connect() as con:  # one condition without an instance: the other holds it
        con.execute("DELETE FROM scores WHERE instance_id = 'i00007' AND condition = 'oracle'")
    assert _same_census(store, ["big"], cells)
    rows = int(store.group_cells(["big"], ["f1_relaxed"], cells)["rows"].sum())
    with store.connect() as con:  # a score row of an instance the dataset does not hold
        con.execute(
            "INSERT INTO scores (run_id, instance_id, condition) VALUES ('big', 'x', 'oracle')"
        )
    assert not _same_census(store, ["big"], cells)
    assert int(store.group_cells(["big"], ["f1_relaxed"], cells)["rows"].sum()) == rows
    with store.connect() as con:
        con.execute("DELETE FROM scores WHERE instance_id = 'x'")
    with store.connect() as con:  # no row of the instance left: its group lacks it
        con.execute("DELETE FROM scores WHERE instance_id = 'i00007'")
    assert not _same_census(store, ["big"], cells)
    census, same = store.group_census(["big"], cells, plain=True)
    assert int(census["n_instances"].sum()) == 299 and same


def _write_run(store: Store, n: int) -> None:
    """A dataset of ``n`` instances and a run ``big`` of two conditions, scored by hand:
    exact-match and F1 of a few values, a confidence error of ``n`` distinct values, some
    failed calls (NULL scores, an error) and NaN scores."""
    import duckdb

    from core.types import Dataset, Instance, Passage

    gold = Passage("p1", 0, "T", "text", "d1", "gold", True)
    instances = tuple(
        Instance(instance_id=f"i{i:05d}", question=f"q{i}", gold_answer="a", passages=(gold,),
                 context_length=4000 * (1 + i % 3), evidence_position="front",
                 reasoning_type="single_hop", oracle_applicable=True, source="t")
        for i in range(n)
    )  # fmt: skip
    store.write_dataset(Dataset("d", "t", "manual", {}, instances))
    rng = np.random.default_rng(3)
    with duckdb.connect(str(store.path)) as con:
        con.execute("INSERT INTO runs (run_id, dataset_id, model) VALUES ('big', 'd', 'm')")
        for cond in ("no_evidence", "oracle"):
            ids = [f"i{i:05d}" for i in range(n)]
            error = [("timeout" if i % 97 == 0 else " " if i % 89 == 0 else None) for i in range(n)]
            con.execute(
                "INSERT INTO predictions (run_id, instance_id, condition, variant, error) "
                "SELECT 'big', unnest(?), ?, '', unnest(?)",
                [ids, cond, error],
            )
            em = rng.integers(0, 2, n).astype(float)
            f1 = rng.choice([0.0, 0.25, 0.5, 2 / 3, 1.0], n)
            conf = rng.random(n)
            em[::97] = f1[::97] = conf[::97] = np.nan  # the failed calls: NULL below
            f1[5::131] = np.nan  # a NaN score (stored as NaN, not NULL)
            ev = rng.integers(0, 500, n) / 499  # 500 distinct values: counted, then binned
            frame = pd.DataFrame({"instance_id": ids, "em": em, "f1": f1, "ce": conf, "ev": ev})
            failed = pd.Series(error).eq("timeout").to_numpy()
            con.register("v", frame)
            con.execute(
                "INSERT INTO scores (run_id, instance_id, condition, variant, em_strict, "
                "f1_strict, em_relaxed, f1_relaxed, confidence_error, ev_f1) "
                "SELECT 'big', instance_id, ?, '', em, f1, em, f1, ce, ev FROM v",
                [cond],
            )
            con.unregister("v")
            con.execute(
                "UPDATE scores SET em_strict = NULL, f1_strict = NULL, em_relaxed = NULL, "
                "f1_relaxed = NULL, confidence_error = NULL WHERE condition = ? "
                "AND list_contains(?, instance_id)",
                [cond, [i for i, f in zip(ids, failed, strict=True) if f]],
            )


def test_report_oncu_computes_in_the_store_above_its_threshold(release, monkeypatch):
    """``report oncu`` on a study's millions of predictions takes the store path: the same
    objects as the frame path (here with the threshold lowered to take it)."""
    import core.commands.report as report

    want = report.oncu_report(release, None, "f1_relaxed")
    monkeypatch.setattr(report, "STORE_PATH_PREDICTIONS", 0)
    monkeypatch.setattr(report, "oncu_summary", None)  # the frame path would fail now
    got = report.oncu_report(release, None, "f1_relaxed")
    assert [(g["run"], g["condition"]) for g in got] == [(w["run"], w["condition"]) for w in want]
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for k, v in w.items():
            if isinstance(v, float):
                assert math.isclose(g[k], v, rel_tol=1e-12, abs_tol=1e-12), k
            elif k != "sample_means":
                assert g[k] == v, k


def _same_table(
    got: pd.DataFrame, want: pd.DataFrame, name: str, rtol: float, as_text: bool = False
) -> None:
    """The same columns and rows; numbers to ``rtol``, the rest equal (``as_text``: as text)."""
    assert list(got.columns) == list(want.columns), name
    assert len(got) == len(want) > 0, name
    for c in want.columns:
        a, b = got[c], want[c]
        if pd.api.types.is_float_dtype(b):
            np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12, err_msg=f"{name}.{c}")
        elif as_text:
            assert a.astype(str).tolist() == b.astype(str).tolist(), f"{name}.{c}"
        else:
            assert a.tolist() == b.tolist(), f"{name}.{c}"


@pytest.mark.parametrize("dataset", ["controlled-200", None])
def test_the_conditions_page_tables_from_rows_left_in_the_store(study, monkeypatch, dataset):
    """Above STORE_ROWS predictions the page's ONCU summary and condition matrix come from
    rows left in the store: the same tables as from the frame (threshold lowered here)."""
    import core.views.oncu as views_oncu
    from core.oncu.cells import StoredRows
    from core.selection import Selection
    from core.views.catalog import get_figure, get_table

    sel = Selection(dataset=dataset)
    names = ("oncu_summary", "condition_matrix")
    want = {n: get_table(n).build(study, sel) for n in names}
    want_fig = get_figure("condition_matrix").build(study, sel)[1]
    assert isinstance(views_oncu.plain_rows(study, sel), pd.DataFrame)
    monkeypatch.setattr(views_oncu, "STORE_ROWS", 0)
    rows = views_oncu.plain_rows(study, sel)
    assert isinstance(rows, StoredRows), type(rows)  # one run, or runs of several datasets
    got = {n: get_table(n).build(study, sel) for n in names}
    got_fig = get_figure("condition_matrix").build(study, sel)[1]
    for n in names:
        _same_table(got[n], want[n], n, rtol=1e-12)
    pd.testing.assert_frame_equal(got_fig, want_fig, check_exact=False, rtol=1e-12)


def test_the_length_page_tables_from_rows_left_in_the_store(study, monkeypatch):
    """The Length & position page's tables and the scaling statistics from rows left in the
    store equal the frame's; per-instance ONCU falls back to the frame."""
    import core.views.oncu as views_oncu
    from core.selection import Selection
    from core.views.catalog import get_table

    sel = Selection(dataset="controlled-200")
    per_instance = Selection(dataset="controlled-200", options={"group_key": ["instance_id"]})
    names = ("length_position", "oncu_groups", "scaling_by_length", "scaling_contrasts")
    want = {n: get_table(n).build(study, sel) for n in names}
    want_pi = get_table("oncu_groups").build(study, per_instance)
    monkeypatch.setattr(views_oncu, "STORE_ROWS", 0)
    got = {n: get_table(n).build(study, sel) for n in names}
    got_pi = get_table("oncu_groups").build(study, per_instance)
    pd.testing.assert_frame_equal(got_pi, want_pi)
    for n in names:
        _same_table(got[n], want[n], n, rtol=1e-9, as_text=True)


def test_threads_asking_for_the_same_read_wait_for_it(study, monkeypatch):
    """A page prefetches its condition matrix beside its ONCU summary: threads asking the
    rows for the same read at once make it once (the others wait), with the same tables."""
    import threading

    import core.views.oncu as views_oncu
    from core.oncu.cells import StoredRows
    from core.selection import Selection

    runs = _runs(study)
    sel = Selection(dataset="controlled-200")
    assert not views_oncu.rows_in_store(study, sel)
    monkeypatch.setattr(views_oncu, "STORE_ROWS", 0)
    assert views_oncu.rows_in_store(study, sel)
    calls = {"sample_pass": 0, "group_pass": 0}
    for name in calls:
        real = getattr(study, name)

        def counted(*a, _real=real, _name=name, **k):
            calls[_name] += 1
            return _real(*a, **k)

        monkeypatch.setattr(study, name, counted)
    rows = StoredRows(study, runs, True, 1)
    bootstrap = (200, 42, 0.95, "auto")
    out: list = []
    go = threading.Barrier(4)

    def ask(kind: str) -> None:
        go.wait()
        if kind == "means":
            out.append(rows.sample_means(True, bootstrap))
        else:
            out.append(rows.oncu_summary("f1_relaxed", ("reasoning_type",), ("retrieved",),
                                         (200, 42, 0.95, True)))  # fmt: skip

    threads = [threading.Thread(target=ask, args=(k,)) for k in ("means", "means", "s", "s")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == {"sample_pass": 1, "group_pass": 1}
    means = [o for o in out if "ci_method" in o.columns]
    summaries = [o for o in out if "oncu_clipped" in o.columns]
    assert len(means) == len(summaries) == 2
    pd.testing.assert_frame_equal(means[0], means[1])
    pd.testing.assert_frame_equal(summaries[0], summaries[1])
    want = store_sample_means(study, runs, ci=True, n_resamples=200, plain=True)
    pd.testing.assert_frame_equal(means[0], want)
