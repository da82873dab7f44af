"""Scores of the engine's write batches, computed from what the engine holds.

:func:`batch_scores` builds, for a batch of prediction rows, the score rows that
:func:`core.scoring.rows.score_frame` gives on the frame :meth:`core.store.Store.scoring_frame`
would read back for them; :class:`ScoringInputs` holds what that needs from the run's
instances (gold answers and ids, passage titles), read once for all of a run's batches.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

import pandas as pd

from core.scoring.rows import score_frame
from core.store import Store

__all__ = ["PREFETCH_MAX", "ScoringInputs", "batch_scores"]

#: Most passages whose titles the writer reads in its first write, with the rest of the
#: planned instances' scoring inputs (:class:`ScoringInputs`; a larger run's batches read
#: their own instances' as they come).
PREFETCH_MAX = 200_000

_KEY_COLUMNS = ("run_id", "instance_id", "condition", "variant")


class ScoringInputs:
    """What scoring needs from a run's instances, read once for all of the writer's batches.

    :meth:`core.store.Store.scoring_inputs` per batch costs several milliseconds however
    small the batch; the writer instead reads the planned instances' inputs in its first
    write, every passage title included while they have at most :data:`PREFETCH_MAX`
    passages (about 40 ms for 35,000), and later batches read nothing more. A larger run
    reads its batches' instances as they come, and the titles of cited passages it has not
    read yet.
    """

    def __init__(self, dataset: str, planned: Collection[str] = ()):
        self.dataset = dataset
        self.info: dict[str, dict[str, Any]] = {}
        self._read: set[str] = set()  # instances asked for (stored or not)
        self._complete: set[str] = set()  # instances whose every title is read
        self._asked: set[tuple[str, str]] = set()  # (instance, cited passage) asked for
        self._prefetch = sorted(set(planned))

    def get(
        self, store: Store, con: Any, cited: Sequence[tuple[str, Sequence[str] | None]]
    ) -> Mapping[str, dict[str, Any]]:
        """The inputs of every instance read so far, including those of ``cited``."""
        if self._prefetch:
            want, self._prefetch = self._prefetch, []
            if store.passage_count(con, self.dataset, want) <= PREFETCH_MAX:
                self.info.update(
                    store.scoring_inputs(
                        con, self.dataset, [(i, None) for i in want], all_titles=True
                    )
                )
                self._read.update(want)
                self._complete.update(want)
        need: dict[str, set[str]] = {}
        for iid, ids in cited:
            if iid in self._complete:
                continue
            known = self.info.get(iid, {}).get("titles", {})
            new = {p for p in ids or () if p not in known and (iid, p) not in self._asked}
            if new or iid not in self._read:
                need.setdefault(iid, set()).update(new)
        if not need:
            return self.info
        got = store.scoring_inputs(con, self.dataset, [(i, sorted(p)) for i, p in need.items()])
        self._read.update(need)
        self._asked.update((i, p) for i, ps in need.items() for p in ps)
        for iid, rec in got.items():
            if iid in self.info:
                self.info[iid]["titles"].update(rec["titles"])
            else:
                self.info[iid] = rec
        return self.info


def batch_scores(rows: Sequence[Mapping[str, Any]], info: Mapping[str, Any]) -> pd.DataFrame | None:
    """The score rows of prediction rows, from the rows and their instances' inputs.

    The frame :func:`core.scoring.rows.score_frame` gets is the one :meth:`core.store.Store.
    scoring_frame` would read back for these rows, built from what the engine holds: a failed
    call (``error`` set) gets NULL scores and no failure label, an unparseable reply scores 0
    and stays in every denominator (seed 000 §8.1). Rows whose instance is not stored are not
    scored (as the store's join leaves them out).
    """
    rows = [r for r in rows if r["instance_id"] in info]
    if not rows:
        return None
    inst = [info[r["instance_id"]] for r in rows]
    frame = pd.DataFrame(
        {
            "condition": [r["condition"] for r in rows],
            "answer": [r["answer"] for r in rows],
            "cited_ids": [r["cited_ids"] for r in rows],
            "parse_error": [r["parse_error"] for r in rows],
            "error": [r["error"] for r in rows],
            "confidence": pd.Series([r["confidence"] for r in rows], dtype="float64"),
            **{
                col: [i[col] for i in inst]
                for col in (
                    "gold_answer",
                    "answer_aliases",
                    "answer_type",
                    "reasoning_type",
                    "gold_ids",
                    "gold_titles",
                )
            },
            "cited_titles": [
                [i["titles"].get(x) for x in (r["cited_ids"] or [])]
                for r, i in zip(rows, inst, strict=True)
            ],
        }
    )
    keys = pd.DataFrame({c: [r[c] for r in rows] for c in _KEY_COLUMNS})
    return pd.concat([keys, score_frame(frame)], axis=1)
