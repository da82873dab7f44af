"""Importers: real HotpotQA and BABILong (ONCU release) files, 2Wiki and generic JSONL inline."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from conftest import shared_fixture

from core.datasets.importers import FORMATS, ImportResult, read_dataset
from core.types import ROLES, count_tokens

HOTPOT = "hotpotqa/hotpot_dev_distractor_sample53.json"
BABILONG = "babilong/babilong_cue_200_external.jsonl"


def write_jsonl(path, records, blank_lines=False):
    lines = [json.dumps(r) for r in records]
    if blank_lines:
        lines = ["", *sum(([line, "   "] for line in lines), [])]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- API
def test_formats_and_unknown_format(tmp_path):
    assert FORMATS == ("hotpotqa", "2wiki", "oncu-jsonl", "jsonl", "longbench")
    with pytest.raises(ValueError) as exc:
        read_dataset(tmp_path / "x.json", "squad", "x")
    assert str(exc.value) == (
        "unknown format 'squad'; allowed: hotpotqa, 2wiki, oncu-jsonl, jsonl, longbench"
    )
    with pytest.raises(ValueError, match="name"):
        read_dataset(tmp_path / "x.json", "jsonl", " ")


# ---------------------------------------------------------------------------- HotpotQA
@pytest.fixture(scope="module")
def hotpot():
    path = shared_fixture(HOTPOT)
    raw = json.loads(path.read_text(encoding="utf-8"))
    return path, raw, read_dataset(path, "hotpotqa", "hp")


def test_hotpot_sample_imports_every_record(hotpot):
    path, raw, result = hotpot
    assert isinstance(result, ImportResult)
    assert result.n_read == 53 and result.skipped == () and result.n_written == 53
    assert result.summary() == "read 53 records, wrote 53 instances, skipped 0"
    ds = result.dataset
    assert ds.name == "hp" and ds.source == "hotpotqa" and ds.builder == "import:hotpotqa"
    assert ds.builder_params["file"] == str(path) and len(ds.builder_params["sha256"]) == 64
    assert [i.instance_id for i in ds.instances] == [r["_id"] for r in raw]
    # one passage per context paragraph; record 28 of the real sample has only 2 paragraphs
    assert [len(i.passages) for i in ds.instances] == [len(r["context"]) for r in raw]
    assert Counter(len(i.passages) for i in ds.instances) == {10: 52, 2: 1}
    assert len(ds.instances[27].passages) == 2


def test_hotpot_gold_passages_and_fan_in_match_supporting_facts(hotpot):
    _, raw, result = hotpot
    for rec, inst in zip(raw, result.dataset.instances, strict=True):
        support = {title for title, _ in rec["supporting_facts"]}
        expected_gold = tuple(
            f"p{k + 1:04d}" for k, (title, _) in enumerate(rec["context"]) if title in support
        )
        assert inst.gold_ids == expected_gold, inst.instance_id
        assert inst.fan_in == len(support) == 2
        assert inst.oracle_applicable
        for k, (p, (title, sentences)) in enumerate(
            zip(inst.passages, rec["context"], strict=True)
        ):
            assert (p.passage_id, p.ord, p.title, p.doc_id) == (f"p{k + 1:04d}", k, title, title)
            assert p.role == ("gold" if title in support else "distractor")
            assert p.text == " ".join(s.strip() for s in sentences if s.strip())
        assert inst.context_length == sum(
            count_tokens(t) + count_tokens(" ".join(s)) for t, s in rec["context"]
        )
        assert inst.metadata["type"] == rec["type"] and inst.metadata["level"] == rec["level"]
        assert inst.metadata["supporting_facts"] == rec["supporting_facts"]
        assert inst.gold_answer == rec["answer"] and inst.question == rec["question"]


def test_hotpot_first_record_exact(hotpot):
    _, _, result = hotpot
    inst = result.dataset.instances[0]
    assert inst.instance_id == "5a8b57f25542995d1e6f1371"
    assert inst.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
    assert inst.gold_answer == "yes" and inst.answer_type == "yes_no"
    assert inst.reasoning_type == "comparison" and inst.metadata["type"] == "comparison"
    assert inst.source == "hotpotqa"
    assert inst.passages[0].title == "Ed Wood (film)"
    assert inst.passages[0].text.startswith(
        "Ed Wood is a 1994 American biographical period comedy-drama film directed and produced "
        "by Tim Burton, and starring Johnny Depp as cult filmmaker Ed Wood. The film concerns"
    )
    assert inst.gold_ids == ("p0002", "p0005")
    assert [inst.passages[1].title, inst.passages[4].title] == ["Scott Derrickson", "Ed Wood"]
    assert inst.context_length == 759
    # gold midpoints fall in different thirds of the context
    assert inst.evidence_position == "scattered"
    assert (inst.distractor_similarity, inst.evidence_density) == ("unknown", "unknown")
    assert inst.metadata["import_notes"]["gold_token_fraction"] == 0.0988


def test_hotpot_cells_over_the_sample(hotpot):
    _, raw, result = hotpot
    insts = result.dataset.instances
    assert Counter(i.reasoning_type for i in insts) == {"multi_hop": 39, "comparison": 14}
    assert Counter(i.answer_type for i in insts) == {"entity": 37, "yes_no": 9, "number": 7}
    numbers = sorted(i.gold_answer for i in insts if i.answer_type == "number")
    assert numbers == ["1,462", "1838", "1962", "1999", "2000", "2000", "9,984"]
    # "3,677 seated" is an entity, not a number
    assert next(i for i in insts if i.gold_answer == "3,677 seated").answer_type == "entity"
    assert {i.evidence_position for i in insts} <= {"front", "middle", "end", "scattered"}


def _hotpot_record(**overrides):
    rec = {
        "_id": "h1",
        "question": "Which came first?",
        "answer": "Alpha",
        "type": "comparison",
        "level": "easy",
        "supporting_facts": [["Alpha", 0], ["Beta", 1]],
        "context": [
            ["Alpha", ["Alpha was founded in 1900.", " It is old."]],
            ["Gamma", ["Gamma is unrelated."]],
            ["Beta", ["Beta is a thing.", " Beta was founded in 1950."]],
        ],
    }
    rec.update(overrides)
    return rec


def test_hotpot_missing_support_title_is_flagged(tmp_path):
    recs = [
        _hotpot_record(),
        _hotpot_record(_id="h2", supporting_facts=[["Alpha", 0], ["Delta", 0], ["Beta", 7]]),
        _hotpot_record(_id="h3", supporting_facts=[["Delta", 0]], type="bridge"),
    ]
    path = tmp_path / "h.json"
    path.write_text(json.dumps(recs), encoding="utf-8")
    a, b, c = read_dataset(path, "hotpotqa", "h").dataset.instances
    assert (
        a.gold_ids == ("p0001", "p0003")
        and a.fan_in == 2
        and "missing_support_titles" not in (a.metadata["import_notes"])
    )
    assert a.passages[0].text == "Alpha was founded in 1900. It is old."
    assert a.evidence_position == "scattered"
    assert b.gold_ids == ("p0001", "p0003") and b.fan_in == 2 and b.oracle_applicable
    assert b.metadata["import_notes"]["missing_support_titles"] == ["Delta"]
    assert b.metadata["import_notes"]["unaligned_supporting_facts"] == [["Beta", 7]]
    assert c.gold_ids == () and c.fan_in == 0 and not c.oracle_applicable
    assert c.reasoning_type == "multi_hop" and c.evidence_position == "unknown"
    assert [p.role for p in c.passages] == ["distractor"] * 3


# ---------------------------------------------------------------------------- 2Wiki
TWOWIKI = [
    {
        "_id": "w1",
        "type": "compositional",
        "question": "Who is the mother of the director of film Polish Easter?",
        "context": [
            [
                "Polish Easter",
                ["Polish Easter is a 2011 film.", "It was directed by Jakob Ziemnicki."],
            ],
            ["Other Film", ["Other Film is a 1999 film."]],
            [
                "Jakob Ziemnicki",
                ["Jakob Ziemnicki is a director.", "His mother is Anna Ziemnicka."],
            ],
        ],
        "supporting_facts": [["Polish Easter", 1], ["Jakob Ziemnicki", 1]],
        "evidences": [
            ["Polish Easter", "director", "Jakob Ziemnicki"],
            ["Jakob Ziemnicki", "mother", "Anna Ziemnicka"],
        ],
        "answer": "Anna Ziemnicka",
    },
    {
        "_id": "w2",
        "type": "bridge_comparison",
        "question": "Which film came out first, Polish Easter or Other Film?",
        "context": [
            ["Polish Easter", ["Polish Easter is a 2011 film."]],
            ["Other Film", ["Other Film is a 1999 film."]],
        ],
        "supporting_facts": [["Polish Easter", 0], ["Other Film", 0]],
        "evidences": [["Polish Easter", "publication date", "2011"]],
        "answer": "Other Film",
    },
    {
        "_id": "w3",
        "type": "inference",
        "question": "Is Other Film older than Polish Easter?",
        "context": [["Other Film", ["Other Film is a 1999 film."]]],
        "supporting_facts": [["Other Film", 0]],
        "evidences": [],
        "answer": "yes",
    },
    {
        "_id": "w4",
        "type": "comparison",
        "question": "How many years apart were the two films released?",
        "context": [["A", ["a"]], ["B", ["b"]], ["C", ["c"]]],
        "supporting_facts": [["C", 0]],
        "evidences": [],
        "answer": 12,
    },
]


def test_twowiki_inline_sample(tmp_path):
    path = tmp_path / "dev.json"
    path.write_text(json.dumps(TWOWIKI, indent=1), encoding="utf-8")
    result = read_dataset(path, "2wiki", "w")
    assert result.summary() == "read 4 records, wrote 4 instances, skipped 0"
    w1, w2, w3, w4 = result.dataset.instances
    assert result.dataset.source == "2wikimultihopqa" and w1.source == "2wikimultihopqa"
    assert [i.reasoning_type for i in (w1, w2, w3, w4)] == [
        "multi_hop",
        "comparison",
        "multi_hop",
        "comparison",
    ]
    assert [i.metadata["type"] for i in (w1, w2, w3, w4)] == [r["type"] for r in TWOWIKI]
    assert w1.metadata["evidences"] == TWOWIKI[0]["evidences"]
    assert "level" not in w1.metadata
    assert (
        w1.passages[0].text == "Polish Easter is a 2011 film. It was directed by Jakob Ziemnicki."
    )
    assert w1.gold_ids == ("p0001", "p0003") and w1.fan_in == 2
    assert w1.evidence_position == "scattered" and w1.answer_type == "entity"
    assert w2.gold_ids == ("p0001", "p0002") and w2.fan_in == 2
    assert w3.gold_ids == ("p0001",) and w3.fan_in == 1 and w3.answer_type == "yes_no"
    assert w3.evidence_position == "middle"  # one passage: midpoint at 1/2
    assert w4.gold_answer == "12" and w4.answer_type == "number"
    assert w4.evidence_position == "end"


# ---------------------------------------------------------------------------- ONCU / BABILong
@pytest.fixture(scope="module")
def babilong():
    path = shared_fixture(BABILONG)
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return raw, read_dataset(path, "oncu-jsonl", "babilong")


def test_babilong_imports_all_without_oracle(babilong):
    raw, result = babilong
    assert result.n_read == 200 and result.n_written == 200 and result.skipped == ()
    insts = result.dataset.instances
    assert result.dataset.source == "babilong"
    assert all(not i.oracle_applicable and i.gold_ids == () and i.fan_in == 0 for i in insts)
    assert [i.instance_id for i in insts] == [r["id"] for r in raw]
    # answers are kept as text, including "none" (20 of them)
    assert [i.gold_answer for i in insts] == [r["gold_answer"] for r in raw]
    assert sum(i.gold_answer == "none" for i in insts) == 20
    marker = re.compile(r"\[passage_id: (p\d{4})\]")
    for rec, inst in zip(raw, insts, strict=True):
        assert [p.passage_id for p in inst.passages] == marker.findall(rec["long_context"])
        # no context text is lost or added
        words = " ".join(p.text for p in inst.passages).split()
        assert words == marker.sub(" ", rec["long_context"]).split()
        assert inst.context_length == rec["context_length"]
        assert inst.metadata == rec["metadata"]
        assert {p.role for p in inst.passages} == {"filler"}


def test_babilong_first_record_exact(babilong):
    _, result = babilong
    inst = result.dataset.instances[0]
    assert inst.instance_id == "babilong_0k_qa1_babilong_000000"
    assert (inst.question, inst.gold_answer) == ("Where is Mary?", "bathroom")
    assert len(inst.passages) == 1
    (p,) = inst.passages
    assert (p.passage_id, p.title, p.doc_id, p.is_gold) == ("p0001", "", "p0001", False)
    assert p.text == (
        "John travelled to the hallway. Mary journeyed to the bathroom. Daniel went back to the "
        "bathroom. John moved to the bedroom."
    )
    assert inst.context_length == 23 and inst.metadata["cue_applicable"] is False
    assert (inst.reasoning_type, inst.answer_type, inst.evidence_position) == (
        "unknown",
        "string",
        "unknown",
    )


def test_babilong_multi_passage_record(babilong):
    raw, result = babilong
    k = next(i for i, r in enumerate(raw) if r["long_context"].count("[passage_id:") == 3)
    inst = result.dataset.instances[k]
    assert [p.passage_id for p in inst.passages] == ["p0001", "p0002", "p0003"]
    assert inst.passages[0].text.endswith("Sandra journeyed to")
    assert inst.passages[1].text.startswith("the hallway.")


ONCU_CONTROLLED = {
    "id": "controlled_000007",
    "source": "controlled",
    "question": "Which company acquired NovaMind-00007?",
    "gold_answer": "Arcturus Systems 00007",
    "oracle_evidence": [
        {"evidence_id": "p0001", "text": "NovaMind-00007 was acquired by Arcturus Systems 00007."},
        {
            "evidence_id": "p0002",
            "text": "Arcturus Systems 00007 is in Zurich.",
            "title": "Arcturus",
        },
    ],
    "long_context": (
        "memo_1 note_2 report_3\n\n"
        "[passage_id: p0001] NovaMind-00007 was acquired by Arcturus Systems 00007.\n\n"
        "archive_4 index_5\n\nledger_6\n\n"
        "[passage_id: p0003] A disputed memo says NovaMind-00007 was acquired by Helios.\n\n"
        "[passage_id: p0004] Title: Zurich\nZurich is a city.\n\n"
        "[passage_id: p0001] NovaMind-00007 was acquired by Arcturus Systems 00007.\n\n"
        "record_7"
    ),
    "distractors": [{"distractor_id": "p0003", "text": "A disputed memo ..."}],
    "context_length": 16000,
    "evidence_position": "scattered",
    "evidence_density": "medium",
    "distractor_similarity": "conflicting",
    "reasoning_type": "single_hop",
    "answer_type": "entity",
    "metadata": {"cue_applicable": True, "seed": 42},
}


def test_oncu_release_record_with_filler_distractor_and_repeat(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [ONCU_CONTROLLED])
    (inst,) = read_dataset(path, "oncu-jsonl", "c").dataset.instances
    got = [(p.passage_id, p.role, p.title, p.text) for p in inst.passages]
    assert got == [
        ("p0005", "filler", "", "memo_1 note_2 report_3"),
        ("p0001", "gold", "", "NovaMind-00007 was acquired by Arcturus Systems 00007."),
        ("p0006", "filler", "", "archive_4 index_5\n\nledger_6"),
        ("p0003", "conflicting", "", "A disputed memo says NovaMind-00007 was acquired by Helios."),
        ("p0004", "filler", "Zurich", "Zurich is a city."),
        ("p0007", "filler", "", "record_7"),
        ("p0002", "gold", "Arcturus", "Arcturus Systems 00007 is in Zurich."),
    ]
    assert [p.ord for p in inst.passages] == list(range(7))
    assert inst.gold_ids == ("p0001", "p0002")
    assert [p.doc_id for p in inst.passages if p.is_gold] == ["p0001", "Arcturus"]
    assert inst.fan_in == 2 and inst.oracle_applicable
    assert (inst.context_length, inst.evidence_position, inst.evidence_density) == (
        16000,
        "scattered",
        "medium",
    )
    assert (inst.distractor_similarity, inst.reasoning_type, inst.answer_type) == (
        "conflicting",
        "single_hop",
        "entity",
    )
    assert inst.source == "controlled"
    assert inst.metadata["seed"] == 42
    assert inst.metadata["import_notes"] == {
        "repeated_passages": ["p0001"],
        "oracle_outside_context": ["p0002"],
    }
    assert all(p.role in ROLES for p in inst.passages)


def test_oncu_repeated_id_with_other_text_is_skipped_and_cue_flag_respected(tmp_path):
    bad = dict(ONCU_CONTROLLED, id="r1")
    bad["long_context"] = "[passage_id: p0001] one\n\n[passage_id: p0001] two"
    off = dict(ONCU_CONTROLLED, id="r2", metadata={"cue_applicable": False})
    nolen = dict(
        ONCU_CONTROLLED, id="r3", oracle_evidence=[], long_context="[passage_id: p0009] a b c"
    )
    for key in ("context_length", "evidence_position", "answer_type"):
        del nolen[key]
    nolen["gold_answer"] = 7
    path = write_jsonl(tmp_path / "o.jsonl", [bad, off, nolen])
    result = read_dataset(path, "oncu-jsonl", "o")
    assert result.skipped == ((1, "passage id repeated with different text"),)
    r2, r3 = result.dataset.instances
    assert r2.gold_ids == ("p0001", "p0002") and not r2.oracle_applicable
    assert r3.context_length == 5 and r3.evidence_position == "unknown"
    assert r3.gold_answer == "7" and r3.answer_type == "number" and not r3.oracle_applicable


# ---------------------------------------------------------------------------- generic JSONL
def _passages(*texts, gold=()):
    return [{"text": t, **({"is_gold": True} if i in gold else {})} for i, t in enumerate(texts)]


def test_jsonl_round_trip_keeps_text_answers(tmp_path):
    answers = ["None", "nan", "NA", "null", "N/A", "0", "false"]
    records = [
        {
            "id": f"a{k}",
            "question": f"q{k}?",
            "answer": a,
            "passages": _passages("x", "y", gold=[1]),
        }
        for k, a in enumerate(answers)
    ]
    records.append({"id": 9, "question": "year?", "answer": 1999, "passages": _passages("z")})
    records.append(
        {
            "id": "f",
            "question": "ratio?",
            "answer": 3.5,
            "aliases": [3.50, "three and a half"],
            "passages": _passages("z"),
        }
    )
    path = write_jsonl(tmp_path / "mine.jsonl", records, blank_lines=True)
    result = read_dataset(path, "jsonl", "mine")
    insts = result.dataset.instances
    assert result.n_read == 9 and result.skipped == ()
    assert [i.gold_answer for i in insts] == [*answers, "1999", "3.5"]
    assert [i.instance_id for i in insts] == [*(f"a{k}" for k in range(7)), "9", "f"]
    assert insts[-1].answer_aliases == ("3.5", "three and a half")
    assert insts[0].answer_type == "string" and insts[5].answer_type == "number"
    assert insts[0].gold_ids == ("p0002",) and insts[0].oracle_applicable
    assert insts[-1].gold_ids == () and not insts[-1].oracle_applicable
    assert result.dataset.source == "jsonl" and insts[0].source == "jsonl"


def test_jsonl_full_record_and_passage_ids(tmp_path):
    full = {
        "id": "q1",
        "question": "Who wrote the novel the film Y is based on?",
        "answer": "Jane Roe",
        "aliases": ["J. Roe"],
        "passages": [
            {
                "id": "d7",
                "title": "Y (film)",
                "text": "Y is a film based on X.",
                "doc_id": "wiki:Y",
                "is_gold": True,
            },
            {"id": "d2", "title": "X (novel)", "text": "X is a novel by Jane Roe.", "role": "gold"},
            {"id": "d9", "title": "Z", "text": "Z is a novel.", "role": "conflicting"},
            {"id": 4, "text": "Filler text here.", "role": "filler", "is_gold": False},
        ],
        "answer_type": "entity",
        "reasoning_type": "multi_hop",
        "context_length": 27,
        "evidence_position": "front",
        "distractor_similarity": "high",
        "evidence_density": "medium",
        "source": "my-benchmark",
        "metadata": {"split": "dev"},
        "annotator": 3,
    }
    kept = {
        "id": "q2",
        "question": "q?",
        "answer": "a",
        "passages": [{"id": "p0010", "text": "a b"}, {"id": "p0002", "text": "c", "is_gold": True}],
    }
    path = write_jsonl(tmp_path / "f.jsonl", [full, kept])
    a, b = read_dataset(path, "jsonl", "f").dataset.instances
    assert [(p.passage_id, p.doc_id, p.role, p.is_gold) for p in a.passages] == [
        ("p0001", "wiki:Y", "gold", True),
        ("p0002", "X (novel)", "gold", True),
        ("p0003", "Z", "conflicting", False),
        ("p0004", "4", "filler", False),
    ]
    assert a.fan_in == 2 and a.answer_aliases == ("J. Roe",)
    assert (a.answer_type, a.reasoning_type, a.context_length, a.evidence_position) == (
        "entity",
        "multi_hop",
        27,
        "front",
    )
    assert (a.distractor_similarity, a.evidence_density, a.source) == (
        "high",
        "medium",
        "my-benchmark",
    )
    assert a.metadata["split"] == "dev"
    notes = a.metadata["import_notes"]
    assert notes["original_passage_ids"] == {
        "p0001": "d7",
        "p0002": "d2",
        "p0003": "d9",
        "p0004": "4",
    }
    assert notes["extra_fields"] == {"annotator": 3}
    # neutral user ids are kept as given, in the given order
    assert [p.passage_id for p in b.passages] == ["p0010", "p0002"] and b.gold_ids == ("p0002",)
    assert "original_passage_ids" not in b.metadata.get("import_notes", {})
    assert b.context_length == 3 and b.evidence_position == "end"


@pytest.mark.parametrize(
    ("gold", "expected"),
    [((0,), "front"), ((1,), "middle"), ((2,), "end"), ((0, 2), "scattered"), ((), "unknown")],
)
def test_evidence_position_by_thirds(tmp_path, gold, expected):
    rec = {
        "id": "x",
        "question": "q?",
        "answer": "a",
        "passages": _passages("w " * 10, "w " * 10, "w " * 10, gold=gold),
    }
    path = write_jsonl(tmp_path / "p.jsonl", [rec])
    (inst,) = read_dataset(path, "jsonl", "p").dataset.instances
    assert inst.evidence_position == expected


def test_unusable_records_are_skipped_with_reasons(tmp_path):
    ok = {"id": "ok", "question": "q?", "answer": "a", "passages": _passages("a")}
    records = [
        ok,
        {"id": "e1", "question": "   ", "answer": "a", "passages": _passages("a")},
        {"id": "e2", "question": "q?", "answer": "", "passages": _passages("a")},
        {"id": "e3", "question": "q?", "answer": "a", "passages": []},
        {"id": "e4", "question": "", "answer": "a", "passages": []},
    ]
    path = write_jsonl(tmp_path / "s.jsonl", records)
    result = read_dataset(path, "jsonl", "s")
    assert result.n_read == 5 and result.n_written == 1
    assert result.skipped == (
        (2, "empty question"),
        (3, "empty answer"),
        (4, "no passages"),
        (5, "empty question"),
    )
    assert result.summary() == (
        "read 5 records, wrote 1 instances, skipped 4 "
        "(empty question: 2, empty answer: 1, no passages: 1)"
    )
    assert result.dataset.builder_params["n_skipped"] == 4


def test_blank_lines_keep_line_numbers(tmp_path):
    path = tmp_path / "b.jsonl"
    ok = json.dumps({"id": "a", "question": "q?", "answer": "x", "passages": _passages("a")})
    empty = json.dumps({"id": "b", "question": "", "answer": "x", "passages": _passages("a")})
    path.write_text(f"\n{ok}\n\n  \n{empty}\n\n", encoding="utf-8")
    result = read_dataset(path, "jsonl", "b")
    assert result.n_read == 2 and result.skipped == ((5, "empty question"),)


def test_bom_is_accepted(tmp_path):
    path = tmp_path / "bom.jsonl"
    rec = {"id": "a", "question": "q?", "answer": "x", "passages": _passages("a")}
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(rec).encode() + b"\n")
    assert read_dataset(path, "jsonl", "b").n_written == 1
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([_hotpot_record()]).encode())
    assert read_dataset(path, "hotpotqa", "b").n_written == 1
