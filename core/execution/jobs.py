"""Background runs for the dashboard: ``python -m core run ...`` in a child process.

A run launched from the Runs page keeps going while the user browses: it is a separate
process that writes predictions through short-lived read-write connections, while the
dashboard only opens read-only ones (DuckDB allows one writer process beside readers that
retry on the lock, SPEC §2). Cancel sends SIGINT (completed calls stay stored); resume starts
the same command again (the engine skips stored calls). A run whose name is running in another
process (the CLI, another dashboard) is refused by the child at once: the job fails with the
child's one line naming the run and the pid holding it (:class:`core.store.RunBusyError`) as
its :meth:`RunJob.last_line`.

Every method the command line runs can be launched this way (issue 18 item 3): the four
conditions (:class:`RunRequest`, ``run``), and, as a :class:`MethodRequest` of a kind in
:data:`METHODS`, CUE-R interventions (``run-interventions``), DOLCE probes (``run-probes``), the
fan-in grid dataset (``generate controlled --preset fanin-grid``) and the CRUX judge (``judge
crux``); and the judge runs of every rubric (issue 20 item 6), one kind per rubric of
:data:`core.judges.rubrics.RUBRICS` in :data:`JUDGE_METHODS` (``judge RUBRIC``; the judged run is
the
request's :attr:`MethodRequest.target_run`, its progress counts judgments). One function per
kind builds exactly the argv a user would type, from the same
declared parameters (:func:`method_params`) the CLI builds its flags from; the child's progress
lines (:class:`core.commands.run.ProgressBar`) are parsed by :func:`parse_progress`.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.attribution.plan import CONDITION as ATTRIBUTION_CONDITION
from core.backends.support import prompt_chars
from core.cuer.interventions import BASE_TOP_K
from core.dolce import probes
from core.execution.launch import (
    DEFAULT_RETRIEVER,
    FANIN_SEED,
    JUDGE_CONDITIONS,
    JUDGE_METHODS,
    JUDGE_NAME,
    JUDGE_PASSAGES,
    JUDGE_RUBRIC,
    METHOD_PARAMS,
    METHODS,
    MethodRequest,
    RunRequest,
    command_for,
    fanin_grid_command,
    interventions_command,
    judge_command,
    judge_rubric_command,
    method_params,
    probes_command,
    run_command,
)
from core.execution.prompts import build_messages
from core.params import NUM_CTX, SEED
from core.retrieval.retrievers import (
    CHUNK_SIZE,
    OVERLAP,
    TOP_K,
    chunk_instance,
)
from core.types import Instance

__all__ = [
    "FANIN_SEED",
    "JUDGE_NAME",
    "JUDGE_CONDITIONS",
    "JUDGE_METHODS",
    "JUDGE_PASSAGES",
    "METHODS",
    "UPLOAD_DIR",
    "JobProgress",
    "MethodRequest",
    "RunJob",
    "RunRequest",
    "command_for",
    "fanin_grid_command",
    "interventions_command",
    "judge_command",
    "judge_rubric_command",
    "longest_prompt_chars",
    "method_params",
    "parse_progress",
    "probes_command",
    "run_command",
    "run_request_from_row",
    "save_upload",
]


_ROOT = Path(__file__).resolve().parents[2]
#: Where uploaded files are written (nothing is written elsewhere).
UPLOAD_DIR = _ROOT / "data" / "uploads"
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: Longest saved upload name, in characters (all ASCII after sanitizing).
_MAX_NAME = 120


def save_upload(
    filename: str, data: bytes, max_bytes: int = 200 * 1024 * 1024, folder: Path | None = None
) -> Path:
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
    """The request that resumes a stored run of the four conditions.

    Same dataset, backend, model, conditions and retrieval; the run itself goes through
    ``python -m core run`` (:func:`core.execution.runs.run_conditions`). A CUE-R or DOLCE run is
    resumed by the request that launched it (its row does not keep every planning knob:
    operators, the probe limit).
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


#: Which passages ``judge crux-answerability`` rates (``--passages``).
_RUBRIC_PASSAGES = replace(
    JUDGE_PASSAGES, description="crux-answerability: the gold passages or all", section=""
)
for _kind, _name in JUDGE_RUBRIC.items():
    METHOD_PARAMS[_kind] = (
        (_RUBRIC_PASSAGES, NUM_CTX, SEED)
        if _name == "crux-answerability"
        else (JUDGE_CONDITIONS, NUM_CTX, SEED)
    )


# --------------------------------------------------------------------------- progress
#: A :class:`core.commands.run.ProgressBar` line: ``[##..] 184/200 12.5 calls/s ETA 1m05s
#: errors 0``.
_PROGRESS = re.compile(
    r"\]\s+(?P<done>\d+)/(?P<total>\d+)\s+(?P<rate>[\d.]+) calls/s ETA (?P<eta>\S+) "
    r"errors (?P<errors>\d+)"
)
_ETA = re.compile(r"^(?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?(?:(?P<s>\d+)s)?$")


@dataclass(frozen=True, slots=True)
class JobProgress:
    """One progress line of a child, parsed.

    Attributes:
        done: calls finished in the current phase.
        total: calls planned in the current phase (a CUE-R run has two: base, interventions).
        rate: calls per second.
        eta: the estimate as printed (``1m05s``; ``--`` when unknown).
        eta_s: the estimate in seconds, None when unknown.
        errors: failed calls so far.
    """

    done: int
    total: int
    rate: float
    eta: str
    eta_s: float | None
    errors: int

    @property
    def fraction(self) -> float:
        """``done / total`` in [0, 1] (1 for an empty phase)."""
        return min(1.0, self.done / self.total) if self.total else 1.0


