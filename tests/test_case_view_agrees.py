"""The Case view's trace divergence D is the Interventions page's D (issue 14).

Both come from :func:`core.cuer.trace_divergence` with the instance's answer and reasoning
type. A reader double answers ``"Total 0NNN"`` with NNN = the number of passages it was shown,
so an original and its ``remove`` perturbation differ only in the synthetic-looking suffix:
for a number answer (or arithmetic reasoning) that suffix is kept by the relaxed normalizer
and the answer counts as changed (+0.3); without the answer type it would be dropped.
"""

from __future__ import annotations

import pytest

import core.rerun
from core.backends import EmbeddedReader
from core.catalog import get_table
from core.cuer import trace_divergence
from core.datasets.controlled import build_controlled
from core.rerun import RerunRequest, rerun
from core.runs import run_interventions
from core.selection import Selection
from core.store import Store
from core.types import Dataset


class _SuffixReader(EmbeddedReader):
    """The embedded reader with its answer replaced by ``Total 0NNN`` (NNN passages shown)."""

    def read(self, messages):  # noqa: D102 - the reader's own contract
        obj = super().read(messages)
        shown = sum(str(m.get("content", "")).count("[passage_id:") for m in messages)
        return dict(obj, answer=f"Total 0{shown:03d}", cited_ids=[], confidence=0.5)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    full = build_controlled(preset="controlled-200", seed=42, name="small")
    # number / arithmetic instances and entity ones (0, 50, 100, 150: the reasoning types)
    picks = tuple(full.instances[i] for i in (0, 50, 100, 150))
    store = Store(tmp_path_factory.mktemp("agree") / "s.duckdb")
    store.write_dataset(Dataset("small", full.source, full.builder, full.builder_params, picks))
    summary = run_interventions(
        store, "small", _SuffixReader(workers=False), name="cr", operators=("remove",),
        two_support=False, zero_retrieval=False,
    )  # fmt: skip
    assert summary.status == "done" and summary.errors == 0
    return store


def test_case_view_divergence_equals_the_interventions_page(store, monkeypatch):
    page = get_table("cuer_role_examples").build(store, Selection(dataset="small"))
    page = page[page["operator"] == "remove"].set_index("instance_id")
    assert len(page) == 4
    # the Case view reruns with the run's own backend: the same reader double
    monkeypatch.setattr(core.rerun, "make_backend", lambda *a, **k: _SuffixReader(workers=False))
    kept_suffix = 0
    for iid, row in page.iterrows():
        inst = store.load_instances("small", [iid])[0]
        req = RerunRequest("small", iid, "cr", "retrieved", "remove", row["target"], {},
                           "embedded", None)  # fmt: skip
        res = rerun(store, req)
        case_d = res["divergence"]
        assert case_d == pytest.approx(row["trace_divergence"])
        orig, pert = res["original"], res["perturbed"]
        untyped = trace_divergence(orig["cited_ids"] or (), pert["cited_ids"] or (),
                                   orig["answer"], pert["answer"], orig["confidence"],
                                   pert["confidence"])  # fmt: skip
        if inst.answer_type == "number" or inst.reasoning_type == "arithmetic":
            kept_suffix += 1
            assert case_d == pytest.approx(untyped + 0.3)  # the answer type matters here
        else:
            assert case_d == pytest.approx(untyped)
    assert kept_suffix >= 1
