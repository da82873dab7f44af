"""``run`` (the four-condition protocol against a backend) and ``report retrieval`` (issue 4).

``python -m core run --db PATH --dataset NAME [--backend auto|embedded|ollama|openai] [--model M]
[--host URL ...] [--base-url URL ...] --conditions no_evidence,full_context,retrieved,oracle
[--retriever lexical --top-k 3] [--rerank N [--rerank-model DIR]] [--concurrency N]
[--num-ctx 32768] [--seed 0] [--timeout SECONDS] --name RUN [--json]`` shows a progress bar
on stderr (done/total, rate, ETA) and ends with a summary line, or with ``--json`` one JSON object
(:class:`core.execution.engine.RunSummary`) of :func:`core.execution.runs.run_conditions`.
``--rerank N`` adds the
CE@N->k stage (seed 000 App. A.13); without a local cross-encoder it fails with one line
saying how to get one, before any call. Rerunning the same
command continues the run: stored calls are skipped, cached responses reused. The default
backend ``auto`` is ``ollama`` when an Ollama server answers and the ``embedded`` baseline
reader otherwise (:func:`choose_backend`).

``python -m core report retrieval --db PATH --dataset NAME --retrievers lexical,dense,hybrid,
iterative,oracle --k 3,5,8,16 [--json]`` prints the retrieval-only audit
(:func:`core.oncu.conditions.retrieval_audit`): mean recall, full-chain coverage, evidence F1,
distractor rate and passages per context per retriever and k.
"""

from __future__ import annotations

import argparse
import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from core.backends import make_backend, server_status
from core.backends.endpoints import total_concurrency
from core.commands import Groups, add_db, open_store, print_json, split_csv
from core.execution.limits import TIMEOUT, cap_concurrency
from core.execution.runs import run_conditions
from core.jsonable import json_plain
from core.names import check_name
from core.params import CONCURRENCY, NUM_CTX, SEED, add_argument, add_arguments
from core.retrieval.dense_fill import dense_model_id
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    RERANK,
    RERANK_MODEL,
    TOP_K,
    list_retrievers,
    reranker,
    retriever_param,
)
from core.scoring.parsing import MAX_CITED
from core.store import Store
from core.store.embeddings import StoreEmbeddingCache
from core.views.common import error_digest
from core.views.retrieval import audit_with_text

__all__ = [
    "ProgressBar",
    "add_backend_args",
    "backend_from_args",
    "choose_backend",
    "drive_run",
    "register",
    "retrieval_report",
    "run_options",
]

_BACKENDS = ("embedded", "ollama", "openai")  # core.backends.BACKENDS, without importing it
_BASE_URL_HELP = (
    "OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (default $OPENAI_BASE_URL); "
    "repeat to spread calls over several: --concurrency is then per endpoint, and a dead "
    "endpoint's calls move to the others"
)


def run_options(kind: str, seed: int = 0, num_ctx: int | None = None) -> dict[str, Any]:
    """The generation options a ``run`` passes to :func:`core.backends.make_backend`.

    Deterministic decoding (temperature 0, fixed seed) for the server backends; Ollama gets
    ``num_ctx`` (default 32768, fixed for the whole run: changing it reloads the model); an
    OpenAI-compatible server gets it as ``context_length`` only when given (it reports its
    own otherwise). The embedded reader takes no generation options.
    """
    if kind == "ollama":
        return {"temperature": 0, "seed": seed, "num_ctx": num_ctx or 32768}
    if kind == "openai":
        opts: dict[str, Any] = {"temperature": 0, "seed": seed}
        if num_ctx:
            opts["context_length"] = num_ctx
        return opts
    return {}


