"""Data is text, in a real browser (issue 18, item 6; STYLE 14).

A dataset whose question, passage title and text and gold answer, and a run whose answer,
explanation, raw reply and error text, carry Markdown images and links, raw HTML, a heading,
LaTeX and Streamlit directives pointing at a local tracker server. Opening the Case view, the
Overview and the Runs page must make the browser request nothing from the tracker, render no
link, image, heading or formula from the data, and show the literal text.
"""

from __future__ import annotations

import http.server
import threading
import urllib.request
from dataclasses import replace

import pytest
from conftest import assert_no_exception, choose, free_port, open_case, settle, streamlit_server

from core.backends import EmbeddedReader
from core.datasets.controlled import build_controlled
from core.execution.runs import run_conditions
from core.store import Store
from core.store.schema import bump_data_version
from core.types import Dataset

pytestmark = [pytest.mark.browser]

_IID = "controlled_000001"


class _Tracker(http.server.ThreadingHTTPServer):
    """A localhost HTTP server that records every request path it gets."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        tracker = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                tracker.paths.append(self.path)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args) -> None:  # quiet
                pass

        super().__init__(("127.0.0.1", free_port()), Handler)


def _hostile(port: int, where: str) -> str:
    return (
        f"{where} ![t](http://127.0.0.1:{port}/exfil.png?data=leak) "
        f'[link](http://127.0.0.1:{port}/x) <img src="http://127.0.0.1:{port}/h.png"> '
        "# Heading $\\frac{1}{2}$ :red[red] **bold** www.example.org"
    )


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """``(url, tracker, gold)``: a server on a store of hostile data, and the tracker."""
    tracker = _Tracker()
    threading.Thread(target=tracker.serve_forever, daemon=True).start()
    port = tracker.server_address[1]
    urllib.request.urlopen(f"http://127.0.0.1:{port}/probe", timeout=5).close()
    assert tracker.paths == ["/probe"]  # the tracker records what reaches it
    tracker.paths.clear()
    full = build_controlled(preset="controlled-200", seed=42, name="hostile")
    first = full.instances[0]
    gold = "Velmora] :green-background[not the gold answer"
    passages = tuple(
        replace(p, title=_hostile(port, "TITLE"), text=_hostile(port, "PASSAGE") + " " + p.text)
        if p.is_gold
        else p
        for p in first.passages
    )
    inst = replace(first, question=_hostile(port, "QUESTION"), gold_answer=gold, passages=passages)
    db = tmp_path_factory.mktemp("injection") / "store.duckdb"
    store = Store(db)
    store.write_dataset(
        Dataset(
            "hostile", full.source, full.builder, full.builder_params, (inst, full.instances[1])
        )
    )
    run_conditions(
        store,
        "hostile",
        EmbeddedReader(workers=False),
        ["no_evidence", "full_context", "retrieved", "oracle"],
        name="r1",
    )
    with store.transaction() as con:
        con.execute(
            "UPDATE predictions SET answer = ?, explanation = ?, raw_response = ? "
            "WHERE run_id = 'r1' AND instance_id = ? AND condition <> 'oracle'",
            [_hostile(port, "ANSWER"), _hostile(port, "EXPLANATION"), _hostile(port, "RAW"), _IID],
        )
        con.execute(
            "UPDATE predictions SET error = ?, answer = NULL "
            "WHERE run_id = 'r1' AND instance_id = ? AND condition = 'oracle'",
            [_hostile(port, "ERROR"), _IID],
        )
        bump_data_version(con, runs=["r1"])
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        yield url, tracker, gold
    tracker.shutdown()


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=800)


def _inert(page, tracker, port: int, name: str) -> None:
    """Nothing from the data became a request, link, image, heading or formula."""
    assert_no_exception(page, name)
    page.wait_for_timeout(500)  # let any image the page made start loading
    assert tracker.paths == [], f"{name}: the tracker got {tracker.paths}"
    assert page.locator(f'img[src*=":{port}"]').count() == 0, name
    assert page.locator(f'a[href*=":{port}"]').count() == 0, name
    assert page.locator('a[href*="example.org"]').count() == 0, name
    assert page.locator(".katex").count() == 0, name
    heads = page.locator("h1, h2, h3, h4, h5, h6").evaluate_all(
        "els => els.map(e => e.innerText.trim())"
    )
    assert not [h for h in heads if h.startswith("Heading")], (name, heads)  # "# Heading"


def test_case_view_shows_hostile_data_as_text(site, page):
    url, tracker, gold = site
    port = tracker.server_address[1]
    open_case(page, f"{url}/case_view?dataset=hostile&instance={_IID}", draw_ms=800)
    _inert(page, tracker, port, "case view")
    literal = f"![t](http://127.0.0.1:{port}/exfil.png?data=leak)"
    # the question heading is escaped Markdown: a zero-width word joiner (U+2060) follows
    # each ':' there (no autolink can form); the text a reader sees is the literal
    body = page.locator("body").inner_text().replace("\u2060", "")
    for where in ("QUESTION", "PASSAGE", "TITLE"):
        assert f"{where} {literal}" in body, where
    shown = page.get_by_text("![t](http://127.0.0.1:", exact=False).filter(visible=True)
    assert shown.count() >= 4  # question (in the prompt), passage title and text, raw reply
    codes = page.locator('[data-testid="stCode"] pre').evaluate_all(
        "els => els.map(e => e.innerText)"
    )
    assert gold in codes  # the gold answer whole, `]` and all: no other text in its place
    assert any(f"RAW {literal}" in c for c in codes)  # the raw reply
    assert "$\\frac{1}{2}$" in body and "# Heading" in body and ":red[red]" in body
    # the failed call shows its error, as text
    choose(page, page, "Prediction", "r1 · oracle (failed call)", settle_page=_settle)
    _settle(page)
    _inert(page, tracker, port, "case view, failed call")
    codes = page.locator('[data-testid="stCode"] pre').evaluate_all(
        "els => els.map(e => e.innerText)"
    )
    assert any(c.startswith(f"ERROR {literal}") for c in codes)
    # side by side (A: full context, B: no evidence): the word diff is Markdown built from
    # escaped answers
    page.get_by_text("Compare two predictions side by side").click()
    _settle(page)
    _inert(page, tracker, port, "case view, comparison")
    body = page.locator("body").inner_text()
    assert f"Answers, word by word (A → B): ANSWER {literal}" in body.replace("\u2060", "")


@pytest.mark.parametrize("path", ["", "runs", "conditions"])
def test_other_pages_show_hostile_data_as_text(site, page, path):
    url, tracker, _ = site
    port = tracker.server_address[1]
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/{path}")
    _settle(page)
    _inert(page, tracker, port, path or "overview")
