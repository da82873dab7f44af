"""The engine's small writes (issue 38 item 4): cheaper, and storing exactly what they stored.

The writer commits within a second of each answer, so at 16 calls/s a write holds a few rows
and its fixed cost is most of the engine's CPU per call. A small batch is scored one row at a
time (no DataFrame), the run's counts are added to instead of recounted, and the data-version
counters the first write made are bumped by one ``UPDATE``. Each must store what the general
path stores, bit for bit.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from test_scoring_vectorized import ANSWERS, CONDS, GOLDS, IDS, REASONS, TITLES, TYPES

from core.execution import score_rows
from core.execution.score_rows import ROW_SCORING_MAX, ScoringInputs, batch_scores
from core.execution.write import WriteContext, write_rows
from core.store import SCORE_COLUMNS, Store
from core.store.schema import bump_data_version


def _engine_rows(seed: int, n: int) -> tuple[list[dict], dict[str, dict]]:
    """Prediction rows as the engine holds them, and their instances' scoring inputs."""
    rng = np.random.default_rng(seed)

    def pick(values, p_none=0.0):
        return None if rng.random() < p_none else values[rng.integers(len(values))]

    def ids(most):
        return [IDS[i] for i in rng.integers(0, len(IDS), rng.integers(0, most + 1))]

    info = {}
    for k in range(12):
        gold = ids(3)
        info[f"i{k}"] = {
            "gold_answer": pick(GOLDS, 0.05),
            "answer_aliases": None
            if rng.random() < 0.5
            else [pick(GOLDS, 0.1) for _ in range(rng.integers(0, 3))],
            "answer_type": pick(TYPES),
            "reasoning_type": pick(REASONS),
            "gold_ids": gold,
            "gold_titles": [pick(TITLES) for _ in gold],
            "titles": {p: pick(TITLES) for p in IDS if rng.random() < 0.7},
        }
    rows = []
    for j in range(n):
        rows.append(
            {
                "run_id": "r",
                "instance_id": f"i{rng.integers(0, 13)}",  # i12: not stored, not scored
                "condition": pick(CONDS),
                "variant": pick(["", "", "", None, "v1"]),
                "answer": pick(ANSWERS, 0.05),
                "cited_ids": ids(4),
                "parse_error": pick([None, None, None, None, "", "  ", "invalid JSON"]),
                "error": pick([None] * 12 + ["", " ", "timeout", "HTTP 500"]),
                "confidence": pick([None, float("nan"), 0.0, -0.0, 0.3, 1.0, 1.7, -0.2]),
                "seq": j,
            }
        )
    return rows, info


def _bits(table: pa.Table) -> dict[str, list]:
    """Every value of a scores table exactly: floats by their bits, null as None."""
    out = {}
    for name in table.column_names:
        values = table.column(name).to_pylist()
        if name in SCORE_COLUMNS and name != "failure_label":
            values = [None if v is None else float(v).hex() for v in values]
        out[name] = values
    return out


def _reference(rows: list[dict], info: dict) -> pa.Table:
    """The general path: the batch's scoring frame through ``score_frame`` (as before)."""
    rows = [r for r in rows if r["instance_id"] in info]
    inst = [info[r["instance_id"]] for r in rows]
    scores = pa.Table.from_pandas(score_rows._frame_scores(rows, inst), preserve_index=False)
    keys = {
        c: pa.array([r[c] or "" if c == "variant" else r[c] for r in rows], pa.string())
        for c in ("run_id", "instance_id", "condition", "variant")
    }
    return pa.table({**keys, **{c: scores.column(c) for c in SCORE_COLUMNS}})


@pytest.mark.parametrize("seed", range(6))
def test_small_batches_score_bit_for_bit_as_the_frame_path(seed):
    rows, info = _engine_rows(seed, 600)
    for lo in range(0, len(rows), ROW_SCORING_MAX):  # one by one, as the writer's batches
        batch = rows[lo : lo + ROW_SCORING_MAX]
        assert _bits(batch_scores(batch, info)) == _bits(_reference(batch, info))
    # a batch over the cut-off takes the column scorer over Arrow: the same values
    assert _bits(batch_scores(rows, info)) == _bits(_reference(rows, info))


def test_odd_values_take_the_frame_path_and_score_the_same():
    rows, info = _engine_rows(9, 40)
    rows[0].update(instance_id="i1", error=None, confidence=1)  # an int: not the engine's
    rows[1].update(instance_id="i1", error=None, cited_ids=("p0001",))  # a tuple
    info["i0"]["gold_ids"] = ["p0001", None]  # a NULL id: only the per-row reference
    for batch in ([rows[0]], [rows[1]], rows):
        assert _bits(batch_scores(batch, info)) == _bits(_reference(batch, info))
    assert batch_scores([r for r in rows if r["instance_id"] == "i12"], info) is None


