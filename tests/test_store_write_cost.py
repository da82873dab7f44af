"""A small batch's cache entries take the cheap path and store what ``INSERT OR IGNORE`` does.

Issue 38 item 4: an engine write of a few rows must cost little CPU. Up to
``records._SMALL_CACHE_BATCH`` cache entries are looked up and the new ones inserted as plain
values; more go through ``INSERT OR IGNORE``. Both keep a cached key's first response.
"""

from __future__ import annotations

from core.store import Store, records
from core.store.schema import CACHE_COLUMNS


def _entry(key: str, response: str) -> dict:
    return {
        "cache_key": key,
        "backend": "b",
        "model": "m",
        "options_hash": "o",
        "prompt_hash": f"p-{key}",
        "response": response,
    }


def _cache(store: Store) -> list[tuple]:
    cols = ", ".join(CACHE_COLUMNS)
    with store.connect(read_only=True) as con:
        return con.execute(f"SELECT {cols} FROM response_cache ORDER BY cache_key").fetchall()


def _write_all(store: Store, batches: list[list[dict]]) -> list[int]:
    out = []
    for batch in batches:
        with store.transaction() as con:
            out.append(store.write_cache(con, batch))
    return out


def test_small_and_large_cache_batches_store_the_same_rows(tmp_path):
    big = records._SMALL_CACHE_BATCH + 1
    first = [_entry(f"k{i:03d}", f"first-{i}") for i in range(big)]
    again = [_entry(f"k{i:03d}", f"second-{i}") for i in range(0, big, 2)]  # keys held
    mixed = [_entry("new", "n1"), _entry("k001", "x"), _entry("new", "n2"), _entry("k", None)]
    small = Store(tmp_path / "small.duckdb")
    large = Store(tmp_path / "large.duckdb")
    # small: one entry a batch (the cheap path every time)
    counts = _write_all(small, [[e] for e in first] + [[e] for e in again] + [mixed])
    assert counts == [1] * len(first) + [1] * len(again) + [3]
    # large: the first batch is over the cut-off (INSERT OR IGNORE)
    assert _write_all(large, [first, again, mixed]) == [big, len(again), 3]
    rows = _cache(small)
    assert rows == _cache(large)
    stored = {r[0]: r[-1] for r in rows}
    assert stored["k000"] == "first-0" and stored["k002"] == "first-2"  # first response kept
    assert stored["new"] == "n1" and stored["k"] is None  # first of a batch's duplicates
    assert len(rows) == big + 2


def test_a_small_batch_of_only_cached_keys_inserts_nothing(tmp_path, monkeypatch):
    store = Store(tmp_path / "s.duckdb")
    _write_all(store, [[_entry("a", "1"), _entry("b", "2")]])
    statements: list[str] = []
    with store.transaction() as con:
        real = con.execute

        class Spy:
            def __getattr__(self, name):
                return getattr(con, name)

            def execute(self, sql, *args):
                statements.append(sql)
                return real(sql, *args)

        assert store.write_cache(Spy(), [_entry("a", "x"), _entry("b", "y")]) == 2
    assert len(statements) == 1 and statements[0].startswith("SELECT")  # a lookup only
    assert [r[-1] for r in _cache(store)] == ["1", "2"]
