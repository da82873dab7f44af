"""Shared pytest fixtures and helpers.

Paths to the real third-party data in ../shared/fixtures, a fresh store path, a store of the
released ONCU outputs, the stub model server (``stub``), free and dead localhost ports,
``streamlit run app.py`` on a free port, the Streamlit ``AppTest`` of one page, and the
headless Chromium the browser tests drive.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from model_stub import ModelStub

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
FIXTURES = SHARED / "fixtures"
#: Debian's Chromium, which the browser tests drive through pytest-playwright.
CHROMIUM = "/usr/bin/chromium"
#: Where the browser tests save their screenshots.
SHOTS = ROOT / "test-results" / "screenshots"
#: The released per-sample outputs of Qwen2.5-14B (ONCU paper), relative to ``FIXTURES``.
RELEASE_CONTROLLED = "oncu_release/controlled_safe16k_qwen25_14b_200.per_sample_metrics.csv"
RELEASE_HOTPOTQA = "oncu_release/hotpotqa_qwen25_14b_200.per_sample_metrics.csv"


def shared_fixture(relpath: str) -> Path:
    """Return ``../shared/fixtures/<relpath>``, skipping the test with a reason when absent."""
    path = FIXTURES / relpath
    if not path.exists():
        pytest.skip(f"real fixture {path} is absent (../shared is not beside this checkout)")
    return path


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh DuckDB store path in a temporary directory."""
    return tmp_path / "store.duckdb"


#: Stores built once per test session and copied (a DuckDB file is closed, hence checkpointed,
#: after each write): one folder shared by the xdist workers of one run, made by the main
#: process (its environment is the workers') and removed when it ends.
_TEMPLATES_ENV = "EVIDENCE_TEST_STORES"


def pytest_configure(config: pytest.Config) -> None:
    # This machine type sets PYTHONDONTWRITEBYTECODE=1: without bytecode, every xdist worker
    # rewrites the asserts of every test module anew and every child process (CLI, Streamlit
    # server) compiles our modules from source, about a minute of the suite's CPU in all.
    # __pycache__/ is ignored by git; a clean clone starts without it.
    sys.dont_write_bytecode = False
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    if not hasattr(config, "workerinput") and _TEMPLATES_ENV not in os.environ:
        os.environ[_TEMPLATES_ENV] = tempfile.mkdtemp(prefix="evidence-test-stores-")
        config._evidence_templates = os.environ[_TEMPLATES_ENV]


def pytest_unconfigure(config: pytest.Config) -> None:
    made = getattr(config, "_evidence_templates", None)
    if made:
        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop(_TEMPLATES_ENV, None)


