"""The run row's lifecycle: what a run is (:class:`RunSpec`), created or reopened, undone.

:func:`open_run` creates or reopens a run's row with status ``running`` (refusing a stored run
of that name with another configuration); :func:`undone_if_refused` removes a row a refused
start created. :mod:`core.execution.runs` and :mod:`core.judges.runs` drive the runs themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from core.backends.base import Backend
from core.execution.prompts import TEMPLATE_VERSION, template_hash
from core.names import check_name
from core.scoring.parsing import DEFAULT_MAX_CITED, MAX_CITED
from core.store import RUN_KINDS, Store

__all__ = ["open_run", "run_spec", "RunSpec", "start_run", "undone_if_refused"]


@dataclass(frozen=True, slots=True)
class RunSpec:
    """What a run is: recorded on its row and checked when the run is resumed.

    Attributes:
        run_id: the run's name (unique in the store).
        dataset: the dataset the run reads.
        backend: backend kind (``embedded``, ``ollama``, ``openai``).
        model: model name as the user gave it.
        options: effective generation options (temperature, seed, num_ctx ...).
        retrieval: the retrieved condition's configuration (:func:`core.oncu.conditions.
            retrieval_config`); empty when no retrieved condition is planned.
        conditions: the conditions planned.
        notes: free text.
        kind: what the run is (:data:`core.store.RUN_KINDS`): ``conditions`` (the four
            matched conditions), ``interventions`` (CUE-R), ``probes`` (DOLCE), ``judge``,
            ``rerun`` (Case-view reruns of an imported run).
    """

    run_id: str
    dataset: str
    backend: str
    model: str
    options: Mapping[str, Any] = field(default_factory=dict)
    retrieval: Mapping[str, Any] = field(default_factory=dict)
    conditions: tuple[str, ...] = ()
    notes: str = ""
    kind: str = "conditions"


_CHECKED = ("dataset_id", "kind", "backend", "model", "model_digest", "options", "template_hash")


def run_spec(
    backend: Backend,
    name: str,
    dataset: str,
    *,
    options: Mapping[str, Any] | None = None,
    reported_options: bool = True,
    retrieval: Mapping[str, Any] | None = None,
    conditions: Iterable[str] = (),
    notes: str = "",
    kind: str = "conditions",
    max_cited: int = DEFAULT_MAX_CITED,
) -> RunSpec:
    """The :class:`RunSpec` of a run of ``backend`` (kind and model read from the backend).

    Args:
        backend: the model backend.
        name: the run id.
        dataset: the dataset the run reads.
        options: generation options to record ...
        reported_options: ... when the backend's ``describe()`` reports no ``options`` of its
            own (True), or always (False: the options the caller passed, as given).
        retrieval: the run's retrieval (or probe) configuration.
        conditions: the conditions planned.
        notes: free text stored on the run.
        kind: the run's kind (:data:`core.store.RUN_KINDS`).
        max_cited: evidence ids scored per reply (:data:`core.scoring.parsing.MAX_CITED`); recorded
            in ``options`` as ``max_cited`` when not the default 3.

    Raises:
        ValueError: an unknown kind, or a ``name`` that :func:`core.names.check_name` refuses.
    """
    check_name("run", name)
    if kind not in RUN_KINDS:
        raise ValueError(f"unknown run kind {kind!r}; choose from {', '.join(RUN_KINDS)}")
    desc = backend.describe()
    reported = desc.get("options") if reported_options else None
    recorded = dict(reported or options or {})
    if max_cited != DEFAULT_MAX_CITED:
        recorded["max_cited"] = MAX_CITED.coerce(max_cited)
    return RunSpec(
        run_id=name,
        dataset=dataset,
        backend=getattr(backend, "name", desc.get("kind", "")),
        model=getattr(backend, "model", desc.get("model", "")),
        options=recorded,
        retrieval=dict(retrieval or {}),
        conditions=tuple(conditions),
        notes=notes,
        kind=kind,
    )


def start_run(store: Store, spec: RunSpec, backend: Backend) -> None:
    """Create the run row, or reopen a stored run with the same configuration.

    Records the template version and hash, the backend's description and model digest, the
    options, the retrieval configuration, the conditions and the kind; a new run is
    ``planned`` until the engine stores its first call (``running``), a reopened one keeps
    its status until then.

    The run's lock (:meth:`core.store.Store.run_lock`) is held while the row is written;
    a caller that goes on to execute calls holds it for the whole run.

    Raises:
        RunBusyError: the run is running in another process (nothing is written).
        ValueError: the dataset is not stored, or a run of that name exists with another
            dataset, backend, model, model digest, options, template or retrieval setting
            (resuming it would mix configurations in one run).
    """
    desc = dict(backend.describe())
    row: dict[str, Any] = {
        "run_id": spec.run_id,
        "dataset_id": spec.dataset,
        "backend": spec.backend,
        "model": spec.model,
        "model_digest": desc.get("model_digest") or desc.get("digest"),
        "options": dict(spec.options),
        "template_version": TEMPLATE_VERSION,
        "template_hash": template_hash(),
        "retrieval": dict(spec.retrieval),
        "notes": spec.notes,
        "kind": spec.kind,
        "backend_info": desc,
        "conditions": list(spec.conditions),
    }
    with store.run_lock(spec.run_id), store.write_batch() as con:
        if not store.has_dataset(spec.dataset, con=con):
            raise ValueError(f"no dataset named '{spec.dataset}' in {store.path}")
        old = store.run_row(spec.run_id, con=con)
        if old is not None:
            _reopen(spec, old, row)
            if any(r["run_id"] == spec.run_id for r in store.changed_runs(con)):
                raise ValueError(  # its stored answers were made on other instances or gold
                    f"run '{spec.run_id}' ran on dataset '{spec.dataset}' before it was "
                    "replaced (--with-runs keep-orphans); resuming it would mix the two: "
                    "choose another --name"
                )
        else:
            row["status"] = "planned"
        store.save_run(row, con=con)


def _reopen(spec: RunSpec, old: Mapping[str, Any], row: dict[str, Any]) -> None:
    """Check a stored run's configuration against ``row``; merge conditions and notes."""
    for col in _CHECKED:
        if col in ("model_digest", "kind") and _norm(old.get(col)) is None:
            continue  # unknown when the run started (server unreachable, older store)
        if _norm(old.get(col)) != _norm(row[col]):
            raise ValueError(
                f"run '{spec.run_id}' exists with another {col} ({old.get(col)!r}, now "
                f"{row[col]!r}); choose another --name to start a new run"
            )
    if old.get("retrieval") and row["retrieval"] and old["retrieval"] != row["retrieval"]:
        raise ValueError(
            f"run '{spec.run_id}' exists with another retrieval setting "
            f"({old['retrieval']!r}, now {row['retrieval']!r}); choose another --name"
        )
    row["retrieval"] = row["retrieval"] or old.get("retrieval") or {}
    row["conditions"] = list(dict.fromkeys([*(old.get("conditions") or []), *spec.conditions]))
    row["notes"] = spec.notes or old.get("notes")


def _norm(value: Any) -> Any:
    return value if value not in (None, "", {}) else None


@contextmanager
def undone_if_refused(store: Store, name: str) -> Iterator[None]:
    """A run this block creates is deleted again when the block fails before storing a call.

    A command refused after :func:`open_run` wrote the ``planned`` row (a damaged store found
    while planning, a bad setting) leaves no run behind (issue 35 item 7); a run that existed
    before, or stored a call, is kept as it is.
    """
    new = store.run_row(name) is None
    try:
        yield
    except Exception:
        if new:
            with suppress(Exception):  # a store too damaged to delete it: the error says so
                store.discard_unstarted_run(name)
        raise


def open_run(store: Store, backend: Backend, name: str, dataset: str, **spec: Any) -> RunSpec:
    """Create or reopen run ``name`` of ``backend`` (:func:`run_spec`, then :func:`start_run`).

    Args:
        store: the store.
        backend: the model backend.
        name: the run id.
        dataset: a stored dataset.
        **spec: :func:`run_spec` keyword arguments.

    Returns:
        The run's spec, as recorded.

    Raises:
        RunBusyError: see :func:`start_run`.
        ValueError: see :func:`start_run`.
    """
    run = run_spec(backend, name, dataset, **spec)
    start_run(store, run, backend)
    return run
