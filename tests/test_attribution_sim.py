"""Attribution recovers a known reader (issue 40, done-when 1), through ``run-attribution``.

A simulated reader answers from which passages its prompt shows: the model stub
(``tests/model_stub.py``, the OpenAI-compatible API) with a scripted ``answer_for``. Reader
1 says "yes" iff p0002 is shown (32 ablations); reader 2 says "yes" iff both p0001 and p0004
are shown (64 ablations). Over 100 instances of 5 passages each, the passages the reader
uses must be the top weights with a CI above 0 for >= 95 % of instances, and the passages it
ignores may have a CI excluding 0 in at most 10 % of (instance, passage) pairs.
"""

from __future__ import annotations

import json

import pytest

from core.cli import main
from core.store import Store
from core.types import Dataset, Instance, Passage

N = 100
IDS = ("p0001", "p0002", "p0003", "p0004", "p0005")


def _dataset(name: str, gold: tuple[str, ...]) -> Dataset:
    insts = []
    for i in range(N):
        passages = tuple(
            Passage(
                pid,
                j,
                f"Doc {j} of {i}",
                f"Filler text number {j} for question {i}.",
                f"d{j}",
                "gold" if pid in gold else "filler",
                pid in gold,
            )
            for j, pid in enumerate(IDS)
        )
        # the question names the dataset: the two readers must not share cached replies
        insts.append(Instance(f"q{i:03d}", f"Is {name} statement {i} true?", "yes", passages))
    return Dataset(name, "test", "test", {}, tuple(insts))


def _shown(messages) -> set[str]:
    user = messages[-1]["content"]
    return {pid for pid in IDS if f"[passage_id: {pid}]" in user}


def _run(stub, db, capsys, name, ablations, needs):
    stub.answer_for = lambda messages: "yes" if needs <= _shown(messages) else "no"
    argv = [
        "run-attribution",
        "--db",
        str(db),
        "--dataset",
        name,
        "--backend",
        "openai",
        "--model",
        "stub-model",
        "--base-url",
        stub.url,
        "--ablations",
        str(ablations),
        "--concurrency",
        "8",
        "--name",
        f"att-{name}",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["errors"] == 0 and summary["status"] == "done"
    assert main(["report", "attribution", "--db", str(db), "--run", f"att-{name}", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _check(rep, needs: set[str]) -> tuple[int, int, int]:
    by: dict[str, dict[str, dict]] = {}
    for p in rep["passages"]:
        by.setdefault(p["instance_id"], {})[p["passage_id"]] = p
    assert len(by) == N
    good = 0
    ignored = excluded = 0
    for rows in by.values():
        top = sorted(rows.values(), key=lambda r: -(r["weight"] or 0))[: len(needs)]
        if {r["passage_id"] for r in top} == needs and all(r["ci_low"] > 0 for r in top):
            good += 1
        for pid, r in rows.items():
            if pid not in needs:
                ignored += 1
                excluded += r["ci_low"] > 0 or r["ci_high"] < 0
    assert good >= 0.95 * N, f"{good} of {N} instances recover {sorted(needs)}"
    assert excluded <= 0.10 * ignored, f"{excluded} of {ignored} ignored passages 'causal'"
    assert rep["calls"]["failed"] == 0 and rep["n_fitted"] == N
    return good, excluded, ignored


@pytest.mark.timeout(900)
def test_known_readers_are_recovered_through_the_cli(stub, tmp_path, capsys):
    db = tmp_path / "sim.duckdb"
    store = Store(db)
    store.write_dataset(_dataset("one", ("p0002",)))
    store.write_dataset(_dataset("both", ("p0001", "p0004")))

    one = _run(stub, db, capsys, "one", 32, {"p0002"})
    seen = {"one": _check(one, {"p0002"})}
    # the reader's cited ids are empty: nothing is cited, every causal passage is uncited
    cells = one["cited_vs_causal"]["cells"]
    assert cells["cited_causal"] == 0 and cells["not_cited_causal"] >= 95
    assert one["gold_reliance"]["overall"]["mean"] > 0.95

    both = _run(stub, db, capsys, "both", 64, {"p0001", "p0004"})
    seen["both"] = _check(both, {"p0001", "p0004"})
    with capsys.disabled():  # the figures, for the record (pytest -s shows them)
        for name, (good, excluded, ignored) in seen.items():
            print(
                f"\nreader {name}: {good}/{N} instances recovered; ignored passages with a "
                f"CI excluding 0: {excluded}/{ignored}"
            )
    # one extra call per k: dropping the two needed passages loses the answer
    assert both["top_drop"]["2"] == pytest.approx(1.0)
