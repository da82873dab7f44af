"""The ONCU protocol's reading of real replies (core/scoring/parsing.py, issue 34 item 1).

Every one of the release's 1,600 raw replies (``../shared/fixtures/oncu_release/
*.raw_model_responses.jsonl``: Qwen2.5-14B, HotpotQA-200 and controlled-200, four methods) is
parsed by :func:`core.scoring.parsing.parse_reply` with the ids that call showed, and compared with
the
release's own parse of it (``prediction``): answer, evidence ids and parse-error presence are
equal on every line.

The lines do not carry the shown ids, so they are derived from the release files of the same
run: ``no_evidence`` showed nothing (``()``); ``oracle`` showed the gold evidence
(``gold_evidence_ids`` of ``per_sample_metrics.csv``); ``direct`` (full context) showed every
passage of the instance, of which the release files name the gold ones and every id the release
kept for that instance under any method (each was shown somewhere, hence in the full context);
``retrieve_then_read`` showed the retrieved chunks' passages, which the release does not list,
so the ids the release kept there stand in for them (this part checks normalization, order, the
cap and the dropping of non-passage ids, not the shown filter; the shown filter is checked on the
other three methods, where the release drops e.g. ``p0001`` cited with no evidence shown).
"""

from __future__ import annotations

import collections
import csv
import json

import pytest
from conftest import shared_fixture

from core.scoring.parsing import parse_reply

RUNS = ("hotpotqa_qwen25_14b_200", "controlled_safe16k_qwen25_14b_200")


def _lines(run: str) -> list[dict]:
    path = shared_fixture(f"oncu_release/{run}.raw_model_responses.jsonl")
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def _shown(run: str, lines: list[dict]) -> list[tuple[str, ...]]:
    """The ids each line's call showed, as far as the release files tell (module docstring)."""
    metrics = shared_fixture(f"oncu_release/{run}.per_sample_metrics.csv")
    with metrics.open(encoding="utf-8", newline="") as fh:
        gold = {
            r["sample_id"]: tuple(x for x in r["gold_evidence_ids"].split(";") if x)
            for r in csv.DictReader(fh)
        }
    kept_anywhere: dict[str, set[str]] = collections.defaultdict(set)
    for line in lines:
        kept_anywhere[line["sample_id"]].update(line["prediction"]["evidence_ids"])
    out = []
    for line in lines:
        sid, method = line["sample_id"], line["method"]
        out.append(
            {
                "no_evidence": (),
                "oracle": gold[sid],
                "direct": tuple(sorted(set(gold[sid]) | kept_anywhere[sid])),
                "retrieve_then_read": tuple(line["prediction"]["evidence_ids"]),
            }[method]
        )
    return out


@pytest.mark.parametrize("run", RUNS)
def test_every_released_reply_parses_as_the_release_parsed_it(run):
    lines = _lines(run)
    assert len(lines) == 800
    differ = []
    side = collections.Counter()
    for line, shown in zip(lines, _shown(run, lines), strict=True):
        got = parse_reply(line["raw_response"], shown)
        want = line["prediction"]
        if (got.answer, list(got.evidence_ids), got.parse_error is not None) != (
            want["answer"],
            want["evidence_ids"],
            "parse_error" in want,
        ):
            differ.append((line["sample_id"], line["method"], got, want))
        side["unshown", line["method"]] += bool(got.unshown_ids)
        side["over cap", line["method"]] += bool(got.over_cap_ids)
    assert differ == []
    # What the release set aside, counted by hand from the raw replies: HotpotQA cites ids not
    # shown (or not passage ids: "passage_id: p0004", "section_78") in 5 no-evidence, 8 full-
    # context and 53 retrieved replies, and cites 4 or 5 shown ids in 3 oracle replies and 1
    # full-context one; controlled cites "evaluation_754"-style ids in 20 full-context replies.
    expected = {
        "hotpotqa_qwen25_14b_200": {
            ("unshown", "no_evidence"): 5,
            ("unshown", "direct"): 8,
            ("unshown", "retrieve_then_read"): 53,
            ("over cap", "oracle"): 3,
            ("over cap", "direct"): 1,
        },
        "controlled_safe16k_qwen25_14b_200": {
            ("unshown", "direct"): 20,
            ("unshown", "retrieve_then_read"): 1,
        },
    }[run]
    assert {k: v for k, v in side.items() if v} == expected


def test_released_examples_by_hand():
    # HotpotQA, no evidence shown: the model cites p0001 anyway; nothing is scored.
    got = parse_reply('{"answer": "yes", "evidence_ids": ["p0001"], "explanation": ""}', ())
    assert (got.answer, got.evidence_ids, got.unshown_ids) == ("yes", (), ("p0001",))
    # controlled, full context: ids that are not passage ids
    got = parse_reply('{"answer": "x", "evidence_ids": ["p0001", "archive_794"]}', ["p0001"])
    assert (got.evidence_ids, got.unshown_ids) == (("p0001",), ("archive_794",))
    # retrieved: a shown id written with its marker is not a passage id for the protocol
    got = parse_reply(
        '{"answer": "x", "evidence_ids": ["p0002", "passage_id: p0003"]}', ["p0002", "p0003"]
    )
    assert (got.evidence_ids, got.unshown_ids) == (("p0002",), ("passage_id: p0003",))
    # oracle: four shown ids cited, three kept
    got = parse_reply(
        '{"answer": "x", "evidence_ids": ["p0001", "p0002", "p0003", "p0004"]}',
        ["p0001", "p0002", "p0003", "p0004"],
    )
    assert (got.evidence_ids, got.over_cap_ids) == (("p0001", "p0002", "p0003"), ("p0004",))


@pytest.mark.parametrize("run", RUNS)
def test_released_replies_cut_mid_json_are_parse_errors(run):
    # The protocol records a parse error with an empty answer for a reply that is not one
    # complete JSON object; what can be read from it is salvaged, never scored.
    for line in _lines(run)[:200]:
        raw = line["raw_response"].rstrip()
        for cut in (len(raw) // 2, len(raw) - 1):
            got = parse_reply(raw[:cut], ())
            assert (got.answer, got.evidence_ids) == ("", ())
            assert got.parse_error == "no JSON object found"
    got = parse_reply('{\n  "answer": "Keltbridge",\n  "evidence_ids": ["p0001", "p00', ["p0001"])
    assert got.answer == "" and got.salvaged == "answer 'Keltbridge' in an incomplete JSON object"
