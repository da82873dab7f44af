"""Malformed files: every case is one DataError naming the file, the record and the field."""

from __future__ import annotations

import json

import pytest
from conftest import shared_fixture

from core.datasets.importers import MAX_FIELD_BYTES, MAX_RECORD_BYTES, read_dataset
from core.types import DataError


def good(i=1, **overrides):
    rec = {
        "id": f"r{i}",
        "question": f"question {i}?",
        "answer": "x",
        "passages": [{"text": "x is here", "is_gold": True}, {"text": "filler"}],
    }
    rec.update(overrides)
    return rec


def hotpot(i=1, **overrides):
    rec = {
        "_id": f"h{i}",
        "question": f"question {i}?",
        "answer": "Alpha",
        "type": "bridge",
        "level": "easy",
        "supporting_facts": [["Alpha", 0]],
        "context": [["Alpha", ["Alpha is here."]], ["Beta", ["Beta is not."]]],
    }
    rec.update(overrides)
    return rec


def jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def fails(path, fmt) -> DataError:
    with pytest.raises(DataError) as exc:
        read_dataset(path, fmt, "x")
    err = exc.value
    assert "\n" not in str(err)
    assert str(err).startswith(f"{path}: ")
    return err


# ---------------------------------------------------------------------------- files
def test_missing_file(tmp_path):
    path = tmp_path / "absent.json"
    for fmt in ("hotpotqa", "jsonl"):
        err = fails(path, fmt)
        assert (err.record, err.field, err.reason) == (None, None, "file not found")
        assert str(err) == f"{path}: file not found"


def test_directory_is_not_a_file(tmp_path):
    err = fails(tmp_path, "oncu-jsonl")
    assert err.reason == "is a directory, not a file"


@pytest.mark.parametrize("fmt", ["hotpotqa", "2wiki", "oncu-jsonl", "jsonl", "longbench"])
def test_empty_file(tmp_path, fmt):
    path = tmp_path / "empty.data"
    path.write_bytes(b"")
    err = fails(path, fmt)
    assert (err.record, err.field, err.reason) == (None, None, "empty file")
    assert str(err) == f"{path}: empty file"