def backend_from_args(
    args: argparse.Namespace, options: dict[str, Any], out: TextIO | None = None
) -> Any:
    """The backend a command's flags ask for, ``--timeout`` included.

    :func:`core.backends.make_backend` with ``options`` plus ``--timeout`` (``timeout_s``)
    for a server backend.

    With several ``--base-url``, ``args.concurrency`` (per endpoint) becomes the total
    (:func:`core.backends.endpoints.total_concurrency`); call this once per command.

    The timeout is a setting of the client, not of the calls: it is not among ``options`` (the
    run records those, and they key the response cache). With the embedded reader, which has
    no timeout, a given ``--timeout`` is ignored with one line on ``out`` (stderr).
    """
    timeout = getattr(args, "timeout", None)
    settings = dict(options)
    if timeout is not None:
        if args.backend in ("ollama", "openai"):
            settings["timeout_s"] = float(timeout)
        else:
            print(
                f"notice: --timeout {timeout:g} ignored: the {args.backend} backend calls no "
                "model server",
                file=out if out is not None else sys.stderr,
            )
    backend = make_backend(
        args.backend, args.model, hosts=args.host, base_url=args.base_url, options=settings
    )
    if getattr(args, "concurrency", None) is not None:
        # --concurrency is per endpoint (several --base-url): the engine's threads
        args.concurrency = total_concurrency(backend, args.concurrency)
    return backend


def _fmt_s(seconds: float) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "--"
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


class ProgressBar:
    """A one-line progress bar for :class:`core.execution.engine.Progress` updates.

    On a terminal it redraws in place (at most ten times a second); otherwise it prints a line
    at every tenth of the work, so logs stay short.
    """

    def __init__(self, stream: TextIO | None = None, width: int = 30):
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self._last = -math.inf
        self._decile = -1

    def line(self, p: Any) -> str:
        """The bar's text for one progress update."""
        frac = p.done / p.total if p.total else 1.0
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        return (
            f"[{bar}] {p.done}/{p.total} {p.rate:.1f} calls/s ETA {_fmt_s(p.eta_s)} "
            f"errors {p.errors}"
        )

    def __call__(self, p: Any) -> None:
        """Show one progress update."""
        now = time.monotonic()
        final = p.done >= p.total
        if self.tty:
            if final or now - self._last >= 0.1:
                self.stream.write("\r" + self.line(p) + ("\n" if final else ""))
                self.stream.flush()
                self._last = now
            return
        decile = int(10 * p.done / p.total) if p.total else 10
        if decile != self._decile or final:
            self._decile = decile
            self.stream.write(self.line(p) + "\n")
            self.stream.flush()