def _from_template(key: str, path: Path, build: Callable[[Path], None]) -> None:
    """``build(path)``, done once per session under ``key`` and copied to ``path`` after.

    The first worker to ask builds the template under a file lock; the others wait for it
    and copy. A ``path`` that already holds a store is built in place (nothing to copy over).
    """
    path = Path(path)
    if path.exists():
        build(path)
        return
    folder = Path(os.environ.get(_TEMPLATES_ENV) or tempfile.mkdtemp(prefix="evidence-stores-"))
    os.environ.setdefault(_TEMPLATES_ENV, str(folder))  # a run outside pytest's configure
    template = folder / f"{key}.duckdb"
    with open(folder / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not template.exists():
            work = folder / f"{key}.building" / "store.duckdb"
            shutil.rmtree(work.parent, ignore_errors=True)
            work.parent.mkdir()
            build(work)
            work.rename(template)
            shutil.rmtree(work.parent, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, path)


@pytest.fixture(autouse=True)
def _no_page_run_left_over() -> Iterator[None]:
    """A page run in this thread (AppTest runs pages in-process) ends with its test: its
    memo of data versions must not answer another test's reads."""
    yield
    common = sys.modules.get("core.views.common")
    if common is not None:
        common.end_page_run()


def demo_into(store):
    """``core.execution.runs.build_demo(store)`` on a store not yet written: a copy of a built one.

    Returns:
        The ``store``.
    """
    from core.execution.runs import build_demo
    from core.store import Store

    _from_template("demo", Path(store.path), lambda p: build_demo(Store(p)))
    return store


def study_into(store, *, full: bool = False):
    """The demo plus DOLCE probes (4 instances), CUE-R interventions (hard) and a small
    attribution run (6 instances, 16 ablations): the figure tests' store, copied.

    ``full`` adds what a study's store holds beside it: a top-5 four-condition run, the
    fan-in grid answered by the same reader and, with the shared fixtures, the released
    HotpotQA run (the venue-preset render test).
    """
    from core.backends import make_backend
    from core.datasets.controlled import build_controlled
    from core.execution.runs import (
        build_demo,
        run_attribution,
        run_conditions,
        run_interventions,
        run_probes,
    )
    from core.store import Store

    release = FIXTURES / RELEASE_HOTPOTQA

    def build(target: Path) -> None:
        study = Store(target)
        build_demo(study)
        reader = make_backend("embedded")
        if full:
            conditions = ("no_evidence", "full_context", "retrieved", "oracle")
            run_conditions(study, "controlled-200", reader, conditions, name="demo-top5", top_k=5)
            study.write_dataset(build_controlled(preset="fanin-grid", seed=42, name="fanin"))
            run_conditions(study, "fanin", reader, conditions, name="fanin-embedded")
        run_probes(study, "controlled-200", reader, name="probes", limit=4)
        run_interventions(study, "controlled-200", reader, name="cuer", hardness=("hard",))
        run_attribution(
            study, "controlled-200", reader, name="attribution", instances="6", ablations=16
        )
        if full and release.is_file():
            from core.datasets.results import import_results

            import_results(study, release, name="hotpotqa_qwen25_14b_200", fmt="oncu-release")

    _from_template(f"study-{int(full)}", Path(store.path), build)
    return store


def build_release_store(path: Path, *, hotpotqa: bool = False, demo: bool = False):
    """A store at ``path`` holding the released controlled outputs as run ``controlled``.

    Args:
        path: the DuckDB file to create.
        hotpotqa: also import the released HotpotQA outputs as run ``hotpotqa``.
        demo: also build the embedded-reader demo (``build_demo``).

    Returns:
        The ``Store``. Skips the test when ../shared/fixtures is absent.
    """
    # Imported on use: every test run loads this conftest, most never open a store.
    from core.datasets.results import import_results
    from core.execution.runs import build_demo
    from core.store import Store

    controlled = shared_fixture(RELEASE_CONTROLLED)
    hotpot = shared_fixture(RELEASE_HOTPOTQA) if hotpotqa else None

    def build(target: Path) -> None:
        store = Store(target)
        import_results(store, controlled, name="controlled")
        if hotpot is not None:
            import_results(store, hotpot, name="hotpotqa")
        if demo:
            build_demo(store)

    _from_template(f"release-h{int(hotpotqa)}-d{int(demo)}", Path(path), build)
    return Store(path)


@pytest.fixture
def stub() -> Iterator[ModelStub]:
    """A running stub model server (``tests/model_stub.py``), stopped after the test."""
    with ModelStub() as s:
        yield s


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dead_url() -> str:
    """The URL of a localhost port nobody listens on (a server that is down)."""
    return f"http://127.0.0.1:{free_port()}"


@contextmanager
def streamlit_server(db: Path, logdir: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free localhost port against the store ``db`` (no demo
    build); yields its URL once it answers, stops it on exit. Its output goes to
    ``logdir/streamlit.log``."""
    port = free_port()
    env = dict(os.environ, EVIDENCE_DB=str(db), EVIDENCE_NO_DEMO="1")
    log = open(logdir / "streamlit.log", "w")
    proc = subprocess.Popen(
        [
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
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).status == 200:
                    break
            except OSError:
                time.sleep(0.3)
        else:
            pytest.fail(f"streamlit did not start on {url}")
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def open_tab(at, label: str, key: str = "conditions.tab"):
    """Open the tab ``label`` of the tabs kept under ``key`` (a page computes its open tab
    only; AppTest has no tab click, the widget's state is its label) and run the page."""
    at.session_state[key] = label
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page(monkeypatch: pytest.MonkeyPatch, db: Path, page: str, dataset: str):
    """Streamlit's ``AppTest`` of ``app.py`` on the store ``db`` (no demo build), switched to
    ``page`` with ``dataset`` chosen in the sidebar; fails on an exception."""
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("EVIDENCE_DB", str(db))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page(page)
    at.run()
    at.selectbox(key="global.dataset").set_value(dataset).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


# ------------------------------------------------------------------------------ browser
@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    """pytest-playwright's launch arguments for Debian's headless Chromium (skip without it)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (python -m core setup installs Debian chromium)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
        ],
    }


def settle(page, timeout_ms: int = 60_000, draw_ms: int = 500) -> None:
    """Wait until the script run finished (Streamlit marks the app root), then ``draw_ms``
    more so that charts draw before a screenshot."""
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_ms
    )
    page.wait_for_timeout(draw_ms)


def press_until(page, key: str, caption: str, timeout_ms: int = 60_000) -> None:
    """Press ``key`` until the text ``caption`` shows (at most 3 presses), then settle.

    A key that clicks a button starts a script run only when the browser's message reaches
    the server: right after the press the app may still read "not running", so waiting for
    that alone can read the page before the step (seen on a loaded CI host). A press can
    also be lost while the page is still being drawn after a load (twice on CI, never here):
    when the caption has not come 10 s after a press and the page is idle, press again.
    """
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    target = page.get_by_text(caption, exact=False).first
    for attempt in range(3):
        page.keyboard.press(key)
        try:
            target.wait_for(timeout=10_000 if attempt < 2 else timeout_ms)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
            settle(page, timeout_ms=90_000, draw_ms=500)
            if target.is_visible():
                break
    settle(page, timeout_ms=90_000, draw_ms=300)


def open_case(page, url: str, draw_ms: int = 600) -> None:
    """Open a Case view URL and wait for its transcript (the first run has drawn it)."""
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(url)
    page.get_by_text("Raw response").first.wait_for(timeout=90_000)
    settle(page, timeout_ms=90_000, draw_ms=draw_ms)


def assert_no_exception(page, name: str) -> None:
    """Fail, naming ``name``, when the page shows a Streamlit exception box."""
    boxes = page.locator('[data-testid="stException"]')
    assert boxes.count() == 0, f"{name}: {boxes.first.inner_text()[:300]}"


def choose(page, scope, label: str, option: str, settle_page=settle) -> None:
    """Pick ``option`` in the selectbox labelled ``label`` inside ``scope`` (a page or part).

    A click that lands while Streamlit re-renders the box does not open it: try again.
    ``settle_page(page)`` waits for the page between tries.
    """
    box = scope.get_by_test_id("stSelectbox").filter(has_text=label).first
    pick(page, box, option, f"selectbox {label!r}", settle_page=settle_page)


def pick(
    page,
    box,
    option: str,
    what: str,
    *,
    typed: bool = False,
    settle_page=settle,
    timeout_ms: int = 5_000,
) -> None:
    """Open ``box`` (a selectbox or multiselect), optionally type ``option`` into it, and
    click the option; three tries, ``settle_page(page)`` before each (a click that lands
    while Streamlit draws the page anew finds the box or its option list replaced)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    for _ in range(3):
        settle_page(page)
        box.click()
        if typed:
            box.locator("input").fill("")  # what an earlier try typed
            page.keyboard.type(option)
        try:
            page.get_by_role("option", name=option, exact=True).click(timeout=timeout_ms)
            return
        except PlaywrightTimeout:
            page.keyboard.press("Escape")
    raise AssertionError(f"{what} offers no option {option!r}")
