"""Benchmark: importing a HotpotQA-format file into a fresh store (no SPEC bound).

Writes a HotpotQA-format JSON list of ``--records`` records (default 5,300, the same order as
the 7,405-record dev set): the 53 real records of
``../shared/fixtures/hotpotqa/hotpot_dev_distractor_sample53.json`` repeated with new ``_id``s
(about 7 MB per 1,000 records, 10 paragraphs each), or, when the fixture is absent, synthetic
records of the same shape. Each run then does what ``python -m core import dataset`` does: read
and validate the file into a dataset (``read_dataset``) and write it into a fresh DuckDB store
(``Store.write_dataset``, one transaction); the store's schema is created before the clock starts.

Figures (median of ``--repeats`` runs, informational: SPEC §12 sets no bound on imports):
records/s and passages/s end to end, and the seconds of the store write alone.

Usage: ``python bench/bench_import.py [--records 5300] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, print_figures  # noqa: E402

from core.datasets.importers import read_dataset  # noqa: E402
from core.store import Store  # noqa: E402

FIXTURE = ROOT.parent / "shared" / "fixtures" / "hotpotqa" / "hotpot_dev_distractor_sample53.json"
N_RECORDS = 5300
SCRIPT = Path(__file__).name


def _synthetic(n: int) -> list[dict]:
    """``n`` HotpotQA-shaped records (10 paragraphs of 4 sentences, 2 supporting titles)."""
    records = []
    for i in range(n):
        titles = [f"Topic {i} {j}" for j in range(10)]
        context = [
            [t, [f" {t} sentence {s} says something about item {i * 10 + j}." for s in range(4)]]
            for j, t in enumerate(titles)
        ]
        records.append(
            {
                "_id": f"syn{i:07d}",
                "question": f"Which topic links item {i} and item {i + 1}?",
                "answer": f"Topic {i} 3",
                "type": "bridge" if i % 4 else "comparison",
                "level": "medium",
                "supporting_facts": [[titles[3], 0], [titles[7], 1]],
                "context": context,
            }
        )
    return records


def write_records(path: Path, n: int) -> str:
    """Write ``n`` HotpotQA-format records to ``path``; return where they came from."""
    if FIXTURE.exists():
        base = json.loads(FIXTURE.read_text(encoding="utf-8"))
        records = []
        for i in range(n):
            rec = copy.deepcopy(base[i % len(base)])
            rec["_id"] = f"{rec['_id']}-{i // len(base):04d}"
            records.append(rec)
        source = f"{len(base)} real records of {FIXTURE.name}, repeated with new ids"
    else:
        records = _synthetic(n)
        source = "synthetic records (fixture absent)"
    path.write_text(json.dumps(records), encoding="utf-8")
    return source


def results(repeats: int = 5, records: int = N_RECORDS) -> list[dict]:
    """Records/s and passages/s of a file import into a fresh store, and the write seconds."""
    total_s, write_s, n_read, n_passages = [], [], 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "hotpot.json"
        source = write_records(src, records)
        mb = src.stat().st_size / 1e6
        for run in range(repeats):
            store = Store(Path(tmp) / f"s{run}.duckdb")
            t0 = time.perf_counter()
            result = read_dataset(src, fmt="hotpotqa", name="bench-import")
            t1 = time.perf_counter()
            store.write_dataset(result.dataset)
            t2 = time.perf_counter()
            total_s.append(t2 - t0)
            write_s.append(t2 - t1)
            n_read = result.n_written
            n_passages = sum(len(i.passages) for i in result.dataset.instances)
            (Path(tmp) / f"s{run}.duckdb").unlink()
    print(
        f"import: {n_read:,} records, {n_passages:,} passages, {mb:.1f} MB ({source}); "
        f"runs {', '.join(f'{t:.2f}' for t in total_s)} s"
    )
    what = f"HotpotQA-format import into a fresh store, {n_read:,} records"
    return [
        figure(
            f"{what}: records", [n_read / t for t in total_s], "records/s", SCRIPT, better="higher"
        ),
        figure(
            f"{what}: passages",
            [n_passages / t for t in total_s],
            "passages/s",
            SCRIPT,
            better="higher",
        ),
        figure(f"{what}: store write alone", write_s, "s", SCRIPT),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures (informational: exit status 0 unless a script error)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=N_RECORDS, help="records in the file (5300)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs (5)")
    args = ap.parse_args(argv)
    return print_figures(results(args.repeats, args.records))


if __name__ == "__main__":
    sys.exit(main())
