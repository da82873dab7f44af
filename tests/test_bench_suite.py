"""bench/run_all.py: figures, the table and the exit status, with fake results (no benchmarks)."""

import json
import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import run_all


def _fake(name, value, bound, better="lower", runs=None):
    return run_all.figure(name, runs or [value], "s", f"bench_{name}.py", bound, better)


def test_figure_is_median_and_checks_its_bound():
    f = run_all.figure("x", [3.0, 1.0, 2.0], "s", "bench_x.py", bound=2.5)
    assert f["value"] == 2.0 and f["ok"] is True and f["runs"] == [3.0, 1.0, 2.0]
    assert set(run_all.KEYS) <= set(f)
    assert run_all.figure("x", [3.0], "s", "b.py", bound=2.5)["ok"] is False
    assert run_all.figure("x", [200.0], "calls/s", "b.py", 200, "higher")["ok"] is True
    assert run_all.figure("x", [199.9], "calls/s", "b.py", 200, "higher")["ok"] is False
    assert run_all.figure("x", [1e9], "s", "b.py")["ok"] is True  # informational
    assert run_all.figure("x", [2.0], "s", "b.py", bound=2.0)["ok"] is False  # "< 2 s"
    with pytest.raises(ValueError, match="better"):
        run_all.figure("x", [1.0], "s", "b.py", 1.0, "smaller")


def test_passes_rejects_nan_against_a_bound():
    assert run_all.passes(math.nan, 1.0, "lower") is False
    assert run_all.passes(math.nan, None, "lower") is True


def test_table_and_markdown_show_bound_and_verdict():
    figs = [
        _fake("scoring", 0.63, 2.0),
        _fake("embedded", 150.0, 200.0, "higher"),
        _fake("import", 1500.0, None, "higher"),
    ]
    text = run_all.table(figs)
    lines = text.splitlines()
    assert lines[0].split() == run_all.HEADER and len(lines) == 5
    assert "< 2 s" in lines[2] and " ok " in lines[2]
    assert ">= 200 s" in lines[3] and "MISSED" in lines[3]
    assert "info" in lines[4] and "1,500 s" in lines[4]
    md = run_all.markdown(figs)
    assert md.splitlines()[0] == "| what | script | bound | measured (median) | runs | ok |"
    assert "| scoring | `bench/bench_scoring.py` | < 2 s | 0.630 s | 0.630 | ok |" in md


def test_exit_status():
    assert run_all.exit_status([_fake("a", 1.0, 2.0), _fake("b", 9.0, None)]) == 0
    assert run_all.exit_status([_fake("a", 3.0, 2.0), _fake("b", 9.0, None)]) == 1
    assert run_all.exit_status([]) == 1


def test_validate_turns_contract_breaches_into_errors():
    assert run_all.validate("x", [])[0]["error"]
    assert run_all.validate("x", [{"name": "y"}])[0]["error"].startswith("figure without")
    lying = {**_fake("x", 5.0, 2.0), "ok": True}  # the runner re-checks the bound
    assert run_all.validate("x", [lying])[0]["ok"] is False


def test_main_prints_table_and_exits_nonzero_on_a_miss(monkeypatch, tmp_path, capsys):
    fake = {
        "scoring": [_fake("scoring", 0.6, 2.0)],
        "dashboard": [_fake("dashboard", 2.0, 1.5)],
        "import": [_fake("import", 1500.0, None, "higher")],
    }
    calls = []
    monkeypatch.setattr(run_all, "discover", lambda: list(fake))

    def run_one(name, repeats, timeout, log=None):
        calls.append((name, repeats))
        return fake[name]

    monkeypatch.setattr(run_all, "run_one", run_one)
    md, js = tmp_path / "b.md", tmp_path / "b.json"
    args = ["--repeats", "2", "--logs", str(tmp_path), "--markdown", str(md), "--json", str(js)]
    assert run_all.main(args) == 1
    out = capsys.readouterr().out
    assert "MISSED" in out and "3 figures, 2 with a bound, 1 missed or failed" in out
    assert calls == [("scoring", 2), ("dashboard", 2), ("import", 2)]
    assert "| dashboard | `bench/bench_dashboard.py` | < 1.5 s | 2.00 s | 2.00 | MISSED |" in (
        md.read_text()
    )
    assert len(json.loads(js.read_text())["figures"]) == 3
    calls.clear()
    assert run_all.main(["--only", "scoring,import", "--logs", str(tmp_path)]) == 0
    assert calls == [("scoring", 5), ("import", 5)]
    with pytest.raises(SystemExit):
        run_all.main(["--only", "nope"])


def test_a_script_without_results_is_an_error(monkeypatch, tmp_path):
    (tmp_path / "bench_empty.py").write_text("X = 1\n")
    monkeypatch.setattr(run_all, "BENCH", tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (fig,) = run_all.run_one_inprocess("empty", 1)
    assert fig["error"] == "no results() function" and fig["ok"] is False
