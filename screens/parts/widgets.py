"""Dashboard widgets built from declared parameters (:class:`core.params.Param`).

The command line builds its flags from the same declarations (:func:`core.params.add_argument`),
so a knob's default, range, choices and help are the same in both places. What widget a
declaration becomes is decided, without streamlit, by :func:`core.params.widget_spec`; this
module only renders it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import streamlit as st

from core.execution.jobs import method_params
from core.params import Param, widget_spec

__all__ = ["method_widgets", "param_widget", "param_widgets", "range_text"]

#: The keyword arguments that set a widget's initial value (left out once Session State has one).
_VALUE_KWARGS = ("value", "index", "default")


def param_widget(
    param: Param,
    key: str,
    container: Any = st,
    *,
    label: str | None = None,
    value: Any = None,
    options: Sequence[Any] | None = None,
    maximum: float | None = None,
) -> Any:
    """Render ``param`` as a widget and return its value, checked by the declaration.

    Choices give a selectbox (a multiselect for a list knob), ``bool`` a checkbox, numbers a
    number_input whose label shows the declared range (``top-k (1–1,000)``), anything else
    a text_input; the tooltip is the declaration's help (description, paper section, default).
    A number outside the range is refused here with one line naming the field, the value and
    the range (issue 36 item 7).

    Args:
        param: the declaration.
        key: the widget's session key (``f"{page}.{name}"``).
        container: where to draw it (``st``, a column, the sidebar, a form).
        label: the label (default: the parameter's name, spaced and capitalized).
        value: the initial value (default: the declared default). Ignored once the key has a
            value in Session State.
        options: the values this page offers, for a declaration that takes any value of its
            type (a selectbox of these; the declared default first when it is among them).
        maximum: a lower upper bound than the declaration's, where this form has one (the
            concurrency a model server is asked for).

    Returns:
        The value converted by :meth:`Param.coerce`; None for an empty entry of a declaration
        whose default is None (the method's own default, e.g. DOLCE's per-problem thresholds).

    Raises:
        ValueError: a value the declaration refuses (the message names the parameter).
    """
    spec = (
        widget_spec(param, label=label)
        if value is None
        else widget_spec(param, label=label, value=value)
    )
    kind, kwargs = spec.kind, dict(spec.kwargs)
    label = spec.label
    bounds = None
    if kind == "number_input" and options is None:
        # the range is shown beside the field and checked here, so a value outside it is
        # refused with one line on the page (the widget's own bounds say it in a tooltip only)
        bounds = (kwargs.pop("min_value", None), kwargs.pop("max_value", None))
        if maximum is not None:
            bounds = (bounds[0], maximum if bounds[1] is None else min(bounds[1], maximum))
        shown = range_text(*bounds)
        label = f"{label} ({shown})" if shown else label
    if options is not None:
        start = value if value is not None else param.default
        kind = "selectbox"
        kwargs = {
            "help": kwargs["help"],
            "options": list(options),
            "index": list(options).index(start) if start in options else 0,
        }
    if key in st.session_state:
        # The widget's value lives in Session State; passing an initial one as well is an error.
        for name in _VALUE_KWARGS:
            kwargs.pop(name, None)
    raw = getattr(container, kind)(label, key=key, **kwargs)
    if param.default is None and raw in (None, ""):
        return None
    if bounds is not None and raw is not None:
        lo, hi = bounds
        if (lo is not None and raw < lo) or (hi is not None and raw > hi):
            raise ValueError(
                f"{spec.label} {raw:g} is out of range: {range_text(lo, hi)} ({param.description})"
            )
    return param.coerce(raw)


def range_text(lo: float | None, hi: float | None) -> str:
    """A declared range as shown beside its field: ``1–1,000``, ``≥ 0``, ``≤ 5``; empty when
    the parameter has none."""
    if lo is not None and hi is not None:
        return f"{lo:,g}–{hi:,g}"
    if lo is not None:
        return f"≥ {lo:,g}"
    return f"≤ {hi:,g}" if hi is not None else ""


def param_widgets(
    params: Iterable[Param],
    prefix: str,
    container: Any = st,
    *,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One :func:`param_widget` per declaration, keyed ``f"{prefix}.{name}"``.

    Args:
        params: the declarations, in display order.
        prefix: the page's session-key prefix (``runs``).
        container: where to draw them.
        labels: labels by parameter name, where the default label does not fit.

    Returns:
        ``{name: value}``: keyword arguments for the planner or run the declarations belong to.

    Raises:
        ValueError: as :func:`param_widget`.
    """
    labels = labels or {}
    return {
        p.name: param_widget(p, f"{prefix}.{p.name}", container, label=labels.get(p.name))
        for p in params
    }


def method_widgets(kind: str, prefix: str, errors: list[str], per_row: int = 4) -> dict[str, Any]:
    """A method's declared knobs' widgets (:func:`core.execution.jobs.method_params`), in rows.

    Each widget is labelled with its command-line flag (``top-k`` for ``--top-k``) and has the
    flag's default and help, so the form and the command read the same.

    Args:
        kind: a :data:`core.execution.jobs.METHODS` kind.
        prefix: the session-key prefix (``runs.probes``).
        errors: where a value a declaration refuses is appended (one line naming the
            parameter), instead of raising: the form still draws every widget.
        per_row: widgets per row.

    Returns:
        ``{name: value}`` (None for a refused value: the launch then stops on ``errors``).
    """
    params = method_params(kind)
    out: dict[str, Any] = {}
    for i, p in enumerate(params):
        if i % per_row == 0:
            cols = st.columns(per_row)
        try:
            out[p.name] = param_widget(p, f"{prefix}.{p.name}", cols[i % per_row], label=p.flag[2:])
        except ValueError as exc:
            errors.append(str(exc))
            out[p.name] = None
    return out
