"""Benchmark: every registered figure exported on the demo store (issue 19 item 6).

Bound (``bench/run_all.py``): **no registered figure takes 30 s or more** to export. The
store is the demo (``core.execution.runs.build_demo``: the embedded reader on controlled-200) plus a
DOLCE probe run (4 instances) and a CUE-R run (hard replacements) of the same reader, so the
DOLCE and CUE-R figures have data. Each figure is built for the first of a few selections that
gives it data (the dataset, the probe run, the CUE-R run) and written as PDF through
:func:`core.export.render.export_figure` at the ``acl-column`` preset, as ``export figure ...
--preset acl-column --out F.pdf`` does; Chromium is started before the clock (a running
dashboard or a second export has it). Each repeat times every figure; the figure reported is
the slowest figure's time per repeat (median over repeats), with the slowest figure named.

Usage: ``python bench/bench_export.py [--repeats 3]``; exit status 1 when the bound is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from run_all import figure, print_figures  # noqa: E402

from core.backends import make_backend  # noqa: E402
from core.execution.runs import build_demo, run_interventions, run_probes  # noqa: E402
from core.export.render import export_figure, preset_settings, start_renderer  # noqa: E402
from core.selection import Selection  # noqa: E402
from core.store import Store  # noqa: E402

SCRIPT = Path(__file__).name
BOUND_S = 30.0
SELECTIONS = (
    Selection(dataset="controlled-200"),
    Selection(runs=("probes",)),
    Selection(runs=("cuer",)),
)


def _store(path: Path) -> Store:
    store = Store(path)
    build_demo(store)
    reader = make_backend("embedded")
    run_probes(store, "controlled-200", reader, name="probes", limit=4)
    run_interventions(store, "controlled-200", reader, name="cuer", hardness=("hard",))
    return store


def _export_all(store: Store, out: Path) -> dict[str, float]:
    """Seconds of each figure's export (build + PDF), for its first selection with data."""
    from core.views.catalog import figure_names

    settings = preset_settings("acl-column")
    seconds = {}
    for name in figure_names():
        for sel in SELECTIONS:
            t = time.perf_counter()
            try:
                export_figure(store, name, sel, out / f"{name}.pdf", settings)
            except ValueError:
                continue  # no data for this selection: the next one
            seconds[name] = time.perf_counter() - t
            break
    return seconds


def results(repeats: int = 3) -> list[dict]:
    """The slowest registered figure's export time per repeat (bound 30 s)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(Path(tmp) / "demo.duckdb")
        start_renderer()
        worst, names, total, counts = [], [], [], []
        for _ in range(repeats):
            seconds = _export_all(store, Path(tmp))
            slowest = max(seconds, key=seconds.get)
            worst.append(seconds[slowest])
            names.append(slowest)
            total.append(sum(seconds.values()))
            counts.append(len(seconds))
    print(
        f"export: {counts[0]} figures with data; slowest per repeat: "
        + ", ".join(f"{n} {s:.2f} s" for n, s in zip(names, worst, strict=True))
    )
    slowest = max(set(names), key=names.count)
    return [
        figure(
            f"slowest registered figure export, demo store, PDF at acl-column ({slowest})",
            worst,
            "s",
            SCRIPT,
            bound=BOUND_S,
        ),
        figure(
            f"all {counts[0]} registered figures with data exported, one after another",
            total,
            "s",
            SCRIPT,
        ),
    ]


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when the bound is missed."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    figs = results(ap.parse_args(argv).repeats)
    print_figures(figs)
    return 0 if all(f["ok"] for f in figs) else 1


if __name__ == "__main__":
    raise SystemExit(main())
