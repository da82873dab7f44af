"""Benchmark: what a researcher waits for in the dashboard, measured in Chromium (issue 36 item 9).

Not ``AppTest``: a real ``streamlit run app.py`` server per store and Debian's headless
Chromium (``/usr/bin/chromium``, Playwright's sync API), so the time includes the websocket,
the script run, the browser's drawing and any rerun a widget event starts. Four interactions:

* **page switch**: a sidebar link clicked until the new page is drawn and idle (to the
  Overview, Conditions & ONCU, the Failure browser and the Case view, in turn);
* **filter change**: a failure label added to the Failure browser's list until the new list
  and its counts are drawn;
* **case open**: a row of the failure list selected until the Case view shows its instance
  (its transcript and "Instance i of n (failure browser filter)");
* **j / k step**: the key ``j`` (next) or ``k`` (previous) pressed in the Case view until the
  picker shows the neighbour ("Instance i+1 of n"): first ``j`` through instances not shown
  before in the session, then ``k`` back through them.

"Drawn and idle": Streamlit's app root reports its script as not running
(``data-test-script-state``; a page observer records every change of that attribute with the
browser's clock), the interaction's own marker is on the page and what it replaces is gone
(the new page's title, the new counts, the new instance position: none of them can be on the
page before the action, so their presence says the script ran even when a short run never
showed "running"), every Plotly chart has drawn its SVG, no spinner or skeleton is left, and
all of that has held for :data:`QUIET_MS` (a second script run inside that window, e.g. a
``st.switch_page``, moves the end). The time is from the action (the browser's clock just
before the click or key) to the moment the page became ready for good; the quiet window itself
is not counted.

Each store is opened once before the clock (the server's first page, its caches cold) and every
interaction is done once unmeasured (the first visit of a page with this selection: the
cold-cache figures are ``bench_dashboard.py``'s first loads), then :data:`REPEATS` times
measured (median, min, max).

Stores: the demo (``core.execution.runs.build_demo``: controlled-200, the embedded reader on the
four
conditions; built once at ``/tmp/bench_browser_demo.duckdb``) and the 1,000,000-prediction
store of ``bench_dashboard.py`` (``/tmp/bench_dashboard.duckdb``, built by its builder when
missing or out of date).

Bounds (both stores): j / k step < 0.5 s, case open < 1 s, page switch and filter change
< 1.5 s.

Usage: ``python bench/bench_browser.py [--stores demo,1m] [--repeats 5]``; exit status 1 when
a bound is missed. ``results(repeats)`` for ``bench/run_all.py`` (``--only browser``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, print_figures  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
]
DEMO_DB = Path(tempfile.gettempdir()) / "bench_browser_demo.duckdb"
REPEATS = 5
#: Milliseconds the page must stay ready (idle, marker shown) before the wait ends.
QUIET_MS = 400
#: Seconds one interaction may take before it counts as failed.
TIMEOUT_S = 120
#: Bounds in seconds (issue 36 item 9).
BOUNDS = {"page switch": 1.5, "filter change": 1.5, "case open": 1.0, "j/k step": 0.5}
#: Sidebar link label -> the page's title (its marker), in the order they are visited.
TARGETS = {
    "Overview": "Evidence-utilization diagnostics",
    "Conditions & ONCU": "Conditions & ONCU",
    "Failure browser": "Failure browser",
    "Case view": "Case view",
}
#: The stores measured: the demo and the 1,000,000-prediction store.
STORES = ("demo", "1m")

#: Records every change of the script state of Streamlit's app root, on the page's clock.
_OBSERVER_JS = """
(() => {
  window.__bench = {log: []};
  const attach = () => {
    const app = document.querySelector('[data-testid="stApp"]');
    if (!app) { setTimeout(attach, 20); return; }
    const rec = () => window.__bench.log.push(
      [performance.now(), app.getAttribute('data-test-script-state')]);
    rec();
    new MutationObserver(rec).observe(app, {attributes: true,
      attributeFilter: ['data-test-script-state']});
  };
  attach();
})();
"""

#: Resolves when the page is drawn and idle after ``t0`` (see the module docstring): every text
#: of ``want`` in the main area, none of ``absent``, and ``heading`` (unless empty) its title.
_WAIT_JS = """
async ([since0, want, absent, heading, quiet, timeout]) => {
  // since0: the action's time on the wall clock (ms); a link that loads a new document
  // leaves this one, whose clock starts at its own time origin
  const t0 = since0 - performance.timeOrigin;
  const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
  const main = () => document.querySelector('[data-testid="stMain"]');
  const drawn = () => {
    if (document.querySelector('[data-testid="stSpinner"], [data-testid="stSkeleton"]')) {
      return false;
    }
    for (const c of document.querySelectorAll('[data-testid="stPlotlyChart"]')) {
      if (!c.querySelector('.main-svg')) { return false; }
    }
    return true;
  };
  const shows = () => {
    const m = main();
    if (!m) { return false; }
    if (heading) {
      const h = m.querySelector('h1');
      if (!h || h.innerText.trim() !== heading) { return false; }
    }
    const body = m.innerText;
    return want.every((w) => body.includes(w)) && !absent.some((a) => body.includes(a));
  };
  let since = null;
  for (;;) {
    const now = performance.now();
    const app = document.querySelector('[data-testid="stApp"]');
    const state = app ? app.getAttribute('data-test-script-state') : null;
    const log = window.__bench.log.filter((e) => e[0] >= t0);
    const ran = log.some((e) => e[1] === 'running');
    // (a run of a few tens of ms may never show 'running': the content tells it ran)
    if (state === 'notRunning' && drawn() && shows()) {
      if (since === null) { since = now; }
      if (now - since >= quiet) {
        return {ms: since - t0, runs: log.filter((e) => e[1] === 'running').length};
      }
    } else {
      since = null;
    }
    if (now - t0 > timeout) {
      const m = main();
      return {ms: null, state: state, ran: ran, log: log.length,
              text: m ? m.innerText.slice(0, 300) : ''};
    }
    await sleep(10);
  }
}
"""


# --------------------------------------------------------------------------- stores
def demo_store(db: Path = DEMO_DB) -> Path:
    """The demo store at ``db``, built unless it already holds the finished demo run."""
    from core.execution.runs import DEMO_DATASET, build_demo
    from core.store import Store

    if db.exists():
        try:
            runs = Store(db, lock_timeout=5).runs_frame(live=False)
            done = runs[(runs["dataset_id"] == DEMO_DATASET) & (runs["status"] == "done")]
            if len(done):
                return db
        except Exception:
            pass
    for p in (db, db.with_name(db.name + ".wal")):
        p.unlink(missing_ok=True)
    t = time.perf_counter()
    build_demo(Store(db))
    print(f"built {db} (the demo) in {time.perf_counter() - t:.1f} s", flush=True)
    return db


def million_store() -> Path:
    """``bench_dashboard.py``'s 1,000,000-prediction store (built by it when missing)."""
    import bench_dashboard

    bench_dashboard.ensure_store(bench_dashboard.DB, bench_dashboard.N_INSTANCES, False)
    return bench_dashboard.DB


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_command(port: int) -> list[str]:
    """The dashboard server's command line (``python -m core serve`` runs the same app)."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(ROOT / "app.py"),
        "--server.port",
        str(port),
        "--server.address",
        "127.0.0.1",
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]


@contextlib.contextmanager
def server(db: Path, log: Path) -> Iterator[str]:
    """``streamlit run app.py`` on ``db`` (no demo build) on a free port; yields its URL."""
    port = _free_port()
    env = dict(os.environ, EVIDENCE_DB=str(db), EVIDENCE_NO_DEMO="1")
    with log.open("w") as out:
        proc = subprocess.Popen(
            server_command(port), cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.time() + 90
            while True:
                try:
                    if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).status == 200:
                        break
                except OSError:
                    if time.time() > deadline or proc.poll() is not None:
                        msg = f"streamlit did not start on {url} (log {log})"
                        raise RuntimeError(msg) from None
                    time.sleep(0.3)
            yield url
        finally:
            proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)


# --------------------------------------------------------------------------- one action
_COUNTS = "predictions in this list"


class Session:
    """One browser tab on one server, with the timed wait of the module docstring."""

    def __init__(self, page, url: str) -> None:
        self.page, self.url = page, url

    def now(self) -> float:
        """The page's clock on the wall (ms since the epoch, sub-millisecond)."""
        return float(self.page.evaluate("performance.timeOrigin + performance.now()"))

    def wait(
        self,
        t0: float,
        want: tuple[str, ...] = (),
        absent: tuple[str, ...] = (),
        heading: str = "",
        timeout_s: float = TIMEOUT_S,
    ) -> float:
        """Seconds from ``t0`` until the page is drawn and idle and shows what is asked."""
        from playwright.sync_api import Error as PlaywrightError

        args = [t0, list(want), list(absent), heading, QUIET_MS, timeout_s * 1000]
        for _ in range(5):
            try:
                got = self.page.evaluate(_WAIT_JS, args)
                break
            except PlaywrightError as exc:  # a link that loaded a new document meanwhile
                if "context was destroyed" not in str(exc) and "navigat" not in str(exc):
                    raise
                self.page.wait_for_load_state()
        else:
            raise RuntimeError("the page kept loading new documents")
        if got.get("ms") is None:
            raise RuntimeError(
                f"not ready after {timeout_s:.0f} s (waiting for {want!r} "
                f"{heading!r}, not {absent!r}): {got}"
            )
        boxes = self.page.locator('[data-testid="stException"]')
        if boxes.count():
            raise RuntimeError(f"exception on the page: {boxes.first.inner_text()[:300]}")
        return got["ms"] / 1000

    def timed(self, action: Callable[[], None], **wait: object) -> float:
        """Do ``action`` and wait (:meth:`wait`'s keywords); its seconds."""
        t0 = self.now()
        action()
        return self.wait(t0, **wait)

    def open(self, path: str, heading: str) -> float:
        """Load ``path`` in the tab (a new session of the app); seconds until it is drawn."""
        t0 = time.time() * 1000
        self.page.goto(f"{self.url}{path}")
        return self.wait(t0, heading=heading, timeout_s=600)

    def text(self, needle: str) -> str:
        """The text of the first element of the main area that contains ``needle``."""
        main = self.page.get_by_test_id("stMain")
        return main.get_by_text(needle, exact=False).first.inner_text()

    # -- the interactions
    def switch(self, link: str) -> float:
        """Click the sidebar link ``link``; seconds until its page is drawn and idle."""
        nav = self.page.get_by_test_id("stSidebarNav")
        target = nav.get_by_role("link", name=link, exact=True)
        target.wait_for()
        return self.timed(target.click, heading=TARGETS[link])

    def _label_box(self):
        return self.page.get_by_test_id("stMultiSelect").filter(has_text="Failure label").first

    def add_label(self, i: int) -> float:
        """Add the ``i``-th offered failure label (cycling) to the filter; seconds until the
        new list and its counts are drawn."""
        before = self.text(_COUNTS)
        self._label_box().click()
        options = self.page.get_by_role("option")
        options.first.wait_for(timeout=10_000)
        names = [n for n in options.all_inner_texts() if n != "Select all"]
        option = self.page.get_by_role("option", name=names[i % len(names)], exact=True)
        t0 = self.now()
        option.click()
        self.page.keyboard.press("Escape")
        return self.wait(t0, want=(_COUNTS,), absent=(before,))

    def remove_label(self) -> None:
        """Take the label off the filter again (Backspace in the box), untimed."""
        before = self.text(_COUNTS)
        self._label_box().locator("input").click()
        t0 = self.now()
        self.page.keyboard.press("Backspace")
        self.page.keyboard.press("Escape")
        self.wait(t0, want=(_COUNTS,), absent=(before,))

    def open_row(self, i: int) -> float:
        """Select row ``i`` of the failure list; seconds until the Case view shows it."""
        grid = self.page.get_by_test_id("stDataFrame").filter(visible=True).first
        grid.scroll_into_view_if_needed()
        box = grid.bounding_box()
        x, y = box["x"] + 18, box["y"] + 35 + 17 + 35 * i  # the row marker, below the header
        return self.timed(
            lambda: self.page.mouse.click(x, y),
            heading="Case view",
            want=("(failure browser filter)", "Raw response"),
        )

    def back_to_list(self) -> None:
        """The Case view's link back to the failure browser (untimed)."""
        link = self.page.get_by_role("link", name="Back to the failure browser")
        self.timed(link.click, heading="Failure browser", want=(_COUNTS,))

    def position(self) -> int:
        """The Case view's "Instance i of n": i."""
        found = re.search(r"Instance ([\d,]+) of", self.text("(failure browser filter)"))
        if found is None:
            raise RuntimeError("the Case view shows no position in the failure list")
        return int(found.group(1).replace(",", ""))

    def step(self, key: str) -> float:
        """Press ``key`` (j / k) in the Case view; seconds until it shows the neighbour."""
        goal = self.position() + (1 if key == "j" else -1)
        self.page.get_by_role("heading", name="Case view").click()  # focus the page, no field
        return self.timed(
            lambda: self.page.keyboard.press(key),
            heading="Case view",
            want=(f"Instance {goal:,} of", "Raw response"),
        )


