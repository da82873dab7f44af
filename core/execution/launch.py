"""A method launched from the Runs page as the exact CLI argv a user would type (command_for)."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from core.attribution.metrics import SCORE_FIELD as ATTRIBUTION_SCORE_FIELD
from core.attribution.plan import INSTANCES as ATTRIBUTION_INSTANCES
from core.attribution.plan import RETRIEVED_TOP_K
from core.attribution.plan import RUN_PARAMS as ATTRIBUTION_PARAMS
from core.cuer.interventions import BASE_TOP_K, RUN_PARAMS
from core.dolce import probes
from core.execution.limits import TIMEOUT
from core.judges.rubrics import RUBRICS
from core.names import check_name
from core.params import CONCURRENCY, LIMIT, NUM_CTX, SEED, Param
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    TOP_K,
    check_rerank_pool,
    retriever_param,
)

__all__ = [
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
]


#: The retriever a run uses unless told otherwise (the declaration's default).
DEFAULT_RETRIEVER = retriever_param().default


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What the user asked to run (the Runs page form).

    Attributes:
        db: the store file.
        dataset: stored dataset name.
        name: run id (an existing id resumes that run).
        conditions: conditions to run.
        backend: ``embedded``, ``ollama`` or ``openai``.
        model: model name (None: the backend's default).
        retriever: retriever family of the retrieved condition.
        top_k: retrieved chunks.
        concurrency: worker threads.
        hosts: Ollama hosts (``--host``), optional.
        base_url: OpenAI-compatible base URL, optional.
        rerank: CE@N->k candidates N (``--rerank``), None for no rerank stage.
        rerank_model: the reranker (``--rerank-model``), None for the default.
        timeout_s: seconds one model call may wait (``--timeout``), None for the backends'
            default; server backends only.
    """

    db: str
    dataset: str
    name: str
    conditions: tuple[str, ...] = ("no_evidence", "full_context", "retrieved", "oracle")
    backend: str = "embedded"
    model: str | None = None
    retriever: str = DEFAULT_RETRIEVER
    top_k: int = TOP_K.default
    concurrency: int = CONCURRENCY.default
    hosts: tuple[str, ...] = ()
    base_url: str | None = None
    rerank: int | None = None
    rerank_model: str | None = None
    timeout_s: float | None = None

    @property
    def kind(self) -> str:
        """The method kind: always ``conditions`` (the run's kind in the store)."""
        return "conditions"


def run_command(req: RunRequest) -> list[str]:
    """The argv of ``python -m core run`` for a request.

    The run name is stripped of surrounding blanks, then checked by
    :func:`core.names.check_name` (non-empty, printable, at most ``NAME_MAX`` characters).

    Raises:
        ValueError: no dataset, a run name ``check_name`` refuses, no condition, or a bad
            number.
    """
    if not req.dataset:
        raise ValueError("a run needs a dataset")
    name = check_name("run", req.name.strip())
    if not req.conditions:
        raise ValueError("choose at least one condition")
    TOP_K.coerce(req.top_k)
    CONCURRENCY.coerce(req.concurrency)
    argv = [
        sys.executable,
        "-m",
        "core",
        "run",
        "--db",
        str(req.db),
        *_opt("--dataset", req.dataset),
        "--backend",
        req.backend,
        "--conditions",
        ",".join(req.conditions),
        "--retriever",
        req.retriever,
        "--top-k",
        str(int(req.top_k)),
        "--concurrency",
        str(int(req.concurrency)),
        f"--name={name}",
    ]
    argv += _server_args(req)
    if req.rerank is not None:
        argv += ["--rerank", str(check_rerank_pool(req.rerank, req.top_k))]
        if req.rerank_model:
            argv += ["--rerank-model", req.rerank_model]
    if req.timeout_s is not None and req.backend != "embedded":
        argv += ["--timeout", f"{TIMEOUT.coerce(req.timeout_s):g}"]
    return argv


#: Method kinds a :class:`MethodRequest` launches, with their labels (the Runs page's menu).
METHODS: dict[str, str] = {
    "interventions": "CUE-R interventions",
    "probes": "DOLCE probes",
    "fanin-grid": "fan-in grid (dataset)",
    "judge": "CRUX judge",
    "attribution": "context attribution (random passage ablations)",
}


#: Seed of the generated fan-in grid (``generate controlled --seed``).
FANIN_SEED = Param("seed", int, 42, "random seed of the generated grid")


