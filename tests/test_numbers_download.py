"""The sidebar's "Download numbers (.tex)" (issue 39 item 4): the command's files for a selection.

``screens.parts.exports.numbers_files`` makes what ``python -m core export numbers`` writes (the
.tex
macros and the .json sidecar); the files must be the command's own for the same store and
runs, the time they were written aside. The sidebar offers both buttons on every page.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
from conftest import ROOT, demo_into

from core.store import Store
from screens.parts.exports import numbers_files

_RUN = "demo-embedded"


def _timeless(tex: str) -> str:
    """The .tex without its time of writing (the header's ``on <UTC time>``)."""
    return re.sub(r" on \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ", " on TIME ", tex)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return demo_into(Store(tmp_path_factory.mktemp("numbers") / "store.duckdb"))


@pytest.mark.parametrize("runs", [None, [_RUN]], ids=["every-run", "chosen-run"])
def test_the_download_is_the_commands_output(demo, tmp_path, runs):
    out = tmp_path / "numbers.tex"
    cmd = [
        sys.executable,
        "-m",
        "core",
        "export",
        "numbers",
        "--db",
        str(demo.path),
        "--out",
        str(out),
    ] + (["--runs", ",".join(runs)] if runs else [])
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, timeout=300)
    got = numbers_files(demo, runs, "f1_relaxed")
    tex = got["tex"].decode()
    assert "\\newcommand{" in tex
    assert _timeless(tex) == _timeless(out.read_text(encoding="utf-8"))
    mine = json.loads(got["json"])
    cli = json.loads(out.with_suffix(".json").read_text(encoding="utf-8"))
    assert mine.pop("written_at") and cli.pop("written_at")
    assert mine == cli
    assert got["json"].decode().endswith("}\n")


def test_no_numbers_is_the_commands_refusal(demo):
    with pytest.raises(ValueError, match="no number to export"):
        numbers_files(demo, [], "f1_relaxed")


def test_the_sidebar_offers_the_numbers(demo, monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("EVIDENCE_DB", str(demo.path))
    monkeypatch.setenv("EVIDENCE_NO_DEMO", "1")
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [e.proto.label for e in at.get("download_button")]
    assert "Download numbers (.tex)" in labels and "JSON" in labels
