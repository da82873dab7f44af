"""Benchmark: the kill -9 drill (issue 15 item 8; SPEC §2, a call is committed as it completes).

A run of ``python -m core run`` (or, for the embedded reader, the same run in a script that
logs each answer) is started as a subprocess and SIGKILLed at a random moment of its
execution, ``repeats`` times per backend; each time the run is then rerun to the end. Per kill:

- **answers lost**: calls the backend answered before the kill whose prediction is not
  committed (the stub server logs each answer as it sends it; the embedded reader's worker
  replies are logged as they reach the engine), in calls and in seconds' worth (calls x the
  run's mean model time per call);
- **calls repeated**: prompts the rerun sent to the backend whose prediction was committed
  before the kill (the stub's request log; the embedded reader's log, read-ahead included).

Backends: ``ollama`` against ``tests/model_stub.py`` in this process (fixed latency 20 ms),
200 calls (50 instances of ``controlled-200`` x the four conditions), ``--concurrency 1``; the
same stub as the judge of a judge run (``judge crux-answerability``: 2 sub-questions x the gold
passages of the 50 instances, ``--concurrency 1``; its judgments are committed by the engine's
writer like predictions, issue 37); and the embedded reader in its worker process, the 800
calls of ``controlled-200``, ``--concurrency 1``. Kill moments are uniform over 10-90 % of an
unkilled run's execution (seeded). Bounds: the worst kill loses < 1 s worth of answers; no call
is repeated. The engine-overhead figure (< 5 %) is ``bench_engine.py``'s.

Usage: ``python bench/bench_durability.py [--repeats 5]``; exit status 1 when a bound is missed.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))

import pandas as pd  # noqa: E402
from model_stub import ModelStub  # noqa: E402
from run_all import figure, print_figures  # noqa: E402

from core.datasets.controlled import build_controlled  # noqa: E402
from core.execution.prompts import prompt_hash  # noqa: E402
from core.store import Store  # noqa: E402

SCRIPT = Path(__file__).name
LOST_BOUND_S = 1.0
STUB_LATENCY_S = 0.02
STUB_INSTANCES = 50
SEED = 15

_EMBEDDED = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {root!r})
    from core.backends import EmbeddedReader
    from core.execution.prompts import prompt_hash
    from core.execution.runs import run_conditions
    from core.store import Store
    from core.types import CONDITIONS

    log = open(sys.argv[1], "a", encoding="utf-8", buffering=1)  # a line reaches the file

    class Logged:
        def __init__(self, inner):
            self.inner, self.size = inner, inner.size

        @property
        def outstanding(self):
            return self.inner.outstanding

        def submit(self, messages):
            fut, h = self.inner.submit(messages), prompt_hash(messages)
            fut.add_done_callback(lambda f: log.write(h + "\\n"))
            return fut

    class LoggedReader(EmbeddedReader):
        logged = None

        def pool(self, size):
            inner = super().pool(size)
            if inner is not None and (self.logged is None or self.logged.inner is not inner):
                self.logged = Logged(inner)
            return None if inner is None else self.logged

    # options of its own per run: the response cache of the other runs stays out
    run_conditions(Store({db!r}), "ctl", LoggedReader(), CONDITIONS, name=sys.argv[2],
                   options={{"drill": sys.argv[2]}})
    """
)