#: Replace a stored dataset of the same name (``generate controlled --replace``).
FANIN_REPLACE = Param("replace", bool, False, "replace a dataset of that name")


#: Which passages the CRUX judge rates (``judge crux --passages``).
JUDGE_PASSAGES = Param(
    "passages",
    str,
    "gold",
    "rate the gold passages only (CRUX's pre-judged P*) or every passage",
    choices=("gold", "all"),
    section="SPEC §9",
)


#: The name the judge's ratings are stored under (``judge crux --judge``).
JUDGE_NAME = Param("judge", str, None, "name to store the ratings under (default backend:model)")


# a table, one row per line: the formatter would put each item on a line of its own
METHOD_PARAMS: dict[str, tuple[Param, ...]] = {
    # the CLI's own help where it overrides a declaration's (``help=`` in its add_argument)
    "interventions": (
        replace(retriever_param(), description="base retriever", section=""), BASE_TOP_K,
        CHUNK_SIZE, OVERLAP, *RUN_PARAMS, NUM_CTX, SEED,
    ),
    "probes": (
        probes.UNITS_PARAM, probes.STRATEGY, probes.MAX_SPANS, probes.PER_LENGTH,
        replace(probes.SEED, description="span and generation seed", section=""), LIMIT,
        NUM_CTX,
    ),
    "fanin-grid": (FANIN_SEED, FANIN_REPLACE),
    "judge": (JUDGE_PASSAGES, JUDGE_NAME, NUM_CTX, SEED),
    "attribution": (
        *ATTRIBUTION_PARAMS, ATTRIBUTION_SCORE_FIELD, ATTRIBUTION_INSTANCES,
        replace(retriever_param(), description="retriever of the retrieved condition",
                section=""),
        RETRIEVED_TOP_K, CHUNK_SIZE, OVERLAP, NUM_CTX,
    ),
}  # fmt: skip


#: The rubric whose judge a ``judge-RUBRIC`` kind runs, by kind.
JUDGE_RUBRIC = {f"judge-{name}": name for name in RUBRICS}


#: Judge-run kinds (``judge RUBRIC``), one per rubric, with their labels (the Runs page's menu).
#: Kept beside :data:`METHODS` (whose kinds have one fixed command each): the rubric is the
#: command's sub-command, and a rubric judging a run's answers takes the judged run as
#: :attr:`MethodRequest.target_run` (``--run``) instead of ``--dataset``.
JUDGE_METHODS: dict[str, str] = {
    kind: f"judge run: {name} ({RUBRICS[name].scale[0]}-{RUBRICS[name].scale[1]})"
    for kind, name in JUDGE_RUBRIC.items()
}


#: The conditions a rubric judge judges (``judge RUBRIC --conditions``), comma-separated.
JUDGE_CONDITIONS = Param(
    "conditions",
    str,
    None,
    "judged conditions, comma-separated (default: retrieved for "
    "crux-coverage; the pack conditions for authtrace-evidence; all four otherwise)",
)


def method_params(kind: str) -> tuple[Param, ...]:
    """The declared knobs of a method kind, in the CLI's flag order.

    They are the declarations its command builds its flags from (``--name`` of each is
    :attr:`core.params.Param.flag`), besides the shared ones a :class:`MethodRequest` holds
    (dataset, name, backend, model, hosts, base URL, concurrency, timeout).

    Raises:
        ValueError: an unknown kind.
    """
    try:
        return METHOD_PARAMS[kind]
    except KeyError:
        kinds = ", ".join([*METHODS, *JUDGE_METHODS])
        raise ValueError(f"unknown method {kind!r}; choose from {kinds}") from None


@dataclass(frozen=True, slots=True)
class MethodRequest:
    """What the user asked to launch, for a method kind other than the four conditions.

    Attributes:
        kind: one of :data:`METHODS`.
        db: the store file.
        dataset: the stored dataset the method reads (unused by ``fanin-grid``).
        name: the run id (``--name``; an existing one resumes that run); for ``fanin-grid``
            the new dataset's name; for ``judge`` only the job's label (the ratings' name is
            the ``judge`` parameter).
        backend: ``embedded``, ``ollama`` or ``openai`` (unused by ``fanin-grid``).
        model: model name (None: the backend's default).
        hosts: Ollama hosts (``--host``).
        base_url: OpenAI-compatible base URL (``--base-url``).
        concurrency: parallel model calls (``--concurrency``; not taken by ``judge``).
        timeout_s: seconds one model call may wait (``--timeout``), None for the default;
            server backends only.
        params: the method's knobs by name (:func:`method_params`); a missing or None one
            takes the declared default (the flag is then left out, as a user would).
        target_run: the run whose answers a rubric judge judges (``--run``; a
            :data:`JUDGE_METHODS` kind other than ``judge-crux-answerability``).
    """

    kind: str
    db: str
    dataset: str
    name: str
    backend: str = "embedded"
    model: str | None = None
    hosts: tuple[str, ...] = ()
    base_url: str | None = None
    concurrency: int = CONCURRENCY.default
    timeout_s: float | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    target_run: str | None = None