# ----------------------------------------------------------------------- progress and bumps


def _store_with_run(path, kind: str) -> Store:
    store = Store(path)
    store.save_run({"run_id": "r", "dataset_id": "d", "status": "running", "kind": kind})
    return store


def _state(store: Store) -> tuple:
    with store.connect(read_only=True) as con:
        run = con.execute(
            "SELECT status, n_done, n_errors, n_planned, model_seconds, wall_seconds FROM runs"
        ).fetchall()
        versions = con.execute(
            "SELECT scope, version FROM data_version WHERE scope <> 'store' ORDER BY scope"
        ).fetchall()
        preds = con.execute(
            "SELECT instance_id, condition, variant, error FROM predictions ORDER BY ALL"
        ).fetchall()
    return run, versions, preds


def _prediction_rows(seed: int, n: int) -> list[dict]:
    rows, _ = _engine_rows(seed, n)
    out = []
    for j, r in enumerate(rows):
        out.append(
            {
                **{k: r[k] for k in ("answer", "cited_ids", "parse_error", "error", "variant")},
                "run_id": "r",
                "instance_id": f"x{j}",
                "condition": "oracle",
                "input_passage_ids": [],
                "total_duration_ns": 1_000_000 * j,
                "_cache": None,
            }
        )
    return out


@pytest.mark.parametrize("kind", ["conditions", "interventions"])
def test_counts_added_per_batch_equal_a_recount_every_batch(tmp_path, kind):
    """The writer's running counts (its batches of new keys) and its one-UPDATE bumps leave
    the run row and the data version exactly as recounting and full bumps do, batch by
    batch; a batch that may replace stored rows recounts."""
    rows = _prediction_rows(3, 90)
    added = _store_with_run(tmp_path / "added.duckdb", kind)
    full = _store_with_run(tmp_path / "full.duckdb", kind)
    ctx = WriteContext("r", "d", 0.0, "b", "m", {}, "h")
    state = ScoringInputs("d")
    batches = [rows[:16], rows[16:20], rows[20:50], rows[50:51], rows[51:90]]
    for k, batch in enumerate(batches):
        replace = {(r["instance_id"], r["condition"], r["variant"] or "") for r in batch[:2]}
        if k != 3:
            replace = set()  # batch 3 "may replace" a key: recounted
        write_rows(added, ctx, batch, 1.0 + k, 90, None, replace, inputs=state)
        write_rows(full, ctx, batch, 1.0 + k, 90, None, replace, inputs=None)
        assert _state(added) == _state(full)
        assert state.counted and state.scopes == ["dataset:d", "global"]
    run = _state(added)[0][0]
    plain = [r for r in rows if kind != "conditions" or not r["variant"]]
    failed = [r for r in plain if (r["error"] or "") != ""]
    assert run[1:4] == (len(plain), len(failed), 90)
    write_rows(added, ctx, [], 9.0, 90, "done", set(), inputs=state)
    write_rows(full, ctx, [], 9.0, 90, "done", set(), inputs=None)
    assert _state(added) == _state(full)


def test_a_rolled_back_first_write_leaves_the_writer_recounting(tmp_path):
    store = _store_with_run(tmp_path / "s.duckdb", "conditions")
    ctx = WriteContext("r", "d", 0.0, "b", "m", {}, "h")
    state = ScoringInputs("d")
    rows = _prediction_rows(4, 6)
    with store.transaction() as con:  # a row the writer thinks new is stored already
        store.write_predictions(con, rows[:1], replace=False)
    with pytest.raises(Exception, match="(?i)constraint|duplicate"):
        write_rows(store, ctx, rows[:3], 1.0, 6, None, set(), inputs=state)
    assert not state.counted and state.scopes is None  # nothing committed: nothing relied on
    write_rows(store, ctx, rows[1:], 2.0, 6, None, set(), inputs=state)
    assert _state(store)[0][0][1] == 6  # recounted: the row stored before is counted


def test_a_bump_of_known_scopes_equals_a_full_bump(tmp_path):
    stores = [_store_with_run(tmp_path / f"{k}.duckdb", "conditions") for k in range(2)]
    scopes = None
    for _ in range(3):
        with stores[0].transaction() as con:
            scopes = bump_data_version(con, runs=["r"], scopes=scopes)
        with stores[1].transaction() as con:
            assert bump_data_version(con, runs=["r"]) == ["dataset:d", "global"]
        assert _state(stores[0])[1] == _state(stores[1])[1]
    assert stores[0].data_version("d") != stores[1].data_version("d")  # store ids differ
    assert stores[0].data_version("d")[1:] == stores[1].data_version("d")[1:]
