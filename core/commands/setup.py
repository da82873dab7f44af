"""``python -m core setup``: install the system packages the product uses, when missing.

Static figure export (kaleido) and the browser tests drive Debian's ``chromium``. The README's
commands call this after ``pip install`` so a fresh machine gets it; it is a no-op once present.
Without root or ``apt-get`` it says what to install and exits 0: the dashboard still works,
only static export and the browser tests need Chromium (they skip with that reason).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

from core.commands import Groups

__all__ = ["CHROMIUM", "chromium_path", "register"]

#: Where Debian's package puts the browser (kaleido and Playwright are pointed at it).
CHROMIUM = "/usr/bin/chromium"


def chromium_path() -> str | None:
    """Path of a usable Chromium binary, or None."""
    if os.path.exists(CHROMIUM):
        return CHROMIUM
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _apt(*args: str) -> int:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], env=env, stdout=subprocess.DEVNULL).returncode


def _cmd_setup(args: argparse.Namespace) -> int:
    found = chromium_path()
    if found:
        print(f"setup: chromium present ({found})")
        return 0
    can_apt = shutil.which("apt-get") is not None and os.geteuid() == 0
    if not can_apt:
        print(
            "setup: chromium is missing and cannot be installed here (needs root and apt-get); "
            "install your distribution's chromium for static figure export and browser tests",
            file=sys.stderr,
        )
        return 0
    print("setup: installing chromium (apt-get) for figure export and browser tests ...")
    if _apt("update", "-q") != 0 or _apt("install", "-y", "-q", "chromium") != 0:
        print("error: apt-get could not install chromium", file=sys.stderr)
        return 1
    print(f"setup: chromium installed ({chromium_path()})")
    return 0


def register(groups: Groups) -> None:
    """Add ``setup``."""
    p = groups.top.add_parser(
        "setup", help="install missing system packages (Debian chromium for export and tests)"
    )
    p.set_defaults(handler=_cmd_setup)
