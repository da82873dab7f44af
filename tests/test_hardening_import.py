"""Issue 17, importers: bad input is one line naming file, record and field, exit 1, and the store
is as before; caps on every importer; dataset and run names checked; several results files."""

from __future__ import annotations

import csv
import json

import pytest

from core.cli import main
from core.datasets.controlled import build_controlled
from core.datasets.importers import FORMATS, read_dataset
from core.datasets.records import MAX_CONTEXT_LENGTH, MAX_FIELD_BYTES
from core.datasets.results import import_results
from core.names import NAME_MAX, check_name
from core.store import Store
from core.types import DataError

HEADER = [
    "sample_id",
    "model_name",
    "method",
    "source",
    "reasoning_type",
    "answer_type",
    "context_length",
    "evidence_position",
    "evidence_density",
    "distractor_similarity",
    "gold_answer",
    "predicted_answer",
    "gold_evidence_ids",
    "predicted_evidence_ids",
]
METHODS = ("no_evidence", "direct", "retrieve_then_read", "oracle")


def row(sid="s1", method="direct", **cells) -> dict[str, str]:
    """One results row; ``cells`` override the defaults."""
    values = [sid, "m1", method, "toy", "single_hop", "entity", "4000", "front", "low", "none"]
    out = dict(zip(HEADER, [*values, "Paris", "Paris", "p0001", "p0001"], strict=True))
    out.update(cells)
    return out


def write_csv(path, rows, header=HEADER):
    """A results CSV as ``csv.writer`` writes it (CRLF line ends, minimal quoting)."""
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for r in rows:
            w.writerow([r[c] for c in header] if isinstance(r, dict) else r)
    return path


def snapshot(db) -> tuple:
    """What an import could change: datasets with their sizes, runs with their predictions."""
    store = Store(db)
    runs = store.runs_frame(live=False)
    return (
        [(d.name, d.n_instances) for d in store.list_datasets()],
        sorted(zip(runs["run_id"], runs["n_predictions"], strict=True)) if len(runs) else [],
    )


@pytest.fixture
def db(tmp_path):
    """A store holding one imported results file (run and dataset ``base``)."""
    path = tmp_path / "base.db"
    f = write_csv(tmp_path / "base.per_sample_metrics.csv", [row(method=m) for m in METHODS])
    import_results(Store(path), f, name="base")
    return path


def refused(capsys, db, *argv) -> str:
    """Run the CLI; it must fail with exit 1, one stderr line, no traceback, store unchanged."""
    before = snapshot(db)
    capsys.readouterr()
    rc = main([*map(str, argv), "--db", str(db)])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    assert snapshot(db) == before
    return err.strip()


def import_csv(capsys, db, path, *extra) -> str:
    return refused(
        capsys, db, "import", "results", "--format", "oncu-release", path, "--name", "new", *extra
    )


# ---------------------------------------------------------------------------- item 1: CSV
def test_line_breaks_inside_quoted_cells_are_kept(tmp_path):
    odd = ["New\nYork", "a\r\nb", "form\x0cfeed", "line\u2028sep", 'say "hi", then', "x\ry"]
    rows = [row(f"s{i}", "direct", predicted_answer=t, gold_answer=t) for i, t in enumerate(odd)]
    store = Store(tmp_path / "s.db")
    res = import_results(store, write_csv(tmp_path / "t.per_sample_metrics.csv", rows), "t")
    assert (res.n_rows, res.n_instances) == (6, 6)
    frame = store.scoring_frame(["t"]).set_index("instance_id")
    for i, text in enumerate(odd):
        assert frame.loc[f"s{i}", "answer"] == text
        assert frame.loc[f"s{i}", "gold_answer"] == text


# ---------------------------------------------------------------------------- item 2: CSV cases
@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            str(2**31),
            f"expected an integer <= {MAX_CONTEXT_LENGTH:,} (the store's 32-bit limit), "
            f"got {2**31}",
        ),
        (
            "9" * 5000,
            f"expected an integer <= {MAX_CONTEXT_LENGTH:,} (the store's 32-bit limit), "
            "got a 5000-digit number",
        ),
        ("²", f"expected a whole number 0..{MAX_CONTEXT_LENGTH:,} in ASCII digits, got '²'"),
        ("-5", f"expected a whole number 0..{MAX_CONTEXT_LENGTH:,} in ASCII digits, got '-5'"),
    ],
)
def test_csv_context_length_out_of_range(capsys, db, tmp_path, value, reason):
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row(), row("s2", context_length=value)])
    assert import_csv(capsys, db, f) == f"error: {f}: record 2: field 'context_length': {reason}"


