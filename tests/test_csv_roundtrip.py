"""Issue 17 item 1: a results CSV is read as CSV. Property: any cells the ``csv`` module writes
(line breaks LF / CR LF / CR, quotes, commas, U+2028, form feed, emoji) come back from the store
exactly as written, through ``import_results`` and the store's read of the predictions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_hardening_import import row, write_csv

from core.datasets.results import import_results
from core.store import Store

_PIECES = st.sampled_from(
    ["\n", "\r\n", "\r", '"', "\u2028", "\x0c", ",", ";", " ", "é", "😀", "\t", "None", "a", "0"]
)
_CELL = st.lists(_PIECES, max_size=12).map("".join)


def test_round_trip_of_random_cells(tmp_path):
    """Write -> import -> read back: predicted answers, gold answer and source are exact."""
    seen = {"n": 0}

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(answers=st.lists(_CELL, min_size=1, max_size=4), gold=_CELL, source=_CELL)
    def check(answers, gold, source):
        seen["n"] += 1
        folder = tmp_path / f"case{seen['n']}"
        folder.mkdir()
        rows = [
            row(f"s{i}", "direct", predicted_answer=a, gold_answer=gold, source=source)
            for i, a in enumerate(answers)
        ]
        store = Store(folder / "s.db")
        import_results(store, write_csv(folder / "r.per_sample_metrics.csv", rows), "r")
        back = store.scoring_frame(["r"]).set_index("instance_id")
        assert [back.loc[f"s{i}", "answer"] for i in range(len(answers))] == answers
        assert set(back["gold_answer"]) == {gold}
        assert set(store.instances_frame("r")["source"]) == {source}

    check()
    assert seen["n"] >= 10