# --------------------------------------------------------------------------- one store
#: The interactions, in the order they are measured.
PARTS = ("switch", "filter", "open", "step")


def measure_store(
    name: str, db: Path, repeats: int, logdir: Path, parts: tuple[str, ...] = PARTS
) -> dict[str, list[float]]:
    """The interactions ``parts`` on the store ``db``: name -> seconds per measured repeat."""
    from playwright.sync_api import sync_playwright

    out: dict[str, list[float]] = {}
    with server(db, logdir / f"streamlit-{name}.log") as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.add_init_script(_OBSERVER_JS)
            s = Session(page, url)
            first = s.open("/", TARGETS["Overview"])
            print(f"  {name}: first page of a fresh server {first:.2f} s", flush=True)

            # page switches: once round unmeasured (the first visit), then ``repeats`` rounds
            for rnd in range(repeats + 1 if "switch" in parts else 0):
                for link in [*list(TARGETS)[1:], "Overview"]:
                    t = s.switch(link)
                    if rnd:
                        out.setdefault(f"page switch to {link}", []).append(t)
                    else:
                        print(f"  {name}: first switch to {link} {t:.2f} s", flush=True)

            # filter changes on the failure browser (the first one unmeasured)
            s.switch("Failure browser")
            for i in range(repeats + 1 if "filter" in parts else 0):
                t = s.add_label(i)
                s.remove_label()
                if i:
                    out.setdefault("filter change (add a failure label)", []).append(t)
                else:
                    print(f"  {name}: first filter change {t:.2f} s", flush=True)

            # case opens: row i of the list, then back to the list (the first unmeasured)
            for i in range(repeats + 1 if "open" in parts else 0):
                t = s.open_row(i)
                if i:
                    out.setdefault("case open (a failure-list row)", []).append(t)
                else:
                    print(f"  {name}: first case open {t:.2f} s", flush=True)
                s.back_to_list()

            # j / k: from the list's first instance, j then k in turn after one unmeasured j
            if "step" not in parts:
                return out
            s.open_row(0)
            s.step("j")  # unmeasured
            for key, what in (("j", "next, not shown before"), ("k", "previous, shown before")):
                name = f"j/k step in the Case view ({key}: {what})"
                for _ in range(repeats):
                    out.setdefault(name, []).append(s.step(key))
        finally:
            browser.close()
    return out


