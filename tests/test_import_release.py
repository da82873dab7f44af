"""Issue 34 item 7: a released run's files read together (metrics CSV, parsed predictions, raw
replies), grouped by run; the raw replies re-parsed and compared with the release's parse; one-line
errors naming file, record and field; a rerun of an instance without text refused."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest
from conftest import RELEASE_HOTPOTQA, shared_fixture
from test_hardening_import import METHODS, refused, row, snapshot, write_csv

from core.cli import main
from core.datasets.release_files import group_release_files, release_parse
from core.datasets.results import import_results
from core.execution.rerun import RerunRequest, rerun
from core.store import Store
from core.store.failure_rows import FailureFilter
from core.types import DataError

HOTPOT = "hotpotqa_qwen25_14b_200"
# hand-read from the fixture's parsed_predictions.jsonl, line 2
LALELI = (
    "The Laleli Mosque is located in Laleli, Fatih, Istanbul, while the Esma Sultan "
    "Mansion is situated in Ortaköy neighborhood of Istanbul."
)
LALELI_ID = "hotpotqa_5adbf0a255429947ff17385a"


def _reply(sid="s1", method="direct", raw=None, **pred) -> dict:
    prediction = {"answer": "Paris", "evidence_ids": ["p0001"], "explanation": "it says so"}
    prediction.update(pred)
    raw = raw if raw is not None else json.dumps(prediction)
    return {
        "sample_id": sid,
        "model_name": "m1",
        "method": method,
        "raw_response": raw,
        "prediction": prediction,
        "prompt_hash": "abc",
        "intermediate": {},
    }


def _jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _toy_run(folder: Path, prefix: str = "toy", replies=None) -> list[Path]:
    """A released run of one instance and four methods: CSV, parsed predictions, replies."""
    folder.mkdir(parents=True, exist_ok=True)
    name = (lambda kind: f"{prefix}.{kind}") if prefix else (lambda kind: kind)
    csv_path = write_csv(folder / name("per_sample_metrics.csv"), [row(method=m) for m in METHODS])
    parsed = _jsonl(
        folder / name("parsed_predictions.jsonl"),
        [
            {
                "sample_id": "s1",
                "method": m,
                "answer": "Paris",
                "evidence_ids": ["p0001"],
                "explanation": f"why {m}",
            }
            for m in METHODS
        ],
    )
    if replies is None:
        replies = [_reply(method=m) for m in METHODS]
        # no evidence shown, and the reply cites p0001 anyway: the release drops it
        replies[0] = _reply(
            method="no_evidence",
            raw='{"answer": "Paris", "evidence_ids": ["p0001"], "explanation": "known"}',
            evidence_ids=[],
            explanation="known",
        )
    raw = _jsonl(folder / name("raw_model_responses.jsonl"), replies)
    return [csv_path, parsed, raw]


# ---------------------------------------------------------------------------- grouping
def test_files_are_grouped_by_run_prefix(tmp_path):
    a = _toy_run(tmp_path, "a")
    b = write_csv(tmp_path / "b.per_sample_metrics.csv", [row()])
    groups = group_release_files([a[2], b, a[0], a[1]])
    assert [(g.name, g.metrics.name) for g in groups] == [
        ("a", "a.per_sample_metrics.csv"),
        ("b", "b.per_sample_metrics.csv"),
    ]
    assert (groups[0].parsed, groups[0].replies) == (a[1], a[2])
    assert (groups[1].parsed, groups[1].replies) == (None, None)
    # a CSV alone takes the side files beside it, as the import always did
    (alone,) = group_release_files([a[0]])
    assert (alone.parsed, alone.replies) == (a[1], a[2])


def test_a_results_folder_is_one_run_named_after_its_run_folder(tmp_path):
    files = _toy_run(tmp_path / "qwen_run" / "results", prefix="")
    (group,) = group_release_files([tmp_path / "qwen_run" / "results"])
    assert group.name == "qwen_run"
    assert (group.metrics, group.parsed, group.replies) == tuple(files)


def test_a_side_file_without_its_metrics_is_refused(tmp_path):
    files = _toy_run(tmp_path, "a")
    with pytest.raises(DataError) as err:
        group_release_files([files[2]])
    assert str(err.value) == (
        f"{files[2]}: no per_sample_metrics.csv of this run among the files (expected "
        f"{tmp_path / 'a.per_sample_metrics.csv'})"
    )


# ---------------------------------------------------------------------------- a toy run
def test_toy_run_stores_reply_explanation_and_both_parses(tmp_path):
    files = _toy_run(tmp_path / "in", "toy")
    store = Store(tmp_path / "s.duckdb")
    res = import_results(store, group_release_files(files)[0])
    assert res.runs == ("toy",) and res.n_explained == 4 and res.n_replies == 4
    preds = {
        p["condition"]: p for p in store.instance_predictions(["toy"], "s1").to_dict("records")
    }
    assert preds["full_context"]["explanation"] == "why direct"
    assert json.loads(preds["full_context"]["raw_response"])["answer"] == "Paris"
    # what the release says was shown: nothing, the gold ids, or (not said) NULL
    assert list(preds["no_evidence"]["input_passage_ids"]) == []
    assert list(preds["oracle"]["input_passage_ids"]) == ["p0001"]
    assert preds["retrieved"]["input_passage_ids"] is None
    # the release's parse and this tool's, per prediction
    shown = release_parse(preds["full_context"]["meta"])
    assert shown["differs"] == []
    assert {r["field"]: (r["release"], r["this tool"]) for r in shown["rows"]}["answer"] == (
        "Paris",
        "Paris",
    )
    run = store.run_row("toy")
    check = run["options"]["parse_check"]
    assert (check["n_rows"], check["n_replies"]) == (4, 4)
    assert check["n_differs"] == sum(
        bool(release_parse(p["meta"])["differs"]) for p in preds.values()
    )
    assert "raw replies: 4 of 4" in run["notes"]


def test_the_no_evidence_reply_citing_an_unshown_id_matches_the_release(tmp_path):
    """Nothing was shown, so the protocol's parse keeps no id: as the release's parse."""
    files = _toy_run(tmp_path / "in", "toy")
    store = Store(tmp_path / "s.duckdb")
    import_results(store, group_release_files(files)[0])
    (pred,) = (
        store.instance_predictions(["toy"], "s1")
        .query("condition == 'no_evidence'")
        .to_dict("records")
    )
    parse = json.loads(pred["meta"])["release"]
    assert parse["parse"]["evidence_ids"] == []
    assert parse["tool_parse"]["evidence_ids"] == []
    assert "evidence_ids" not in parse["parse_differs"]


def test_cli_imports_a_results_folder(tmp_path, capsys):
    _toy_run(tmp_path / "myrun" / "results", prefix="")
    db = tmp_path / "s.duckdb"
    capsys.readouterr()
    assert (
        main(
            [
                "import",
                "results",
                "--format",
                "oncu-release",
                str(tmp_path / "myrun" / "results"),
                "--db",
                str(db),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith(
        f"{tmp_path / 'myrun' / 'results' / 'per_sample_metrics.csv'}: read 4 "
        "predictions of 1 instances; created dataset 'myrun'; runs: myrun "
        "(re-scored); explanations: 4; raw replies: 4 of 4"
    )
    assert snapshot(db)[1] == [("myrun", 4)]


# ---------------------------------------------------------------------------- bad input
@pytest.fixture
def db(tmp_path):
    path = tmp_path / "base.db"
    import_results(
        Store(path),
        write_csv(tmp_path / "base.per_sample_metrics.csv", [row(method=m) for m in METHODS]),
        name="base",
    )
    return path


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        ({"raw_response": None}, "raw_response", "is null"),
        ({"raw_response": 5}, "raw_response", "expected a string, got the number 5"),
        ({"prediction": "x"}, "prediction", "expected an object, got the string 'x'"),
        (
            {"method": "closed_book"},
            "method",
            "unknown method 'closed_book' (allowed: "
            "no_evidence, direct, retrieve_then_read, oracle)",
        ),
        (
            {"sample_id": "s9"},
            "sample_id",
            "(sample_id, method) ('s9', 'retrieve_then_read') is not in toy.per_sample_metrics.csv",
        ),
        (
            {"model_name": "m2"},
            "model_name",
            "'m2' here but 'm1' in toy.per_sample_metrics.csv for ('s1', 'retrieve_then_read')",
        ),
    ],
)
def test_a_bad_reply_line_is_one_line_and_stores_nothing(capsys, db, tmp_path, bad, field, reason):
    replies = [_reply(method=m) for m in METHODS]
    replies[2] = {**replies[2], **bad}
    files = _toy_run(tmp_path / "in", "toy", replies=replies)
    err = refused(capsys, db, "import", "results", "--format", "oncu-release", *files)
    assert err == f"error: {files[2]}: record 3: field '{field}': {reason}"


def test_a_reply_listed_twice_is_refused(capsys, db, tmp_path):
    replies = [_reply(method=m) for m in METHODS] + [_reply(method="oracle")]
    files = _toy_run(tmp_path / "in", "toy", replies=replies)
    err = refused(capsys, db, "import", "results", "--format", "oncu-release", *files)
    assert err == (
        f"error: {files[2]}: record 5: field 'sample_id': (sample_id, method) "
        "('s1', 'oracle') listed twice: first in record 4"
    )


def test_several_runs_with_name_are_refused(capsys, db, tmp_path):
    a = _toy_run(tmp_path / "in", "a")
    b = _toy_run(tmp_path / "in", "b")
    err = refused(
        capsys, db, "import", "results", "--format", "oncu-release", *a, *b, "--name", "x"
    )
    assert err.startswith("error: --name names one import, but the files hold 2 runs (a, b)")


# ---------------------------------------------------------------------------- rerun refused
def test_a_rerun_of_an_instance_without_text_is_refused(tmp_path):
    files = _toy_run(tmp_path / "in", "toy")
    store = Store(tmp_path / "s.duckdb")
    import_results(store, group_release_files(files)[0])
    before = len(store.runs_frame(live=False))
    with pytest.raises(ValueError) as err:
        rerun(store, RerunRequest("toy", "s1", "toy", "retrieved", "remove", "p0001"))
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(
        "cannot rerun s1: the store holds no question or passage text for it "
        "(imported from oncu-release results, which keeps ids and answers "
        "only)"
    )
    assert len(store.runs_frame(live=False)) == before  # no companion run was made


# ---------------------------------------------------------------------------- the real release
@pytest.fixture(scope="module")
def hotpot(tmp_path_factory):
    csv_path = shared_fixture(RELEASE_HOTPOTQA)
    files = [
        csv_path.with_name(f"{HOTPOT}.{k}")
        for k in ("per_sample_metrics.csv", "parsed_predictions.jsonl", "raw_model_responses.jsonl")
    ]
    store = Store(tmp_path_factory.mktemp("rel") / "r.duckdb")
    (group,) = group_release_files(files[::-1])
    res = import_results(store, group)
    return store, res, files


def test_release_import_keeps_every_reply_and_explanation(hotpot):
    store, res, files = hotpot
    assert res.runs == (HOTPOT,) and res.n_rows == 800 and res.n_replies == 800
    # 621 of the 800 parsed predictions carry a non-empty explanation (counted in the file)
    assert res.n_explained == 621
    preds = store.instance_predictions([HOTPOT], LALELI_ID)
    direct = preds[preds["condition"] == "full_context"].iloc[0]
    assert direct["explanation"] == LALELI
    first = [json.loads(line) for line in files[2].read_text(encoding="utf-8").splitlines()]
    mine = {(r["sample_id"], r["method"]): r["raw_response"] for r in first}
    assert direct["raw_response"] == mine[(LALELI_ID, "direct")]
    check = store.run_row(HOTPOT)["options"]["parse_check"]
    assert (check["n_rows"], check["n_replies"]) == (800, 800)
    with store.connect(read_only=True) as con:
        metas = [
            m
            for (m,) in con.execute(
                "SELECT meta FROM predictions WHERE run_id = ?", [HOTPOT]
            ).fetchall()
        ]
    assert len(metas) == 800
    assert check["n_differs"] == sum(bool(json.loads(m)["release"]["parse_differs"]) for m in metas)


def test_release_scores_are_the_release_values(hotpot):
    """Answers and cited ids are the metrics CSV's: the sample relaxed F1 of the README."""
    store, _, files = hotpot
    with files[0].open(encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    cited = {(r["sample_id"], r["method"]): r["predicted_evidence_ids"] for r in rows}
    preds = store.instance_predictions([HOTPOT], LALELI_ID).to_dict("records")
    back = {
        "full_context": "direct",
        "retrieved": "retrieve_then_read",
        "oracle": "oracle",
        "no_evidence": "no_evidence",
    }
    for p in preds:
        assert ";".join(p["cited_ids"]) == cited[(LALELI_ID, back[p["condition"]])]


def test_release_folder_copy_imports_the_same(tmp_path, hotpot):
    """The run's results/ folder (bare names) gives the same run as the prefixed files."""
    _, res, files = hotpot
    folder = tmp_path / HOTPOT / "results"
    folder.mkdir(parents=True)
    for f in files:
        shutil.copy(f, folder / f.name.removeprefix(HOTPOT + "."))
    store = Store(tmp_path / "s.duckdb")
    again = import_results(store, folder)
    assert again.runs == (HOTPOT,)
    assert (again.n_explained, again.n_replies, again.parse_check) == (
        res.n_explained,
        res.n_replies,
        res.parse_check,
    )


def test_failure_browser_rows_carry_the_released_explanation(hotpot):
    """The retrieved failure of the Apple Remote question lists its released explanation."""
    store, _, _ = hotpot
    rows, _ = store.failure_page(
        FailureFilter(runs=(HOTPOT,), conditions=("retrieved",), text="Siri Remote"), 0, 50
    )
    (hit,) = rows[rows["instance_id"] == "hotpotqa_5adddccd5542997dc7907069"].to_dict("records")
    assert hit["outcome"] == "wrong" and hit["answer"] == "Siri Remote"
    # hand-read from the fixture's parsed_predictions.jsonl, line 15
    assert hit["explanation"] == (
        "The Siri Remote is designed specifically to work with the always-on Siri capable Apple "
        "TV, which was originally interacted with by the Apple Remote."
    )


def test_a_retrieved_reply_citing_an_id_the_release_dropped_is_explained(hotpot):
    """The reply cites p0002; the release kept no id (p0002 was not among the retrieved
    chunks), and the release does not say what was shown, so this tool keeps it."""
    store, _, _ = hotpot
    preds = store.instance_predictions([HOTPOT], "hotpotqa_5adddccd5542997dc7907069")
    (meta,) = preds.loc[preds["condition"] == "retrieved", "meta"]
    parse = release_parse(meta)
    assert parse["differs"] == ["evidence_ids"]
    rows = {r["field"]: (r["release"], r["this tool"]) for r in parse["rows"]}
    assert rows["evidence ids"] == ("(none)", "p0002")
    assert parse["note"].startswith("The release does not record which passages this call showed")
    (oracle,) = preds.loc[preds["condition"] == "oracle", "meta"]
    assert release_parse(oracle)["note"] == ""  # the oracle's shown ids are known