def _flag_args(params: Sequence[Param], values: Mapping[str, Any]) -> list[str]:
    """The flags of the knobs whose value differs from the declared default, checked.

    Booleans become ``--name`` / ``--no-name``, lists comma-separated items.

    Raises:
        ValueError: a value the declaration refuses, or a name the method does not declare.
    """
    known = {p.name for p in params}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"unknown parameter {unknown[0]!r}; allowed: {', '.join(sorted(known))}")
    argv: list[str] = []
    for p in params:
        raw = values.get(p.name)
        if raw is None:
            continue
        value = p.coerce(raw)
        default = list(p.default) if isinstance(p.default, tuple) else p.default
        if value == default:
            continue
        if p.type is bool:
            argv.append(p.flag if value else "--no-" + p.flag[2:])
        elif p.multiple:
            argv += [p.flag, ",".join(map(str, value))]
        else:
            argv += [p.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return argv


def _server_args(req: RunRequest | MethodRequest) -> list[str]:
    """``--model``, one ``--host`` per Ollama host and ``--base-url`` of a request."""
    argv = ["--model", req.model] if req.model else []
    for host in req.hosts:
        argv += ["--host", host]
    if req.base_url:
        argv += ["--base-url", req.base_url]
    return argv


def _backend_args(req: MethodRequest) -> list[str]:
    """``--backend``, ``--model``, ``--host``, ``--base-url``, ``--timeout`` of a request."""
    if req.backend not in ("embedded", "ollama", "openai"):
        raise ValueError(f"unknown backend {req.backend!r}; choose embedded, ollama or openai")
    argv = ["--backend", req.backend, *_server_args(req)]
    if req.timeout_s is not None and req.backend != "embedded":
        argv += ["--timeout", f"{TIMEOUT.coerce(req.timeout_s):g}"]
    return argv


def _run_args(req: MethodRequest, command: str) -> list[str]:
    """The start every run command shares: ``-m core COMMAND --db --dataset`` + backend."""
    if req.kind not in METHODS and req.kind not in JUDGE_METHODS:
        method_params(req.kind)  # raises, naming the kinds
    if not req.dataset:
        raise ValueError("a run needs a dataset")
    return [
        sys.executable,
        "-m",
        "core",
        command,
        "--db",
        str(req.db),
        *_opt("--dataset", req.dataset),
        *_backend_args(req),
    ]


def _opt(flag: str, value: str) -> list[str]:
    """``[flag, value]``, or ``[flag=value]`` for a value starting with "-".

    A dataset named ``-x`` would otherwise be read by argparse as another flag.
    """
    return [f"{flag}={value}"] if value.startswith("-") else [flag, value]


def _concurrency_args(req: MethodRequest) -> list[str]:
    n = CONCURRENCY.coerce(req.concurrency)
    return [] if n == CONCURRENCY.default else ["--concurrency", str(n)]


def _check_kind(req: MethodRequest, kind: str) -> None:
    if req.kind != kind:
        raise ValueError(f"a {req.kind!r} request, not {kind!r}")


def interventions_command(req: MethodRequest) -> list[str]:
    """The argv of ``python -m core run-interventions`` (CUE-R) for a request.

    Raises:
        ValueError: another kind, no dataset, a run name :func:`core.names.check_name`
            refuses, or a parameter value its declaration refuses.
    """
    _check_kind(req, "interventions")
    name = check_name("run", req.name.strip())
    return [
        *_run_args(req, "run-interventions"),
        *_flag_args(method_params(req.kind), req.params),
        *_concurrency_args(req),
        f"--name={name}",
    ]


def probes_command(req: MethodRequest) -> list[str]:
    """The argv of ``python -m core run-probes`` (DOLCE) for a request.

    Raises:
        ValueError: as :func:`interventions_command`.
    """
    _check_kind(req, "probes")
    name = check_name("run", req.name.strip())
    return [
        *_run_args(req, "run-probes"),
        *_flag_args(method_params(req.kind), req.params),
        *_concurrency_args(req),
        f"--name={name}",
    ]


def judge_command(req: MethodRequest) -> list[str]:
    """The argv of ``python -m core judge crux`` (CRUX 0-5 ratings) for a request.

    ``judge crux`` makes one call at a time, so the request's concurrency is not passed.

    Raises:
        ValueError: another kind, no dataset, or a parameter value its declaration refuses.
    """
    _check_kind(req, "judge")
    argv = _run_args(req, "judge")
    argv.insert(4, "crux")  # python -m core judge crux --db ...
    return argv + _flag_args(method_params(req.kind), req.params)


def judge_rubric_command(req: MethodRequest) -> list[str]:
    """The argv of ``python -m core judge RUBRIC`` (a judge run) for a ``judge-RUBRIC`` request.

    ``judge-crux-answerability`` judges the request's dataset (``--dataset``); the other
    rubrics judge the answers of :attr:`MethodRequest.target_run` (``--run``; the two flags
    exclude each other). The request's name is the judge run's (``--name``; an existing one
    resumes it).

    Raises:
        ValueError: not a judge kind, no dataset, no judged run where the rubric needs one (or
            one where it judges passages), a name :func:`core.names.check_name` refuses, or a
            parameter value its declaration refuses.
    """
    rubric = JUDGE_RUBRIC.get(req.kind)
    if rubric is None:
        raise ValueError(f"a {req.kind!r} request, not a judge run")
    name = check_name("run", req.name.strip())
    argv = _run_args(req, "judge")
    argv.insert(4, rubric)  # python -m core judge RUBRIC --db ...
    target = (req.target_run or "").strip()
    if rubric == "crux-answerability":
        if target:
            raise ValueError("crux-answerability judges the dataset's passages, not a run")
    else:
        if not target:
            raise ValueError(f"{rubric} judges a run's answers: choose the judged run")
        dataset = _opt("--dataset", req.dataset)
        at = argv.index(dataset[0])
        argv[at : at + len(dataset)] = _opt("--run", target)
    return [
        *argv,
        *_flag_args(method_params(req.kind), req.params),
        *_concurrency_args(req),
        f"--name={name}",
    ]


def attribution_command(req: MethodRequest) -> list[str]:
    """The argv of ``python -m core run-attribution`` (issue 40) for a request.

    Raises:
        ValueError: another kind, no dataset, a run name :func:`core.names.check_name`
            refuses, or a parameter value its declaration refuses.
    """
    _check_kind(req, "attribution")
    name = check_name("run", req.name.strip())
    return [
        *_run_args(req, "run-attribution"),
        *_flag_args(method_params(req.kind), req.params),
        *_concurrency_args(req),
        f"--name={name}",
    ]


def fanin_grid_command(req: MethodRequest) -> list[str]:
    """The argv of ``python -m core generate controlled --preset fanin-grid`` for a request.

    The request's name is the new dataset's name; dataset, backend and model are not used.

    Raises:
        ValueError: another kind, a name :func:`core.names.check_name` refuses, or a bad seed.
    """
    _check_kind(req, "fanin-grid")
    name = check_name("dataset", req.name.strip())
    return [
        sys.executable,
        "-m",
        "core",
        "generate",
        "controlled",
        "--preset",
        "fanin-grid",
        *_flag_args(method_params(req.kind), req.params),
        *_opt("--name", name),
        "--db",
        str(req.db),
    ]


_COMMANDS = {
    "interventions": interventions_command,
    "probes": probes_command,
    "fanin-grid": fanin_grid_command,
    "judge": judge_command,
    "attribution": attribution_command,
    **dict.fromkeys(JUDGE_METHODS, judge_rubric_command),
}


def command_for(req: RunRequest | MethodRequest) -> list[str]:
    """The argv of a request: :func:`run_command` for the conditions, else its kind's function.

    Raises:
        ValueError: as the kind's function, or an unknown kind.
    """
    if isinstance(req, RunRequest):
        return run_command(req)
    method_params(req.kind)  # an unknown kind: one line naming the kinds
    return _COMMANDS[req.kind](req)