class _AnswerLog(ModelStub):
    """The stub server, logging the prompt hash of every chat it answers, as it answers."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.answered: list[str] = []
        self._log_lock = threading.Lock()

    def start(self, port: int = 0) -> _AnswerLog:
        super().start(port)
        self._server.handle_error = lambda *_: None  # a killed client resets its connection
        return self

    def ollama_chat(self, body):
        out = super().ollama_chat(body)
        with self._log_lock:
            self.answered.append(prompt_hash(body.get("messages") or []))
        return out

    def log(self) -> list[str]:
        with self._log_lock:
            return list(self.answered)


def _store(db: Path, limit: int | None) -> None:
    ds = build_controlled("controlled-200", seed=42, limit=limit)
    Store(db).write_dataset(ds.__class__("ctl", ds.source, ds.builder, {}, ds.instances))


def _committed(db: Path, run: str) -> tuple[set[str], int, float]:
    """(committed prompt hashes, rows, mean model seconds per call) of ``run``."""
    store = Store(db)
    rows = store.prediction_rows(run)
    if not len(rows):  # a judge run: its judgments
        rows = store.judgments_frame(runs=[run])
    per_call = float(rows["latency_ms"].mean()) / 1000.0 if len(rows) else float("nan")
    return set(rows["prompt_hash"]), len(rows), per_call


class _Drill:
    """Start, kill and rerun one backend's runs; subclasses say how a run starts and logs."""

    name = ""
    n_calls = 0

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.db = tmp / f"{self.name}.duckdb"

    def start(self, run: str, log: Path) -> subprocess.Popen:
        raise NotImplementedError

    def answered(self, log: Path) -> list[str]:
        raise NotImplementedError

    def _wait_first(self, proc: subprocess.Popen, log: Path) -> float:
        while not self.answered(log):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name}: the run ended before its first answer: {proc.stderr.read()}"
                )
            time.sleep(0.002)
        return time.monotonic()

    def span(self) -> float:
        """Seconds from the first answer to the end of an unkilled run (a warm-up)."""
        log = self.tmp / f"{self.name}-warm.log"
        proc = self.start("warm", log)
        t = self._wait_first(proc, log)
        if proc.wait(timeout=600) != 0:
            raise RuntimeError(f"{self.name}: warm-up run failed: {proc.stderr.read()}")
        return time.monotonic() - t

    def kill(self, i: int, delay: float) -> dict:
        """Kill run ``i`` ``delay`` s after its first answer, rerun it; what was lost."""
        run = f"k{i}"
        log, relog = self.tmp / f"{self.name}-{i}.log", self.tmp / f"{self.name}-{i}b.log"
        proc = self.start(run, log)
        try:
            time.sleep(max(0.0, self._wait_first(proc, log) + delay - time.monotonic()))
            ended = proc.poll() is not None
            if not ended:
                os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait(timeout=60)
        answered = set(self.answered(log))
        committed, n_committed, _ = _committed(self.db, run)
        rerun = self.start(run, relog)
        if rerun.wait(timeout=600) != 0:
            raise RuntimeError(f"{self.name}: rerun of {run} failed: {rerun.stderr.read()}")
        repeated = set(self.answered(relog)) & committed
        final, n_final, per_call = _committed(self.db, run)
        if n_final != self.n_calls:
            raise RuntimeError(f"{self.name}: {run} ended with {n_final} of {self.n_calls} rows")
        lost = len(answered - committed)
        out = {
            "lost": lost,
            "lost_s": lost * per_call,
            "repeated": len(repeated),
            "committed": n_committed,
            "answered": len(answered),
            "ended": ended,
        }
        print(
            f"{self.name} kill {i} at +{delay:.2f} s: answered {len(answered)}, committed "
            f"{n_committed} rows, lost {lost} ({out['lost_s']:.3f} s worth at "
            f"{per_call * 1000:.1f} ms/call), rerun repeated {len(repeated)}"
            f"{' (the run had ended)' if ended else ''}",
            file=sys.stderr,
        )
        return out


class _StubDrill(_Drill):
    name = "stub"
    n_calls = 4 * STUB_INSTANCES

    def __init__(self, tmp: Path, stub: _AnswerLog):
        super().__init__(tmp)
        self.stub = stub
        self.marks: dict[Path, int] = {}
        _store(self.db, STUB_INSTANCES)

    def start(self, run: str, log: Path) -> subprocess.Popen:
        self.marks[log] = len(self.stub.log())
        argv = [
            sys.executable,
            "-m",
            "core",
            "run",
            "--db",
            str(self.db),
            "--dataset",
            "ctl",
            "--backend",
            "ollama",
            "--model",
            "stub-model",
            "--host",
            self.stub.url,
            "--concurrency",
            "1",
            "--name",
            run,
            "--json",
            "--seed",
            str(sum(map(ord, run))),
        ]  # a seed per run: no cache hits
        return subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def answered(self, log: Path) -> list[str]:
        return self.stub.log()[self.marks[log] :]


