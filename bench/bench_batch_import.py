"""Benchmark: ``batch import`` throughput, answers stored per second on one core (issue 21).

Builds a store holding a HotpotQA-format dataset of ``--records`` records (default 5,300: the 53
real records of ``../shared/fixtures/hotpotqa/hotpot_dev_distractor_sample53.json`` repeated
with new ids, as ``bench_import.py`` writes them; synthetic records of the same shape when the
fixture is absent), exports the four conditions as a batch file (``batch export``: 4 calls per
record) and answers every line as vLLM's ``run_batch`` would write it, with the embedded
reader's reply to the same messages (the stub server's replies; repeated records have the
same prompts, so each distinct prompt is read once). None of that is timed.

Each timed run imports the whole file into a fresh copy of the exported store, as ``python -m
core batch import`` does (:func:`core.batch.runs.import_batch`: read and check every line, parse
every reply, build the prediction rows, score them and store predictions, cache entries and
scores in one transaction, the run finished), pinned to one core.

Figure: answers stored per second (median of ``--repeats`` runs), bound >= 5,000 answers/s
(issue 21).

Usage: ``python bench/bench_batch_import.py [--records 5300] [--repeats 5]``
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_import import write_records  # noqa: E402
from run_all import figure, one_core, print_figures  # noqa: E402

from core.backends.embedded import EmbeddedReader  # noqa: E402
from core.batch.runs import export_batch, import_batch  # noqa: E402
from core.datasets.importers import read_dataset  # noqa: E402
from core.store import Store  # noqa: E402

N_RECORDS = 5300
#: The bound of issue 21: answers stored per second on one core.
BOUND = 5000.0
SCRIPT = Path(__file__).name
CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")


def _answers(requests: Path, out: Path) -> int:
    """Write run_batch output lines answering every request line; returns the line count."""
    reader = EmbeddedReader()
    replies: dict[str, str] = {}
    n = 0
    with open(requests, encoding="utf-8") as src, open(out, "w", encoding="utf-8") as dst:
        for line in src:
            req = json.loads(line)
            msgs = req["body"]["messages"]
            key = json.dumps(msgs, sort_keys=True)
            text = replies.get(key)
            if text is None:
                text = replies[key] = reader.generate(msgs).text
            body = {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "model": req["body"]["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                        "logprobs": None,
                    }
                ],
                "usage": {"prompt_tokens": 1000, "completion_tokens": 40, "total_tokens": 1040},
            }
            dst.write(
                json.dumps(
                    {
                        "id": f"vllm-{n}",
                        "custom_id": req["custom_id"],
                        "response": {
                            "status_code": 200,
                            "request_id": f"vllm-batch-{n}",
                            "body": body,
                        },
                        "error": None,
                    }
                )
                + "\n"
            )
            n += 1
    return n


def results(repeats: int = 5, records: int = N_RECORDS) -> list[dict]:
    """Answers/s of ``batch import`` of a four-condition batch file, one core."""
    rates: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        src = tmp_path / "hotpot.json"
        source = write_records(src, records)
        base = tmp_path / "base.duckdb"
        Store(base).write_dataset(read_dataset(src, fmt="hotpotqa", name="bench").dataset)
        export_batch(
            Store(base),
            "conditions",
            "bench",
            "batch",
            "bench-model",
            tmp_path / "in.jsonl",
            conditions=CONDITIONS,
        )
        n = _answers(tmp_path / "in.jsonl", tmp_path / "out.jsonl")
        with one_core():
            for run in range(repeats):
                db = tmp_path / f"s{run}.duckdb"
                shutil.copy(base, db)
                store = Store(db)
                t0 = time.perf_counter()
                got = import_batch(store, "batch", [tmp_path / "out.jsonl"])
                rates.append(n / (time.perf_counter() - t0))
                if got["stored"] != n:
                    raise RuntimeError(f"stored {got['stored']} of {n} answers")
                db.unlink()
    print(
        f"batch import: {n:,} answers ({records:,} records x 4 conditions; {source}); "
        f"runs {', '.join(f'{r:,.0f}' for r in rates)} answers/s"
    )
    what = f"batch import of a run_batch output file, {n:,} answers (four conditions), one core"
    return [figure(what, rates, "answers/s", SCRIPT, bound=BOUND, better="higher")]


def main(argv: list[str] | None = None) -> int:
    """Print the figure; exit status 1 when the bound is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=N_RECORDS, help="records (5300)")
    ap.add_argument("--repeats", type=int, default=5, help="timed runs (5)")
    args = ap.parse_args(argv)
    return print_figures(results(args.repeats, args.records))


if __name__ == "__main__":
    sys.exit(main())
