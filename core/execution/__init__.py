"""Executing runs: orchestrator, engine loop, limits, threads, write path, jobs.

One concept per module:

- :mod:`core.execution.engine`: the one execution loop (execute_work) of every model call,
  predictions and judgments: skip stored -> cache -> execute -> parse -> store -> score;
- :mod:`core.execution.jobs`: background runs for the dashboard: ``python -m core run ...`` in a
  child process;
- :mod:`core.execution.launch`: a method launched from the Runs page as the exact CLI argv a user
  would type (command_for);
- :mod:`core.execution.limits`: limits the execution engine keeps (issue 17): concurrency and the
  stored size of a reply;
- :mod:`core.execution.prompts`: fixed prompt templates and the answer contract: (instance,
  condition) -> chat messages;
- :mod:`core.execution.rerun`: case-view reruns: one instance, one perturbation, run now, stored,
  compared with the original;
- :mod:`core.execution.run_spec`: a run's spec and row: created, reopened or refused before any
  call (open_run);
- :mod:`core.execution.runs`: runs: every way of running a method against a model starts, goes and
  ends here;
- :mod:`core.execution.score_rows`: scores of the engine's write batches, computed from what the
  engine holds;
- :mod:`core.execution.threads`: the engine's calling threads, for a server backend at
  ``concurrency`` > 1 (issue 17);
- :mod:`core.execution.write`: the write path: cache keys, prediction rows, the writer thread that
  commits within a second of an answer.

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
            "BATCH_SIZE",
            "COALESCE_S",
            "COMMIT_S",
            "FIRST_GAP_S",
            "MAX_GAP_S",
            "MIN_GAP_S",
            "POOL_WRITE_SHARE",
            "Progress",
            "WRITE_SHARE",
            "WriteContext",
            "WriteFn",
            "Writer",
            "cache_key",
            "from_cache",
            "options_hash",
            "prediction_row",
            "write_rows",
        ),
        "write",
    ),
    **dict.fromkeys(
        ("RunSpec", "open_run", "run_spec", "start_run", "undone_if_refused"),
        "run_spec",
    ),
    **dict.fromkeys(
        (
            "POOL_DEPTH",
            "POOL_MIN_CALLS",
            "PredictionWork",
            "READ_AHEAD",
            "ReadAhead",
            "RunSummary",
            "Work",
            "execute",
            "execute_work",
            "plan_and_execute",
            "rerun_call",
        ),
        "engine",
    ),
    **dict.fromkeys(
        (
            "JobProgress",
            "RunJob",
            "UPLOAD_DIR",
            "longest_prompt_chars",
            "parse_progress",
            "run_request_from_row",
            "save_upload",
        ),
        "jobs",
    ),
    **dict.fromkeys(
        (
            "DEFAULT_RETRIEVER",
            "FANIN_REPLACE",
            "FANIN_SEED",
            "JUDGE_CONDITIONS",
            "JUDGE_METHODS",
            "JUDGE_NAME",
            "JUDGE_PASSAGES",
            "JUDGE_RUBRIC",
            "METHODS",
            "METHOD_PARAMS",
            "MethodRequest",
            "RunRequest",
            "attribution_command",
            "command_for",
            "fanin_grid_command",
            "interventions_command",
            "judge_command",
            "judge_rubric_command",
            "method_params",
            "probes_command",
            "run_command",
        ),
        "launch",
    ),
    **dict.fromkeys(
        (
            "MAX_REPLY_BYTES",
            "MAX_SERVER_CONCURRENCY",
            "REPLY_NUMBER_RANGES",
            "TIMEOUT",
            "cap_concurrency",
            "cap_reply",
            "checked_numbers",
            "concurrency_limit",
            "usable_cores",
        ),
        "limits",
    ),
    **dict.fromkeys(
        (
            "ANSWER_SCHEMA",
            "MESSAGE_CONDITIONS",
            "NO_PASSAGES",
            "PASSAGE_TEMPLATE",
            "PROBE_INSTRUCTION",
            "SYSTEM_CONTEXT",
            "SYSTEM_NO_EVIDENCE",
            "TEMPLATE_VERSION",
            "USER_CONTEXT",
            "USER_NO_EVIDENCE",
            "build_messages",
            "prompt_hash",
            "render_evidence",
            "render_passage",
            "template_hash",
        ),
        "prompts",
    ),
    **dict.fromkeys(
        (
            "OPERATORS",
            "RERUN_CONDITIONS",
            "RerunRequest",
            "base_shown_ids",
            "missing_text",
            "plan_perturbation",
            "rerun",
            "shown_context",
        ),
        "rerun",
    ),
    **dict.fromkeys(
        (
            "DEMO_DATASET",
            "DEMO_RUN",
            "base_citations",
            "build_demo",
            "present",
            "run_attribution",
            "run_conditions",
            "run_interventions",
            "run_probes",
        ),
        "runs",
    ),
    **dict.fromkeys(
        ("PREFETCH_MAX", "ScoringInputs", "batch_scores"),
        "score_rows",
    ),
    **dict.fromkeys(
        ("frozen_heap", "run_threads"),
        "threads",
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