class _JudgeDrill(_StubDrill):
    """The stub as the judge of a ``crux-answerability`` judge run (CRUX ratings)."""

    name = "judge"

    def __init__(self, tmp: Path, stub: _AnswerLog):
        super().__init__(tmp, stub)
        from core.judges.runs import plan_judgments

        store = Store(self.db)
        sq = pd.DataFrame(
            [
                {
                    "instance_id": i.instance_id,
                    "sq_id": f"s{k}",
                    "text": f"What does passage {k} of {i.instance_id} say?",
                }
                for i in store.load_instances("ctl")
                for k in (1, 2)
            ]
        )
        store.write_crux_judgments("ctl", sq, pd.DataFrame())
        self.n_calls = len(plan_judgments(store, "crux-answerability", dataset="ctl")[1])

    def start(self, run: str, log: Path) -> subprocess.Popen:
        self.marks[log] = len(self.stub.log())
        argv = [
            sys.executable,
            "-m",
            "core",
            "judge",
            "crux-answerability",
            "--db",
            str(self.db),
            "--dataset",
            "ctl",
            "--backend",
            "ollama",
            "--model",
            "stub-model",
            "--host",
            self.stub.url,
            "--concurrency",
            "1",
            "--name",
            run,
            "--json",
            "--seed",
            str(sum(map(ord, run))),
        ]
        return subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )


class _EmbeddedDrill(_Drill):
    name = "embedded"
    n_calls = 800

    def __init__(self, tmp: Path):
        super().__init__(tmp)
        _store(self.db, None)
        self.script = tmp / "run_embedded.py"
        self.script.write_text(_EMBEDDED.format(root=str(ROOT), db=str(self.db)))

    def start(self, run: str, log: Path) -> subprocess.Popen:
        argv = [sys.executable, str(self.script), str(log), run]
        return subprocess.Popen(
            argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )

    def answered(self, log: Path) -> list[str]:
        return log.read_text().split() if log.exists() else []


def _drill(drill: _Drill, repeats: int, rng: random.Random) -> list[dict]:
    span = drill.span()
    print(f"{drill.name}: {span:.2f} s from the first answer to the end of a run", file=sys.stderr)
    out = []
    for i in range(repeats):
        got = drill.kill(i, rng.uniform(0.1, 0.9) * span)
        if got["ended"]:  # too late: once more, earlier
            got = drill.kill(100 + i, rng.uniform(0.1, 0.5) * span)
        out.append(got)
    return out


def results(repeats: int = 5) -> list[dict]:
    """The drill's figures (see the module docstring)."""
    rng = random.Random(SEED)
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        with _AnswerLog(latency_s=STUB_LATENCY_S) as stub:
            stub_kills = _drill(_StubDrill(tmp, stub), repeats, rng)
            judge = _JudgeDrill(tmp, stub)
            judge_kills = _drill(judge, repeats, rng)
        emb_kills = _drill(_EmbeddedDrill(tmp), repeats, rng)
    ms = STUB_LATENCY_S * 1000
    figs = []
    for label, kills, rows in (
        (
            f"{ms:.0f} ms stub server (ollama backend, 200 calls, concurrency 1)",
            stub_kills,
            "predictions",
        ),
        (
            f"{ms:.0f} ms stub judge (judge run crux-answerability, {judge.n_calls} judgments, "
            "concurrency 1)",
            judge_kills,
            "judgments",
        ),
        ("embedded reader (800 calls of controlled-200, concurrency 1)", emb_kills, "predictions"),
    ):
        lost_s = [k["lost_s"] for k in kills]
        figs += [
            figure(
                f"kill -9 vs {label}: answered calls lost per kill",
                [k["lost"] for k in kills],
                "calls",
                SCRIPT,
            ),
            figure(
                f"kill -9 vs {label}: answers lost per kill, worst of {len(kills)}",
                lost_s,
                "s worth",
                SCRIPT,
                bound=LOST_BOUND_S,
                value=max(lost_s),
            ),
            figure(
                f"kill -9 vs {label}: rerun calls for committed {rows}, all kills",
                [k["repeated"] for k in kills],
                "calls",
                SCRIPT,
                bound=1,
                value=sum(k["repeated"] for k in kills),
            ),
        ]
    return figs


def main(argv: list[str] | None = None) -> int:
    """Print the figures; exit status 1 when one misses its bound."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="kills per backend (5)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    return print_figures(results(args.repeats))


if __name__ == "__main__":
    sys.exit(main())
