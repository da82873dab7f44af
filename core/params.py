"""Declared parameters: one declaration per knob drives the CLI flag and the dashboard widget.

Retrievers, intervention operators, probe strategies and figure/table options declare each of
their parameters once as a :class:`Param` (type, default, choices, range, help, paper section).
:func:`add_argument` turns a declaration into an ``argparse`` flag; :func:`widget_spec` turns it
into the description of a dashboard widget, which ``screens/parts/widgets.py`` renders. Nothing here
imports streamlit.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CONCURRENCY",
    "LIMIT",
    "NUM_CTX",
    "SEED",
    "Param",
    "ParamInfo",
    "WidgetSpec",
    "add_argument",
    "add_arguments",
    "defaults",
    "widget_spec",
]


@dataclass(frozen=True, slots=True)
class Param:
    """Declaration of one parameter (UI widgets and CLI flags are built from it).

    Attributes:
        name: keyword name (the CLI flag is ``--name`` with ``_`` as ``-``).
        type: ``int``, ``float``, ``str`` or ``bool``.
        default: default value (None: optional, no value unless given).
        description: one line for help texts and tooltips.
        choices: allowed values, or None for any value of ``type``.
        minimum: smallest allowed value for numbers, or None.
        maximum: largest allowed value for numbers, or None.
        section: the paper / SPEC section the parameter comes from ("" when none).
        multiple: the value is a list of items (comma-separated on the command line, a
            multiselect in the dashboard); each item is checked against the declaration.
        validate: an extra check of a converted value (an item, for ``multiple``) that raises
            ValueError, for value sets that ``choices`` cannot list (``take-every-N``).
    """

    name: str
    type: type
    default: Any
    description: str
    choices: tuple[Any, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    section: str = ""
    multiple: bool = False
    validate: Callable[[Any], Any] | None = field(default=None, compare=False)

    @property
    def flag(self) -> str:
        """The command-line flag, e.g. ``--top-k`` for ``top_k``."""
        return "--" + self.name.replace("_", "-")

    @property
    def label(self) -> str:
        """A widget label: the name with spaces, capitalized (``Chunk size``)."""
        return self.name.replace("_", " ").capitalize()

    @property
    def help(self) -> str:
        """Help text: the description, the section and the default."""
        where = f" ({self.section})" if self.section else ""
        return f"{self.description}{where}{_default_text(self.default)}"

    def coerce(self, value: Any) -> Any:
        """Convert ``value`` to this parameter's type and check it.

        Args:
            value: a value from code, a widget or a command-line flag (for ``multiple``: a
                comma-separated string or an iterable of items).

        Returns:
            The converted value (a list for ``multiple``; None for an optional parameter
            given None).

        Raises:
            ValueError: the value cannot be converted or is out of range / not a choice; the
                message names the parameter.
        """
        if value is None and self.default is None:
            return None
        if not self.multiple:
            return self._item(value)
        if isinstance(value, str):
            items = value.split(",")
        elif isinstance(value, list | tuple | set | frozenset):
            items = list(value)
        else:  # one item given alone (``--option ks=5``), or a value of the wrong kind
            items = [value]
        items = [v.strip() if isinstance(v, str) else v for v in items]
        out = [self._item(v) for v in items if v != ""]
        if not out:
            raise ValueError(f"parameter {self.name!r} needs at least one value")
        return out

    def _item(self, value: Any) -> Any:
        try:
            if self.type is int and isinstance(value, float) and not value.is_integer():
                raise ValueError
            if self.type is bool and isinstance(value, str):
                low = value.strip().lower()
                if low not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                out: Any = low in ("true", "1", "yes")
            else:
                out = self.type(value)
        except (TypeError, ValueError):
            raise ValueError(
                f"parameter {self.name!r} expects {self.type.__name__}, got {value!r}"
            ) from None
        if self.choices is not None and out not in self.choices:
            allowed = ", ".join(map(str, self.choices))
            raise ValueError(f"parameter {self.name!r}: {out!r} is not one of {allowed}")
        if self.minimum is not None and out < self.minimum:
            raise ValueError(f"parameter {self.name!r} must be >= {self.minimum}, got {out!r}")
        if self.maximum is not None and out > self.maximum:
            raise ValueError(f"parameter {self.name!r} must be <= {self.maximum}, got {out!r}")
        if self.validate is not None:
            try:
                self.validate(out)
            except ValueError as exc:
                raise ValueError(f"parameter {self.name!r}: {exc}") from None
        return out

    def parse(self, text: str) -> Any:
        """``argparse`` type function: :meth:`coerce` with argparse's error type."""
        try:
            return self.coerce(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    def with_default(self, default: Any, description: str | None = None) -> Param:
        """A copy with another default (for a method whose published default differs)."""
        return dataclasses.replace(
            self, default=default, description=description or self.description
        )

    def many(self, default: Iterable[Any], description: str | None = None) -> Param:
        """The same knob as a list of values (``--k 3,5``), each item checked as declared."""
        return dataclasses.replace(
            self,
            default=tuple(default),
            description=description or self.description,
            multiple=True,
        )


#: The name retrieval code used before parameters were shared; the same class.
ParamInfo = Param

#: Execution knobs every run command and the Runs page share.
CONCURRENCY = Param("concurrency", int, 1, "parallel model calls", minimum=1)
NUM_CTX = Param(
    "num_ctx",
    int,
    None,
    "context window in tokens, fixed per run (Ollama default 32768)",
    minimum=1,
    maximum=10_000_000,
)
SEED = Param(
    "seed", int, 0, "generation seed (a 64-bit integer)", minimum=-(2**63), maximum=2**63 - 1
)  # what a server takes (Ollama, OpenAI: int64)
#: Work on the first N instances of a dataset only (None: all of them).
LIMIT = Param("limit", int, None, "only the first N instances", minimum=1)

_UNSET: Any = object()


def _default_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    return f"; default {value}"


def add_argument(
    parser: argparse.ArgumentParser | Any,
    param: Param,
    *,
    flag: str | None = None,
    default: Any = _UNSET,
    dest: str | None = None,
    help: str | None = None,
    raw: bool = False,
) -> None:
    """Add ``param`` to ``parser`` as a flag (choices, type check and help from the declaration).

    A bad value ends in argparse's usage error (exit 2) with the declaration's message, which
    names the parameter. A ``bool`` parameter becomes ``--name`` / ``--no-name``; a
    ``multiple`` one takes comma-separated items and parses to a list.

    Args:
        parser: an ``argparse`` parser or argument group.
        param: the declaration.
        flag: the flag to use instead of :attr:`Param.flag`.
        default: the default to use instead of the declared one.
        dest: the attribute name on the parsed namespace (default: the parameter's name).
        help: the help text to use instead of :attr:`Param.help`.
        raw: keep the flag's text as given (a ``multiple`` default joined by commas): for a
            command that checks the value itself and reports a bad one as a data error.
    """
    value = param.default if default is _UNSET else default
    if help is None:
        help = param.help if default is _UNSET else param.description + _default_text(value)
    kwargs: dict[str, Any] = {"dest": dest or param.name, "default": value, "help": help}
    if param.type is bool:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif raw:
        if isinstance(value, list | tuple):
            kwargs["default"] = ",".join(map(str, value))
        if param.choices is not None:
            kwargs["metavar"] = ",".join(map(str, param.choices))
    else:
        # Errors name the attribute the command reads (``top_k`` for the ``k`` knob).
        named = param if dest in (None, param.name) else dataclasses.replace(param, name=dest)
        kwargs["type"] = named.parse
        kwargs["metavar"] = (dest or param.name).upper()
        if param.choices is not None and not param.multiple:
            # The type function checks choices first (its message names the parameter);
            # argparse gets them too, for --help and for tools that read the parser.
            kwargs["choices"] = list(param.choices)
            kwargs["metavar"] = "{" + ",".join(map(str, param.choices)) + "}"
        elif param.choices is not None:
            kwargs["metavar"] = ",".join(map(str, param.choices))
        if param.multiple and isinstance(value, list | tuple):
            kwargs["default"] = list(value)
    parser.add_argument(flag or param.flag, **kwargs)


def add_arguments(parser: argparse.ArgumentParser | Any, params: Iterable[Param]) -> None:
    """:func:`add_argument` for each declaration, in order."""
    for param in params:
        add_argument(parser, param)


def defaults(params: Iterable[Param]) -> dict[str, Any]:
    """``{name: default}`` of the declarations."""
    return {p.name: p.default for p in params}


@dataclass(frozen=True, slots=True)
class WidgetSpec:
    """What dashboard widget a declaration becomes (rendered by ``screens/parts/widgets.py``).

    Attributes:
        kind: the Streamlit function: ``number_input``, ``selectbox``, ``multiselect``,
            ``checkbox`` or ``text_input``.
        label: the widget label.
        kwargs: its keyword arguments (value / options / index, min and max, step, help).
    """

    kind: str
    label: str
    kwargs: dict[str, Any]


def widget_spec(param: Param, *, label: str | None = None, value: Any = _UNSET) -> WidgetSpec:
    """The dashboard widget for ``param``.

    Choices give a selectbox (a multiselect when ``multiple``), ``bool`` a checkbox, numbers a
    number_input with the declared range, anything else a text_input.

    Args:
        param: the declaration.
        label: the label (default :attr:`Param.label`).
        value: the initial value (default: the declared default).

    Returns:
        The widget kind, label and keyword arguments; ``help`` is :attr:`Param.help`.
    """
    value = param.default if value is _UNSET else value
    label = label or param.label
    kw: dict[str, Any] = {"help": param.help}
    if param.choices is not None and param.multiple:
        kw["options"] = list(param.choices)
        kw["default"] = list(value or ())
        return WidgetSpec("multiselect", label, kw)
    if param.choices is not None:
        kw["options"] = list(param.choices)
        kw["index"] = kw["options"].index(value) if value in param.choices else 0
        return WidgetSpec("selectbox", label, kw)
    if param.type is bool:
        kw["value"] = bool(value)
        return WidgetSpec("checkbox", label, kw)
    if param.type in (int, float) and not param.multiple:
        cast = param.type
        kw["min_value"] = None if param.minimum is None else cast(param.minimum)
        kw["max_value"] = None if param.maximum is None else cast(param.maximum)
        kw["value"] = None if value is None else cast(value)
        if value is None:  # empty: the method decides (e.g. a per-problem default)
            kw["placeholder"] = "auto"
        kw["step"] = cast(1) if cast is int else 0.01
        if cast is float:
            kw["format"] = "%.4g"
        return WidgetSpec("number_input", label, kw)
    if isinstance(value, list | tuple):
        value = ",".join(map(str, value))
    kw["value"] = "" if value is None else str(value)
    return WidgetSpec("text_input", label, kw)