def parse_progress(line: str) -> JobProgress | None:
    """The progress in one output line of a run command, None when it is not a progress line."""
    m = _PROGRESS.search(line)
    if m is None:
        return None
    eta = m["eta"]
    t = _ETA.match(eta)
    eta_s = None
    if t is not None and eta != "" and any(t.groups()):
        eta_s = float(int(t["h"] or 0) * 3600 + int(t["m"] or 0) * 60 + int(t["s"] or 0))
    return JobProgress(
        int(m["done"]), int(m["total"]), float(m["rate"]), eta, eta_s, int(m["errors"])
    )


# --------------------------------------------------------------------------- prompt size
def _longest(messages: Sequence[Sequence[Mapping[str, str]]]) -> int:
    return max((prompt_chars(m) for m in messages), default=0)


def _instance_prompts(inst: Instance, req: RunRequest | MethodRequest) -> list[Any]:
    """Messages bounding the longest prompt ``req`` plans for one instance (see below)."""
    if isinstance(req, RunRequest):
        kind, values = "conditions", {}
    else:
        kind, values = req.kind, dict(req.params)
    if kind == "probes":
        units = values.get("units") or probes.UNITS_PARAM.default
        n = len(probes.split_units(inst, units))
        return [c.messages for c in probes.plan_probes(inst, units=units, lengths=[n])]
    if kind == "attribution" and (values.get("condition") or ATTRIBUTION_CONDITION.default) in (
        "full_context",
        "oracle",
    ):  # the unablated context is the longest; an oracle without gold plans nothing
        cond = values.get("condition") or ATTRIBUTION_CONDITION.default
        return [build_messages(inst, cond)] if cond == "full_context" or inst.gold_ids else []
    if kind == "judge" or kind in JUDGE_METHODS:
        return []  # one passage (or answer, or pack) per call: not measured
    out: list[Any] = [build_messages(inst, "no_evidence")]
    chunk_size = int(values.get("chunk_size") or CHUNK_SIZE.default)
    overlap = int(values.get("overlap") if values.get("overlap") is not None else OVERLAP.default)
    if kind == "conditions":
        conds = req.conditions  # type: ignore[union-attr]
        top_k = int(req.top_k)  # type: ignore[union-attr]
        if "full_context" in conds:
            out.append(build_messages(inst, "full_context"))
        if "oracle" in conds and inst.gold_ids:
            out.append(build_messages(inst, "oracle"))
        if "retrieved" not in conds:
            return out
        extra: list[Any] = []
    else:  # interventions: the retrieved base, and at most one passage more (replace, duplicate)
        top_k = int(values.get("top_k") or BASE_TOP_K.default)
        extra = sorted(inst.passages, key=lambda p: len(p.text), reverse=True)[:1]
    chunks = sorted(
        chunk_instance(inst, chunk_size, overlap), key=lambda c: len(c.text), reverse=True
    )[:top_k]
    out.append(build_messages(inst, "intervention", [*chunks, *extra]))
    return out


def longest_prompt_chars(instances: Sequence[Instance], req: RunRequest | MethodRequest) -> int:
    """Characters of the longest prompt a request plans (an upper bound), for a preflight.

    Exact for the plain conditions and the DOLCE probes (the span of every unit, C = L, is the
    longest); for the retrieved condition the ``top_k`` longest chunks of the instance, and for
    CUE-R those plus its longest passage (a replacement or a duplicate adds at most one), which
    no real prompt exceeds. No retriever runs (the dense one would embed every chunk). Judge
    prompts (one passage, one sub-question) count 0; a fan-in grid plans no call.

    Args:
        instances: the dataset's instances (for probes the first ``limit`` are used).
        req: the request.
    """
    if isinstance(req, MethodRequest) and req.kind == "fanin-grid":
        return 0
    if isinstance(req, MethodRequest) and req.kind == "probes" and req.params.get("limit"):
        instances = instances[: int(req.params["limit"])]
    return max((_longest(_instance_prompts(i, req)) for i in instances), default=0)


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

    request: RunRequest | MethodRequest
    argv: list[str]
    process: subprocess.Popen
    started: float
    lines: list[str] = field(default_factory=list)
    cancelled: bool = False
    _reader: threading.Thread | None = field(default=None, repr=False)

    @classmethod
    def start(
        cls, req: RunRequest | MethodRequest, extra_env: dict[str, str] | None = None
    ) -> RunJob:
        """Launch the request's command (:func:`command_for`) in a child process.

        The child runs in its own process group, with the project as its working directory.

        Raises:
            ValueError: a request :func:`command_for` refuses (nothing is started).
        """
        argv = command_for(req)
        env = dict(os.environ) | dict(extra_env or {})
        env["PYTHONUNBUFFERED"] = "1"
        proc = subprocess.Popen(
            argv,
            cwd=_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
            start_new_session=True,
        )
        job = cls(req, argv, proc, time.time())
        job._reader = threading.Thread(target=job._pump, daemon=True)
        job._reader.start()
        return job

    def _pump(self) -> None:
        assert self.process.stdout is not None
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

    def progress(self) -> JobProgress | None:
        """The latest progress line parsed (:func:`parse_progress`), None before the first.

        After a successful end the last phase reads as complete even where the child's last
        progress line was printed before its final tenth (non-terminal output is printed at
        every tenth of the work).
        """
        for line in reversed(self.lines[-50:]):
            p = parse_progress(line)
            if p is not None:
                if self.returncode == 0 and p.done < p.total:
                    p = JobProgress(p.total, p.total, p.rate, "0s", 0.0, p.errors)
                return p
        return None

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
