"""Attribution runs on controlled-200 with the embedded reader (issue 40, done-when 2 and 4).

Full context, 32 ablations, through ``run-attribution``: among the instances answered
correctly, the top-weighted passage is a gold passage for at least 90 %; the median LDS is
reported; rerunning makes no model call (the same name: every call stored; another name:
every call from the response cache). The Attribution page (AppTest) shows the report's
numbers.
"""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from core.cli import main
from core.store import Store

pytestmark = pytest.mark.slow

_DS, _RUN = "controlled-200", "attr-c200"


@pytest.fixture(scope="module")
def c200(tmp_path_factory):
    db = tmp_path_factory.mktemp("attr") / "c200.duckdb"
    assert main(["generate", "controlled", "--preset", _DS, "--seed", "42", "--db", str(db)]) == 0
    argv = [
        "run-attribution",
        "--db",
        str(db),
        "--dataset",
        _DS,
        "--backend",
        "embedded",
        "--condition",
        "full_context",
        "--ablations",
        "32",
        "--name",
        _RUN,
        "--json",
    ]
    assert main(argv) == 0
    return db, argv


@pytest.fixture(scope="module")
def report(c200):
    """The run's report (``report attribution --json``), computed once for the module."""
    import contextlib
    import io

    db, _ = c200
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        # the fewest resamples the report takes: what is asserted (the top-weighted passage,
        # the LDS) comes from the weights and the held-out fit, not from the weights' CIs
        argv = ["report", "attribution", "--db", str(db), "--run", _RUN, "--n-boot", "50"]
        assert main([*argv, "--json"]) == 0
    return json.loads(out.getvalue())


def _json(capsys, argv):
    capsys.readouterr()
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_top_passage_is_gold_and_a_rerun_makes_no_call(c200, report, capsys):
    db, argv = c200
    rep = report
    assert rep["n_instances"] == 200 and rep["calls"]["ablations"] == 200 * 32
    assert rep["calls"]["failed"] == 0
    top = rep["top_gold"]
    assert top["n_correct"] >= 100
    assert top["rate"] >= 0.90, top
    assert rep["lds"]["median"] is not None and -1.0 <= rep["lds"]["median"] <= 1.0
    print(
        f"controlled-200: top passage gold for {top['top_is_gold']} of {top['n_correct']} "
        f"({top['rate']:.3f}); median LDS {rep['lds']['median']:.3f}; LDS < 0.3: "
        f"{rep['lds']['below']}"
    )
    # the same command again: every call is stored, none is made
    again = _json(capsys, argv)
    assert again["executed"] == 0 and again["cached"] == 0
    assert again["skipped_existing"] == again["planned"] > 200 * 33
    # another run of the same settings on the first 20 instances: every reply comes from the
    # response cache (its prompts are the same)
    other = _json(capsys, [*argv[:-3], "--instances", "20", "--name", "attr-c200-again", "--json"])
    assert other["executed"] == 0 and other["cached"] == other["planned"] > 20 * 33
    store = Store(db)
    store.delete_run("attr-c200-again")  # the page test reads the store's one attribution run
    assert store.run_row(_RUN)["kind"] == "attribution"
    assert store.run_row(_RUN)["retrieval"]["attribution"] == {
        "condition": "full_context",
        "ablations": 32,
        "keep": 0.5,
        "seed": 0,
        "target": "retention",
        "score_field": "soft_correct",
    }


def test_logprob_is_refused_with_one_line(c200, capsys):
    db, argv = c200
    capsys.readouterr()
    bad = [*argv[:-3], "--target", "logprob", "--name", "lp"]
    assert main(bad) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "forced continuation" in err
    assert Store(db).run_row("lp") is None


def test_attribution_page_shows_the_report(c200, monkeypatch, capsys, tmp_path):
    """The page on a copy of the store holding one attribution run of 20 instances (its
    replies from the response cache the 200-instance run filled; the report of 20 instances
    takes a tenth of the 200's fit), against that run's ``report attribution --json``."""
    import shutil

    from streamlit.testing.v1 import AppTest

    src, argv = c200
    db = tmp_path / "page.duckdb"
    shutil.copyfile(src, db)
    Store(db).delete_run(_RUN)
    small = [a if a != str(src) else str(db) for a in argv[:-3]]
    run = _json(capsys, [*small, "--instances", "20", "--name", "attr-20", "--json"])
    assert run["executed"] == 0 and run["cached"] == run["planned"]
    rep = _json(capsys, ["report", "attribution", "--db", str(db), "--run", "attr-20", "--json"])
    assert rep["n_instances"] == 20
    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300)
    at.switch_page("screens/attribution.py")
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.title[0].value == "Attribution"
    table = next(
        d.value
        for d in at.dataframe
        if "causal" in d.value.columns and "not causal" in d.value.columns
    )
    cells = rep["cited_vs_causal"]["cells"]
    assert list(table["causal"]) == [cells["cited_causal"], cells["not_cited_causal"]]
    assert list(table["not causal"]) == [cells["cited_not_causal"], cells["not_cited_not_causal"]]
    weights = next(d.value for d in at.dataframe if "weight" in d.value.columns)
    first = [p for p in rep["passages"] if p["instance_id"] == rep["instances"][0]["instance_id"]]
    assert list(weights["passage_id"]) == [p["passage_id"] for p in first]
    assert list(weights["weight"]) == pytest.approx([p["weight"] for p in first], nan_ok=True)
