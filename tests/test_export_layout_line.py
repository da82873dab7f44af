"""``export figure`` says in one line what the layout could not keep (issue 39 item 1).

At 400x260 px the calibration figure's legend needs more room than 60 % of the height: the
figure grows instead of squeezing its plot, and the command says so (the size it wrote and
what would keep the size), never a changed file in silence.
"""

from __future__ import annotations

import pytest
from conftest import demo_into

from core.cli import main
from core.store import Store

pytestmark = pytest.mark.slow


def test_a_figure_that_grows_says_so(tmp_path, capsys):
    db = tmp_path / "s.duckdb"
    demo_into(Store(db))
    out = tmp_path / "calibration.svg"
    assert (
        main(
            [
                "export",
                "figure",
                "calibration",
                "--dataset",
                "controlled-200",
                "--width",
                "400",
                "--height",
                "260",
                "--out",
                str(out),
                "--db",
                str(db),
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith(f"wrote {out} (svg, ")
    assert len(lines) == 2 and lines[1].startswith("calibration at 400x260 px: "), lines
    assert "so the figure is 400x" in lines[1] and "keeps the size" in lines[1]
    assert out.is_file()


def test_the_download_menu_keeps_the_same_line_for_the_page(tmp_path):
    """The dashboard's figure maker records the command's line (in the page's words) for the
    Download popover to show under the figure once the file is made."""
    from core.export.render import ExportSettings
    from core.selection import Selection
    from core.views.catalog import get_figure
    from screens.parts import exports

    store = demo_into(Store(tmp_path / "s.duckdb"))
    fig, _ = get_figure("calibration").build(store, Selection(dataset="controlled-200"))
    make = exports._figure_maker(
        fig, "svg", ExportSettings(width=400, height=260), None, "calibration", "tok"
    )
    assert make().lstrip().startswith(b"<svg")
    note = exports._NOTES.pop("tok")
    assert note.startswith("calibration at 400x260 px: ") and "--" not in note, note
    make = exports._figure_maker(fig, "svg", ExportSettings(), None, "calibration", "tok")
    make()
    assert "tok" not in exports._NOTES  # the default size fits on the demo: nothing to say
