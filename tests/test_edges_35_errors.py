"""Issue 35, Why 10 and 11: one-line errors that name the file, record or flag; nothing silent.

Each bad input below ended in a traceback, an error naming the wrong file, a 9 MB "one-line"
error, or a silent success (an empty CSV, an ignored option). Now: one line on stderr, exit 1
(2 for a usage error), echoed values cut to 200 characters, no file written.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from core.backends import EmbeddedReader
from core.cli import build_parser, main
from core.datasets.controlled import build_controlled
from core.execution.jobs import RunRequest, run_command
from core.execution.runs import run_conditions
from core.store import Store
from core.store.failure_rows import FailureFilter


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """A store of 6 controlled instances, runs ``r`` and ``a,b`` (a name with a comma), and
    a batch-exported run ``b``."""
    db = tmp_path_factory.mktemp("e35") / "s.duckdb"
    store = Store(db)
    store.write_dataset(build_controlled("controlled-200", limit=6, name="ds"))
    for name in ("r", "a,b"):
        run_conditions(
            store, "ds", EmbeddedReader(workers=False), ("full_context", "oracle"), name=name
        )
    assert (
        main(
            [
                "batch",
                "export",
                "conditions",
                "--db",
                str(db),
                "--dataset",
                "ds",
                "--run",
                "b",
                "--conditions",
                "oracle",
                "--model",
                "m",
                "--out",
                str(db.parent / "b.jsonl"),
            ]
        )
        == 0
    )
    return db


def _fails(capsys, argv: list[str], code: int = 1) -> str:
    """Run the CLI; assert it ends with ``code`` and one line of error; return that line."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        raise SystemExit(main(argv))
    assert exited.value.code == code
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    line = err[-1]
    assert len(line) <= 1000, len(line)
    return line


# ------------------------------------------------------------------------ batch import
def test_batch_import_deeply_nested_line(base, tmp_path, capsys):
    bad = tmp_path / "nested.jsonl"
    bad.write_text("[" * 100_000 + "]" * 100_000 + "\n")
    line = _fails(capsys, ["batch", "import", str(bad), "--run", "b", "--db", str(base)])
    assert str(bad) in line and "line 1" in line and "nested too deeply" in line


def test_batch_import_directory_and_huge_integer(base, tmp_path, capsys):
    line = _fails(capsys, ["batch", "import", str(tmp_path), "--run", "b", "--db", str(base)])
    assert str(tmp_path) in line
    huge = tmp_path / "huge.jsonl"
    huge.write_text('{"custom_id": ' + "9" * 5000 + "}\n")
    line = _fails(capsys, ["batch", "import", str(huge), "--run", "b", "--db", str(base)])
    assert str(huge) in line and "line 1" in line


