"""``python -m core setup``: install the system packages the product uses, when missing.

Static figure export (kaleido) and the browser tests drive Debian's ``chromium``; every export
sets the font family :data:`core.export.render.FONT_FAMILY` (Liberation Serif, Debian
``fonts-liberation``), which Chromium embeds in PDFs; the export tests read PDFs with
``pdfinfo`` / ``pdffonts`` (``poppler-utils``). The README's commands call this after ``pip
install`` so a fresh machine gets them; it is a no-op once present. Without root or ``apt-get``
it says what to install and exits 0: the dashboard still works, only static export and the
browser tests need Chromium (they skip with that reason).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from collections.abc import Callable

from core.commands import Groups

__all__ = ["CHROMIUM", "FONT_FILE", "PACKAGES", "chromium_path", "register"]

#: Where Debian's package puts the browser (kaleido and Playwright are pointed at it).
CHROMIUM = "/usr/bin/chromium"
#: The regular face of the export font family (Debian ``fonts-liberation``).
FONT_FILE = "/usr/share/fonts/truetype/liberation/LiberationSerif-Regular.ttf"


def chromium_path() -> str | None:
    """Path of a usable Chromium binary, or None."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _font_path() -> str | None:
    """Path of the export font (Liberation Serif), or None."""
    if os.path.exists(FONT_FILE):
        return FONT_FILE
    if shutil.which("fc-match") is None:
        return None
    found = subprocess.run(
        ["fc-match", "-f", "%{family}|%{file}", "Liberation Serif"], capture_output=True, text=True
    ).stdout
    family, _, path = found.partition("|")
    return path if "Liberation Serif" in family else None


#: Debian packages: (package, what it is for, how to find it installed).
PACKAGES: tuple[tuple[str, str, Callable[[], str | None]], ...] = (
    ("chromium", "figure export and browser tests", chromium_path),
    ("fonts-liberation", "the export font, Liberation Serif", _font_path),
    ("poppler-utils", "the export tests (pdfinfo, pdffonts)", lambda: shutil.which("pdfinfo")),
    (
        "texlive-latex-base",
        "pdflatex, to compile exported LaTeX in the tests",
        lambda: shutil.which("pdflatex"),
    ),
    (
        "texlive-latex-recommended",
        "booktabs, for the exported LaTeX tables",
        lambda: _kpse("booktabs.sty"),
    ),
)


def _kpse(name: str) -> str | None:
    """Where TeX finds ``name`` (``kpsewhich``), or None."""
    if shutil.which("kpsewhich") is None:
        return None
    found = subprocess.run(["kpsewhich", name], capture_output=True, text=True).stdout.strip()
    return found or None


def _apt(*args: str) -> int:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], env=env, stdout=subprocess.DEVNULL).returncode


def _cmd_setup(args: argparse.Namespace) -> int:
    missing = []
    for name, purpose, find in PACKAGES:
        found = find()
        if found:
            print(f"setup: {name} present ({found})")
        else:
            missing.append((name, purpose, find))
    if not missing:
        return 0
    names = " ".join(name for name, _, _ in missing)
    can_apt = shutil.which("apt-get") is not None and os.geteuid() == 0
    if not can_apt:
        print(
            f"setup: missing and cannot be installed here (needs root and apt-get): {names}; "
            "install your distribution's packages for static figure export and its tests",
            file=sys.stderr,
        )
        return 0
    for name, purpose, _ in missing:
        print(f"setup: installing {name} (apt-get) for {purpose} ...")
    if _apt("update", "-q") != 0 or _apt("install", "-y", "-q", *names.split()) != 0:
        print(f"error: apt-get could not install {names}", file=sys.stderr)
        return 1
    for name, _, find in missing:
        print(f"setup: {name} installed ({find()})")
    return 0


def register(groups: Groups) -> None:
    """Add ``setup``."""
    p = groups.top.add_parser(
        "setup",
        help="install missing system packages (Debian chromium, fonts-liberation, "
        "poppler-utils, texlive-latex-base and -recommended for export and its tests)",
    )
    p.set_defaults(handler=_cmd_setup)
