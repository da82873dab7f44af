"""Replies read into the answer contract as the ONCU protocol reads them (core/scoring/parsing)"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.scoring.parsing import INTERNAL_ERROR, ParsedAnswer, parse_reply

GOOD = '{"answer": "Velka", "evidence_ids": ["p0002"], "confidence": 0.8, "explanation": "p2"}'


def test_bare_object():
    assert parse_reply(GOOD) == ParsedAnswer("Velka", ("p0002",), 0.8, "p2", None)
    assert parse_reply("  \n" + GOOD + "\n ") == parse_reply(GOOD)


def test_fenced_object():
    for fence in (
        f"```json\n{GOOD}\n```",
        f"Here you go:\n```\n{GOOD}\n```\nDone.",
        f"```JSON {GOOD}```",
    ):
        assert parse_reply(fence).answer == "Velka", fence


def test_first_balanced_object_with_braces_inside_strings():
    text = 'Thinking... {"answer": "a {weird} one", "evidence_ids": [], "confidence": 1} trailing }'
    got = parse_reply(text)
    assert got.answer == "a {weird} one" and got.parse_error is None
    escaped = 'x {"answer": "say \\"}\\" twice", "evidence_ids": ["p0001"]} y'
    assert parse_reply(escaped).answer == 'say "}" twice'
    # the first balanced candidate that is not JSON is skipped
    two = '{not json} and then {"answer": "second"}'
    assert parse_reply(two).answer == "second"


def test_python_style_and_trailing_commas_are_salvaged_not_scored():
    # Not strict JSON: a parse error with an empty answer, as the protocol's parser records it
    got = parse_reply("{'answer': 'Paris', 'evidence_ids': ['p0001'],}")
    assert (got.answer, got.evidence_ids, got.parse_error) == ("", (), "no JSON object found")
    assert got.salvaged == "answer 'Paris' in a reply that is not strict JSON"
    got = parse_reply('{"answer": "x", "evidence_ids": ["p0001",], "confidence": 0.5,}')
    assert got.answer == "" and got.parse_error and "'x'" in got.salvaged
    # a raw control character inside a string is not strict JSON either
    got = parse_reply('{"answer": "two\nlines"}')  # a real line break inside the string
    assert got.parse_error
    assert got.salvaged == "answer 'two\\nlines' in a reply that is not strict JSON"


def test_unparseable_replies():
    for text in ("", "   ", None, "Paris", "The answer is {Paris", '"just a string"', "[1, 2]"):
        got = parse_reply(text)
        assert got.answer == "" and got.parse_error, text
    assert parse_reply("").parse_error == "empty reply"
    assert parse_reply("Paris").parse_error == "no JSON object found"
    got = parse_reply('{"evidence_ids": ["p0001"]}')
    assert (got.parse_error, got.evidence_ids) == ("missing field 'answer'", ("p0001",))


def test_answer_coercion():
    def ans(value):
        return parse_reply(json.dumps({"answer": value})).answer

    assert ans(3) == "3"
    assert ans(3.0) == "3"
    assert ans(2.5) == "2.5"
    assert ans(True) == "yes" and ans(False) == "no"
    assert ans(["Paris", "Lyon"]) == "Paris, Lyon"
    assert ans("  padded ") == "padded"
    assert ans({"name": "x"}) == '{"name": "x"}'
    # null is an empty answer, not a parse error (the release reads it so)
    assert parse_reply('{"answer": null}') == ParsedAnswer("", ())
    # an answer naming a passage is blanked (the release's sanitize rule) and salvaged
    got = parse_reply('{"answer": "section_78", "evidence_ids": []}')
    assert (got.answer, got.parse_error) == ("", None) and "section_78" in got.salvaged
    assert parse_reply('{"answer": "Passage_3"}').answer == ""
    assert parse_reply('{"answer": "passage 3"}').answer == "passage 3"


def test_the_answer_key_is_exact():
    for text in ('{"Answer": "caps", "Evidence": "p0001"}', '{"final_answer": "alias"}'):
        got = parse_reply(text)
        assert (got.answer, got.parse_error) == ("", "missing field 'answer'"), text
        assert "under another key" in got.salvaged
    got = parse_reply('{"answer": "a", "citations": ["p0001"]}', ["p0001"])
    assert got.evidence_ids == () and got.salvaged.startswith("evidence under another key")


@pytest.mark.parametrize(
    ("raw", "ids", "unshown"),
    [
        (["p0001", "p0003"], ("p0001", "p0003"), ()),
        ("p0001", ("p0001",), ()),
        (3, ("p0003",), ()),
        ("p0001, p0003", (), ("p0001, p0003",)),  # one item, not a passage id
        (["P0003", "p3", "3", " p00003 "], ("p0003",), ()),
        (
            ["[passage_id: p0003]", "passage_id: p0003"],
            (),
            ("[passage_id: p0003]", "passage_id: p0003"),
        ),
        (["p12", "p00012"], ("p0012",), ()),
        ([{"id": "p0002"}], (), ('{"id": "p0002"}',)),
        ([], (), ()),
        ("", (), ()),
        (None, (), ()),
        ([3, "c0001", 2.0, True, None], ("p0003",), ("c0001", "2.0", "true")),
        (["evaluation_754", "evaluation_754"], (), ("evaluation_754",)),
    ],
)
def test_evidence_id_normalization(raw, ids, unshown):
    got = parse_reply(json.dumps({"answer": "a", "evidence_ids": raw}))
    assert (got.evidence_ids, got.unshown_ids, got.over_cap_ids) == (ids, unshown, ())


def test_only_shown_ids_are_scored_at_most_three():
    text = json.dumps(
        {
            "answer": "a",
            "evidence_ids": ["p0001", "p0009", "doc7", "p2", "p0001", "p3", "p4", "p0009", "p5"],
        }
    )
    got = parse_reply(text, known_ids=["p0001", "p0002", "p0003", "p0004", "p0005"])
    assert got.evidence_ids == ("p0001", "p0002", "p0003")
    assert got.unshown_ids == ("p0009", "doc7")
    assert got.over_cap_ids == ("p0004", "p0005")
    assert got.record() == {"unshown_ids": ["p0009", "doc7"], "over_cap_ids": ["p0004", "p0005"]}
    # nothing shown: nothing scored
    assert parse_reply(text, known_ids=()).evidence_ids == ()
    # --max-cited changes the cap; None lifts it
    assert parse_reply(text, ["p0001", "p0002"], max_cited=1).over_cap_ids == ("p0002",)
    assert len(parse_reply(text, None, max_cited=None).evidence_ids) == 6
    # known ids not known: every passage id kept (capped), non-passage ids still set aside
    got = parse_reply(text)
    assert (got.evidence_ids, got.unshown_ids) == (("p0001", "p0009", "p0002"), ("doc7",))
    assert got.unknown_ids == got.unshown_ids  # the former name


@pytest.mark.parametrize(
    ("raw", "conf"),
    [
        (0.8, 0.8),
        ("0.8", 0.8),
        (" 0.25 ", 0.25),
        (1, 1.0),
        (0, 0.0),
        (80, 0.8),  # (1, 100] is a percentage
        ("80%", 0.8),
        ("5%", 0.05),
        (100, 1.0),
        (150, 1.0),  # clamped
        (-0.2, 0.0),  # clamped
        ("high", None),
        (True, None),
        (None, None),
        ([0.5], None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_confidence_coercion(raw, conf):
    got = parse_reply(json.dumps({"answer": "a", "confidence": raw}))
    assert got.confidence == (pytest.approx(conf) if conf is not None else None)
    assert got.parse_error is None


def test_missing_fields_take_empty_values():
    got = parse_reply('{"answer": "a"}')
    assert got == ParsedAnswer("a", (), None, "", None, (), (), "", "")


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_never_raises_on_arbitrary_text(text):
    got = parse_reply(text)
    assert isinstance(got, ParsedAnswer)
    assert isinstance(got.answer, str)
    assert got.confidence is None or 0.0 <= got.confidence <= 1.0
    assert (got.parse_error is None) or got.answer == ""


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.floats(allow_nan=True) | st.integers() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["answer", "evidence_ids", "confidence", "explanation", "x"]),
            children,
            max_size=5,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(_JSONISH, st.sampled_from(["{}", "```json\n{}\n```", "noise {} noise", "{}}}}"]))
def test_never_raises_on_json_shaped_replies(value, wrapper):
    text = (
        wrapper.replace("{}", json.dumps(value)) if isinstance(value, dict) else json.dumps(value)
    )
    got = parse_reply(text, known_ids=["p0001"])
    assert got.confidence is None or 0.0 <= got.confidence <= 1.0
    assert all(isinstance(i, str) for i in got.evidence_ids)
    assert set(got.evidence_ids) <= {"p0001"} and len(got.evidence_ids) <= 3
    assert not set(got.unshown_ids) & set(got.evidence_ids)
    if isinstance(value, dict) and "answer" in value and value["answer"] is not None:
        if wrapper != "{}}}}":
            assert got.parse_error is None


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="{}[]\"\\:,' abp0123", max_size=200))
def test_never_raises_on_brace_soup(text):
    got = parse_reply(text)
    assert isinstance(got, ParsedAnswer)
    # parse_reply catches its own exceptions; one caught here is a parser bug, not a bad reply.
    assert not (got.parse_error or "").startswith(INTERNAL_ERROR), got.parse_error


def test_a_shown_id_is_scored_as_the_dataset_spells_it():
    # a dataset may keep five-digit ids (p00012): the cited p12 is that passage, so spelled
    got = parse_reply(
        '{"answer": "a", "evidence_ids": ["p12", "p00012", "p0013"]}', ["p00012", "p0013"]
    )
    assert got.evidence_ids == ("p00012", "p0013")