def _kind(what: str) -> str:
    return next(k for k in BOUNDS if what.startswith(k))


def results(repeats: int = REPEATS, stores: tuple[str, ...] = tuple(STORES)) -> list[dict]:
    """Per store and interaction: the median of ``repeats`` measured runs against its bound."""
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing (python -m core setup installs it)")
    logdir = Path(tempfile.mkdtemp(prefix="bench_browser_"))
    script = Path(__file__).name
    figs: list[dict] = []
    for name in stores:
        db = demo_store() if name == "demo" else million_store()
        print(f"store {name}: {db}; load before {os.getloadavg()[0]:.2f}", flush=True)
        try:
            got = measure_store(name, db, repeats, logdir)
            error = None
        except Exception as exc:
            got, error = {}, f"{type(exc).__name__}: {str(exc)[:300]}"
            print(f"  {name}: FAILED {error}", flush=True)
        print(f"  load after {os.getloadavg()[0]:.2f}", flush=True)
        if error:
            figs.append(
                dict(
                    figure(f"browser {name}: interactions", [], "s", script, bound=0.0), error=error
                )
            )
            continue
        for what, runs in got.items():
            fig = figure(
                f"browser {name} store: {what}", runs, "s", script, bound=BOUNDS[_kind(what)]
            )
            figs.append(fig)
            print(
                f"  {what:44} median {statistics.median(runs):6.3f} s  "
                f"min {min(runs):6.3f}  max {max(runs):6.3f}  (bound {fig['bound']:g} s)"
                + ("" if fig["ok"] else "  MISSED"),
                flush=True,
            )
    return figs


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when a bound is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", default=",".join(STORES), help="comma-separated: demo,1m")
    ap.add_argument("--repeats", type=int, default=REPEATS)
    args = ap.parse_args(argv)
    stores = tuple(s for s in args.stores.split(",") if s)
    unknown = [s for s in stores if s not in STORES]
    if unknown:
        print(f"error: --stores: unknown {unknown}; choose from {list(STORES)}")
        return 1
    return print_figures(results(args.repeats, stores))


if __name__ == "__main__":
    sys.exit(main())
