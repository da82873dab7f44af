"""JSON-plain values: the one converter every report and run summary goes through.

Frames and method results hold numpy scalars and NaN; JSON wants Python numbers and ``null``.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["json_plain"]


def json_plain(value: Any) -> Any:
    """``value`` as plain JSON-ready Python: NaN -> None, numpy scalars -> Python numbers.

    Dicts (keys become strings), lists and tuples (become lists) are converted recursively;
    anything else is returned as it is.

    Args:
        value: a scalar, or a container of them.

    Returns:
        The converted value.
    """
    if isinstance(value, dict):
        return {str(k): json_plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_plain(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
