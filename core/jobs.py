"""Background runs for the dashboard: ``python -m core run ...`` in a child process.

A run launched from the Runs page keeps going while the user browses: it is a separate
process that writes predictions through short-lived read-write connections, while the
dashboard only opens read-only ones (DuckDB allows one writer process beside readers that
retry on the lock, SPEC §2). Cancel sends SIGINT (completed calls stay stored); resume starts
the same command again (the engine skips stored calls). A run whose name is running in another
process (the CLI, another dashboard) is refused by the child at once: the job fails with the
child's one line naming the run and the pid holding it (:class:`core.store.RunBusyError`) as
its :meth:`RunJob.last_line`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from core.engine_limits import TIMEOUT
from core.names import check_name
from core.params import CONCURRENCY
from core.retrieval import TOP_K, check_rerank_pool, retriever_param

__all__ = [
    "UPLOAD_DIR",
    "RunJob",
    "RunRequest",
    "run_command",
    "run_request_from_row",
    "save_upload",
]

#: The retriever a run uses unless told otherwise (the declaration's default).
DEFAULT_RETRIEVER = retriever_param().default

_ROOT = Path(__file__).resolve().parents[1]
#: Where uploaded files are written (nothing is written elsewhere).
UPLOAD_DIR = _ROOT / "data" / "uploads"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Longest saved upload name, in characters (all ASCII after sanitizing).
_MAX_NAME = 120


def save_upload(filename: str, data: bytes, max_bytes: int = 200 * 1024 * 1024,
                folder: Path | None = None) -> Path:
    """Write an uploaded file under ``data/uploads/`` with a sanitized name; returns its path.

    Only the name's last component is kept, with characters outside ``A-Za-z0-9._-`` replaced
    and leading dots dropped (``../../etc/x`` -> ``x``), cut to :data:`_MAX_NAME` characters
    (extension kept). The bytes go to a fresh temporary file in the same folder, renamed over
    the target, so a link planted at either name is replaced, never written through.

    Raises:
        ValueError: an empty or oversized file, a name with nothing usable in it, or a write
            that failed (a full disk); nothing is left behind then.
    """
    if not data:
        raise ValueError(f"{filename}: empty upload")
    if len(data) > max_bytes:
        raise ValueError(f"{filename}: {len(data):,} bytes is over the {max_bytes:,}-byte limit")
    base = _SAFE.sub("_", Path(filename).name).strip("._")
    if not base:
        raise ValueError(f"unusable file name {filename!r}")
    if len(base) > _MAX_NAME:  # the file system refuses names over 255 bytes
        stem, dot, ext = base.rpartition(".")
        ext = ext[:16] if dot and stem else ""
        base = base[: _MAX_NAME - len(ext) - 1].rstrip("._") + (f".{ext}" if ext else "")
    target = (folder or UPLOAD_DIR) / base
    tmp: str | None = None
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".upload-", suffix=".part", dir=target.parent)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, target)
    except OSError as exc:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
        raise ValueError(f"{target}: could not save the upload: {exc.strerror or exc}") from exc
    return target


def run_request_from_row(db: str, run: Mapping[str, object]) -> RunRequest:
    """The request that resumes a stored run.

    Same dataset, backend, model, conditions and retrieval; the run itself goes through
    ``python -m core run`` (:func:`core.runs.run_conditions`).
    """
    retrieval = run.get("retrieval") or {}
    conds = run.get("conditions") or ("no_evidence", "full_context", "retrieved", "oracle")
    return RunRequest(
        db=db,
        dataset=str(run.get("dataset_id")),
        name=str(run.get("run_id")),
        conditions=tuple(conds),  # type: ignore[arg-type]
        backend=str(run.get("backend") or "embedded"),
        model=None if run.get("backend") == "embedded" else str(run.get("model") or "") or None,
        retriever=str(retrieval.get("retriever", DEFAULT_RETRIEVER)),  # type: ignore[union-attr]
        top_k=int(retrieval.get("top_k", TOP_K.default)),  # type: ignore[union-attr]
        rerank=retrieval.get("rerank"),  # type: ignore[union-attr]
        rerank_model=retrieval.get("rerank_model"),  # type: ignore[union-attr]
    )


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
        sys.executable, "-m", "core", "run", "--db", str(req.db), "--dataset", req.dataset,
        "--backend", req.backend, "--conditions", ",".join(req.conditions),
        "--retriever", req.retriever, "--top-k", str(int(req.top_k)),
        "--concurrency", str(int(req.concurrency)), f"--name={name}",
    ]  # fmt: skip
    if req.model:
        argv += ["--model", req.model]
    for host in req.hosts:
        argv += ["--host", host]
    if req.base_url:
        argv += ["--base-url", req.base_url]
    if req.rerank is not None:
        argv += ["--rerank", str(check_rerank_pool(req.rerank, req.top_k))]
        if req.rerank_model:
            argv += ["--rerank-model", req.rerank_model]
    if req.timeout_s is not None and req.backend != "embedded":
        argv += ["--timeout", f"{TIMEOUT.coerce(req.timeout_s):g}"]
    return argv


@dataclass
class RunJob:
    """A run executing in a child process; its stderr (the progress bar) is kept in memory.

    Attributes:
        request: what was asked.
        argv: the command line.
        process: the child process.
        started: ``time.time()`` at launch.
        lines: stderr/stdout lines so far (the last ones are the progress).
    """

    request: RunRequest
    argv: list[str]
    process: subprocess.Popen
    started: float
    lines: list[str] = field(default_factory=list)
    cancelled: bool = False
    _reader: threading.Thread | None = field(default=None, repr=False)

    @classmethod
    def start(cls, req: RunRequest, extra_env: dict[str, str] | None = None) -> RunJob:
        """Launch the run in a child process (its own process group, cwd = the project)."""
        argv = run_command(req)
        env = dict(os.environ) | dict(extra_env or {})
        env["PYTHONUNBUFFERED"] = "1"
        proc = subprocess.Popen(
            argv, cwd=_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, bufsize=1, start_new_session=True,
        )  # fmt: skip
        job = cls(req, argv, proc, time.time())
        job._reader = threading.Thread(target=job._pump, daemon=True)
        job._reader.start()
        return job

    def _pump(self) -> None:
        assert self.process.stdout is not None  # noqa: S101 - set by Popen(stdout=PIPE)
        for raw in self.process.stdout:
            for part in raw.replace("\r", "\n").splitlines():
                if part.strip():
                    self.lines.append(part.rstrip())
                    del self.lines[:-200]

    @property
    def running(self) -> bool:
        """True while the child process runs."""
        return self.process.poll() is None

    @property
    def returncode(self) -> int | None:
        """The exit code, None while running (0 done, 130 cancelled, 1 a data error)."""
        return self.process.poll()

    def status(self) -> str:
        """``running``, ``done``, ``cancelled`` or ``failed``."""
        rc = self.returncode
        if rc is None:
            return "running"
        if rc == 0:
            return "done"
        return "cancelled" if self.cancelled or rc in (130, -signal.SIGINT) else "failed"

    def last_line(self) -> str:
        """The latest output line (the progress bar or the final summary/error).

        Once the child has ended, its output is read to the end first, so a failed run shows
        its own last line (``error: run 'X' is already running in process N ...``).
        """
        if self._reader is not None and self.process.poll() is not None:
            self._reader.join(timeout=2.0)
        return self.lines[-1] if self.lines else ""

    def cancel(self, timeout: float = 10.0) -> None:
        """Interrupt the run (SIGINT: completed calls stay stored); kill it after ``timeout``."""
        if not self.running:
            return
        self.cancelled = True
        self.process.send_signal(signal.SIGINT)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