def test_csv_context_length_at_the_limit_is_accepted(tmp_path):
    store = Store(tmp_path / "s.db")
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row(context_length=str(2**31 - 1))])
    import_results(store, f, "x")
    assert store.instances_frame("x")["context_length"].tolist() == [2**31 - 1]


def test_duplicate_gold_evidence_id(capsys, db, tmp_path):
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row(gold_evidence_ids="p0001;p0001")])
    assert import_csv(capsys, db, f) == (
        f"error: {f}: record 1: field 'gold_evidence_ids': passage id 'p0001' listed twice: "
        "each gold passage id once"
    )


def test_cell_over_the_csv_module_limit_names_its_column(capsys, db, tmp_path):
    big = "a" * (16 * 1024 * 1024 + 5)
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row(), row("s2", predicted_answer=big)])
    del big
    assert import_csv(capsys, db, f) == (
        f"error: {f}: record 2: field 'predicted_answer': field too large "
        f"({16 * 1024 * 1024 + 5:,} bytes > {MAX_FIELD_BYTES:,})"
    )
    assert csv.field_size_limit() == 131072  # the module's limit is restored


def test_cell_over_the_byte_cap_in_few_characters(capsys, db, tmp_path):
    n = MAX_FIELD_BYTES // 4 + 1  # characters of 4 bytes each: under the csv limit, over the cap
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row(gold_answer="😀" * n)])
    assert import_csv(capsys, db, f) == (
        f"error: {f}: record 1: field 'gold_answer': field too large "
        f"({4 * n:,} bytes > {MAX_FIELD_BYTES:,})"
    )


def test_duplicate_header_column(capsys, db, tmp_path):
    header = [*HEADER, "gold_answer"]
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [[*row().values(), "Lyon"]], header)
    assert import_csv(capsys, db, f) == (
        f"error: {f}: field 'gold_answer': column named twice in the header (columns 11 and 15)"
    )


def test_one_sample_with_two_gold_answers(capsys, db, tmp_path):
    rows = [row(method="direct"), row(method="oracle", gold_answer="Lyon")]
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", rows)
    assert import_csv(capsys, db, f) == (
        f"error: {f}: record 2: field 'gold_answer': sample_id 's1' has gold_answer 'Lyon' here "
        "but 'Paris' in record 1: one sample has one gold_answer"
    )


def test_non_utf8_csv_names_record_and_column(capsys, db, tmp_path):
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row(), row("s2", gold_answer="Zürich")])
    data = f.read_bytes()
    bad = data.index("ü".encode())
    f.write_bytes(data.replace("ü".encode(), b"\xfc"))
    assert import_csv(capsys, db, f) == (
        f"error: {f}: record 2: field 'gold_answer': invalid UTF-8 at byte {bad:,} of the file; "
        "the file must be UTF-8 encoded"
    )


# ---------------------------------------------------------------------------- item 2: side files
def _with_side(tmp_path, side: bytes):
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row()])
    side_path = tmp_path / "x.parsed_predictions.jsonl"
    side_path.write_bytes(side)
    return f, side_path


@pytest.mark.parametrize(
    ("line", "field", "reason"),
    [
        (b'["s1", "direct"]', None, "expected a JSON object, got a list of 2 items"),
        (b'"just text"', None, "expected a JSON object, got the string 'just text'"),
        (
            b'{"sample_id": "s1", "method": "direct", "explanation": "a\\ud800b"}',
            "explanation",
            "a \\u escape names half of a UTF-16 surrogate pair (e.g. \\ud83d alone): not valid "
            "text",
        ),
        (
            b'{"sample_id": "s1", "method": "direct", "explanation": 5}',
            "explanation",
            "expected a string, got the number 5",
        ),
    ],
)
def test_bad_side_file_line(capsys, db, tmp_path, line, field, reason):
    good = b'{"sample_id": "s0", "method": "direct", "explanation": "fine"}\n'
    f, side = _with_side(tmp_path, good + line + b"\n")
    where = f"record 2: field '{field}'" if field else "record 2"
    assert import_csv(capsys, db, f) == f"error: {side}: {where}: {reason}"


def test_non_utf8_side_file(capsys, db, tmp_path):
    f, side = _with_side(tmp_path, b'{"sample_id": "s1", "explanation": "caf\xe9"}\n')
    assert import_csv(capsys, db, f) == (
        f"error: {side}: record 1: field 'explanation': invalid UTF-8 at byte 39 of the file "
        "(byte 39 of the line); the file must be UTF-8 encoded"
    )


