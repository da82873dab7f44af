"""LongBench importer (``--format longbench``): passages and units for DOLCE, answers, errors."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cli import main
from core.datasets.importers import read_dataset
from core.datasets.longbench import split_context
from core.dolce.probes import plan_probes, split_units
from core.store import Store
from core.types import DataError

# LongBench's multi-document QA shape: "Passage N:\n<title line>\n<text>" sections.
HOTPOT = {
    "input": "Which magazine was started first, Arthur's Magazine or First for Women?",
    "context": (
        "Passage 1:\nArthur's Magazine\nArthur's Magazine was a literary periodical. "
        "It was founded in 1844.\n\n"
        "Passage 2:\nFirst for Women\nFirst for Women is a woman's magazine. It started in 1989."
    ),
    "answers": ["Arthur's Magazine", "Arthur's Magazine", " ", "arthurs magazine"],
    "length": 31,
    "dataset": "hotpotqa",
    "language": "en",
    "all_classes": None,
    "_id": "lb-001",
}
# passage_retrieval_en: the answer names a paragraph label; text follows the marker.
RETRIEVAL = {
    "input": "An abstract about the moon.",
    "context": "Intro line.\nParagraph 1: The Sun is a star.\n\nParagraph 2: The Moon orbits. "
    "It has no air.",
    "answers": ["Paragraph 2"],
    "length": 20,
    "dataset": "passage_retrieval_en",
    "language": "en",
    "all_classes": None,
    "_id": "lb-002",
}
# trec (few-shot classification): no markers, blocks split at blank lines; classes listed.
TREC = {
    "input": "What is the capital of Peru?",
    "context": "Question: Who wrote Hamlet?\nType: Individual\n\n \nQuestion: How far is it?\n"
    "Type: Distance",
    "answers": ["City"],
    "length": 18,
    "dataset": "trec",
    "language": "en",
    "all_classes": ["Individual", "Distance", "City"],
    "_id": 7,
    "pred": "ignored by LongBench, kept by us",
}
# gov_report: no input -> skipped, as every importer skips an empty question.
SUMMARY = {
    "input": "",
    "context": "A report.",
    "answers": ["A summary."],
    "length": 4,
    "dataset": "gov_report",
    "language": "en",
    "all_classes": None,
    "_id": "lb-004",
}


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_longbench_file_imports_passages_answers_and_metadata(tmp_path):
    path = _write(tmp_path / "lb.jsonl", [HOTPOT, RETRIEVAL, TREC, SUMMARY])
    result = read_dataset(path, "longbench", "lb")
    assert (result.n_read, result.n_written) == (4, 3)
    assert result.skipped == ((4, "empty question (input)"),)
    assert result.summary() == (
        "read 4 records, wrote 3 instances, skipped 1 (empty question (input): 1)"
    )
    assert result.dataset.builder == "import:longbench"
    hot, ret, trec = result.dataset.instances

    assert hot.instance_id == "lb-001" and hot.question == HOTPOT["input"]
    # answers[0] is the gold answer; the blank one is dropped, the repeat kept once.
    assert hot.gold_answer == "Arthur's Magazine"
    assert hot.answer_aliases == ("arthurs magazine",)
    assert [(p.passage_id, p.title, p.doc_id) for p in hot.passages] == [
        ("p0001", "Passage 1", "Passage 1"),
        ("p0002", "Passage 2", "Passage 2"),
    ]
    assert hot.passages[0].text == (
        "Arthur's Magazine\nArthur's Magazine was a literary periodical. It was founded in 1844."
    )
    assert [(p.role, p.is_gold) for p in hot.passages] == [("filler", False)] * 2
    assert (hot.oracle_applicable, hot.fan_in, hot.evidence_position) == (False, 0, "unknown")
    assert hot.source == "longbench/hotpotqa" and hot.answer_type == "string"
    assert hot.metadata == {
        "dataset": "hotpotqa",
        "language": "en",
        "all_classes": None,
        "length": 31,
    }
    # whitespace tokens of titles + texts: (2 + 13) + (2 + 14)
    assert hot.context_length == 31

    assert [(p.title, p.text) for p in ret.passages] == [
        ("", "Intro line."),
        ("Paragraph 1", "The Sun is a star."),
        ("Paragraph 2", "The Moon orbits. It has no air."),
    ]
    assert ret.gold_answer == "Paragraph 2" and ret.answer_aliases == ()

    assert trec.instance_id == "7"  # integer ids become their string form
    assert [p.text for p in trec.passages] == [
        "Question: Who wrote Hamlet?\nType: Individual",
        "Question: How far is it?\nType: Distance",
    ]
    assert [p.title for p in trec.passages] == ["", ""]
    assert trec.metadata["all_classes"] == ["Individual", "Distance", "City"]
    assert trec.metadata["import_notes"] == {
        "extra_fields": {"pred": "ignored by LongBench, kept by us"}
    }
    assert trec.source == "longbench/trec"


def test_longbench_units_for_dolce_probes(tmp_path):
    path = _write(tmp_path / "lb.jsonl", [HOTPOT, RETRIEVAL])
    hot, ret = read_dataset(path, "longbench", "lb").dataset.instances
    # Sentence units: each line, then each sentence: title line + 2 sentences per passage.
    assert [u.text for u in split_units(hot)] == [
        "Arthur's Magazine",
        "Arthur's Magazine was a literary periodical.",
        "It was founded in 1844.",
        "First for Women",
        "First for Women is a woman's magazine.",
        "It started in 1989.",
    ]
    assert [u.passage_id for u in split_units(hot)] == ["p0001"] * 3 + ["p0002"] * 3
    assert [u.passage_id for u in split_units(hot, "passage")] == ["p0001", "p0002"]
    # L = 6 sentences: all spans (paper sampling), ladder 0, 1, 2, 5, 6 -> 1 + 6 + 5 + 2 + 1.
    calls = plan_probes(hot)
    assert len(calls) == 15
    # The paragraph label the answer names is in every probe that shows that paragraph.
    (one,) = [c for c in plan_probes(ret, lengths=[1]) if "Moon" in c.messages[1]["content"]]
    assert "Title: Paragraph 2" in one.messages[1]["content"]
    # Passage units: 3 passages -> ladder 0, 1, 2, 3 -> 1 + 3 + 2 + 1.
    assert len(plan_probes(ret, units="passage")) == 7


def test_split_context_rules():
    assert split_context("") == [] and split_context(" \n\n ") == []
    assert split_context("One block.") == [("", "One block.")]
    assert split_context("a\n\n\nb\n \t\nc\nd") == [("", "a"), ("", "b"), ("", "c\nd")]
    # markers only at line starts; an empty section is dropped; the text keeps its lines
    assert split_context("Passage 1:\n\nPassage 2: x\ny see Passage 3: no") == [
        ("Passage 2", "x\ny see Passage 3: no")
    ]


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        ({"_id": None}, "_id", "is null"),
        ({"_id": ""}, "_id", "empty id"),
        ({"input": 5}, "input", "expected a string, got the number 5"),
        ({"context": ["a"]}, "context", "expected a string, got a list of 1 items"),
        ({"answers": "Paris"}, "answers", "expected a list, got the string 'Paris'"),
        ({"answers": [["x"]]}, "answers[0]", "expected a string or a number, got a list of 1"),
        ({"length": "31"}, "length", "expected an integer, got the string '31'"),
        ({"length": -1}, "length", "expected an integer >= 0, got -1"),
        ({"dataset": 3}, "dataset", "expected a string, got the number 3"),
        ({"all_classes": "City"}, "all_classes", "expected a list, got the string 'City'"),
    ],
)
def test_bad_fields_name_file_record_and_field(tmp_path, overrides, field, reason):
    path = _write(tmp_path / "bad.jsonl", [RETRIEVAL, HOTPOT | overrides])
    with pytest.raises(DataError) as exc:
        read_dataset(path, "longbench", "x")
    err = exc.value
    assert (err.record, err.field) == (2, field)
    assert reason in err.reason, err.reason
    assert str(err).startswith(f"{path}: record 2: field '{field}': ") and "\n" not in str(err)


@pytest.mark.parametrize("missing", ["_id", "input", "context", "answers"])
def test_required_fields(tmp_path, missing):
    rec = {k: v for k, v in HOTPOT.items() if k != missing}
    path = _write(tmp_path / "m.jsonl", [rec])
    with pytest.raises(DataError) as exc:
        read_dataset(path, "longbench", "x")
    assert (exc.value.record, exc.value.field, exc.value.reason) == (1, missing, "missing")


def test_optional_fields_may_be_absent_or_null(tmp_path):
    rec = {"_id": "a", "input": "q?", "context": "x.", "answers": ["x"], "length": None}
    (inst,) = read_dataset(_write(tmp_path / "o.jsonl", [rec]), "longbench", "o").dataset.instances
    assert inst.source == "longbench"
    assert inst.metadata == {"dataset": "", "language": "", "all_classes": None, "length": None}


def test_unusable_records_are_skipped_and_all_skipped_is_an_error(tmp_path):
    recs = [
        HOTPOT | {"_id": "a", "answers": []},
        HOTPOT | {"_id": "b", "answers": ["", "  "]},
        HOTPOT | {"_id": "c", "context": "\n\n"},
        HOTPOT | {"_id": "d", "input": "  "},
    ]
    path = _write(tmp_path / "s.jsonl", recs)
    with pytest.raises(DataError) as exc:
        read_dataset(path, "longbench", "x")
    assert exc.value.record is None
    assert exc.value.reason == (
        "no usable records: all 4 skipped (empty answer: 2, no passages (empty context): 1, "
        "empty question (input): 1)"
    )
    path = _write(tmp_path / "dup.jsonl", [HOTPOT, HOTPOT])
    with pytest.raises(DataError, match="record 2: field '_id': duplicate instance id 'lb-001'"):
        read_dataset(path, "longbench", "x")


def test_cli_import_longbench_and_bad_file_leaves_store_unchanged(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    path = _write(tmp_path / "lb.jsonl", [HOTPOT, RETRIEVAL, TREC, SUMMARY])
    args = ["import", "dataset", "--format", "longbench", str(path), "--db", str(db)]
    assert main(args + ["--name", "lb"]) == 0
    assert capsys.readouterr().out.startswith(
        f"{path}: read 4 records, wrote 3 instances, skipped 1 (empty question (input): 1)"
    )
    summary = Store(db).dataset_summary("lb")
    assert summary["n_instances"] == 3 and summary["n_passages"] == 2 + 3 + 2
    # a broken third record: one line naming file, record and field, exit 1, nothing written
    bad = _write(tmp_path / "bad.jsonl", [HOTPOT, RETRIEVAL, TREC | {"answers": None}])
    bad_args = ["import", "dataset", "--format", "longbench", str(bad), "--db", str(db)]
    assert main(bad_args + ["--name", "lb2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert f"{bad}: record 3: field 'answers': is null" in err and "Traceback" not in err
    assert Store(db).dataset_names() == ["lb"]


_context = st.lists(
    st.sampled_from(
        [
            "Passage 1:",
            "Paragraph 22: ",
            "\n",
            "\n\n",
            " ",
            "Passage 3:\n",
            "A b.",
            "c? D",
            "\t",
            "x",
        ]
    ),
    max_size=12,
).map("".join)
_value = st.one_of(
    st.none(), st.integers(-3, 3), st.text(max_size=6), st.lists(st.text(max_size=3))
)
_FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FUZZ
@given(context=_context, question=_value, answers=st.one_of(_value, st.lists(_value, max_size=3)))
def test_longbench_shaped_records_never_crash_and_lose_no_text(
    tmp_path, context, question, answers
):
    path = _write(
        tmp_path / "f.jsonl",
        [{"_id": "a", "input": question, "context": context, "answers": answers}],
    )
    try:
        (inst,) = read_dataset(path, "longbench", "f").dataset.instances
    except DataError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(f"{path}: ")
        return
    # every non-space character of the context is in a passage, apart from the markers
    strip = re.compile(r"^(Passage|Paragraph) \d+:", re.M)
    assert "".join(strip.sub("", context).split()) == "".join(
        "".join(p.text.split()) for p in inst.passages
    )
    assert all(p.text.strip() for p in inst.passages)
    assert len(split_units(inst)) >= len(inst.passages) >= 1
