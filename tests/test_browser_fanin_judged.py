"""The Fan-in page's judged scores in a real browser (issue 20): proxy → judged, people vs judge.

The store holds the demo (the embedded reader, four conditions on controlled-200) judged
offline by the embedded lexical judge with the two AuthTrace rubrics, plus one annotator's
labels of 12 items of the correctness judge. The researcher opens the Fan-in page, switches
"AC / ER / EP from" from proxy to judged, and reads the degradation curves, the degradation
table and the bucket table: they show what ``python -m core report fanin --score-source judged
--json`` prints for the run (rounded as the page shows them), not the proxies shown before the
switch. The "Human labels and agreement" expander shows the κ and raw agreement that
``report agreement --json`` prints.
"""

from __future__ import annotations

import csv
import json
import re

import pytest
from conftest import SHOTS, assert_no_exception, choose, demo_into, settle, streamlit_server
from test_cli import run_cli

from core.annotate.roundtrip import export_sample, import_labels
from core.execution.runs import DEMO_RUN
from core.judges.runs import make_judge, run_judge
from core.store import Store

pytestmark = [pytest.mark.browser, pytest.mark.slow]

CORRECTNESS = "authtrace-correctness"
#: The degradation curves' AC axis title once the judges give AC (core.figures.fanin).
JUDGED_AXIS = "AC judged (0-3 rubric / 3 x 100)"

#: The fan-in degradation curves (the figure whose drill-down keys hold ``fan_in``): the y-axis
#: title and, per named trace (one per condition), its points, as the browser holds them.
_CURVES_JS = """() => {
  for (const gd of document.querySelectorAll('.js-plotly-plot')) {
    const drill = gd.layout && gd.layout.meta && gd.layout.meta.drill;
    if (!drill || !drill.keys.includes('fan_in') || gd.offsetWidth === 0) continue;
    const axis = gd.layout.yaxis.title;
    const traces = {};
    for (const t of gd._fullData || []) {
      const name = gd.data[t.index].name;
      if (name) traces[name] = {x: Array.from(t.x), y: Array.from(t.y)};
    }
    return {title: typeof axis === 'string' ? axis : axis.text, traces: traces};
  }
  return null;
}"""

#: The accessible copy Streamlit's grid keeps of the cells it draws, one list per row (the
#: header first).
_ROWS_JS = """el => [...el.querySelectorAll('tr')].map(
  tr => [...tr.querySelectorAll('th, td')].map(c => c.innerText.trim()))"""


def _report(*args: object) -> dict:
    res = run_cli("report", *args, "--json")
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """``(url, fanin, agreement)``: a server on the judged, labelled demo store, and what
    ``report fanin --score-source judged`` / ``report agreement`` print for it."""
    root = tmp_path_factory.mktemp("fanin_judged")
    db = root / "store.duckdb"
    store = Store(db)
    demo_into(store)
    for rubric in (CORRECTNESS, "authtrace-evidence"):
        run_judge(store, rubric, make_judge("embedded"), name=f"j-{rubric}", run=DEMO_RUN)
    # alice rates a blind sample of 12 judged answers, alternately 3 and 0, so that she agrees
    # with the judge on some items and not others (a kappa other than 0)
    rated = root / "alice.csv"
    export_sample(store, DEMO_RUN, 12, 7, rated, rubric=CORRECTNESS)
    with rated.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows):
        row["label"] = "3" if i % 2 == 0 else "0"
    with rated.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    import_labels(store, rated, DEMO_RUN, "alice", rubric=CORRECTNESS)
    fanin = _report(
        "fanin",
        "--runs",
        DEMO_RUN,
        "--score-source",
        "judged",
        "--resamples",
        "50",
        "--no-instances",
        "--db",
        db,
    )
    agreement = _report("agreement", "--run", DEMO_RUN, "--rubric", CORRECTNESS, "--db", db)
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url, fanin, agreement


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=400)


def _grid(page, scope, header: str) -> list[dict[str, str]]:
    """The rows the page draws of the table in ``scope`` (the page or a part) with a column
    titled exactly ``header``, as ``{column title: shown cell}``; waits for the table."""
    title = page.locator("th", has_text=re.compile(f"^{re.escape(header)}$"))
    grid = scope.get_by_test_id("stDataFrame").filter(has=title)
    grid.first.wait_for(timeout=60_000)
    head, *rows = grid.first.evaluate(_ROWS_JS)
    assert rows, f"the table with {header!r} shows no rows"
    return [dict(zip(head, r, strict=True)) for r in rows]


def _num(cell: str) -> float | None:
    """A shown number cell (empty: no value)."""
    return None if cell == "" else float(cell)


def _one(v: float | None, scale: float = 1.0) -> float | None:
    """A report value as the page rounds it for its tables and hover labels (one decimal)."""
    return None if v is None else round(scale * v, 1)


def _curves(page, title: str) -> dict:
    """The degradation curves once their AC axis is titled ``title`` (the figure is drawn a
    moment after the script run ends)."""
    page.wait_for_function(
        f"() => {{ const c = ({_CURVES_JS})(); "
        f"return c !== null && c.title === {json.dumps(title)}; }}",
        timeout=60_000,
    )
    return page.evaluate(_CURVES_JS)