def test_side_file_explanation_is_stored(tmp_path):
    f, _ = _with_side(
        tmp_path, b'{"sample_id": "s1", "method": "direct", "explanation": "e\\nf"}\n'
    )
    store = Store(tmp_path / "s.db")
    import_results(store, f, "x")
    (pred,) = store.instance_predictions(["x"], "s1").to_dict("records")
    assert pred["explanation"] == "e\nf"


# ---------------------------------------------------------------------------- JSONL importers
@pytest.mark.parametrize("fmt", ["jsonl", "oncu-jsonl"])
def test_jsonl_context_length_beyond_32_bit(capsys, db, tmp_path, fmt):
    rec = {
        "id": "r1",
        "question": "q?",
        "answer": "x",
        "gold_answer": "x",
        "long_context": "[passage_id: p0001] x is here",
        "context_length": 2**31,
        "passages": [{"text": "x is here", "is_gold": True}],
    }
    f = tmp_path / "x.jsonl"
    f.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    err = refused(capsys, db, "import", "dataset", "--format", fmt, f, "--name", "x")
    assert err == (
        f"error: {f}: record 1: field 'context_length': expected an integer <= "
        f"{MAX_CONTEXT_LENGTH:,}, got {2**31}"
    )
    rec["context_length"] = 2**31 - 1
    f.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    assert read_dataset(f, fmt, "x").dataset.instances[0].context_length == 2**31 - 1


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_dataset_format_caps_its_fields(tmp_path, fmt):
    big = "b" * (MAX_FIELD_BYTES + 1)
    records = {
        "jsonl": {"id": "r1", "question": big, "answer": "x", "passages": []},
        "oncu-jsonl": {"id": "r1", "question": big, "gold_answer": "x", "long_context": "x"},
        "longbench": {"_id": "r1", "input": big, "context": "x", "answers": ["x"]},
        "hotpotqa": [
            {"_id": "r1", "question": big, "answer": "x", "context": [], "supporting_facts": []}
        ],
        "2wiki": [
            {"_id": "r1", "question": big, "answer": "x", "context": [], "supporting_facts": []}
        ],
    }
    f = tmp_path / "x.data"
    f.write_text(json.dumps(records[fmt]) + "\n", encoding="utf-8")
    field = "input" if fmt == "longbench" else "question"
    with pytest.raises(DataError) as exc:
        read_dataset(f, fmt, "x")
    assert str(exc.value) == (
        f"{f}: record 1: field '{field}': field too large "
        f"({MAX_FIELD_BYTES + 1:,} bytes > {MAX_FIELD_BYTES:,})"
    )


# ---------------------------------------------------------------------------- import crux
@pytest.fixture
def crux_db(tmp_path):
    path = tmp_path / "c.db"
    Store(path).write_dataset(build_controlled(limit=1, name="tiny"))
    return path


def _crux_file(tmp_path, text: str):
    f = tmp_path / "sq.jsonl"
    f.write_text(text, encoding="utf-8")
    return f


def test_crux_text_over_the_cap(capsys, crux_db, tmp_path):
    iid = Store(crux_db).list_instance_ids("tiny")[0]
    rec = {"instance_id": iid, "sq_id": "s1", "text": "w" * (20 * 1000 * 1000)}
    f = _crux_file(tmp_path, json.dumps(rec) + "\n")
    err = refused(capsys, crux_db, "import", "crux", f, "--dataset", "tiny")
    assert err == (
        f"error: {f}: record 1: field 'text': field too large "
        f"(20,000,000 bytes > {MAX_FIELD_BYTES:,})"
    )


def test_crux_lone_surrogate(capsys, crux_db, tmp_path):
    iid = Store(crux_db).list_instance_ids("tiny")[0]
    f = _crux_file(tmp_path, f'{{"instance_id": "{iid}", "sq_id": "s1", "text": "x\\udc00"}}\n')
    err = refused(capsys, crux_db, "import", "crux", f, "--dataset", "tiny")
    assert err.startswith(f"error: {f}: record 1: field 'text': a \\u escape names half of a")


# ---------------------------------------------------------------------------- item 5: names
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("", "must not be empty"),
        ("   ", "must not be empty"),
        ("a\nb", "character 2 is U+000A (unnamed), not printable"),
        ("a\u2028b", "character 2 is U+2028 (LINE SEPARATOR), not printable"),
        ("a\u202eb", "character 2 is U+202E (RIGHT-TO-LEFT OVERRIDE), not printable"),
        (" lead", "must not start or end with a blank"),
    ],
)
def test_check_name_refuses(value, why):
    with pytest.raises(ValueError) as exc:
        check_name("dataset", value)
    assert str(exc.value).startswith(f"dataset name {value!r}: {why}")


