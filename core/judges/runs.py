"""Judge runs: a rubric (:mod:`core.judges`) applied by a judge backend, as a run (issue 20).

A judge run is a run row of kind ``judge`` (:func:`core.execution.runs.open_run`), its judgments
rows
of the ``judgments`` table (:mod:`core.store.judgments`). What is judged:

- ``crux-answerability``: every (stored sub-question, passage) pair of a *dataset* (the gold
  passages P*, as CRUX pre-judges, or ``all``); the judgments are CRUX's ratings (the store's
  ``answerability`` view), so ``report crux --judge NAME`` uses them (``judge crux`` is this
  rubric's run under a judge's name);
- ``crux-coverage``: every (answer, sub-question) pair of a *run*'s predictions (condition
  ``retrieved`` by default). Sub-questions are the dataset's stored ones; an instance without
  any gets one derived sub-question, its own question (sq id ``question``), and says so;
- ``authtrace-correctness``: every answer of a run's plain conditions. Our datasets carry no
  atomic claim units: the gold claim units are the gold answer (one claim), the reference
  answer is the gold answer;
- ``authtrace-evidence``: per prediction with an evidence pack (:func:`core.fanin.
  evidence_pack`: shown passages of ``retrieved`` / ``oracle``, cited ones of
  ``full_context``), one ER call per gold passage (the gold evidence units) against the pack's
  canonical segments, and one EP call per segment against all gold units.

A failed prediction (``error`` set) is not an answer and is not judged; the count says so.

Execution is the engine's (:func:`core.execution.engine.execute_work`, the one loop that calls a
model,
with :class:`JudgmentWork`): stored judgments are skipped (a rerun makes no call; a failed one
is made again), cached replies are reused (key: backend kind, model digest or name, options
hash, prompt hash; each judgment is asked, even one whose prompt another shares), calls run
on ``concurrency`` threads (capped as every run's), and judgments are committed by the
engine's writer within :data:`core.execution.engine.COMMIT_S` of their answer, each batch with the
run's
counts, so a kill loses at most about a second of judgments. A failed call is stored with its
``error`` and no rating; the run ends ``done``, ``partial`` (some calls failed), ``failed``
(all did) or ``cancelled``. This module plans, asks (:meth:`JudgmentWork.call`) and builds rows.
The lexical judge (:class:`core.judges.lexical.LexicalJudge`) gets the rubric's fields instead
of the prompt; its replies are cached and stored the same way.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from core.backends import make_backend
from core.backends.base import Backend, Reply
from core.crux.metrics import judge_messages
from core.execution.engine import Progress, WriteContext, execute_work
from core.execution.limits import cap_reply
from core.execution.prompts import prompt_hash
from core.execution.runs import open_run, present
from core.execution.write import WriteFn
from core.fanin.metrics import evidence_pack
from core.judges.lexical import LexicalJudge
from core.judges.rubrics import Rubric, authtrace_messages, canonical_segments, get_rubric
from core.store import Store, StoreError
from core.types import Instance, Passage, stored_ids

__all__ = [
    "DERIVED_SQ",
    "default_conditions",
    "judge_config",
    "answerability_pairs",
    "JudgeSummary",
    "judgment_row",
    "make_judge",
    "JudgmentWork",
    "plan_judgments",
    "PlannedJudgment",
    "run_judge",
]

#: Sub-question id of the one derived sub-question (the instance's own question) of an
#: instance without stored sub-questions (``crux-coverage``).
DERIVED_SQ = "question"
_Key = tuple[str, str, str, str]


@dataclass(frozen=True, slots=True)
class PlannedJudgment:
    """One judge call.

    Attributes:
        target_run: the judged run ('' for a dataset's passages).
        instance_id: the instance.
        condition: the judged prediction's condition ('' for passages).
        item: what in it (``<sq>|<passage>``, ``<sq>``, ``ac``, ``er:<gold id>``,
            ``ep:<segment no.>``).
        template: the rubric template the reply answers (its parser), ``user`` / ``ac`` /
            ``er`` / ``ep``.
        messages: the chat messages sent to a model judge.
        prompt_hash: hash of ``messages`` (the cache key's part).
        fields: the values the prompt shows, for the lexical judge.
    """

    target_run: str
    instance_id: str
    condition: str
    item: str
    template: str
    messages: tuple[Mapping[str, str], ...]
    prompt_hash: str
    fields: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> _Key:
        """The judgment's key in its run."""
        return (self.target_run, self.instance_id, self.condition, self.item)


def _planned(
    target: str,
    iid: str,
    cond: str,
    item: str,
    template: str,
    msgs: list[dict[str, str]],
    fields: Mapping[str, Any],
) -> PlannedJudgment:
    return PlannedJudgment(
        target, iid, cond, item, template, tuple(msgs), prompt_hash(msgs), dict(fields)
    )


@dataclass(frozen=True, slots=True)
class JudgeSummary:
    """What one judge execution did.

    Attributes:
        run: the judge run.
        rubric: the rubric's name.
        planned: judgments planned.
        executed: calls sent to the judge.
        cached: calls served from the response cache.
        skipped_existing: judgments already stored (not made again).
        errors: failed calls (stored with their error, no rating).
        parse_errors: replies that did not read as a rating (CRUX: rated 0; AuthTrace: none).
        not_judged: predictions left out because their call had failed (no answer).
        seconds: wall-clock seconds.
        status: the run's final status.
        notes: lines to show (derived sub-questions, the baseline label ...).
    """

    run: str
    rubric: str
    planned: int
    executed: int
    cached: int
    skipped_existing: int
    errors: int
    parse_errors: int
    not_judged: int
    seconds: float
    status: str
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The summary as a JSON-ready dict."""
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


# ------------------------------------------------------------------------ planning


def default_conditions(rubric: str) -> tuple[str, ...]:
    """The conditions a rubric judges by default (``crux-coverage``: the retrieved one)."""
    if rubric == "crux-coverage":
        return ("retrieved",)
    if rubric == "authtrace-evidence":
        return ("retrieved", "oracle", "full_context")
    return ("no_evidence", "full_context", "retrieved", "oracle")


def _passage_text(inst: Instance, pid: str) -> str | None:
    for p in inst.passages:
        if p.passage_id == pid:
            return f"{p.title}\n{p.text}" if p.title else p.text
    return None


def plan_judgments(
    store: Store,
    rubric: str,
    *,
    dataset: str | None = None,
    run: str | None = None,
    conditions: Iterable[str] | None = None,
    passages: str = "gold",
) -> tuple[str, list[PlannedJudgment], dict[str, Any]]:
    """Plan a rubric's judge calls.

    Args:
        store: the store.
        rubric: a registered rubric name.
        dataset: the dataset (``crux-answerability``).
        run: the judged run (the other rubrics).
        conditions: the judged conditions (default :func:`default_conditions`).
        passages: ``gold`` or ``all`` (``crux-answerability``).

    Returns:
        ``(dataset, planned calls, info)``; info: ``not_judged`` (failed predictions left
        out), ``derived_sq`` (instances judged against their own question), ``notes``.

    Raises:
        ValueError: unknown rubric, dataset or run, a missing ``--dataset`` / ``--run``, no
            sub-questions for ``crux-answerability``, a bad ``passages``.
    """
    rub = get_rubric(rubric)
    info: dict[str, Any] = {"not_judged": 0, "derived_sq": 0, "notes": []}
    if rub.name == "crux-answerability":
        if not dataset:
            raise ValueError("crux-answerability judges a dataset's passages: give --dataset")
        if run:
            raise ValueError("crux-answerability judges passages, not a run: drop --run")
        return dataset, _plan_answerability(store, dataset, passages), info
    if not run:
        raise ValueError(f"{rub.name} judges a run's predictions: give --run")
    row = store.run_row(run)
    if row is None:
        raise ValueError(f"no run '{run}' in {store.path}")
    ds = str(row.get("dataset_id") or "")
    if dataset and dataset != ds:
        raise ValueError(f"run '{run}' is of dataset '{ds}', not '{dataset}'")
    conds = tuple(conditions or default_conditions(rub.name))
    preds = store.prediction_rows(run)
    preds = preds[(preds["variant"] == "") & preds["condition"].isin(conds)]
    failed = preds["error"].map(lambda e: present(e) and bool(str(e).strip()))
    info["not_judged"] = int(failed.sum())
    preds = preds[~failed]
    wanted = sorted(set(preds["instance_id"]))
    by_inst = {i.instance_id: i for i in store.load_instances(ds, wanted)} if wanted else {}
    plan: list[PlannedJudgment] = []
    if rub.name == "crux-coverage":
        plan = _plan_coverage(store, ds, run, preds, by_inst, info)
    elif rub.name == "authtrace-correctness":
        plan = _plan_correctness(run, preds, by_inst)
    else:
        plan = _plan_evidence(run, preds, by_inst)
    if info["not_judged"]:
        info["notes"].append(
            f"{info['not_judged']} predictions not judged: their call failed (no answer)"
        )
    return ds, plan, info


def answerability_pairs(
    store: Store, dataset: str, sq: pd.DataFrame, passages: str = "gold"
) -> Iterator[tuple[Any, Passage, str, list[dict[str, str]]]]:
    """Every (sub-question, passage) pair CRUX's answerability judge rates (seed 002 Fig. 8).

    Yields ``(sub-question row, passage, context, messages)`` in the sub-questions' order, each
    instance's passages in order (only gold ones when ``passages`` is ``gold``); instances not
    stored are skipped. The ``crux-answerability`` judge runs plan from here.
    """
    wanted = sorted(set(sq["instance_id"]))
    by_inst = {i.instance_id: i for i in store.load_instances(dataset, wanted)}
    for row in sq.itertuples(index=False):
        inst = by_inst.get(row.instance_id)
        if inst is None:
            continue
        for p in inst.passages:
            if passages == "gold" and not p.is_gold:
                continue
            context = f"{p.title}\n{p.text}" if p.title else p.text
            yield row, p, context, judge_messages(str(row.text or ""), context)


def _plan_answerability(store: Store, dataset: str, passages: str) -> list[PlannedJudgment]:
    if passages not in ("gold", "all"):
        raise ValueError(f"passages must be 'gold' or 'all', got {passages!r}")
    if dataset not in store.dataset_names():
        raise ValueError(f"unknown dataset {dataset!r}")
    sq, _ = store.crux_judgments(dataset)
    if sq.empty:
        raise ValueError(
            f"dataset {dataset!r} has no sub-questions; store them first (import crux FILE)"
        )
    out = []
    for row, p, context, msgs in answerability_pairs(store, dataset, sq, passages):
        out.append(
            _planned(
                "",
                row.instance_id,
                "",
                f"{row.sq_id}|{p.passage_id}",
                "user",
                msgs,
                {"question": str(row.text or ""), "context": context},
            )
        )
    return out


def _crux_msgs(question: str, context: str) -> list[dict[str, str]]:
    return judge_messages(question, context)


def _plan_coverage(
    store: Store,
    dataset: str,
    run: str,
    preds: pd.DataFrame,
    by_inst: Mapping[str, Instance],
    info: dict[str, Any],
) -> list[PlannedJudgment]:
    sq, _ = store.crux_judgments(dataset)
    by_sq: dict[str, list[tuple[str, str]]] = {}
    for r in sq.itertuples(index=False):
        by_sq.setdefault(r.instance_id, []).append((str(r.sq_id), str(r.text or "")))
    out = []
    derived: set[str] = set()
    for r in preds.itertuples(index=False):
        inst = by_inst.get(r.instance_id)
        if inst is None:
            continue
        subs = by_sq.get(r.instance_id)
        if not subs:
            subs = [(DERIVED_SQ, inst.question)]
            derived.add(r.instance_id)
        answer = str(r.answer) if present(r.answer) else ""
        for sq_id, text in subs:
            out.append(
                _planned(
                    run,
                    r.instance_id,
                    r.condition,
                    sq_id,
                    "user",
                    _crux_msgs(text, answer),
                    {"question": text, "context": answer},
                )
            )
    info["derived_sq"] = len(derived)
    if derived:
        info["notes"].append(
            f"{len(derived)} instances have no stored sub-questions: each answer is judged "
            f"against the instance's own question (sub-question '{DERIVED_SQ}')"
        )
    return out


def _plan_correctness(
    run: str, preds: pd.DataFrame, by_inst: Mapping[str, Instance]
) -> list[PlannedJudgment]:
    out = []
    for r in preds.itertuples(index=False):
        inst = by_inst.get(r.instance_id)
        if inst is None:
            continue
        claims = [inst.gold_answer]
        answer = str(r.answer) if present(r.answer) else ""
        msgs = authtrace_messages(
            "ac",
            query=inst.question,
            gold_claim_units_json=json.dumps(claims, ensure_ascii=False),
            reference_answer=inst.gold_answer,
            predicted_answer=answer,
        )
        fields = {"claims": claims, "reference_answer": inst.gold_answer, "answer": answer}
        out.append(_planned(run, r.instance_id, r.condition, "ac", "ac", msgs, fields))
    return out


def _plan_evidence(
    run: str, preds: pd.DataFrame, by_inst: Mapping[str, Instance]
) -> list[PlannedJudgment]:
    out = []
    for r in preds.itertuples(index=False):
        inst = by_inst.get(r.instance_id)
        if inst is None:
            continue
        pack = evidence_pack(r.condition, stored_ids(r.input_passage_ids), stored_ids(r.cited_ids))
        if pack is None:
            continue
        gold = [p for p in inst.passages if p.is_gold]
        if not gold:
            continue
        units = [{"doc_id": p.doc_id or p.passage_id, "quote": p.text} for p in gold]
        texts = [t for pid in dict.fromkeys(pack) if (t := _passage_text(inst, pid)) is not None]
        segs = canonical_segments(texts)
        pack_json = json.dumps(segs, ensure_ascii=False)
        for p, unit in zip(gold, units, strict=True):
            msgs = authtrace_messages(
                "er",
                query=inst.question,
                gold_evidence_unit_json=json.dumps(unit, ensure_ascii=False),
                predicted_context_pack_json=pack_json,
            )
            out.append(
                _planned(
                    run,
                    r.instance_id,
                    r.condition,
                    f"er:{p.passage_id}",
                    "er",
                    msgs,
                    {"gold_unit": p.text, "pack": segs},
                )
            )
        units_json = json.dumps(units, ensure_ascii=False)
        for j, seg in enumerate(segs):
            msgs = authtrace_messages(
                "ep",
                query=inst.question,
                gold_evidence_units_json=units_json,
                predicted_evidence_unit_json=json.dumps(seg, ensure_ascii=False),
            )
            out.append(
                _planned(
                    run,
                    r.instance_id,
                    r.condition,
                    f"ep:{j:04d}",
                    "ep",
                    msgs,
                    {"segment": seg, "gold_units": [p.text for p in gold]},
                )
            )
    return out


# ------------------------------------------------------------------------ execution


def make_judge(kind: str, model: str | None = None, **settings: Any) -> Backend:
    """The judge backend: the lexical judge for ``embedded``, else a model backend.

    Raises:
        ValueError: an unknown kind (from :func:`core.backends.make_backend`).
    """
    if kind == "embedded":
        return LexicalJudge()  # type: ignore[return-value]
    return make_backend(kind, model, **settings)


def run_judge(
    store: Store,
    rubric: str,
    backend: Backend,
    *,
    name: str,
    dataset: str | None = None,
    run: str | None = None,
    conditions: Iterable[str] | None = None,
    passages: str = "gold",
    concurrency: int = 1,
    options: Mapping[str, Any] | None = None,
    progress: Callable[[Progress], None] | None = None,
    cancel: threading.Event | None = None,
    notes: str = "",
) -> JudgeSummary:
    """Plan and execute a judge run (resumable by ``name``); see the module docstring.

    Args:
        store: the store.
        rubric: a registered rubric name (:data:`core.judges.rubrics.RUBRICS`).
        backend: the judge (:func:`make_judge`).
        name: the judge run's id; the same name continues it.
        dataset: the judged dataset (``crux-answerability``).
        run: the judged run (the other rubrics).
        conditions: the judged conditions (default :func:`default_conditions`).
        passages: ``gold`` or ``all`` (``crux-answerability``).
        concurrency: threads calling the judge (capped as the engine caps it).
        options: generation options recorded on the run (part of the cache key).
        progress: called with a :class:`core.execution.engine.Progress` after each commit.
        cancel: set it to stop; the run is resumable.
        notes: free text stored on the run.

    Raises:
        RunBusyError: the judge run is running in another process.
        ValueError: see :func:`plan_judgments`; a stored run of that name with another
            configuration (rubric, version, target, backend, model, options).
    """
    rub = get_rubric(rubric)
    t0 = time.monotonic()
    conds = tuple(conditions or default_conditions(rub.name))
    ds, plan, info = plan_judgments(
        store, rub.name, dataset=dataset, run=run, conditions=conds, passages=passages
    )
    desc = backend.describe()
    extra = [desc["label"]] if desc.get("baseline") else []
    judge_cfg = judge_config(rub, run, conds, passages)
    with store.run_lock(name):
        open_run(
            store,
            backend,
            name,
            ds,
            options=options,
            retrieval={"judge": judge_cfg},
            kind="judge",
            notes=notes,
        )
        work = JudgmentWork(rub, f"{backend.name}:{backend.model}")
        out = execute_work(
            store,
            name,
            plan,
            backend,
            work,
            concurrency=concurrency,
            progress=progress,
            cancel=cancel,
            started=t0,
        )
    return JudgeSummary(
        run=name,
        rubric=rub.name,
        planned=out.planned,
        executed=out.executed,
        cached=out.cached,
        skipped_existing=out.skipped_existing,
        errors=out.errors,
        parse_errors=out.parse_errors,
        not_judged=info["not_judged"],
        seconds=out.seconds,
        status=out.status,
        notes=tuple(info["notes"] + extra),
    )


def judge_config(
    rub: Rubric, run: str | None, conds: Sequence[str], passages: str
) -> dict[str, Any]:
    """What a judge run records of itself (``retrieval.judge`` of its run row)."""
    return {
        "rubric": rub.name,
        "version": rub.version,
        "hash": rub.hash,
        "target_run": run or "",
        "conditions": [] if rub.name == "crux-answerability" else list(conds),
        "passages": passages if not run else None,
    }


def judgment_row(
    name: str,
    rub: Rubric,
    judge_model: str,
    call: PlannedJudgment,
    reply: Reply,
    hit: bool,
    ms: float,
) -> dict[str, Any]:
    """The stored row of one judge reply: parsed by the rubric unless the call failed.

    A live call (:func:`run_judge`) and an imported batch answer
    (:mod:`core.batch.judges`) are stored through this one function.
    """
    rating, perr = (None, None)
    if reply.error is None:
        rating, perr = rub.parse(reply.text, call.template)
    raw, _ = cap_reply(reply.text)
    return {
        "run_id": name,
        "rubric": rub.name,
        "rubric_version": rub.version,
        "rubric_hash": rub.hash,
        "judge_model": judge_model,
        "target_run": call.target_run,
        "instance_id": call.instance_id,
        "condition": call.condition,
        "item": call.item,
        "prompt_hash": call.prompt_hash,
        "raw_reply": raw,
        "rating": rating,
        "parse_error": perr,
        "error": reply.error,
        "cache_hit": hit,
        "latency_ms": ms,
    }


class JudgmentWork:
    """Planned judgments -> judgment rows: a judge run's :class:`core.execution.engine.Work`.

    Args:
        rub: the rubric (parses each reply).
        judge_model: ``backend:model`` of the judge, stored on each judgment.
    """

    pooled = False  # the judges have no worker processes
    shared = False  # every judgment is asked, even one whose prompt another shares

    def __init__(self, rub: Rubric, judge_model: str):
        self.rub, self.judge_model = rub, judge_model

    def key(self, item: PlannedJudgment) -> _Key:
        """The judgment's ``(target_run, instance_id, condition, item)``."""
        return item.key

    def stored(self, store: Store, run_id: str, con: Any) -> tuple[set[Any], set[Any]]:
        """The run's stored judgment keys: all, answered (a failed one is made again)."""
        stored_all = store.judgment_keys(run_id, ok_only=False, con=con)
        ok = store.judgment_keys(run_id, ok_only=True, con=con) if stored_all else set()
        return stored_all, ok

    def n_planned(self, keys: Sequence[Any], stored_all: set[Any], stored_ok: set[Any]) -> int:
        """The run's judgments once this plan is made (stored ones included)."""
        return len(stored_all | set(keys))

    def call(self, backend: Any, item: PlannedJudgment) -> Reply:
        """Ask the judge: the rubric's fields to the lexical judge, else the prompt."""
        try:
            if isinstance(backend, LexicalJudge):
                kind = "crux" if item.template == "user" else item.template
                return backend.rate(kind, item.fields)
            return backend.generate(list(item.messages))
        except Exception as exc:
            return Reply(text="", error=f"backend raised {type(exc).__name__}: {exc}")

    def row(
        self, ctx: WriteContext, item: PlannedJudgment, reply: Reply, hit: bool, ms: float, ck: str
    ) -> dict[str, Any]:
        """The judgment row (:func:`judgment_row`) and its cache entry (a new answer's)."""
        out = judgment_row(ctx.run_id, self.rub, self.judge_model, item, reply, hit, ms)
        out["_cache"] = (
            {
                "cache_key": ck,
                "backend": ctx.backend,
                "model": ctx.model_id,
                "options_hash": ctx.options_hash,
                "prompt_hash": item.prompt_hash,
                "response": json.dumps({"text": reply.text}),
            }
            if reply.error is None and not hit
            else None
        )
        return out

    def writer(
        self,
        store: Store,
        ctx: WriteContext,
        todo: Sequence[Any],
        n_planned: int,
        replace: Collection[Any],
    ) -> WriteFn:
        """Writes judgments, cache entries and the run's counts in one transaction a batch."""

        def write(rows: Sequence[dict[str, Any]], wall: float, finish: str | None) -> Any:
            if not rows and finish is None:
                return None
            cache = [r["_cache"] for r in rows if r["_cache"] is not None]
            with store.write_batch() as con:
                store.write_judgments(con, ctx.run_id, rows)
                if cache:
                    store.write_cache(con, cache)
                status = finish or "running"
                stored = store.finish_judge_run(con, ctx.run_id, status, n_planned, wall)
            return stored if finish is not None else None

        return write

    def fail(self, store: Store, ctx: WriteContext, n_planned: int) -> None:
        """Mark the run ``failed`` (a store locked past its timeout is let be)."""
        try:
            with store.write_batch() as con:
                store.finish_judge_run(con, ctx.run_id, "failed", n_planned, ctx.wall_seconds)
        except StoreError:
            pass