def add_backend_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--backend`` (required), ``--model``, ``--host``, ``--base-url``, ``--timeout``."""
    parser.add_argument(
        "--backend",
        required=True,
        choices=_BACKENDS,
        help="embedded (baseline reader, no server), ollama, or openai (compatible endpoint)",
    )
    parser.add_argument("--model", help="model name (default: the backend's default)")
    parser.add_argument(
        "--host", action="append", help="Ollama host URL; repeat to spread calls over several"
    )
    parser.add_argument("--base-url", action="append", help=_BASE_URL_HELP)
    add_argument(parser, TIMEOUT)


def choose_backend(
    kind: str, model: str | None, hosts: Sequence[str] | None, out: TextIO = sys.stderr
) -> str:
    """Resolve ``auto``: ``ollama`` when a server answers at ``hosts``, else ``embedded``.

    Without a server, ``auto`` with a ``model`` is an error (a model name means the user wants
    that model, not the baseline); without a model it says, on ``out``, that the baseline runs.

    Raises:
        ValueError: ``auto`` with a model and no reachable server, or a server and no model.
    """
    if kind != "auto":
        return kind
    status = server_status(hosts, timeout_s=1.0)
    up = [row for row in status if row["reachable"]]
    if up:
        if not model:
            pulled = sorted({m for row in up for m in row["models"]})
            raise ValueError(
                f"an Ollama server answers at {up[0]['host']}: choose a model with --model "
                f"(pulled: {', '.join(pulled) or 'none; run `ollama pull NAME`'}), or pass "
                "--backend embedded for the baseline reader"
            )
        return "ollama"
    where = ", ".join(row["host"] for row in status)
    if model:
        raise ValueError(
            f"no Ollama server answers at {where}: start it with `ollama serve` (and `ollama "
            f"pull {model}`), set OLLAMA_HOST / --host, or pass --backend embedded"
        )
    print(
        f"no Ollama server answers at {where}: running the embedded baseline reader "
        "(an extractive baseline, not a language model)",
        file=out,
    )
    return "embedded"


def drive_run(
    args: argparse.Namespace,
    start: Callable[..., Any],
    *,
    label: str = "run",
    calls: str = "calls",
    model_time: bool = True,
) -> int:
    """What every run command shares: store, backend, progress bar, Ctrl+C, summary.

    ``start(store, backend, options=..., progress=..., cancel=...)`` runs the work and returns a
    summary with ``to_dict()`` and the fields of :class:`core.execution.engine.RunSummary`.

    The run's lock (:meth:`core.store.Store.run_lock`) is taken first, before the backend is
    made: a run of that name going in another process stops the command at once with
    :class:`core.store.RunBusyError` (one line naming the run and the pid, exit status 1).
    ``--timeout`` reaches the backend (:func:`backend_from_args`); ``--concurrency`` is per
    endpoint when ``--base-url`` is repeated (the engine runs that many threads per endpoint,
    :func:`backend_from_args`); a total above
    :func:`core.execution.limits.concurrency_limit` is capped, with one line on stderr (``start``
    reads ``args.concurrency`` when it is called). A ``--name`` that
    :func:`core.names.check_name` refuses stops it first (ValueError, one line, exit 1).
    """
    check_name("run", args.name)
    store = open_store(args)
    try:
        with store.run_lock(args.name):
            options = run_options(args.backend, args.seed, args.num_ctx)
            backend = backend_from_args(args, options)
            if getattr(args, "concurrency", None) is not None:
                args.concurrency, notice = cap_concurrency(backend, args.concurrency)
                if notice:
                    print(f"notice: {notice}", file=sys.stderr)
            s = start(
                store,
                backend,
                options=options,
                progress=ProgressBar(sys.stderr),
                cancel=threading.Event(),
            )
    except KeyboardInterrupt:
        print(
            f"\ninterrupted: completed {calls} are stored; rerun the same command to continue "
            f"run '{args.name}'",
            file=sys.stderr,
        )
        return 130
    if args.json:
        print_json(s.to_dict())
    else:
        model = getattr(s, "model_seconds", None) if model_time else None
        print(
            f"{label} '{s.run}' {s.status}: {s.planned} planned, {s.executed} executed, "
            f"{s.cached} cached, {s.skipped_existing} already stored, {s.errors} errors, "
            f"{s.parse_errors} parse errors in {s.seconds:.1f} s"
            + (f" (model {model:.1f} s)" if model is not None else "")
        )
    return _failed_calls(store, s, calls)


def _failed_calls(store: Store, s: Any, calls: str) -> int:
    """Say why calls failed (stderr); exit status 1 when every call of the execution failed.

    Failed calls are stored with their error (a rerun makes them again), so a run with some
    failures still succeeds; one where none got an answer (server down, wrong model name)
    is a failed command.
    """
    made = int(s.executed) + int(s.cached)
    if not s.errors:
        return 0
    top = "; ".join(f"{err} ({n})" for err, n in store.error_counts(s.run))
    every = s.errors >= made
    head = f"all {s.errors} {calls}" if every else f"{s.errors} of {made} {calls}"
    print(
        f"run '{s.run}': {head} failed, most frequent: {top}; rerun the same command to "
        f"make the failed {calls} again",
        file=sys.stderr,
    )
    return 1 if every else 0


def _cmd_run(args: argparse.Namespace) -> int:
    check_name("run", args.name)  # before the lock file beside the store is made for it
    with open_store(args).run_lock(args.name):  # refused at once, before a server is asked
        if args.rerank is not None:  # a missing cross-encoder, too (one line, exit 1)
            reranker(args.rerank_model)
        args.backend = choose_backend(args.backend, args.model, args.host)
        return drive_run(
            args,
            lambda store, backend, **kw: run_conditions(
                store,
                args.dataset,
                backend,
                split_csv(args.conditions),
                name=args.name,
                retriever=args.retriever,
                top_k=args.top_k,
                chunk_size=args.chunk_size,
                overlap=args.overlap,
                rerank=args.rerank,
                rerank_model=args.rerank_model,
                concurrency=args.concurrency,
                max_cited=args.max_cited,
                **kw,
            ),
        )


def retrieval_report(
    store: Store,
    dataset: str,
    retrievers: Sequence[str],
    ks: Sequence[int],
    chunk_size: int = CHUNK_SIZE.default,
    overlap: int = OVERLAP.default,
) -> list[dict[str, Any]]:
    """One object per (retriever, k): the retrieval-only audit means of a stored dataset.

    Args:
        store: the store.
        dataset: a stored dataset.
        retrievers: retriever families.
        ks: context sizes.
        chunk_size: chunk window in tokens.
        overlap: chunk overlap in tokens.

    Raises:
        ValueError: unknown dataset, retriever or k.
    """
    if dataset not in store.dataset_names():
        raise ValueError(f"no dataset named '{dataset}' in {store.path}")
    vectors = StoreEmbeddingCache(store, dense_model_id())  # dense vectors kept for reuse
    # instances without passage text (imported results) are counted in n_no_text, not ranked
    _, agg = audit_with_text(
        store.load_instances(dataset), retrievers, ks, chunk_size, overlap, vectors
    )
    vectors.flush()
    rows = []
    for row in agg.to_dict("records"):
        row = {"dataset": dataset, "chunk_size": chunk_size, "overlap": overlap, **row}
        rows.append(
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        )
    return rows


def _cmd_report_retrieval(args: argparse.Namespace) -> int:
    try:
        ks = [int(k) for k in split_csv(args.k)]
    except ValueError:
        raise ValueError(f"--k must be integers separated by commas, got {args.k!r}") from None
    rows = retrieval_report(
        open_store(args),
        args.dataset,
        split_csv(args.retrievers),
        ks,
        args.chunk_size,
        args.overlap,
    )
    if args.json:
        print_json(rows)
        return 0
    print(
        f"{'retriever':10} {'k':>3} {'recall':>7} {'chain':>7} {'ev.F1':>7} {'distr.':>7} "
        f"{'passages':>8} {'n':>5}"
    )
    for r in rows:
        cells = [
            f"{r[m]:.{2 if m == 'passages_per_context' else 3}f}" if r[m] is not None else "--"
            for m in (
                "recall",
                "full_chain_coverage",
                "evidence_f1",
                "distractor_rate",
                "passages_per_context",
            )
        ]
        print(
            f"{r['retriever']:10} {r['k']:>3} {cells[0]:>7} {cells[1]:>7} {cells[2]:>7} "
            f"{cells[3]:>7} {cells[4]:>8} {r['n_instances']:>5}"
        )
    if rows and rows[0]["missing"]:  # instances without passage text: not ranked
        print(f"missing: {rows[0]['missing']}")
    return 0


def runs_report(store: Store, selector: str | None = None) -> list[dict[str, Any]]:
    """One object per stored run: kind, live status, counts and its most frequent error.

    Args:
        store: the store.
        selector: a run id or a dataset name (its runs); None for every run.
    """
    frame = store.runs_frame()
    if frame.empty:
        return []
    wanted = set(store.resolve_runs(selector))
    out = []
    for r in frame[frame["run_id"].isin(wanted)].sort_values("run_id").to_dict("records"):
        digest = error_digest(store, [r["run_id"]])
        out.append(
            json_plain(
                {
                    "run": r["run_id"],
                    "kind": r.get("kind"),
                    "dataset": r["dataset_id"],
                    "backend": r["backend"],
                    "model": r["model"],
                    "status": r["status"],
                    "n_planned": r.get("n_planned"),
                    "n_done": r.get("n_done"),
                    "n_errors": digest["errors"],
                    "top_error": digest["top"],
                    "top_error_count": digest["top_n"],
                    "pid": r.get("pid"),
                    "heartbeat_at": r.get("heartbeat_at"),
                }
            )
        )
    return out


def _cmd_report_runs(args: argparse.Namespace) -> int:
    rows = runs_report(open_store(args), args.run)
    if args.json:
        print_json(rows)
        return 0
    print(
        f"{'run':28} {'kind':13} {'status':11} {'planned':>7} {'done':>6} {'errors':>6}  "
        "most frequent error"
    )
    for r in rows:
        top = f"{r['top_error']} ({r['top_error_count']})" if r["top_error"] else "-"
        print(
            f"{r['run']:28} {r['kind'] or '-':13} {r['status'] or '-':11} "
            f"{r['n_planned'] if r['n_planned'] is not None else '-':>7} "
            f"{r['n_done'] if r['n_done'] is not None else '-':>6} {r['n_errors']:>6}  {top}"
        )
    return 0


def register(groups: Groups) -> None:
    """Add ``run``, ``report runs`` and ``report retrieval`` to the CLI."""
    run = groups.top.add_parser(
        "run", help="run the four conditions on a dataset against a model backend"
    )
    run.add_argument("--dataset", required=True, help="stored dataset name")
    run.add_argument(
        "--backend",
        default="auto",
        choices=("auto", *_BACKENDS),
        help="auto (default: ollama when a server answers, else embedded), embedded (baseline "
        "reader, no server), ollama, or openai (compatible endpoint)",
    )
    run.add_argument("--model", help="model name (default: the backend's default)")
    run.add_argument(
        "--host",
        action="append",
        help="Ollama host URL; repeat to spread calls over several (default $OLLAMA_HOST)",
    )
    run.add_argument("--base-url", action="append", help=_BASE_URL_HELP)
    run.add_argument(
        "--conditions",
        default="no_evidence,full_context,retrieved,oracle",
        help="comma-separated conditions (default: all four)",
    )
    add_argument(run, retriever_param())
    add_argument(run, TOP_K, flag="--top-k", dest="top_k")
    add_arguments(
        run,
        (RERANK, RERANK_MODEL, CHUNK_SIZE, OVERLAP, CONCURRENCY, NUM_CTX, SEED, TIMEOUT, MAX_CITED),
    )
    run.add_argument("--name", required=True, help="run name; rerun it to continue the run")
    run.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    add_db(run)
    run.set_defaults(handler=_cmd_run)

    runs = groups.report.add_parser(
        "runs", help="stored runs: kind, status (partial/failed/interrupted), counts, errors"
    )
    runs.add_argument("--run", help="a run id or a dataset name (default: every run)")
    runs.add_argument("--json", action="store_true", help="print JSON")
    add_db(runs)
    runs.set_defaults(handler=_cmd_report_runs)

    rep = groups.report.add_parser(
        "retrieval", help="retrieval-only audit per retriever family and k (SPEC §4)"
    )
    rep.add_argument("--dataset", required=True, help="stored dataset name")
    # The handler splits and checks these lists itself (a bad item is a data error, exit 1).
    families = retriever_param().many(list_retrievers(), "comma-separated retriever families")
    add_argument(rep, families, flag="--retrievers", dest="retrievers", raw=True)
    add_argument(rep, TOP_K.many((3, 5, 8, 16), "comma-separated budgets"), raw=True)
    add_arguments(rep, (CHUNK_SIZE, OVERLAP))
    rep.add_argument("--json", action="store_true", help="print JSON")
    add_db(rep)
    rep.set_defaults(handler=_cmd_report_retrieval)