def test_check_name_length_and_good_names():
    assert check_name("run", "x" * NAME_MAX) == "x" * NAME_MAX
    assert check_name("dataset", "HotpotQA dev (200), v2/qwen2.5:14b") == (
        "HotpotQA dev (200), v2/qwen2.5:14b"
    )
    with pytest.raises(ValueError, match=f"{NAME_MAX + 1} characters, at most {NAME_MAX}"):
        check_name("run", "x" * (NAME_MAX + 1))


def test_import_dataset_refuses_a_bad_name(capsys, db, tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text(
        json.dumps({"id": "r1", "question": "q?", "answer": "x", "passages": [{"text": "x"}]})
        + "\n"
    )
    err = refused(capsys, db, "import", "dataset", "--format", "jsonl", f, "--name", "a\tb")
    assert err == (
        "error: dataset name 'a\\tb': character 2 is U+0009 (unnamed), not printable; "
        "use letters, digits, spaces and punctuation"
    )
    refused(capsys, db, "import", "dataset", "--format", "jsonl", f, "--name", "n" * 129)
    refused(capsys, db, "generate", "controlled", "--name", "bad\x1bname")


def test_import_results_refuses_bad_names(capsys, db, tmp_path):
    f = write_csv(tmp_path / "x.per_sample_metrics.csv", [row()])
    err = refused(capsys, db, "import", "results", "--format", "oncu-release", f, "--name", "x\ny")
    assert err.startswith("error: dataset name 'x\\ny': character 2 is U+000A")
    two = write_csv(tmp_path / "y.per_sample_metrics.csv", [row(), row(model_name="bad\x07model")])
    err = import_csv(capsys, db, two)
    assert err.startswith(
        f"error: {two}: record 2: field 'model_name': run name 'new/bad\\x07model'"
    )


# ---------------------------------------------------------------------------- item 9: several files
def test_several_results_files_in_one_process(capsys, db, tmp_path):
    a = write_csv(tmp_path / "alpha.per_sample_metrics.csv", [row(method=m) for m in METHODS])
    b = write_csv(tmp_path / "beta.per_sample_metrics.csv", [row("s9", method=m) for m in METHODS])
    capsys.readouterr()
    assert (
        main(["import", "results", "--format", "oncu-release", str(a), str(b), "--db", str(db)])
        == 0
    )
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{a}: read 4 predictions of 1 instances; created dataset 'alpha'; runs: alpha (re-scored)",
        f"{b}: read 4 predictions of 1 instances; created dataset 'beta'; runs: beta (re-scored)",
    ]
    assert snapshot(db)[1] == [("alpha", 4), ("base", 4), ("beta", 4)]


def test_several_files_stop_at_the_first_bad_one(capsys, db, tmp_path):
    a = write_csv(tmp_path / "alpha.per_sample_metrics.csv", [row(method=m) for m in METHODS])
    b = write_csv(tmp_path / "beta.per_sample_metrics.csv", [row(context_length="²")])
    c = write_csv(tmp_path / "gamma.per_sample_metrics.csv", [row()])
    capsys.readouterr()
    rc = main(
        ["import", "results", "--format", "oncu-release", str(a), str(b), str(c), "--db", str(db)]
    )
    cap = capsys.readouterr()
    assert rc == 1
    assert cap.out.splitlines()[0].startswith(f"{a}: read 4 predictions")
    assert cap.err == (
        f"error: {b}: record 1: field 'context_length': expected a whole number "
        f"0..{MAX_CONTEXT_LENGTH:,} in ASCII digits, got '²' (nothing of this file was stored; "
        f"stopped at file 2 of 3; the 1 file(s) before it stay imported: {a})\n"
    )
    assert [name for name, _ in snapshot(db)[0]] == ["base", "alpha"]


def test_name_with_several_files_is_refused(capsys, db, tmp_path):
    a = write_csv(tmp_path / "alpha.per_sample_metrics.csv", [row()])
    b = write_csv(tmp_path / "beta.per_sample_metrics.csv", [row()])
    err = refused(capsys, db, "import", "results", "--format", "oncu-release", a, b, "--name", "n")
    assert err.startswith("error: --name names one import, but 2 files were given")
    other = tmp_path / "sub"
    other.mkdir()
    a2 = write_csv(other / "alpha.per_sample_metrics.csv", [row()])
    err = refused(capsys, db, "import", "results", "--format", "oncu-release", a, a2)
    assert err == (
        f"error: {a} and {a2} would both be imported as 'alpha'; import them one at a time "
        "with --name"
    )
