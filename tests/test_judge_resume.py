"""A judge run goes through the engine's loop (issue 37 item 2): interrupted and run again, it
makes no model call for a stored judgment, and stores what an uninterrupted run stores."""

from __future__ import annotations

import threading

import pandas as pd
import pytest

from core.backends.base import Reply
from core.execution.engine import PredictionWork, Work
from core.execution.prompts import prompt_hash
from core.judges.rubrics import get_rubric
from core.judges.runs import JudgmentWork, run_judge
from core.store import Store
from core.types import Dataset, Instance, Passage

_VALUES = (
    "run_id",
    "target_run",
    "instance_id",
    "condition",
    "item",
    "prompt_hash",
    "raw_reply",
    "rating",
    "parse_error",
    "error",
    "rubric",
    "rubric_version",
    "rubric_hash",
    "judge_model",
)


class _Judge:
    """Model-like judge: rates by the context's length; interrupts after ``stop_after`` calls."""

    name = "double"
    model = "judge-double"

    def __init__(self, stop_after: int | None = None, fail: frozenset[str] = frozenset()):
        self.prompts: list[str] = []
        self.stop_after, self.fail = stop_after, fail
        self.lock = threading.Lock()

    def describe(self) -> dict:
        return {"kind": "double", "model": self.model}

    def generate(self, messages, options=None):
        with self.lock:
            if self.stop_after is not None and len(self.prompts) >= self.stop_after:
                raise KeyboardInterrupt  # Ctrl-C mid-run (an Exception would be a failed call)
            h = prompt_hash(messages)
            self.prompts.append(h)
        if h in self.fail:
            return Reply(text="", error="server down")
        return Reply(text=str(len(messages[0]["content"]) % 6))


def _store(path) -> Store:
    store = Store(path)
    texts = ("alpha beta gamma", "delta epsilon zeta eta", "theta iota kappa lambda mu")
    insts = tuple(
        Instance(
            f"q{i}",
            f"What is {i}?",
            "x",
            fan_in=2,
            passages=tuple(
                Passage(f"p{j:04d}", j, "T", f"{t} {i}", f"d{j}", "gold", j < 2)
                for j, t in enumerate(texts)
            ),
        )
        for i in range(4)
    )
    store.write_dataset(Dataset("tiny", "test", "test", {}, insts))
    sq = pd.DataFrame(
        [
            {"instance_id": f"q{i}", "sq_id": f"s{k}", "text": f"which {k} of {i}?"}
            for i in range(4)
            for k in range(2)
        ]
    )
    store.write_crux_judgments("tiny", sq, pd.DataFrame())
    return store


def _judge(store, backend, concurrency=1):
    return run_judge(
        store,
        "crux-answerability",
        backend,
        name="j",
        dataset="tiny",
        passages="all",
        concurrency=concurrency,
    )


def _stored(store) -> pd.DataFrame:
    frame = store.judgments_frame(runs=["j"])[list(_VALUES)]
    return frame.sort_values(["instance_id", "item"]).reset_index(drop=True)


def test_both_kinds_of_run_are_work_of_the_one_loop():
    assert isinstance(PredictionWork(), Work)
    assert isinstance(JudgmentWork(get_rubric("crux-answerability"), "double:judge"), Work)


@pytest.mark.parametrize("concurrency", [1, 2])
def test_an_interrupted_judge_run_rerun_makes_no_call_for_a_stored_judgment(tmp_path, concurrency):
    ref = _store(tmp_path / "ref.duckdb")
    whole = _judge(ref, _Judge())
    assert (whole.planned, whole.executed, whole.status) == (24, 24, "done")

    store = _store(tmp_path / "cut.duckdb")
    first = _Judge(stop_after=9)
    with pytest.raises(KeyboardInterrupt):
        _judge(store, first, concurrency)
    stored = _stored(store)
    assert 0 < len(stored) <= 9  # what was answered before the interrupt is committed
    assert store.run_row("j")["status"] == "cancelled"
    again = _Judge()
    out = _judge(store, again, concurrency)
    assert out.status == "done" and out.skipped_existing == len(stored)
    assert not set(again.prompts) & set(stored["prompt_hash"])  # no call for a stored one
    assert out.executed + out.cached == 24 - len(stored) == len(again.prompts) + out.cached
    pd.testing.assert_frame_equal(_stored(store), _stored(ref))  # the values a whole run stores

    third = _Judge()
    assert _judge(store, third).skipped_existing == 24 and third.prompts == []


def test_a_failed_judgment_is_made_again_and_only_it(tmp_path):
    store = _store(tmp_path / "s.duckdb")
    probe = _Judge()
    _judge(store, probe)
    down = frozenset(probe.prompts[:3])
    store2 = _store(tmp_path / "s2.duckdb")
    out = _judge(store2, _Judge(fail=down))
    assert (out.errors, out.status) == (3, "partial")
    again = _Judge()
    out = _judge(store2, again)
    assert sorted(again.prompts) == sorted(down) and out.status == "done"
