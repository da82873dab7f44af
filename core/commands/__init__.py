"""CLI command groups, one module per area, each owning its handlers and its argparse part.

Every module here exposes ``register(groups: Groups) -> None`` and adds its commands to the
groups it needs; :func:`core.cli.build_parser` calls them in :data:`MODULES` order. Handlers
import heavy modules inside the function so ``python -m core --help`` stays fast.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

__all__ = ["Groups", "MODULES", "split_csv"]

#: Command modules, registered in this order (``core.commands.<name>``).
MODULES = (
    "reports", "engine", "interventions", "dolce", "coverage", "crux_judge", "export", "serve",
    "setup",
)


@dataclass(frozen=True, slots=True)
class Groups:
    """The subparser groups a command module may add to.

    Attributes:
        top: top-level commands (``python -m core NAME``).
        import_: ``python -m core import NAME`` (``dataset`` is built in).
        report: ``python -m core report NAME`` (each prints tables, ``--json`` for machines).
        export: ``python -m core export NAME`` (figures and tables for papers).
    """

    top: argparse._SubParsersAction
    import_: argparse._SubParsersAction
    report: argparse._SubParsersAction
    export: argparse._SubParsersAction


def split_csv(text: str | None) -> list[str]:
    """The non-blank, stripped items of a comma-separated option (``None``: none)."""
    return [t.strip() for t in str(text or "").split(",") if t.strip()]
