"""Sentence embeddings kept in the store (issue 18 item 5): the dense retriever's vectors.

Ranking chunks with the dense retriever embeds every chunk of every instance, which takes
minutes on a CPU for a few hundred instances. The vectors depend only on the model and the
text, so they are kept in the table ``embeddings`` (``model``, ``text_sha256``, ``vector``)
and reused by every later ranking: the Retrieval page, ``export figure retrieval_curves`` and
the next dashboard start. :class:`StoreEmbeddingCache` is the
:class:`core.retrieval.retrievers.EmbeddingCache` over that table.

Not a numbered migration (like ``data_version``): the table is made by its first write, and
a store without it reads as holding no vectors. Vectors change no number the dashboard shows
(they are the same vectors the model would give again), so writing them bumps no data
version.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping

import duckdb
import numpy as np
import pyarrow as pa

from core.store.connection import StoreBase, StoreError

__all__ = ["EmbeddingsMixin", "StoreEmbeddingCache"]

_DDL = (
    "CREATE TABLE IF NOT EXISTS embeddings (model VARCHAR NOT NULL, "
    "text_sha256 VARCHAR NOT NULL, vector FLOAT[] NOT NULL, PRIMARY KEY (model, text_sha256))"
)


class EmbeddingsMixin(StoreBase):
    """The embedding table of :class:`core.store.Store`."""

    def stored_embeddings(self, model: str, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The vectors of ``model`` stored under ``keys`` (text SHA-256), as float32 arrays.

        Keys without a vector are left out; a store without the table holds none.
        """
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        with self.connect(read_only=True) as con, con.cursor() as cur:
            try:  # a fresh cursor: no result pending on ``con`` gets in the way
                table = cur.sql(
                    "SELECT e.text_sha256, e.vector FROM embeddings e "
                    "JOIN (SELECT unnest(?::VARCHAR[]) AS k) w ON w.k = e.text_sha256 "
                    "WHERE e.model = ?",
                    params=[wanted, model],
                ).to_arrow_table()
            except duckdb.CatalogException:
                return {}
        if table.num_rows == 0:
            return {}
        names = table.column("text_sha256").to_pylist()
        values = table.column("vector").combine_chunks()
        flat = values.values.to_numpy(zero_copy_only=False).astype(np.float32, copy=False)
        offsets = values.offsets.to_numpy()
        return {name: flat[offsets[i] : offsets[i + 1]].copy() for i, name in enumerate(names)}

    def save_embeddings(self, model: str, vectors: Mapping[str, np.ndarray]) -> int:
        """Keep ``vectors`` (text SHA-256 -> vector) of ``model``; returns how many were new.

        Keys already stored keep their vector. One transaction: all or nothing.
        """
        if not vectors:
            return 0
        keys = list(vectors)
        rows = pa.table(
            {
                "text_sha256": pa.array(keys, type=pa.string()),
                "vector": pa.array(
                    [np.asarray(vectors[k], dtype=np.float32) for k in keys],
                    type=pa.list_(pa.float32()),
                ),
            }
        )
        count = "SELECT count(*) FROM embeddings WHERE model = ?"
        with self.write_batch() as con:  # one transaction on an attached connection
            con.execute(_DDL)
            before = con.execute(count, [model]).fetchall()[0][0]
            con.register("new_embeddings", rows)
            try:
                con.execute(
                    "INSERT OR IGNORE INTO embeddings "
                    "SELECT ?, text_sha256, vector FROM new_embeddings",
                    [model],
                )
            finally:
                con.unregister("new_embeddings")
            after = con.execute(count, [model]).fetchall()[0][0]
        return int(after) - int(before)


class StoreEmbeddingCache:
    """A :class:`core.retrieval.retrievers.EmbeddingCache` on the store's ``embeddings`` table.

    Reads go to memory first, then to the store in one query per :meth:`get_many`; new
    vectors are kept in memory until :meth:`flush` writes them in one transaction. When the
    store cannot be written (another process holds it, a read-only file), the vectors stay
    in memory for this process and :attr:`unsaved` says how many.

    Args:
        store: the store.
        model: the model's name and version (one cache holds one model's vectors).
    """

    def __init__(self, store: EmbeddingsMixin, model: str) -> None:
        self.store, self.model = store, model
        self._mem: dict[str, np.ndarray] = {}
        self._pending: dict[str, np.ndarray] = {}
        self._lock = threading.Lock()
        self.unsaved = 0

    def get(self, key: str) -> np.ndarray | None:
        """The vector of ``key`` (memory, then the store), or None."""
        return self.get_many([key]).get(key)

    def get_many(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """The vectors of those ``keys`` that are known; one store query for the rest."""
        keys = list(keys)
        with self._lock:
            found = {k: self._mem[k] for k in keys if k in self._mem}
        rest = [k for k in keys if k not in found]
        if rest:
            try:
                loaded = self.store.stored_embeddings(self.model, rest)
            except StoreError:
                loaded = {}
            with self._lock:
                self._mem.update(loaded)
            found.update(loaded)
        return found

    def put(self, key: str, vector: np.ndarray) -> None:
        """Remember ``vector`` for ``key``; written to the store by :meth:`flush`."""
        with self._lock:
            self._mem[key] = vector
            self._pending[key] = vector

    def flush(self) -> int:
        """Write the vectors not yet stored; returns how many were written (0 when it failed)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return 0
        try:
            written = self.store.save_embeddings(self.model, pending)
        except (StoreError, duckdb.Error):
            self.unsaved += len(pending)
            return 0
        return written

    def __len__(self) -> int:
        return len(self._mem)
