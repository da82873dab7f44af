"""Figures and tables by name: one registry that the dashboard pages and ``export`` share.

A figure is a function ``(store, selection) -> (plotly Figure, DataFrame)``: the figure as the
page shows it and the data behind it (the CSV a user downloads). A table is a function
``(store, selection) -> DataFrame``. Method areas register theirs in their own module
(``core/figures/<area>.py``) with :func:`register_figure` / :func:`register_table`;
:data:`AREAS` lists the modules :func:`load_all` imports. Nothing here imports streamlit.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AREAS",
    "FigureSpec",
    "Selection",
    "TableSpec",
    "figure_names",
    "get_figure",
    "get_table",
    "load_all",
    "register_figure",
    "register_table",
    "table_names",
]

#: Modules under ``core.figures`` that register figures/tables (imported by :func:`load_all`).
AREAS = ("oncu", "retrieval", "cuer", "dolce", "fanin")


@dataclass(frozen=True, slots=True)
class Selection:
    """What the user selected: the same object for a page and for ``export``.

    Attributes:
        dataset: dataset name, or None for every dataset of the selected runs.
        runs: run ids (several runs are shown side by side, paired by instance).
        score_field: answer score the view uses (``f1_relaxed`` by default).
        filters: metadata cell -> allowed values (e.g. ``{"reasoning_type": ["multi_hop"]}``).
        options: view-specific settings (thresholds, top-k, ...), JSON-serialisable.
    """

    dataset: str | None = None
    runs: tuple[str, ...] = ()
    score_field: str = "f1_relaxed"
    filters: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FigureSpec:
    """A registered figure.

    Attributes:
        name: registry name (``export figure NAME``).
        title: human title.
        description: what the figure shows and how to read it (shown as the page tooltip).
        reference: the SPEC / paper section the numbers come from.
        build: ``(store, selection) -> (go.Figure, pd.DataFrame)``.
    """

    name: str
    title: str
    description: str
    reference: str
    build: Callable[..., tuple[Any, Any]]


@dataclass(frozen=True, slots=True)
class TableSpec:
    """A registered table (same fields as :class:`FigureSpec`; ``build`` returns a DataFrame)."""

    name: str
    title: str
    description: str
    reference: str
    build: Callable[..., Any]


_FIGURES: dict[str, FigureSpec] = {}
_TABLES: dict[str, TableSpec] = {}


def register_figure(
    name: str, *, title: str, description: str, reference: str
) -> Callable[[Callable[..., tuple[Any, Any]]], Callable[..., tuple[Any, Any]]]:
    """Decorator: register a figure builder under ``name`` (names are unique)."""

    def deco(fn: Callable[..., tuple[Any, Any]]) -> Callable[..., tuple[Any, Any]]:
        if name in _FIGURES and _FIGURES[name].build is not fn:
            raise ValueError(f"figure {name!r} is registered twice")
        _FIGURES[name] = FigureSpec(name, title, description, reference, fn)
        return fn

    return deco


def register_table(
    name: str, *, title: str, description: str, reference: str
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator: register a table builder under ``name`` (names are unique)."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        if name in _TABLES and _TABLES[name].build is not fn:
            raise ValueError(f"table {name!r} is registered twice")
        _TABLES[name] = TableSpec(name, title, description, reference, fn)
        return fn

    return deco


def load_all() -> None:
    """Import every area module that exists, so all figures and tables are registered."""
    for area in AREAS:
        try:
            importlib.import_module(f"core.figures.{area}")
        except ModuleNotFoundError as exc:
            if exc.name != f"core.figures.{area}":
                raise


def figure_names() -> list[str]:
    """Registered figure names, sorted."""
    load_all()
    return sorted(_FIGURES)


def table_names() -> list[str]:
    """Registered table names, sorted."""
    load_all()
    return sorted(_TABLES)


def get_figure(name: str) -> FigureSpec:
    """The figure registered as ``name``; ValueError naming the allowed ones otherwise."""
    load_all()
    if name not in _FIGURES:
        raise ValueError(f"unknown figure {name!r}; choose one of: {', '.join(sorted(_FIGURES))}")
    return _FIGURES[name]


def get_table(name: str) -> TableSpec:
    """The table registered as ``name``; ValueError naming the allowed ones otherwise."""
    load_all()
    if name not in _TABLES:
        raise ValueError(f"unknown table {name!r}; choose one of: {', '.join(sorted(_TABLES))}")
    return _TABLES[name]
