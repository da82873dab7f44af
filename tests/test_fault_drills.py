"""Fault and bad-input drills (issue 9): the product under kill -9, a full disk, a misbehaving
model server, a reader beside a writer, garbage replies and hostile uploads.

Real parts only: CLI subprocesses killed with SIGKILL; a full disk as a real size-limited
``tmpfs`` mounted over the store's folder (root only, else skipped with the reason) and as a
file-size limit on the writing process (what a full disk looks like to DuckDB, always run); the
``ollama`` and ``openai`` backends (the real client libraries) against ``tests/model_stub.py``
in every fault mode; Streamlit's ``AppTest`` and real ``streamlit`` servers.

Drilled elsewhere, not repeated here: kill -9 during a *run* (twice, then a rerun that makes
every call exactly once) in ``test_crash_resume.py``; a run beside a read-only reader process in
``test_concurrent_access.py``; importer fuzzing in ``test_fuzz_importers.py``; the answer
parser on arbitrary text and JSON-shaped replies in ``test_parsing.py``; f-string SQL in
``test_sql_safety.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

import httpx
import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from model_stub import GARBAGE_REPLIES, ModelStub

from core.backends import make_backend
from core.commands.serve import streamlit_command
from core.datasets.controlled import build_controlled
from core.datasets.importers import read_dataset
from core.execution.jobs import save_upload
from core.execution.runs import run_conditions
from core.scoring.parsing import ParsedAnswer, parse_reply
from core.store import Store

N_JSONL = 3000  # records of the import drills: a few seconds of parsing and writing
_ALIASES = {"answer", "final_answer", "finalanswer"}  # core.scoring.parsing's names for the answer


def _cli(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "core", *args], cwd=ROOT, capture_output=True, text=True, **kw
    )


def _datasets(db) -> dict[str, int]:
    out = _cli("datasets", "--db", str(db), "--json")
    assert out.returncode == 0, out.stderr
    return {d["name"]: d["n_instances"] for d in json.loads(out.stdout)}


def _write_jsonl(path, n: int, noise: int = 0) -> None:
    """``n`` records of 9 passages; ``noise`` hex characters per filler defeat compression."""
    with open(path, "w") as f:
        for i in range(n):
            passages = [
                {"text": f"Record {i} fact: the code of item {i} is K{i:05d}.", "is_gold": True},
                *(
                    {"text": f"Filler {j} of item {i}: {os.urandom(noise // 2).hex()}."}
                    for j in range(8)
                ),
            ]
            rec = {
                "id": f"q{i}",
                "question": f"What is the code of item {i}?",
                "answer": f"K{i:05d}",
                "passages": passages,
            }
            f.write(json.dumps(rec) + "\n")


@pytest.fixture(scope="module")
def base_store(tmp_path_factory) -> Path:
    """A store holding controlled-200 as dataset ``before``; drills work on copies of it."""
    path = tmp_path_factory.mktemp("base") / "base.duckdb"
    ds = dataclasses.replace(build_controlled("controlled-200", seed=42), name="before")
    Store(path).write_dataset(ds)
    assert not Path(f"{path}.wal").exists()  # one self-contained file to copy
    return path


def _copy(base: Path, folder: Path) -> Path:
    db = folder / "s.duckdb"
    shutil.copyfile(base, db)
    return db


@pytest.fixture(scope="module")
def noisy_jsonl(tmp_path_factory) -> Path:
    """About 24 MB of incompressible records: more than a nearly full disk holds."""
    path = tmp_path_factory.mktemp("src") / "noisy.jsonl"
    _write_jsonl(path, N_JSONL, noise=1000)
    return path


@pytest.fixture
def small_disk(tmp_path):
    """``mount(size)``: a fresh tmpfs of ``size`` (``"9000k"``) at ``tmp_path/disk``; unmounted
    afterwards. Skips when mounting is not allowed (not root, no CAP_SYS_ADMIN)."""
    where = tmp_path / "disk"
    where.mkdir()
    mounted = []

    def mount(size: str) -> Path:
        if os.geteuid() != 0:
            pytest.skip("mounting a tmpfs needs root; the file-size-limit drill covers this")
        out = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
            capture_output=True,
            text=True,
        )
        if out.returncode != 0:
            pytest.skip(
                f"cannot mount a tmpfs here ({out.stderr.strip()}); "
                "the file-size-limit drill covers a full disk"
            )
        mounted.append(where)
        return where

    yield mount
    for m in mounted:
        subprocess.run(["umount", "-l", str(m)], check=False)


def _grow(disk: Path) -> None:
    """Free space: the tmpfs grows to 256 MB."""
    subprocess.run(["mount", "-o", "remount,size=256m", str(disk)], check=True)


def _headroom(base: Path, extra: int) -> str:
    return f"{(os.path.getsize(base) + extra) // 1024}k"


def _one_line_disk_full(out: subprocess.CompletedProcess, db: Path) -> None:
    assert out.returncode == 1, (out.returncode, out.stderr)
    lines = [ln for ln in out.stderr.splitlines() if ln.strip() and not ln.startswith("[")]
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    assert lines[0].startswith(f"error: store {db}: ") and "disk full" in lines[0], lines[0]


# ----------------------------------------------------------------- kill -9 during an import


@pytest.mark.slow
def test_kill_9_during_an_import_leaves_all_or_nothing_then_import_completes(base_store, tmp_path):
    db, src = _copy(base_store, tmp_path), tmp_path / "big.jsonl"
    _write_jsonl(src, N_JSONL)
    cmd = [
        sys.executable,
        "-m",
        "core",
        "import",
        "dataset",
        "--format",
        "jsonl",
        str(src),
        "--name",
        "big",
        "--db",
        str(db),
    ]
    # Kill at fixed shares of how long the whole import takes on this machine (timed on a copy
    # of the store), so the kills land while it runs on a fast machine and on a slow one.
    scratch = tmp_path / "timing"
    scratch.mkdir()
    timed = [*cmd[:-1], str(_copy(base_store, scratch))]
    t0 = time.monotonic()
    assert subprocess.run(timed, cwd=ROOT, capture_output=True).returncode == 0
    whole = time.monotonic() - t0
    killed = 0
    for delay in (0.5 * whole, 0.7 * whole, 0.85 * whole, 0.95 * whole):
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed += 1
        proc.wait(timeout=60)
        seen = _datasets(db)  # the store opens after every kill
        assert seen["before"] == 200
        assert seen.get("big") in (None, N_JSONL), seen  # never a partial dataset
        if "big" in seen:
            break
    assert killed >= 1, f"the import finished before any kill ({whole:.2f} s in all)"
    if "big" not in _datasets(db):
        done = _cli(
            "import", "dataset", "--format", "jsonl", str(src), "--name", "big", "--db", str(db)
        )
        assert done.returncode == 0, done.stderr
    assert _datasets(db) == {"before": 200, "big": N_JSONL}
    assert len(Store(db).instances_frame("big")) == N_JSONL  # each record once


@pytest.mark.slow
def test_an_import_with_half_a_surrogate_pair_is_refused_in_one_line(base_store, tmp_path):
    db, src = _copy(base_store, tmp_path), tmp_path / "emoji.jsonl"
    good = {
        "id": "q1",
        "question": "Which sign is \U0001f600?",
        "answer": "K1",
        "passages": [{"text": "The sign \U0001f600 is K1.", "is_gold": True}],
    }
    bad = dict(good, id="q2", answer="K\ud83d")  # json.dumps writes the escape "\ud83d"
    src.write_text(json.dumps(good) + "\n")
    assert read_dataset(src, "jsonl", "ok").n_read == 1  # a whole pair is an emoji: fine
    src.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    out = _cli("import", "dataset", "--format", "jsonl", str(src), "--name", "s", "--db", str(db))
    assert out.returncode == 1 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stderr.startswith(f"error: {src}: record 2: field 'answer': "), out.stderr
    assert "surrogate" in out.stderr
    assert _datasets(db) == {"before": 200}


# ------------------------------------------------------------------------------ disk full


@pytest.mark.slow
def test_an_import_onto_a_full_disk_fails_in_one_line_then_succeeds_once_there_is_room(
    base_store, noisy_jsonl, small_disk
):
    disk = small_disk(_headroom(base_store, 1_500_000))  # room for a little, not the import
    db = _copy(base_store, disk)
    args = (
        "import",
        "dataset",
        "--format",
        "jsonl",
        str(noisy_jsonl),
        "--name",
        "big",
        "--db",
        str(db),
    )
    _one_line_disk_full(_cli(*args), db)
    assert _datasets(db) == {"before": 200}  # opens, unchanged, on the still-full disk
    _grow(disk)
    assert _cli(*args).returncode == 0
    assert _datasets(db) == {"before": 200, "big": N_JSONL}


@pytest.mark.slow
def test_an_import_past_a_file_size_limit_fails_in_one_line_and_the_store_still_opens(
    base_store, noisy_jsonl, tmp_path
):
    db = _copy(base_store, tmp_path)
    limit = os.path.getsize(db) + 1_000_000  # room for a little, not for the new dataset

    def full_disk() -> None:  # in the child: writes past `limit` fail with EFBIG
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "core",
            "import",
            "dataset",
            "--format",
            "jsonl",
            str(noisy_jsonl),
            "--name",
            "big",
            "--db",
            str(db),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        preexec_fn=full_disk,
    )
    _one_line_disk_full(out, db)
    assert _datasets(db) == {"before": 200}


@pytest.mark.slow
def test_a_run_that_fills_the_disk_stops_in_one_line_and_resumes_once_there_is_room(
    base_store, small_disk
):
    disk = small_disk(_headroom(base_store, 1_000_000))
    db = _copy(base_store, disk)
    args = (
        "run",
        "--dataset",
        "before",
        "--backend",
        "embedded",
        "--name",
        "r",
        "--json",
        "--db",
        str(db),
    )
    _one_line_disk_full(_cli(*args), db)
    store = Store(db)
    row = store.run_row("r")
    assert row is None or row["status"] != "done"  # not reported as a finished run
    kept = store.prediction_rows("r")
    assert len(kept) < 800 and kept["f1_relaxed"].notna().all()  # whole batches only
    _grow(disk)
    again = _cli(*args)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary["status"] == "done" and summary["skipped_existing"] == len(kept)
    rows = store.prediction_rows("r")
    assert len(rows) == 800 and not rows.duplicated(["instance_id", "condition"]).any()
    assert rows["f1_relaxed"].notna().all()


# ------------------------------------------------------------- a misbehaving model server


@pytest.fixture(scope="module")
def three_template(tmp_path_factory) -> Path:
    """A store with three controlled instances (4K tokens), written once."""
    ds = build_controlled("controlled-200", seed=42, subset={"context_length": [4000]})
    ds = dataclasses.replace(ds, name="three", instances=ds.instances[:3])
    path = tmp_path_factory.mktemp("faults") / "three.duckdb"
    Store(path).write_dataset(ds)
    return path


@pytest.fixture
def three(three_template, tmp_path) -> Path:
    """A fresh copy of the three-instance store (an empty response cache: every call is sent)."""
    return _copy(three_template, tmp_path)


def _backend(kind: str, stub: ModelStub, **options):
    opts = {
        "backoff_s": 0.01,
        "max_backoff_s": 0.02,
        "timeout_s": 1.0,
        "connect_timeout_s": 1.0,
        **options,
    }
    if kind == "ollama":
        return make_backend("ollama", "stub-model", hosts=[stub.url], options=opts)
    return make_backend("openai", "stub-model", base_url=f"{stub.url}/v1", options=opts)


#: One chat in each fault mode, each error recognisable by its message.
_FAULTS = {
    "500": "HTTP 500 from",
    "stall": "timed out after 1s",
    "not-json": "is not JSON",
    "missing-fields": "lacks or mistypes field(s)",
    "close": "closed mid-response",
}
_CONDITIONS = ["oracle", "no_evidence", "full_context", "retrieved"]


def _chats(stub: ModelStub) -> int:
    return sum(p in ("/api/chat", "/v1/chat/completions") for p in stub.paths())


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ollama", "openai"])
def test_every_server_fault_lands_on_its_own_prediction_and_the_run_finishes(three, kind):
    store = Store(three)
    with ModelStub(stall_s=3.0) as stub:
        # 12 calls, one try each: 5 transport faults, 4 garbage replies, then 3 answered
        stub.queue_modes(*_FAULTS, *["garbage"] * len(GARBAGE_REPLIES))
        summary = run_conditions(
            store,
            "three",
            _backend(kind, stub, retries=1),
            _CONDITIONS,
            name=f"mix-{kind}",
            concurrency=1,
        )
        assert _chats(stub) == 12
    assert (summary.planned, summary.executed, summary.status) == (12, 12, "partial")
    assert (summary.errors, summary.parse_errors) == (5, 4)
    rows = store.prediction_rows(f"mix-{kind}")
    assert len(rows) == 12 and not rows.duplicated(["instance_id", "condition"]).any()
    failed = rows[rows["error"].notna()]
    for needle in _FAULTS.values():  # each fault on exactly one prediction, in one line
        assert failed["error"].str.contains(needle, regex=False).sum() == 1, (needle, failed)
    assert failed["error"].map(lambda e: "\n" not in e and stub.url in e).all()
    # errors, not answers: never also parse errors, no scores, no failure label
    assert failed["parse_error"].isna().all() and failed["f1_relaxed"].isna().all()
    assert failed["failure_label"].isna().all()
    garbled = rows[rows["error"].isna() & rows["parse_error"].notna()]
    # stored as received, half an emoji pair as U+FFFD (the store holds UTF-8 only)
    stored = {t.replace("\ud83d", "\ufffd") for t in GARBAGE_REPLIES}
    assert set(garbled["raw_response"]) == stored and (garbled["f1_relaxed"] == 0).all()
    answered = rows[rows["error"].isna() & rows["parse_error"].isna()]
    assert len(answered) == 3 and (answered["answer"] != "").all()
    # answers (parse errors included) are scored and stay in every denominator
    assert rows.loc[rows["error"].isna(), "f1_relaxed"].notna().all()
    run = store.run_row(f"mix-{kind}")
    assert (run["status"], run["n_done"], run["n_errors"]) == ("partial", 12, 5)

    # the server is back: a rerun makes the 5 failed calls again and nothing else
    with ModelStub() as stub:
        again = run_conditions(
            store,
            "three",
            _backend(kind, stub, retries=1),
            _CONDITIONS,
            name=f"mix-{kind}",
            concurrency=1,
        )
        assert _chats(stub) == 5
    assert (again.executed, again.skipped_existing, again.errors) == (5, 7, 0)
    rows = store.prediction_rows(f"mix-{kind}")
    assert len(rows) == 12 and rows["error"].isna().all()
    assert again.status == "done" and store.run_row(f"mix-{kind}")["status"] == "done"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ollama", "openai"])
@pytest.mark.parametrize("down", ["500", "gone"])
def test_a_server_down_for_the_whole_run_gives_a_failed_run_of_errors(three, kind, down):
    store = Store(three)
    with ModelStub(mode="500") as stub:
        backend = _backend(kind, stub, retries=2)
        if down == "gone":  # the server died before the run: nothing listens on its port
            stub.stop()
        summary = run_conditions(
            store, "three", backend, ["oracle", "no_evidence"], name=f"down-{kind}", concurrency=2
        )
        assert _chats(stub) == (6 if down == "500" else 0)
    assert (summary.planned, summary.executed, summary.errors, summary.status) == (
        6,
        6,
        6,
        "failed",
    )
    assert store.run_row(f"down-{kind}")["status"] == "failed"
    rows = store.prediction_rows(f"down-{kind}")
    assert len(rows) == 6 and rows["f1_relaxed"].isna().all()
    assert rows["parse_error"].isna().all()
    expect = "HTTP 500 from" if down == "500" else "cannot reach"
    assert rows["error"].str.contains(expect, regex=False).all(), rows["error"].tolist()
    assert rows["error"].str.contains(stub.url, regex=False).all()


@pytest.mark.slow
def test_a_busy_server_is_retried_within_the_call(three):
    store = Store(three)
    with ModelStub() as stub:
        stub.set_mode("503-once")
        summary = run_conditions(
            store, "three", _backend("ollama", stub, retries=2), ["oracle"], name="busy"
        )
        assert _chats(stub) == 4
    assert summary.errors == 0 and summary.executed == 3


# --------------------------------------------------- the dashboard beside a CLI run, one store


@pytest.mark.slow
def test_the_dashboard_renders_while_a_cli_run_writes_the_same_store(
    base_store, tmp_path, monkeypatch
):
    from streamlit.testing.v1 import AppTest

    db = _copy(base_store, tmp_path)
    monkeypatch.setenv("EVIDENCE_DB", str(db))

    def render(page: str) -> AppTest:
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.switch_page(page)
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        shown = " ".join(str(m.value) for m in (*at.error, *at.warning))
        assert "lock" not in shown.lower(), shown
        return at

    def live_run(at: AppTest) -> tuple[str, int] | None:
        frame = next(d.value for d in at.dataframe if "run_id" in d.value.columns)
        row = frame[frame["run_id"] == "live"]
        return None if row.empty else (row["status"].iloc[0], int(row["n_predictions"].iloc[0]))

    seen: list[tuple[str, int] | None] = []
    # slow answers until a render has seen the run half-way; then it may finish at full speed
    with ModelStub(latency_s=0.05) as stub:
        run = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "core",
                "run",
                "--dataset",
                "before",
                "--backend",
                "ollama",
                "--model",
                "stub-model",
                "--host",
                stub.url,
                "--conditions",
                "no_evidence,oracle",
                "--name",
                "live",
                "--json",
                "--db",
                str(db),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            while run.poll() is None:
                for page in ("screens/overview.py", "screens/conditions.py", "screens/runs.py"):
                    at = render(page)
                seen.append(live_run(at))
                if any(s and s[0] == "running" and 0 < s[1] < 400 for s in seen):
                    stub.latency_s = 0.0
            out, err = run.communicate(timeout=120)
        finally:
            if run.poll() is None:
                run.kill()
    assert run.returncode == 0, err
    assert "lock" not in err.lower()
    summary = json.loads(out)
    assert (summary["planned"], summary["errors"], summary["status"]) == (400, 0, "done")
    assert any(s and s[0] == "running" and 0 < s[1] < 400 for s in seen), seen
    assert live_run(render("screens/runs.py")) == ("done", 400)


# ------------------------------------------------------------------- garbage into the parser


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300).filter(lambda t: "{" not in t))
def test_a_reply_without_an_object_is_a_parse_error(text):
    got = parse_reply(text)
    assert got.answer == "" and got.parse_error in ("empty reply", "no JSON object found")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=8), c, max_size=3),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.text(max_size=12).filter(lambda k: k.strip().lower() not in _ALIASES), _JSON, max_size=5
    )
)
def test_an_object_without_an_answer_is_a_parse_error(obj):
    got = parse_reply(json.dumps(obj))
    assert (got.answer, got.parse_error) == ("", "missing field 'answer'")


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.none(),
        st.binary(max_size=200),
        st.integers(),
        st.floats(),
        _JSON,
        st.text(
            alphabet=st.sampled_from([*'{}[]":,\\ answer01', "\ud83d", "\udfff", "\x00"]),
            max_size=200,
        ),
    )
)
def test_the_parser_never_raises_on_any_value(value):
    got = parse_reply(value, known_ids=["p0001"])
    assert isinstance(got, ParsedAnswer) and isinstance(got.answer, str)
    assert got.confidence is None or 0.0 <= got.confidence <= 1.0
    assert got.parse_error is None or got.answer == ""


@pytest.mark.parametrize(
    "text",
    ["{" * 200_000, '{"answer": ' * 40_000 + "1" + "}" * 40_000, '{"' * 100_000],
    ids=["open-braces", "nested-too-deep", "unclosed-strings"],
)
def test_pathological_replies_are_parse_errors_in_bounded_time(text):
    t0 = time.monotonic()
    got = parse_reply(text)
    assert got.parse_error == "no JSON object found"
    assert time.monotonic() - t0 < 15


# ----------------------------------------------------------------- uploads and the bind address


@pytest.mark.parametrize(
    "name, saved",
    [
        ("../../etc/x.jsonl", "x.jsonl"),
        ("/etc/passwd", "passwd"),
        ("..\\..\\x.json", "x.json"),
        ("a/b/../../c.csv", "c.csv"),
        ("./.hidden", "hidden"),
        ("we ird\x00 näme.jsonl", "we_ird_n_me.jsonl"),
        ("~/x;rm -rf.json", "x_rm_-rf.json"),
    ],
)
def test_an_upload_is_written_only_inside_the_upload_folder(tmp_path, name, saved):
    folder = tmp_path / "data" / "uploads"
    path = save_upload(name, b"payload", folder=folder)
    assert path == folder / saved and path.read_bytes() == b"payload"
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file()) == [path]  # nothing else


@pytest.mark.parametrize("name", ["", ".", "..", "///", "../..", "._."])
def test_an_upload_name_with_nothing_usable_is_refused(tmp_path, name):
    with pytest.raises(ValueError, match="unusable file name"):
        save_upload(name, b"x", folder=tmp_path / "u")
    assert not any(tmp_path.rglob("*.*"))


def test_uploads_over_the_limit_or_empty_are_refused_and_long_names_are_cut(tmp_path):
    folder = tmp_path / "u"
    with pytest.raises(ValueError, match="11 bytes is over the 10-byte limit"):
        save_upload("big.jsonl", b"x" * 11, max_bytes=10, folder=folder)
    with pytest.raises(ValueError, match="empty upload"):
        save_upload("e.jsonl", b"", folder=folder)
    assert not folder.exists() or not any(folder.iterdir())
    path = save_upload("n" * 400 + ".jsonl", b"x", folder=folder)  # over the 255-byte limit
    assert path.parent == folder and path.name.endswith(".jsonl") and len(path.name) <= 120


def test_a_link_planted_in_the_upload_folder_is_replaced_not_written_through(tmp_path):
    folder, outside = tmp_path / "u", tmp_path / "outside.txt"
    folder.mkdir()
    outside.write_text("keep")
    (folder / "x.jsonl").symlink_to(outside)
    path = save_upload("x.jsonl", b"new", folder=folder)
    assert outside.read_text() == "keep"
    assert not path.is_symlink() and path.read_bytes() == b"new"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_upload_name_is_saved_inside_the_folder_or_refused(name):
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "u"
        try:
            path = save_upload(name, b"x", folder=folder)
        except ValueError as exc:
            assert "unusable file name" in str(exc)
            return
        assert path.parent == folder and path.read_bytes() == b"x"
        assert not path.name.startswith(".") and len(path.name) <= 120


def test_an_upload_onto_a_full_disk_is_a_value_error_that_leaves_nothing(small_disk):
    folder = small_disk("64k") / "uploads"
    with pytest.raises(ValueError, match=r"x\.jsonl: could not save the upload: No space left"):
        save_upload("x.jsonl", os.urandom(256 * 1024), folder=folder)
    assert list(folder.iterdir()) == []


def test_the_upload_limit_and_bind_address_are_configured():
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["address"] == "127.0.0.1"
    assert config["browser"]["gatherUsageStats"] is False
    # what Streamlit lets through (MB) is what save_upload accepts
    limit = inspect.signature(save_upload).parameters["max_bytes"].default
    assert config["server"]["maxUploadSize"] * 1024 * 1024 == limit
    argv = streamlit_command(8501)
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """Local addresses listening on TCP ``port`` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            addr, hexport = local.split(":")
            if state == "0A" and int(hexport, 16) == port:  # 0A: LISTEN
                raw = bytes.fromhex(addr)
                if width == 8:
                    found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
                else:  # four little-endian 32-bit words
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="needs Linux /proc/net/tcp")
def test_the_dashboard_listens_on_loopback_only(base_store, tmp_path):
    db = _copy(base_store, tmp_path)
    env = dict(os.environ, EVIDENCE_DB=str(db))
    serve_port, plain_port = _free_port(), _free_port()
    procs = [  # `core serve`, and a bare `streamlit run app.py` that only has config.toml
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "core",
                "serve",
                "--no-demo",
                "--port",
                str(serve_port),
                "--db",
                str(db),
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.port", str(plain_port)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        ),
    ]
    try:
        for port in (serve_port, plain_port):
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/_stcore/health").text == "ok":
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, f"no dashboard on port {port}"
                assert all(p.poll() is None for p in procs), "a dashboard process exited"
                time.sleep(0.3)
            assert _listening(port) == {"127.0.0.1"}
    finally:
        for p in procs:  # the whole session: `serve` runs streamlit as its child
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
            p.wait(timeout=30)
