"""The README's commands are the ones CI runs; the layout is the product shape of SPEC §1."""

from __future__ import annotations

import re

from conftest import ROOT


def _readme_commands() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    blocks = {}
    for label in ("Run", "Test"):
        m = re.search(rf"^{label} \(.*?```bash\n(.+?)\n```", text, re.S | re.M)
        assert m, f"README has no '{label} (...)' section with a bash block"
        blocks[label] = m.group(1).strip()
    return blocks


def test_ci_runs_the_readme_test_command_and_nothing_else():
    cmds = _readme_commands()
    ci_lines = [
        line
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert ci_lines == [cmds["Test"]]
    assert "pytest" in cmds["Test"] and "requirements.txt" in cmds["Test"]


def test_layout_is_the_product_shape():
    for name in (
        "app.py",
        "screens",
        "core",
        "data",
        "assets",
        "tests",
        "requirements.txt",
        "README.md",
    ):
        assert (ROOT / name).exists(), name
    assert (ROOT / "core" / "__main__.py").exists()


def test_readme_run_command_serves_the_dashboard_and_every_page_is_listed():
    cmds = _readme_commands()
    assert cmds["Run"].endswith("python -m core serve")
    assert cmds["Run"].split(" && ")[:3] == cmds["Test"].split(" && ")[:3]  # same install
    text = (ROOT / "README.md").read_text()
    app = (ROOT / "app.py").read_text()
    for title in re.findall(r'\("screens/\w+\.py", "([^"]+)"', app):
        assert f"| {title} |" in text, f"README's page table lacks '{title}'"


def test_requirements_are_pinned_and_torch_is_the_cpu_wheel():
    reqs = [
        line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert all(re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][\w.+]*", r) for r in reqs), reqs
    assert "torch==2.13.0" in reqs
