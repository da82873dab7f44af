"""The Case view's transcript in a real browser (issue 18, item 2).

The store holds the demo (the embedded reader over controlled-200). The page must show the
messages exactly as sent (compared with :func:`core.execution.prompts.build_messages`, whose hash is
the
stored prompt hash), the retrieved chunks in rank order with their stored scores, the raw
response as stored, question text in the instance picker, and step with Next / Previous.
"""

from __future__ import annotations

import json

import pytest
from conftest import (
    SHOTS,
    assert_no_exception,
    choose,
    demo_into,
    open_case,
    settle,
    streamlit_server,
)
from playwright.sync_api import expect

from core.execution.prompts import build_messages, prompt_hash
from core.store import Store
from core.store.schema import bump_data_version

pytestmark = [pytest.mark.browser]

_DATASET, _IID = "controlled-200", "controlled_000001"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """``(url, store)``: a server on a fresh demo store."""
    db = tmp_path_factory.mktemp("transcript") / "store.duckdb"
    store = Store(db)
    demo_into(store)
    with streamlit_server(db, tmp_path_factory.mktemp("log")) as url:
        SHOTS.mkdir(parents=True, exist_ok=True)
        yield url, store


def _settle(page) -> None:
    settle(page, timeout_ms=90_000, draw_ms=400)


def _codes(page) -> list[str]:
    """The text of every code block on the page (messages, raw responses, gold answer)."""
    blocks = page.locator('[data-testid="stCode"] pre')
    return blocks.evaluate_all("els => els.map(e => e.innerText)")


def _stored(store: Store, condition: str) -> dict:
    rows = store.instance_predictions(["demo-embedded"], _IID)
    return rows[rows["condition"] == condition].iloc[0].to_dict()


def test_transcript_shows_prompt_passage_order_and_raw_reply(demo, page):
    url, store = demo
    open_case(page, f"{url}/case_view?dataset={_DATASET}&instance={_IID}", draw_ms=400)
    assert_no_exception(page, "case_view")
    inst = store.load_instances(_DATASET, [_IID])[0]

    # the retrieved call: its messages, rebuilt, hash to the stored prompt hash
    choose(page, page, "Prediction", "demo-embedded · retrieved", settle_page=_settle)
    _settle(page)
    stored = _stored(store, "retrieved")
    meta = json.loads(stored["meta"])
    page.get_by_text("Show the messages as sent").click()  # drawn on demand
    # the click's rerun may start after the page first looks idle (under load): wait for it
    expect(
        page.locator('[data-testid="stCode"] pre')
        .filter(has_text="You answer a question using the passages")
        .first
    ).to_be_visible(timeout=60_000)
    _settle(page)
    codes = _codes(page)
    # the test rebuilds the retrieved messages from the stored chunks on its own: the
    # chunks shown in the page's ranks must be the ones whose text gives the stored hash
    system = build_messages(inst, "no_evidence")[0]["content"]
    assert system not in codes  # the retrieved call had passages: the context system prompt
    sent = [c for c in codes if c.startswith("You answer a question using the passages")]
    assert len(sent) == 1, codes[:3]
    user = next(c for c in codes if c.startswith("Passages:\n\n[passage_id: "))
    assert (
        prompt_hash([{"role": "system", "content": sent[0]}, {"role": "user", "content": user}])
        == stored["prompt_hash"]
    )
    assert page.get_by_text("exactly as sent", exact=False).first.is_visible()

    # the shown chunks, in rank order, with the stored retrieval scores
    body = page.locator("body").inner_text()
    ranked = zip(meta["chunk_ids"], meta["chunk_scores"], strict=True)
    heads = [f"#{r} · score {s:.3f} · {c}" for r, (c, s) in enumerate(ranked, start=1)]
    at = [body.find(h) for h in heads]
    assert all(i >= 0 for i in at), (heads, body[:2000])
    assert at == sorted(at)  # shown in prompt order
    assert "gold" in body and "cited by the model" in body

    page.get_by_text("Evidence shown, in prompt order").scroll_into_view_if_needed()
    page.screenshot(path=str(SHOTS / "case_view_transcript.png"))
    # the raw response exactly as stored
    assert stored["raw_response"] in codes

    # the instance picker shows question text; Next / Previous step through the instances
    picker = page.get_by_role("combobox", name="Instance")  # its value is the shown label
    assert inst.question[:40] in picker.input_value()
    page.get_by_role("button", name="Next ▶").click()
    _settle(page)
    second = store.load_instances(_DATASET, ["controlled_000002"])[0]
    assert second.question[:40] in picker.input_value()
    assert page.get_by_text("Instance 2 of 200").is_visible()
    page.screenshot(path=str(SHOTS / "case_view_picker.png"))
    page.get_by_role("button", name="◀ Previous").click()
    _settle(page)
    assert inst.question[:40] in picker.input_value()
    assert_no_exception(page, "case_view steps")


def test_failures_only_and_a_failed_call_shows_its_error(demo, page):
    url, store = demo
    # one stored call of the run becomes a failed call (an error, no answer)
    with store.transaction() as con:
        con.execute(
            "UPDATE predictions SET error = 'backend raised TimeoutError: read timed out', "
            "answer = NULL, raw_response = '' "
            "WHERE run_id = 'demo-embedded' AND instance_id = ? AND condition = 'oracle'",
            [_IID],
        )
        bump_data_version(con, runs=["demo-embedded"])  # the page's caches see the change
    open_case(page, f"{url}/case_view?dataset={_DATASET}&instance={_IID}", draw_ms=400)
    choose(page, page, "Prediction", "demo-embedded · oracle (failed call)", settle_page=_settle)
    _settle(page)
    assert page.get_by_text("its error stands in place of an answer", exact=False).is_visible()
    assert "backend raised TimeoutError: read timed out" in _codes(page)
    page.get_by_text("Failures only").click()
    _settle(page)
    assert_no_exception(page, "case_view failures only")
    n_failed = int((store.instance_outcomes(_DATASET, ["demo-embedded"])["n_failed"] > 0).sum())
    assert page.get_by_text(f"Instance 1 of {n_failed}").is_visible()