def test_switching_fanin_to_judged_scores_shows_report_fanin_judged(judged, page):
    url, rep, _ = judged
    assert rep["source"] == "judged"
    buckets = {(r["condition"], r["bucket"]): r for r in rep["by_bucket"]}
    points = {(r["condition"], r["fan_in"]): r["ac"] for r in rep["by_fan_in"]}
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/fanin")
    page.get_by_role("heading", name="Fan-in").first.wait_for(timeout=90_000)
    _settle(page)
    assert_no_exception(page, "fanin")

    # proxies first: AC = 100 x the score field
    proxy = _curves(page, "100 x answer F1 (proxy for AC)")
    proxy_rows = {(r["condition"], r["bucket"]): r for r in _grid(page, page, "AC proxy CI")}
    assert "AC judged" not in page.locator('[data-testid="stDataFrame"] th').all_inner_texts()

    choose(page, page, "AC / ER / EP from", "judged", settle_page=_settle)
    _settle(page)
    assert_no_exception(page, "fanin judged")
    assert page.get_by_text("Every figure and table below uses the judges' AC").is_visible()

    # the curves: one point per (condition, fan-in), AC as the hover label shows it (one decimal)
    curves = _curves(page, JUDGED_AXIS)
    assert set(curves["traces"]) == {"full_context", "no_evidence", "oracle", "retrieved"}
    shown = {
        (c, int(x)): y
        for c, t in curves["traces"].items()
        for x, y in zip(t["x"], t["y"], strict=True)
    }
    assert shown.keys() == points.keys() and len(points) == 8  # fan-in 1 and 2, 4 conditions
    for key, ac in points.items():
        assert round(shown[key], 1) == _one(ac), key
    # the judges' AC is not the proxy's: full context at fan-in 2 drops from 75.9 to 75.3
    before = dict(
        zip(proxy["traces"]["full_context"]["x"], proxy["traces"]["full_context"]["y"], strict=True)
    )
    assert round(before[2], 1) == 75.9 and _one(points[("full_context", 2)]) == 75.3

    # the bucket table: AC / ER / EP per (condition, bucket), ER and EP in %
    rows = _grid(page, page, "AC judged CI")
    assert len(rows) >= 9  # the grid draws the rows in view: three conditions at least
    differ = 0
    for row in rows:
        want = buckets[(row["condition"], row["bucket"])]
        assert (int(row["n"]), int(row["missing"])) == (want["n"], want["missing"]), row
        assert _num(row["AC judged"]) == _one(want["ac"]), row
        assert _num(row["ER judged %"]) == _one(want["er"], 100), row
        assert _num(row["EP judged %"]) == _one(want["ep"], 100), row
        old = proxy_rows[(row["condition"], row["bucket"])]
        differ += (old["AC proxy"], old["ER id-overlap %"]) != (
            row["AC judged"],
            row["ER judged %"],
        )
    assert differ >= 3, "the judged bucket table shows the proxies' numbers"
    fc_low = next(r for r in rows if (r["condition"], r["bucket"]) == ("full_context", "low"))
    assert (fc_low["AC judged"], fc_low["ER judged %"]) == ("75.3", "91")  # proxy: 75.9, 79.9
    assert (
        proxy_rows[("full_context", "low")]["AC proxy"],
        proxy_rows[("full_context", "low")]["ER id-overlap %"],
    ) == ("75.9", "79.9")

    # the degradation table: AC at fan-in 1 (no instance of the demo has fan-in >= 4)
    deg = {r["condition"]: r for r in rep["degradation"]}
    table = _grid(page, page, "AC judged single")
    assert {r["condition"] for r in table} == set(deg)
    for row in table:
        want = deg[row["condition"]]
        assert _num(row["AC judged single"]) == _one(want["ac_single"]), row
        assert int(row["n single"]) == want["n_single"] == 38
        assert _num(row["AC judged high"]) is None and want["ac_high"] is None
    page.screenshot(path=str(SHOTS / "fanin_judged.png"), full_page=True)


def test_people_vs_judge_expander_shows_report_agreement(judged, page):
    url, _, rep = judged
    (want,) = rep["pairs"]
    assert (want["rater_a"], want["rater_b"], want["n"]) == ("alice", f"judge:j-{CORRECTNESS}", 12)
    # hand-checked: alice's alternating labels against the judge's 0 / 3 give the confusion
    # [[4, 2], [2, 4]]: p_o = 8/12, p_e = (6/12)^2 + (6/12)^2 = 1/2, kappa = (2/3 - 1/2) / (1/2)
    assert (want["labels"], want["confusion"]) == (["0", "3"], [[4, 2], [2, 4]])
    assert want["kappa"] == pytest.approx(1 / 3) and want["raw_agreement"] == pytest.approx(2 / 3)
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/fanin")
    page.get_by_role("heading", name="Fan-in").first.wait_for(timeout=90_000)
    _settle(page)
    title = f"Human labels and agreement: run {DEMO_RUN} ({CORRECTNESS})"
    expander = page.get_by_test_id("stExpander").filter(has_text=title)
    assert expander.count() == 1
    expander.get_by_text(title, exact=True).click()
    expander.get_by_test_id("stDataFrame").first.wait_for(state="visible", timeout=30_000)
    _settle(page)
    assert_no_exception(page, "fanin agreement")
    assert "12 sampled items; raters (items rated): alice (12)" in expander.inner_text()
    (got,) = _grid(page, expander, "Cohen's κ")
    assert (got["rater_a"], got["rater_b"]) == ("alice", f"judge:j-{CORRECTNESS}")
    assert (int(got["n"]), int(got["agreed"])) == (12, want["agreed"])
    kappa = float(got["Cohen's κ"])
    assert f"{kappa:.3f}" == f"{want['kappa']:.3f}"  # as shown: 3 decimals
    assert f"{float(got['raw agreement']):.3f}" == f"{want['raw_agreement']:.3f}"
    # the confusion table under it: rows alice, columns the judge
    confusion = _grid(page, expander, "3")
    assert [[r[""], r["0"], r["3"]] for r in confusion] == [["0", "4", "2"], ["3", "2", "4"]]
    page.screenshot(path=str(SHOTS / "fanin_people_vs_judge.png"), full_page=True)