def test_whitespace_only_files(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_text("\n  \n\n", encoding="utf-8")
    assert fails(path, "jsonl").reason == "empty file (only blank lines)"
    path = tmp_path / "blank.json"
    path.write_text(" \n ", encoding="utf-8")
    assert fails(path, "hotpotqa").reason == "empty file"
    path.write_text(" [ ] ", encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert (err.record, err.reason) == (None, "no records (the JSON list is empty)")


# ---------------------------------------------------------------------------- truncated JSON
def test_truncated_json_list_names_the_record(tmp_path):
    recs = [hotpot(i) for i in range(1, 4)]
    text = json.dumps(recs)
    cut = text.index('"question 2?') + 5  # inside record 2's question
    path = tmp_path / "cut.json"
    path.write_text(text[:cut], encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert (err.record, err.field) == (2, None)
    assert err.reason.startswith(
        "truncated JSON (the text ends inside a value: Unterminated string"
    )
    assert f"{path}: record 2: truncated JSON" in str(err)


def test_truncated_json_list_between_records(tmp_path):
    text = json.dumps([hotpot(1), hotpot(2)])
    path = tmp_path / "cut.json"
    path.write_text(text[:-1], encoding="utf-8")  # the closing ']' is missing
    err = fails(path, "hotpotqa")
    assert (err.record, err.reason) == (
        2,
        "truncated JSON (the file ends before the list is closed)",
    )
    path.write_text(text[: text.index("}, {") + 3], encoding="utf-8")  # ends after "},"
    err = fails(path, "hotpotqa")
    assert (err.record, err.reason) == (2, "truncated JSON (the file ends before this record)")


def test_real_hotpot_file_cut_in_the_middle(tmp_path):
    raw = json.loads(
        shared_fixture("hotpotqa/hotpot_dev_distractor_sample53.json").read_text("utf-8")
    )
    parts = [json.dumps(r) for r in raw]
    text = "[" + ", ".join(parts) + "]"
    cut = len(text) // 2
    # record k (1-based) spans [start_k, start_k + len(part_k)) by construction
    start, expected = 1, None
    for k, part in enumerate(parts, 1):
        if start <= cut < start + len(part):
            expected = k
            break
        start += len(part) + 2
    path = tmp_path / "half.json"
    path.write_text(text[:cut], encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert expected is not None and err.record == expected
    assert err.reason.startswith("truncated JSON")


def test_truncated_jsonl_line_in_the_middle(tmp_path):
    lines = [json.dumps(good(i)) for i in range(1, 4)]
    lines[1] = lines[1][:30]
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    err = fails(path, "jsonl")
    assert (err.record, err.field) == (2, None)
    assert err.reason.startswith("truncated JSON (the text ends inside a value:")
    assert str(err).startswith(f"{path}: record 2: truncated JSON")


def test_truncated_last_jsonl_line(tmp_path):
    text = "".join(json.dumps(good(i)) + "\n" for i in range(1, 4))
    path = tmp_path / "cut.jsonl"
    path.write_text(text[:-25], encoding="utf-8")  # the last line is cut, no newline
    err = fails(path, "jsonl")
    assert err.record == 3 and err.reason.startswith("truncated JSON")


def test_invalid_json_that_is_not_truncated(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(good(1)) + '\n{"id": "r2" "question": "q"}\n', encoding="utf-8")
    err = fails(path, "jsonl")
    assert (err.record, err.reason) == (2, "invalid JSON: Expecting ',' delimiter at column 13")
    path = tmp_path / "bad.json"
    path.write_text("[" + json.dumps(hotpot(1)) + ",\n {] ", encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert err.record == 2 and err.reason.startswith("invalid JSON: Expecting property name")
    assert err.reason.endswith("at line 2 column 3")
    path.write_text("[" + json.dumps(hotpot(1)) + "\n {} ]", encoding="utf-8")  # no comma
    err = fails(path, "hotpotqa")
    assert (err.record, err.reason) == (
        1,
        "invalid JSON after this record: expected ',' or ']' at line 2 column 2",
    )


def test_deeply_nested_record(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"id": "a", "metadata": ' + "[" * 100_000 + "]" * 100_000 + "}\n", "utf-8")
    err = fails(path, "jsonl")
    assert (err.record, err.reason) == (1, "invalid JSON: nested too deeply")


def test_jsonl_file_given_as_json_list(tmp_path):
    path = jsonl(tmp_path / "h.jsonl", [hotpot(1)])
    err = fails(path, "hotpotqa")
    assert err.record is None
    assert err.reason == (
        "expected a JSON list of records, found '{' first "
        "(a JSON Lines file? use the oncu-jsonl or jsonl format)"
    )


def test_record_that_is_not_an_object(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text(json.dumps(good(1)) + "\n[1, 2, 3]\n", encoding="utf-8")
    err = fails(path, "jsonl")
    assert (err.record, err.field, err.reason) == (
        2,
        None,
        "expected a JSON object, got a list of 3 items",
    )


# ---------------------------------------------------------------------------- fields
def test_jsonl_record_without_question(tmp_path):
    rec = good(3)
    del rec["question"]
    path = jsonl(tmp_path / "data.jsonl", [good(1), good(2), rec])
    err = fails(path, "jsonl")
    assert (err.record, err.field, err.reason) == (3, "question", "missing")
    assert str(err) == f"{path}: record 3: field 'question': missing"


def test_hotpot_record_without_question(tmp_path):
    rec = hotpot(2)
    del rec["question"]
    path = tmp_path / "h.json"
    path.write_text(json.dumps([hotpot(1), rec]), encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert str(err) == f"{path}: record 2: field 'question': missing"


def test_oncu_record_without_question(tmp_path):
    rec = {"id": "o1", "gold_answer": "a", "long_context": "[passage_id: p0001] a"}
    path = jsonl(tmp_path / "o.jsonl", [rec])
    assert str(fails(path, "oncu-jsonl")) == f"{path}: record 1: field 'question': missing"


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        ({"question": 123}, "question", "expected a string, got the number 123"),
        ({"question": ["a", "b"]}, "question", "expected a string, got a list of 2 items"),
        ({"question": None}, "question", "is null"),
        ({"answer": None}, "answer", "is null"),
        ({"answer": True}, "answer", "expected a string or a number, got the boolean true"),
        ({"answer": ["x"]}, "answer", "expected a string or a number, got a list of 1 items"),
        ({"id": 1.5}, "id", "expected a string or an integer id, got the number 1.5"),
        ({"passages": "x is here"}, "passages", "expected a list, got the string 'x is here'"),
        ({"passages": {"text": "x"}}, "passages", "expected a list, got an object"),
        (
            {"passages": ["x is here"]},
            "passages[0]",
            "expected an object, got the string 'x is here'",
        ),
        ({"passages": [{"title": "T"}]}, "passages[0].text", "missing"),
        ({"passages": [{"text": 5}]}, "passages[0].text", "expected a string, got the number 5"),
        (
            {"passages": [{"text": "a", "is_gold": "yes"}]},
            "passages[0].is_gold",
            "expected true or false, got the string 'yes'",
        ),
        (
            {"passages": [{"text": "a", "role": "support"}]},
            "passages[0].role",
            "unknown role 'support'; allowed: gold, distractor, conflicting, filler",
        ),
        (
            {"passages": [{"text": "a", "role": "gold", "is_gold": False}]},
            "passages[0].is_gold",
            "is_gold false contradicts role 'gold'",
        ),
        (
            {"passages": [{"id": "d1", "text": "a"}, {"id": "d1", "text": "b"}]},
            "passages[1].id",
            "duplicate passage id 'd1' (also passages[0])",
        ),
        ({"context_length": -3}, "context_length", "expected an integer >= 0, got -3"),
        ({"context_length": "4K"}, "context_length", "expected an integer, got the string '4K'"),
        ({"metadata": [1]}, "metadata", "expected an object, got a list of 1 items"),
        ({"aliases": "x"}, "aliases", "expected a list, got the string 'x'"),
    ],
)
def test_jsonl_wrong_types(tmp_path, overrides, field, reason):
    path = jsonl(tmp_path / "t.jsonl", [good(1), good(2, **overrides)])
    err = fails(path, "jsonl")
    assert (err.record, err.field, err.reason) == (2, field, reason)
    assert str(err) == f"{path}: record 2: field '{field}': {reason}"


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        ({"question": 123}, "question", "expected a string, got the number 123"),
        ({"context": "Alpha"}, "context", "expected a list, got the string 'Alpha'"),
        (
            {"context": {"title": ["Alpha"], "sentences": [["a"]]}},
            "context",
            "expected a list of [title, [sentences]] pairs, got an object (the Hugging Face column "
            "layout is not supported: use the original JSON release)",
        ),
        (
            {"context": [["Alpha"]]},
            "context[0]",
            "expected [title, [sentences]], got a list of 1 items",
        ),
        (
            {"context": [["Alpha", "Alpha is here."]]},
            "context[0][1]",
            "expected a list, got the string 'Alpha is here.'",
        ),
        (
            {"context": [["Alpha", ["ok", 7]]]},
            "context[0][1][1]",
            "expected a string, got the number 7",
        ),
        (
            {"supporting_facts": [["Alpha", "0"]]},
            "supporting_facts[0][1]",
            "expected an integer, got the string '0'",
        ),
        ({"supporting_facts": None}, "supporting_facts", "is null"),
        ({"_id": ""}, "_id", "empty id"),
    ],
)
def test_hotpot_wrong_types(tmp_path, overrides, field, reason):
    path = tmp_path / "h.json"
    path.write_text(json.dumps([hotpot(1), hotpot(2, **overrides)]), encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert (err.record, err.field, err.reason) == (2, field, reason)


@pytest.mark.parametrize(
    ("overrides", "field", "reason"),
    [
        ({"long_context": ["a"]}, "long_context", "expected a string, got a list of 1 items"),
        ({"oracle_evidence": [{"text": "a"}]}, "oracle_evidence[0].evidence_id", "missing"),
        ({"oracle_evidence": {"p0001": "a"}}, "oracle_evidence", "expected a list, got an object"),
        ({"distractors": [{"text": "a"}]}, "distractors[0].distractor_id", "missing"),
        ({"context_length": 4.5}, "context_length", "expected an integer, got the number 4.5"),
        ({"metadata": "none"}, "metadata", "expected an object, got the string 'none'"),
    ],
)
def test_oncu_wrong_types(tmp_path, overrides, field, reason):
    rec = {
        "id": "o2",
        "question": "q?",
        "gold_answer": "a",
        "long_context": "[passage_id: p0001] a",
    }
    ok = dict(rec, id="o1")
    path = jsonl(tmp_path / "o.jsonl", [ok, {**rec, **overrides}])
    err = fails(path, "oncu-jsonl")
    assert (err.record, err.field, err.reason) == (2, field, reason)


# ---------------------------------------------------------------------------- encoding
def test_non_utf8_jsonl_names_line_field_and_offset(tmp_path):
    lines = [json.dumps(good(i)).encode() for i in range(1, 5)]
    lines[2] = lines[2].replace(b"question 3?", b"question \xe9t\xe9?")  # Latin-1 bytes
    path = tmp_path / "latin.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    in_line = lines[2].index(b"\xe9")
    offset = len(lines[0]) + len(lines[1]) + 2 + in_line
    err = fails(path, "jsonl")
    assert (err.record, err.field) == (3, "question")
    assert err.reason == (
        f"invalid UTF-8 at byte {offset:,} of the file (byte {in_line} of the line); "
        "the file must be UTF-8 encoded"
    )
    assert str(err).startswith(
        f"{path}: record 3: field 'question': invalid UTF-8 at byte {offset:,}"
    )


def test_non_utf8_json_list_names_record_field_and_offset(tmp_path):
    data = json.dumps([hotpot(1), hotpot(2), hotpot(3)], indent=1).encode()
    data = data.replace(b"Beta is not.", b"Beta is n\xf6t.", 2)  # records 1 and 2; the first counts
    data = data.replace(b"n\xf6t", b"not", 1)  # ... keep only record 2's bad byte
    path = tmp_path / "latin.json"
    path.write_bytes(data)
    offset = data.index(b"\xf6")
    line = data[:offset].count(b"\n") + 1
    err = fails(path, "hotpotqa")
    assert (err.record, err.field) == (2, "context[1][1][0]")
    assert err.reason == (
        f"invalid UTF-8 at byte {offset:,} (line {line}); the file must be UTF-8 encoded"
    )


def test_non_utf8_in_a_truncated_json_list_still_names_the_record(tmp_path):
    text = json.dumps([hotpot(1), hotpot(2)]).encode()
    data = text[: text.index(b"question 2?") + 9] + b"\xff\xfe"
    path = tmp_path / "bad.json"
    path.write_bytes(data)
    err = fails(path, "2wiki")
    assert err.record == 2 and err.field is None
    assert err.reason.startswith(f"invalid UTF-8 at byte {len(data) - 2:,} (line 1)")


def test_utf16_file(tmp_path):
    path = tmp_path / "u16.jsonl"
    path.write_bytes(json.dumps(good(1)).encode("utf-16"))
    err = fails(path, "jsonl")
    assert err.record == 1 and "invalid UTF-8 at byte 0 of the file" in err.reason


# ---------------------------------------------------------------------------- sizes
def test_50_mb_field(tmp_path):
    big = "a" * (50 * 1024 * 1024)
    path = tmp_path / "big.jsonl"
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps(good(1)) + "\n")
        f.write('{"id": "r2", "question": "' + big + '", "answer": "x", "passages": []}\n')
    del big
    err = fails(path, "jsonl")
    assert (err.record, err.field) == (2, "question")
    assert err.reason == "field too large (52,428,800 bytes > 8,388,608)"
    assert (
        str(err)
        == f"{path}: record 2: field 'question': field too large (52,428,800 bytes > 8,388,608)"
    )


def test_oversized_nested_field_counts_utf8_bytes(tmp_path):
    n = MAX_FIELD_BYTES // 2 + 1  # characters; 2 bytes each in UTF-8
    rec = hotpot(1, context=[["Alpha", ["ok", "é" * n]]])
    path = tmp_path / "big.json"
    path.write_text(json.dumps([rec], ensure_ascii=False), encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert (err.record, err.field) == (1, "context[0][1][1]")
    assert err.reason == f"field too large ({2 * n:,} bytes > {MAX_FIELD_BYTES:,})"


def test_field_at_the_limit_is_accepted(tmp_path):
    rec = good(1, question="q" * MAX_FIELD_BYTES)
    path = jsonl(tmp_path / "edge.jsonl", [rec])
    (inst,) = read_dataset(path, "jsonl", "x").dataset.instances
    assert len(inst.question) == MAX_FIELD_BYTES


def test_record_size_limit_is_documented():
    assert MAX_FIELD_BYTES == 8 * 1024 * 1024 and MAX_RECORD_BYTES == 64 * 1024 * 1024


# ---------------------------------------------------------------------------- ids, skips
def test_duplicate_instance_ids_are_an_error(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [good(1), good(2), good(3, id="r1")])
    err = fails(path, "jsonl")
    assert (err.record, err.field) == (3, "id")
    assert (
        str(err)
        == f"{path}: record 3: field 'id': duplicate instance id 'r1' (first used by record 1)"
    )
    path = tmp_path / "d.json"
    path.write_text(json.dumps([hotpot(1), hotpot(1)]), encoding="utf-8")
    err = fails(path, "hotpotqa")
    assert (err.record, err.field) == (2, "_id")


def test_integer_and_string_ids_collide(tmp_path):
    path = jsonl(tmp_path / "d.jsonl", [good(1, id=7), good(2, id="7")])
    err = fails(path, "jsonl")
    assert err.record == 2 and err.reason == "duplicate instance id '7' (first used by record 1)"


def test_all_records_skipped_is_an_error(tmp_path):
    path = jsonl(tmp_path / "s.jsonl", [good(1, question=""), good(2, passages=[])])
    err = fails(path, "jsonl")
    assert err.record is None
    assert err.reason == "no usable records: all 2 skipped (empty question: 1, no passages: 1)"


def test_error_stops_before_anything_is_returned(tmp_path):
    # a valid record followed by a broken one: no partial result, the error names record 2
    path = tmp_path / "half.jsonl"
    path.write_text(json.dumps(good(1)) + "\n" + json.dumps(good(2, passages=7)) + "\n", "utf-8")
    err = fails(path, "jsonl")
    assert (err.record, err.field) == (2, "passages")
