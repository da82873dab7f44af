"""Batch files: request/output lines, a run's calls exported and imported.

One concept per module:

- :mod:`core.batch.files`: openAI Batch files: the request lines a run's calls become and the result
  lines read back;
- :mod:`core.batch.judges`: judge runs through batch files (issue 21 item 1): export a judge run's
  calls, import its replies;
- :mod:`core.batch.runs`: runs through batch files: export a run's calls for an offline batch
  runner, import its answers.

The public names below are loaded on first use (PEP 562), so importing one module
of the package does not import the others.
"""

from __future__ import annotations

import importlib
from typing import Any

# Public name -> the module that defines it.
_WHERE = {
    **dict.fromkeys(
        (
            "BatchFileError",
            "MAX_TOKENS",
            "ResultLine",
            "URL",
            "custom_id",
            "judge_custom_id",
            "parse_custom_id",
            "parse_judge_custom_id",
            "read_results",
            "request_line",
            "request_options",
            "result_line",
            "shard_paths",
        ),
        "files",
    ),
    **dict.fromkeys(
        ("export_judge_batch", "import_judge_batch"),
        "judges",
    ),
    **dict.fromkeys(
        ("BATCH_KINDS", "BatchBackend", "WAITING", "export_batch", "import_batch"),
        "runs",
    ),
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    """Load a public name's module on first use."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