# ------------------------------------------------------------------------ output paths
def test_outputs_under_a_file_are_one_line(base, tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    under = tmp_path / "f" / "out"
    line = _fails(capsys, ["store", "export", "--out", str(under), "--db", str(base)])
    assert str(under) in line
    line = _fails(
        capsys,
        [
            "export",
            "table",
            "oncu_summary",
            "--runs",
            "r",
            "--out",
            str(under) + ".csv",
            "--db",
            str(base),
        ],
    )
    assert "--out" in line and "is a file, not a folder" in line
    line = _fails(
        capsys,
        [
            "export",
            "figure",
            "condition_matrix",
            "--runs",
            "r",
            "--out",
            str(tmp_path),
            "--db",
            str(base),
        ],
    )
    assert "--out" in line and "is a directory" in line


# ------------------------------------------------------------------------ export flags
def test_export_table_unknown_dataset_writes_no_file(base, tmp_path, capsys):
    out = tmp_path / "t.csv"
    line = _fails(
        capsys,
        [
            "export",
            "table",
            "oncu_summary",
            "--dataset",
            "nope",
            "--out",
            str(out),
            "--db",
            str(base),
        ],
    )
    assert "--dataset nope" in line and "ds" in line
    assert not out.exists()


def test_export_option_unknown_nested_or_huge(base, tmp_path, capsys):
    out = tmp_path / "t.csv"
    args = ["export", "table", "oncu_summary", "--runs", "r", "--out", str(out), "--db", str(base)]
    line = _fails(capsys, [*args, "--option", "bogus=1"])
    assert "unknown --option bogus" in line and "n_resamples" in line
    line = _fails(capsys, [*args, "--option", "n_resamples=" + "[" * 100_000])
    assert "nested too deeply" in line
    line = _fails(capsys, [*args, "--option", "k" * 20_000 + "=1"])
    assert len(line) < 600
    assert not out.exists()


def test_export_option_of_the_wrong_kind_is_one_line(base, tmp_path, capsys):
    """A declared --option with a value of the wrong kind: one line naming it, no traceback."""
    out = tmp_path / "f.png"
    args = [
        "export",
        "figure",
        "retrieval_curves",
        "--dataset",
        "ds",
        "--out",
        str(out),
        "--db",
        str(base),
    ]
    for value, words in (
        ("ks=5.5", "'ks' expects int, got 5.5"),
        ('ks={"a": 1}', "'ks' expects int"),
        ("retrievers=5", "is not one of lexical, dense, hybrid, iterative, oracle"),
    ):
        line = _fails(capsys, [*args, "--option", value])
        assert words in line, line
    assert not out.exists()


def test_runs_with_a_comma_are_selectable(base, tmp_path, capsys):
    out = tmp_path / "t.csv"
    assert (
        main(
            [
                "export",
                "table",
                "oncu_summary",
                "--runs",
                '"a,b"',
                "--runs",
                "r",
                "--out",
                str(out),
                "--db",
                str(base),
            ]
        )
        == 0
    )
    text = out.read_text("utf-8")
    assert '"a,b"' in text and "\nr," in text


def test_seed_out_of_range_is_a_usage_error(base, capsys):
    line = _fails(
        capsys,
        [
            "run",
            "--dataset",
            "ds",
            "--backend",
            "embedded",
            "--conditions",
            "oracle",
            "--seed",
            str(2**70),
            "--name",
            "s",
            "--db",
            str(base),
        ],
        code=2,
    )
    assert "--seed" in line
    line = _fails(
        capsys,
        [
            "run",
            "--dataset",
            "ds",
            "--backend",
            "embedded",
            "--seed",
            "9" * 5000,
            "--name",
            "s",
            "--db",
            str(base),
        ],
        code=2,
    )
    assert len(line) < 600


# ------------------------------------------------------------------------ names
def test_control_characters_refused_in_a_judge_name(base, tmp_path, capsys):
    crux = tmp_path / "crux.jsonl"
    crux.write_text(json.dumps({"instance_id": "x", "sub_questions": []}) + "\n")
    line = _fails(
        capsys,
        ["import", "crux", str(crux), "--dataset", "ds", "--judge", "a\nb", "--db", str(base)],
    )
    assert "judge name" in line and "U+000A" in line


def test_dataset_named_with_a_dash_launches(base):
    argv = run_command(RunRequest(db=str(base), dataset="-x", name="r2", conditions=("oracle",)))
    args = build_parser().parse_args(argv[3:])
    assert isinstance(args, argparse.Namespace) and args.dataset == "-x"


# ------------------------------------------------------------------------ store merge
def test_store_merge_names_the_file_at_fault(base, tmp_path, capsys):
    bad = tmp_path / "bad.duckdb"
    bad.write_text("not a store")
    into = tmp_path / "m.duckdb"
    line = _fails(capsys, ["store", "merge", str(bad), "--into", str(into)])
    assert str(bad) in line and not into.exists()


# ------------------------------------------------------------------------ failure browser
def test_failure_page_of_a_huge_offset(base):
    filt = FailureFilter(runs=("r",), failures_only=False)
    rows, counts = Store(base).failure_page(filt, offset=10**30)
    assert rows.empty and counts["total"] == 12


def test_a_store_whose_folder_cannot_be_made_is_one_line(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    db = tmp_path / "f" / "s.duckdb"
    line = _fails(capsys, ["generate", "controlled", "--name", "z", "--db", str(db)])
    assert f"store {db}: cannot make its folder {tmp_path / 'f'}" in line


def test_every_runs_list_takes_a_quoted_name_with_a_comma(base, capsys):
    """``split_csv`` (every comma-separated option) reads CSV quoting: the fan-in report and
    the paper's numbers select the run ``a,b`` by ``'"a,b"'``, not runs ``a`` and ``b``."""
    assert (
        main(
            ["report", "fanin", "--runs", '"a,b",r', "--json", "--no-instances", "--db", str(base)]
        )
        == 0
    )
    systems = {r["system"] for r in json.loads(capsys.readouterr().out)["by_bucket"]}
    assert any(s.startswith("a,b") for s in systems) and any(s.startswith("r") for s in systems)
    assert main(["report", "fanin", "--runs", "a,b", "--db", str(base)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'a'" in err, err
