"""A file of a recognizable other format is named on import (issue 36 item 7 / "Why" 12).

Importing the real HotpotQA sample as released results used to say "column named twice in the
header (columns 6 and 67)"; the released metrics CSV as a HotpotQA dataset "expected a JSON list
of records". Now the one-line error says what the file looks like and which format to choose,
on the command line and on the Runs page, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import shared_fixture

from core.cli import main
from core.datasets.sniff import format_hint, sniff

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
RELEASE = "oncu_release/hotpotqa_qwen25_14b_200.per_sample_metrics.csv"
BABILONG = "babilong/babilong_cue_200_external.jsonl"


def test_sniff_names_the_real_files():
    assert sniff(shared_fixture(HOTPOT)).fmt == "hotpotqa"
    assert sniff(shared_fixture(RELEASE)).fmt == "oncu-release"
    assert sniff(shared_fixture(BABILONG)) is None  # no clear sign: no guess
    # the right format chosen: no hint; HotpotQA and 2Wiki share a layout: no hint either
    assert format_hint(shared_fixture(HOTPOT), "dataset", "hotpotqa") is None
    assert format_hint(shared_fixture(HOTPOT), "dataset", "2wiki") is None


def test_sniff_reads_only_the_head_and_never_fails(tmp_path):
    big = tmp_path / "big.json"
    big.write_text(
        '[{"_id": "a", "question": "q", "answer": "x", "supporting_facts": [], '
        '"context": [["t", ["' + "s " * 100_000 + '"]]]}]'
    )
    assert sniff(big) is None  # the first record is cut at 64 KiB: not recognized, no error
    assert sniff(tmp_path / "missing.json") is None
    (tmp_path / "bin").write_bytes(b"\xff\xfe\x00garbage")
    assert sniff(tmp_path / "bin") is None


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["import", "results", HOTPOT, "--format", "oncu-release"],
            "this looks like a HotpotQA file (a JSON list of records with _id, question, answer, "
            "supporting_facts, context); choose format hotpotqa (import dataset --format hotpotqa)",
        ),
        (
            ["import", "dataset", RELEASE, "--format", "hotpotqa", "--name", "x"],
            "this looks like released ONCU results (a per_sample_metrics.csv with sample_id, "
            "model_name, method, gold_answer, predicted_answer); choose format oncu-release "
            "(import results --format oncu-release)",
        ),
        (
            ["import", "dataset", HOTPOT, "--format", "oncu-jsonl", "--name", "x"],
            "choose format hotpotqa",
        ),
    ],
)
def test_the_cli_names_the_format_and_writes_nothing(tmp_path, capsys, args, words):
    db = tmp_path / "s.duckdb"
    file = str(shared_fixture(args[2]))
    assert main([*args[:2], file, *args[3:], "--db", str(db)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: {file}: ") and words in err[0], err
    assert not db.exists() or _runs(db) == 0


def _runs(db: Path) -> int:
    import duckdb

    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute("SELECT count(*) FROM datasets").fetchone()[0]
    finally:
        con.close()


def test_the_runs_page_names_its_own_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("EVIDENCE_DB", str(tmp_path / "s.duckdb"))
    from screens.parts.common import import_file

    with pytest.raises(ValueError) as err:
        import_file("results: oncu-release", shared_fixture(HOTPOT), "x")
    assert 'choose format hotpotqa (choose What: "dataset: hotpotqa" above)' in str(err.value)
