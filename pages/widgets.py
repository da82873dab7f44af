"""Dashboard widgets built from declared parameters (:class:`core.params.Param`).

The command line builds its flags from the same declarations (:func:`core.params.add_argument`),
so a knob's default, range, choices and help are the same in both places. What widget a
declaration becomes is decided, without streamlit, by :func:`core.params.widget_spec`; this
module only renders it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import streamlit as st

from core.params import Param, widget_spec

__all__ = ["param_widget", "param_widgets"]

#: The keyword arguments that set a widget's initial value (left out once Session State has one).
_VALUE_KWARGS = ("value", "index", "default")


def param_widget(
    param: Param,
    key: str,
    container: Any = st,
    *,
    label: str | None = None,
    value: Any = None,
) -> Any:
    """Render ``param`` as a widget and return its value, checked by the declaration.

    Choices give a selectbox (a multiselect for a list knob), ``bool`` a checkbox, numbers a
    number_input with the declared minimum and maximum, anything else a text_input; the
    tooltip is the declaration's help (description, paper section, default).

    Args:
        param: the declaration.
        key: the widget's session key (``f"{page}.{name}"``).
        container: where to draw it (``st``, a column, the sidebar, a form).
        label: the label (default: the parameter's name, spaced and capitalized).
        value: the initial value (default: the declared default). Ignored once the key has a
            value in Session State.

    Returns:
        The value converted by :meth:`Param.coerce`.

    Raises:
        ValueError: a text entry the declaration refuses (the message names the parameter).
    """
    spec = widget_spec(param, label=label) if value is None else widget_spec(
        param, label=label, value=value
    )
    kwargs = dict(spec.kwargs)
    if key in st.session_state:
        # The widget's value lives in Session State; passing an initial one as well is an error.
        for name in _VALUE_KWARGS:
            kwargs.pop(name, None)
    raw = getattr(container, spec.kind)(spec.label, key=key, **kwargs)
    return param.coerce(raw)


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
