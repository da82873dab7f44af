"""Numbers with provenance: one LaTeX macro per headline number, and a paper that checks itself.

``python -m core export numbers --out numbers.tex`` writes one ``newcommand`` per number the
pages show (ONCU per run and condition with its CI, sample means, the retrieved - full paired
contrast and its p, CUE-R operator effects, DOLCE category counts, fan-in degradation, CRUX
metrics), each preceded by a comment naming the store, the runs, their digests, the
definition and the exact command that recomputes it; ``numbers.json`` beside it holds the same
with full precision. ``python -m core report check-paper numbers.tex [paper.tex ...]``
recomputes every macro from the store and lists those whose value changed, with why (issue 39).

Macro names (documented in docs/USER_GUIDE.md, "Numbers for the paper"): a prefix naming the
quantity, then each name part in CamelCase; a LaTeX macro name holds letters only, so digits
are spelled out one by one (``qwen25`` -> ``QwenTwoFive``) and other characters split parts.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from core.store.digests import run_digests

__all__ = [
    "CheckResult",
    "PaperNumber",
    "check_paper",
    "collect_numbers",
    "macro_part",
    "numbers_json",
    "numbers_tex",
    "provenance_comment",
    "read_numbers",
    "tool_version",
]

TOOL = "evidence-diagnostics"
_DIGITS = ("Zero", "One", "Two", "Three", "Four", "Five", "Six", "Seven", "Eight", "Nine")
#: The conditions an ONCU / sample-mean macro is written for, in the tables' order.
_CONDITIONS = ("no_evidence", "full_context", "retrieved", "oracle")
#: Prefixes of this tool's macros (a paper's use of one that no longer exists is flagged).
PREFIXES = ("oncu", "mean", "contrast", "contrastP", "cuer", "cuerP", "dolce", "fanin", "crux")


@dataclass(frozen=True, slots=True)
class PaperNumber:
    """One headline number as a macro.

    Attributes:
        macro: the macro's name without the backslash (letters only).
        text: the macro's body, formatted as the exported tables are (``0.583 [0.506, 0.663]``,
            ``$<0.001$``).
        value: the number at full precision (None when it could not be computed).
        ci_low: the lower CI bound, or None.
        ci_high: the upper CI bound, or None.
        what: what the number is, in words (quantity, run, condition, score field).
        definition: where it is defined (SPEC section and paper).
        runs: the runs it is computed from.
        dataset: their dataset.
        command: the command that prints it.
    """

    macro: str
    text: str
    value: float | None
    ci_low: float | None
    ci_high: float | None
    what: str
    definition: str
    runs: tuple[str, ...]
    dataset: str
    command: str


def tool_version() -> str:
    """The tool's version (``pyproject.toml``)."""
    try:
        with (Path(__file__).resolve().parents[2] / "pyproject.toml").open("rb") as fh:
            return str(tomllib.load(fh)["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


# ------------------------------------------------------------------------------ names
def macro_part(name: str) -> str:
    """A name as letters only, CamelCase: ``hotpotqa_qwen25`` -> ``HotpotqaQwenTwoFive``."""
    out: list[str] = []
    for part in re.split(r"[^A-Za-z0-9]+", str(name)):
        for chunk in re.findall(r"[A-Za-z]+|[0-9]", part):
            out.append(_DIGITS[int(chunk)] if chunk.isdigit() else chunk[:1].upper() + chunk[1:])
    return "".join(out) or "X"


# ------------------------------------------------------------------------------ format
def _finite(x: Any) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def _num(x: float | None, digits: int = 3) -> str:
    if x is None:
        return "--"
    text = f"{x:.{digits}f}"
    return "0." + "0" * digits if text == "-0." + "0" * digits else text


def _with_ci(v: float | None, lo: float | None, hi: float | None, digits: int = 3) -> str:
    if lo is None or hi is None:
        return _num(v, digits)
    return f"{_num(v, digits)} [{_num(lo, digits)}, {_num(hi, digits)}]"


def p_text(p: Any) -> str:
    """A p-value as the tables print it: three decimals, ``$<0.001$`` below 0.001."""
    v = _finite(p)
    if v is None:
        return "--"
    return "$<0.001$" if v < 0.001 else _num(v)


# ------------------------------------------------------------------------------ collect
@dataclass
class _Collector:
    """Numbers as they are found, with unique macro names and the notes of what is missing."""

    numbers: list[PaperNumber] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _seen: set[str] = field(default_factory=set)

    def add(
        self,
        macro: str,
        text: str,
        value: Any,
        what: str,
        definition: str,
        runs: Sequence[str],
        dataset: str,
        command: str,
        ci: tuple[Any, Any] = (None, None),
    ) -> None:
        name, i = macro, 1
        while name in self._seen:  # two runs whose names spell the same letters
            i += 1
            name = f"{macro}{_DIGITS[i % 10]}" if i < 10 else f"{macro}X{macro_part(str(i))}"
        if name != macro:
            self.notes.append(f"\\{macro} is taken: this one is \\{name} ({what})")
        self._seen.add(name)
        self.numbers.append(
            PaperNumber(
                macro=name,
                text=text,
                value=_finite(value),
                ci_low=_finite(ci[0]),
                ci_high=_finite(ci[1]),
                what=what,
                definition=definition,
                runs=tuple(runs),
                dataset=str(dataset),
                command=command,
            )
        )


def _oncu_numbers(c: _Collector, store: Any, run: str, dataset: str, score: str) -> None:
    # function-level (start-up time): the report modules load every method; the CLI's --help
    # and the pages that never export numbers do not need them
    from core.commands.report import oncu_report, paired_report

    cmd = f"python -m core report oncu --run {run} --score-field {score} --json"
    rows = oncu_report(store, run, score_field=score)
    for r in rows:
        cond = str(r["condition"])
        v, lo, hi = (_finite(r.get(k)) for k in ("oncu_clipped", "oncu_ci_low", "oncu_ci_high"))
        c.add(
            f"oncu{macro_part(run)}{macro_part(cond)}",
            _with_ci(v, lo, hi),
            v,
            f"ONCU (clipped mean over valid groups, 95% bootstrap CI) of run {run}, "
            f"condition {cond}, score {score}; {r.get('valid_groups')} of "
            f"{r.get('total_groups')} groups valid",
            "SPEC §6.5; ONCU paper §3 (Eq. 1-3)",
            [run],
            dataset,
            cmd,
            (lo, hi),
        )
    if rows:
        means = rows[0].get("sample_means") or {}
        for cond in _CONDITIONS:
            if cond in means:
                v = _finite(means[cond])
                c.add(
                    f"mean{macro_part(run)}{macro_part(cond)}",
                    _num(v),
                    v,
                    f"sample mean of {score} of run {run}, condition {cond}",
                    "SPEC §6.4; ONCU paper Table 6",
                    [run],
                    dataset,
                    cmd,
                )
    conds = {str(r["condition"]) for r in rows} | set(
        (rows[0].get("sample_means") or {}) if rows else ()
    )
    if {"retrieved", "full_context"} <= conds:
        pcmd = (
            f"python -m core report paired --run {run} --a retrieved --b full_context "
            f"--score-field {score} --json"
        )
        for r in paired_report(store, run, "retrieved", "full_context", score_field=score):
            v, lo, hi = (_finite(r.get(k)) for k in ("mean", "ci_low", "ci_high"))
            stem = f"{macro_part(run)}RetrievedMinusFullContext"
            c.add(
                f"contrast{stem}",
                _with_ci(v, lo, hi),
                v,
                f"paired contrast retrieved - full_context of {score}, run {run}, "
                f"n = {r.get('n')}, 95% CI",
                "SPEC §6.6; ONCU paper §7.6",
                [run],
                dataset,
                pcmd,
                (lo, hi),
            )
            test = r.get("p_method") or r.get("p_test") or "as report paired prints it"
            c.add(
                f"contrastP{stem}",
                p_text(r.get("p")),
                r.get("p"),
                f"p of the paired contrast retrieved - full_context, run {run} ({test})",
                "SPEC §6.6; ONCU paper §7.6",
                [run],
                dataset,
                pcmd,
            )


def _cuer_numbers(c: _Collector, store: Any, run: str, dataset: str) -> None:
    from core.cuer.metrics import intervention_report

    cmd = f"python -m core report interventions --run {run} --json"
    rep = intervention_report(store, run)
    for r in rep.get("paired", []):
        op, var, metric = str(r["operator"]), str(r.get("variant") or ""), str(r["metric"])
        stem = (
            f"{macro_part(run)}{macro_part(op)}{macro_part(var) if var else ''}{macro_part(metric)}"
        )
        v, lo, hi = (_finite(r.get(k)) for k in ("delta", "ci_low", "ci_high"))
        label = op + (f":{var}" if var else "")
        c.add(
            f"cuer{stem}",
            _with_ci(v, lo, hi),
            v,
            f"CUE-R effect of {label} on {metric} (original - perturbed), run {run}, "
            f"n = {r.get('n')}, 95% CI",
            "SPEC §7; CUE-R paper §4",
            [run],
            dataset,
            cmd,
            (lo, hi),
        )
        c.add(
            f"cuerP{stem}",
            p_text(r.get("p")),
            r.get("p"),
            f"p of the CUE-R effect of {label} on {metric}, run {run}",
            "SPEC §7; CUE-R paper §4",
            [run],
            dataset,
            cmd,
        )


def _dolce_numbers(c: _Collector, store: Any, run: str, dataset: str) -> None:
    from core.commands.dolce import dolce_report

    cmd = f"python -m core report dolce --run {run} --json"
    tasks = dolce_report(store, run).get("tasks", [])
    for t in tasks:
        task = str(t["task"])
        stem = macro_part(run) + (macro_part(task) if len(tasks) > 1 else "")
        for cat in ("I", "II", "III", "IV", "V"):
            n = t.get(f"n_{cat}")
            if n is None:
                continue
            c.add(
                f"dolce{stem}Cat{cat}",
                str(int(n)),
                n,
                f"DOLCE problems of category {cat} in task {task}, run {run} (of {t.get('n')})",
                "SPEC §8; DOLCE paper §4 (Table 2)",
                [run],
                dataset,
                cmd,
            )


def _fanin_numbers(c: _Collector, store: Any, run: str, dataset: str, score: str) -> None:
    from core.fanin.metrics import fanin_report

    cmd = f"python -m core report fanin --runs {run} --score-field {score} --json"
    try:
        res = fanin_report(store, [run], score)
    except ValueError as exc:  # no fan-in buckets in this run: not a fan-in number
        c.notes.append(f"fan-in of run {run}: {str(exc).splitlines()[0]}")
        return
    for r in res.degradation.to_dict("records"):
        v = _finite(r.get("rel_degradation"))
        if v is None:
            continue
        lo, hi = _finite(r.get("rel_ci_low")), _finite(r.get("rel_ci_high"))
        pct = [None if x is None else 100 * x for x in (v, lo, hi)]
        c.add(
            f"fanin{macro_part(str(r['system']))}RelDrop",
            _with_ci(*pct, digits=1) + "\\%",
            v,
            f"relative degradation (AC_high - AC_single) / AC_single of {r['system']} "
            f"(AC = 100 x {score}), single n = {r.get('n_single')}, high n = {r.get('n_high')}",
            "SPEC §9; AuthTrace fan-in paper §4",
            [run],
            dataset,
            cmd,
            (lo, hi),
        )


def _crux_numbers(c: _Collector, store: Any, dataset: str) -> None:
    from core.crux.metrics import crux_report

    cmd = f"python -m core report crux --dataset {dataset} --json"
    res = crux_report(store, dataset)
    for r in res.aggregate.to_dict("records"):
        for key, name in (("coverage", "Cov"), ("alpha_ndcg", "AlphaNdcg"), ("density", "Den")):
            v = _finite(r.get(key))
            c.add(
                f"crux{macro_part(dataset)}{macro_part(str(r['retriever']))}"
                f"K{macro_part(str(r['k']))}{name}",
                _num(v),
                v,
                f"CRUX {key} of retriever {r['retriever']} at k = {r['k']} over dataset "
                f"{dataset} (n = {r.get('n')})",
                "SPEC §10; CRUX paper §3",
                [],
                dataset,
                cmd,
            )


def collect_numbers(
    store: Any, runs: Iterable[str] | None = None, score_field: str = "f1_relaxed"
) -> tuple[list[PaperNumber], list[str]]:
    """Every headline number of the runs (all runs when None), and notes on what is missing.

    Conditions and imported runs give ONCU, sample means and the paired contrast (and fan-in
    degradation when their instances span fan-in buckets), intervention runs the CUE-R
    effects, probe runs the DOLCE category counts; datasets with CRUX sub-questions give the
    CRUX metrics. Judge, rerun and planned runs give none.
    """
    frame = store.runs_frame(live=False)
    if runs is not None:
        wanted = set(runs)
        unknown = sorted(wanted - set(frame["run_id"]))
        if unknown:
            raise ValueError(f"no such run: {', '.join(unknown)}")
        frame = frame[frame["run_id"].isin(wanted)]
    c = _Collector()
    frame = frame.sort_values("run_id")
    kinds: dict[str, Callable[[str, str], None]] = {
        "conditions": lambda r, d: (
            _oncu_numbers(c, store, r, d, score_field),
            _fanin_if_any(c, store, r, d, score_field),
        ),
        "imported": lambda r, d: (
            _oncu_numbers(c, store, r, d, score_field),
            _fanin_if_any(c, store, r, d, score_field),
        ),
        "interventions": lambda r, d: _cuer_numbers(c, store, r, d),
        "probes": lambda r, d: _dolce_numbers(c, store, r, d),
    }
    for run, dataset, kind, n in zip(
        frame["run_id"], frame["dataset_id"], frame["kind"], frame["n_predictions"], strict=True
    ):
        if kind in kinds and int(n) > 0:
            kinds[kind](str(run), str(dataset))
    for dataset in sorted({str(d) for d in frame["dataset_id"].dropna()}):
        subq, _ = store.crux_judgments(dataset)
        if not subq.empty:
            _crux_numbers(c, store, dataset)
    return c.numbers, c.notes


def _fanin_if_any(c: _Collector, store: Any, run: str, dataset: str, score: str) -> None:
    frame = store.analysis_frame([run])
    if "fan_in" in frame.columns and frame["fan_in"].dropna().nunique() >= 2:
        _fanin_numbers(c, store, run, dataset, score)


# ------------------------------------------------------------------------------ write
def _provenance(store: Any, numbers: Sequence[PaperNumber]) -> dict[str, Any]:
    runs = sorted({r for n in numbers for r in n.runs})
    datasets = sorted({n.dataset for n in numbers})
    return {
        "tool": TOOL,
        "version": tool_version(),
        "written_at": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "store": str(Path(store.path).resolve()),
        "data_version": {d: list(store.data_version(d)) for d in datasets},
        "runs": run_digests(store, runs),
    }


def numbers_json(
    store: Any, numbers: Sequence[PaperNumber], notes: Sequence[str], score_field: str
) -> dict:
    """The sidecar: provenance, every number at full precision, and the notes."""
    return _provenance(store, numbers) | {
        "score_field": score_field,
        "numbers": [asdict(n) | {"runs": list(n.runs)} for n in numbers],
        "notes": list(notes),
    }


def _comment(text: str) -> str:
    return " ".join(str(text).split())  # one line: a newline in a name cannot end the comment


def numbers_tex(sidecar: dict[str, Any]) -> str:
    """``numbers.tex``: a header, then per number a comment block and its ``newcommand``."""
    runs = sidecar["runs"]
    lines = [
        f"% Numbers for the paper, written by {TOOL} {sidecar['version']} "
        f"on {sidecar['written_at']} (python -m core export numbers).",
        f"% store: {_comment(sidecar['store'])}",
        "% Check them against the store: python -m core report check-paper THIS_FILE "
        "[paper.tex ...]",
        "% The same numbers at full precision: the .json file of the same name.",
    ]
    for note in sidecar["notes"]:
        lines.append(f"% note: {_comment(note)}")
    for n in sidecar["numbers"]:
        lines.append("")
        lines.append(f"% \\{n['macro']}: {_comment(n['what'])}")
        lines.append(f"% definition: {_comment(n['definition'])}")
        for run in n["runs"]:
            d = runs.get(run, {})
            lines.append(
                f"% run {_comment(run)} (dataset {_comment(n['dataset'])}, data version "
                f"{(sidecar['data_version'].get(n['dataset']) or [0, '?'])[1]}, "
                f"{d.get('n', 0)} predictions, digest {d.get('predictions', '-')}/"
                f"{d.get('scores', '-')})"
            )
        lines.append(f"% recompute: {_comment(n['command'])}")
        lines.append(f"\\newcommand{{\\{n['macro']}}}{{{n['text']}}}")
    return "\n".join(lines) + "\n"


def provenance_comment(
    store: Any, runs: Sequence[str], what: str, definition: str, command: str
) -> str:
    """LaTeX comment lines saying where an exported table comes from (issue 39 item 6).

    The same provenance as a number of ``export numbers``: the tool and its version, the
    store, each run with its dataset's data version, prediction count and digests, the
    definition and the command that writes the file again.
    """
    frame = store.runs_frame(live=False)
    datasets = dict(zip(frame["run_id"], frame["dataset_id"], strict=True))
    digests = run_digests(store, runs)
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [
        f"% {_comment(what)}: written by {TOOL} {tool_version()} on {stamp}",
        f"% store: {_comment(Path(store.path).resolve())}",
        f"% definition: {_comment(definition)}",
    ]
    for run in runs:
        d, dataset = digests.get(run, {}), datasets.get(run)
        version = store.data_version(str(dataset))[1] if dataset is not None else "?"
        lines.append(
            f"% run {_comment(run)} (dataset {_comment(dataset)}, data version {version}, "
            f"{d.get('n', 0)} predictions, digest {d.get('predictions', '-')}/"
            f"{d.get('scores', '-')})"
        )
    lines.append(f"% recompute: {_comment(command)}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------ check
_NEWCOMMAND = re.compile(r"\\(?:re)?newcommand\{\\([A-Za-z]+)\}\{(.*)\}\s*$")


def read_numbers(path: Path) -> dict[str, Any]:
    """A written ``numbers.tex`` with its sidecar (``.json`` beside it) when present.

    Returns:
        ``{"macros": {name: text}, "sidecar": dict | None}``.

    Raises:
        ValueError: the file cannot be read or defines no macro (one line naming it).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read ({type(exc).__name__}: {exc})") from None
    macros = {}
    for line in text.splitlines():
        m = _NEWCOMMAND.match(line.strip())
        if m:
            macros[m.group(1)] = m.group(2)
    if not macros:
        raise ValueError(f"{path}: defines no \\newcommand: not a file of 'export numbers'")
    sidecar = None
    side = Path(path).with_suffix(".json")
    if side.is_file():
        try:
            sidecar = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{side}: not the sidecar of {path} ({exc})") from None
    return {"macros": macros, "sidecar": sidecar}


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What ``report check-paper`` found.

    Attributes:
        changed: ``(macro, old, new, why)`` for each macro whose value changed.
        gone: macros of the file that the store no longer gives (``(macro, old, why)``).
        literals: ``(file, line, literal, macros)``: a number typed in the paper that equals
            a current macro's value.
        stale_uses: ``(file, line, macro)``: a macro the paper uses that no longer exists.
        n_checked: macros compared.
    """

    changed: list[tuple[str, str, str, str]]
    gone: list[tuple[str, str, str]]
    literals: list[tuple[str, int, str, list[str]]]
    stale_uses: list[tuple[str, int, str]]
    n_checked: int

    @property
    def stale(self) -> bool:
        """Whether any number of the paper is out of date."""
        return bool(self.changed or self.gone or self.stale_uses)


def _why(old: dict[str, Any] | None, new: dict[str, Any], runs: Sequence[str]) -> str:
    if old is None:
        return "no sidecar (.json) to tell why"
    reasons = []
    for run in runs:
        a, b = old.get("runs", {}).get(run), new["runs"].get(run)
        if a is None or b is None:
            reasons.append(f"run {run} {'is new' if a is None else 'is gone'}")
        elif a.get("predictions") != b.get("predictions"):
            reasons.append(
                f"rerun: the predictions of {run} changed ({a.get('n')} -> {b.get('n')} rows)"
            )
        elif a.get("scores") != b.get("scores"):
            reasons.append(f"re-score: the scores of {run} changed (predictions unchanged)")
    if reasons:
        return "; ".join(reasons)
    if old.get("version") != new["version"]:
        return f"tool version {old.get('version')} -> {new['version']} (same data)"
    return "same data and tool version: the definition's options changed"


def _ours(name: str) -> bool:
    """Whether a macro name has the shape of this tool's (a prefix, then a capital)."""
    return any(name.startswith(p) and name[len(p) : len(p) + 1].isupper() for p in PREFIXES)


_LITERAL = re.compile(r"(?<![\w.\\])[-+]?\d+\.\d+(?!\w|\.\d)")
_USE = re.compile(r"\\([A-Za-z]+)")


def check_paper(
    store: Any, numbers_path: Path, papers: Sequence[Path] = (), score_field: str | None = None
) -> CheckResult:
    """Recompute every macro of a ``numbers.tex`` and compare; scan the paper's ``.tex``.

    Args:
        store: the store to recompute from.
        numbers_path: a file written by ``export numbers``.
        papers: the paper's ``.tex`` files (numbers typed literally, macros that are gone).
        score_field: the score field the numbers used (default: the sidecar's, else
            ``f1_relaxed``).
    """
    old = read_numbers(numbers_path)
    side = old["sidecar"]
    field_ = score_field or (side or {}).get("score_field") or "f1_relaxed"
    known = set(store.runs_frame(live=False)["run_id"])
    wanted = sorted({r for n in (side or {}).get("numbers", []) for r in n["runs"]} & known)
    numbers, notes = collect_numbers(store, wanted if side else None, field_)
    new = numbers_json(store, numbers, notes, field_)
    now = {n.macro: n for n in numbers}
    old_runs = {n["macro"]: n["runs"] for n in (side or {}).get("numbers", [])}
    changed, gone = [], []
    for macro, text in old["macros"].items():
        runs = old_runs.get(macro, [])
        if macro not in now:
            gone.append((macro, text, _why(side, new, runs) if runs else "no longer computed"))
        elif now[macro].text != text:
            changed.append((macro, text, now[macro].text, _why(side, new, runs)))
    literals: list[tuple[str, int, str, list[str]]] = []
    stale: list[tuple[str, int, str]] = []
    by_value: dict[str, list[str]] = {}
    for n in numbers:
        head = n.text.split(" ")[0]
        if re.fullmatch(r"[-+]?\d+\.\d+", head):
            by_value.setdefault(head, []).append(n.macro)
    for paper in papers:
        try:
            lines = Path(paper).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"{paper}: cannot read ({type(exc).__name__})") from None
        for i, line in enumerate(lines, start=1):
            body = re.split(r"(?<!\\)%", line, maxsplit=1)[0]
            if _NEWCOMMAND.match(body.strip()):
                continue
            for m in _LITERAL.finditer(body):
                if m.group(0) in by_value:
                    literals.append((str(paper), i, m.group(0), by_value[m.group(0)]))
            for m in _USE.finditer(body):
                name = m.group(1)
                if name not in now and (name in old["macros"] or _ours(name)):
                    stale.append((str(paper), i, name))
    return CheckResult(changed, gone, literals, stale, len(old["macros"]))
