"""The embedded lexical judge: a deterministic, offline *baseline* for every rubric (issue 20).

Not a language model: it reads the same fields the rubric's prompt shows (never more) and
maps token overlap to the rubric's scale, so every judged view works without a model server.
Its judgments are labelled as a baseline wherever they are shown (``describe()["label"]``,
:data:`LABEL`).

Tokens: lower-cased runs of letters and digits (and single CJK characters), minus a short
English stop-word list. ``overlap(a, b) = |tokens(a) ∩ tokens(b)| / |tokens(a)|`` over token
sets (0 when ``a`` has none). The mappings:

- ``crux-answerability`` / ``crux-coverage`` (0..5), o = overlap(sub-question, context):
  5 if o >= 0.8, 4 if o >= 0.6, 3 if o >= 0.45, 2 if o >= 0.3, 1 if o >= 0.15, else 0;
- ``authtrace-correctness`` (0..3): per gold claim, r = overlap(claim, answer): supported
  (r >= 0.8, counts 1), partial (r >= 0.5, counts 0.5), else missing (0); claim coverage c =
  the mean; answer precision p = overlap(answer, claims + reference answer). Score 3 if
  c >= 0.9 and p >= 0.5; 2 if c >= 0.6; 1 if c >= 0.3; else 0 (an empty answer scores 0);
- ``authtrace-evidence`` ER (0/1): covered when overlap(gold unit, whole pack) >= 0.5;
  EP (0/1): matched when max over gold units of overlap(segment, gold unit) >= 0.5.

Replies are written the way a model would answer the rubric (a bare digit for CRUX, the
rubric's JSON for AuthTrace), so the same parsers read them and the raw reply is stored.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from core.backends.base import Reply

__all__ = [
    "AC_CUTS",
    "CRUX_CUTS",
    "EVIDENCE_CUT",
    "LABEL",
    "LexicalJudge",
    "overlap",
    "tokens",
]

#: What every view says of the lexical judge's numbers.
LABEL = "lexical baseline judge (token overlap; not a language model)"
#: Overlap thresholds of the CRUX ratings 5, 4, 3, 2, 1 (below the last: 0).
CRUX_CUTS = (0.8, 0.6, 0.45, 0.3, 0.15)
#: Claim coverage thresholds of AC scores 2 and 1, and (with precision >= 0.5) 3.
AC_CUTS = {"3": 0.9, "2": 0.6, "1": 0.3, "precision": 0.5, "supported": 0.8, "partial": 0.5}
#: Overlap at which a gold unit is covered (ER) or a segment matched (EP).
EVIDENCE_CUT = 0.5

_TOKEN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by did do does for from had has have how in is it its of on or "
    "that the their this to was were what when where which who whom whose why with".split()
)


def tokens(text: Any) -> set[str]:
    """Content tokens of ``text``: lower-cased alphanumeric runs and CJK characters."""
    return {t for t in _TOKEN.findall(str(text or "").lower()) if t not in _STOP}


def overlap(a: Any, b: Any) -> float:
    """Share of ``a``'s content tokens found in ``b`` (0 when ``a`` has none)."""
    ta = tokens(a)
    return len(ta & tokens(b)) / len(ta) if ta else 0.0


def _crux(question: str, context: str) -> tuple[str, float]:
    o = overlap(question, context)
    rating = next((5 - i for i, cut in enumerate(CRUX_CUTS) if o >= cut), 0)
    return str(rating), o


def _ac(claims: Sequence[str], reference: str, answer: str) -> str:
    if not tokens(answer):
        return json.dumps({"score": 0, "reason": "lexical baseline: empty answer"})
    credit = []
    for c in claims:
        r = overlap(c, answer)
        credit.append(1.0 if r >= AC_CUTS["supported"] else 0.5 if r >= AC_CUTS["partial"] else 0.0)
    cov = sum(credit) / len(credit) if credit else 0.0
    prec = overlap(answer, " ".join([*claims, reference]))
    if cov >= AC_CUTS["3"] and prec >= AC_CUTS["precision"]:
        score = 3
    elif cov >= AC_CUTS["2"]:
        score = 2
    elif cov >= AC_CUTS["1"]:
        score = 1
    else:
        score = 0
    reason = f"lexical baseline: claim coverage {cov:.2f}, answer precision {prec:.2f}"
    return json.dumps({"score": score, "reason": reason})


def _er(gold_unit: str, pack: Sequence[str]) -> str:
    o = overlap(gold_unit, " ".join(pack))
    return json.dumps(
        {"covered": int(o >= EVIDENCE_CUT), "reason": f"lexical baseline: overlap {o:.2f}"}
    )


def _ep(segment: str, gold_units: Sequence[str]) -> str:
    scores = [overlap(segment, g) for g in gold_units]
    hits = [i for i, s in enumerate(scores) if s >= EVIDENCE_CUT]
    best = max(scores, default=0.0)
    return json.dumps(
        {
            "matched": int(bool(hits)),
            "matched_gold_indices": hits,
            "reason": f"lexical baseline: best overlap {best:.2f}",
        }
    )


class LexicalJudge:
    """The embedded lexical judge (see the module docstring); deterministic and offline.

    Attributes:
        name: ``embedded`` (the backend kind recorded on the judge run).
        model: ``lexical-judge-v1``.
    """

    name = "embedded"
    model = "lexical-judge-v1"

    def describe(self) -> dict[str, Any]:
        """Recorded on the judge run: kind, model, and the baseline label."""
        return {
            "kind": "embedded",
            "model": self.model,
            "model_digest": self.model,
            "baseline": True,
            "label": LABEL,
            "mapping": {
                "crux_cuts": list(CRUX_CUTS),
                "ac_cuts": AC_CUTS,
                "evidence_cut": EVIDENCE_CUT,
            },
        }

    def generate(
        self, messages: Sequence[Mapping[str, Any]], options: Mapping[str, Any] | None = None
    ) -> Reply:
        """Not supported: the lexical judge rates a rubric's fields (:meth:`rate`)."""
        return Reply(text="", error="the lexical judge rates rubric fields, not prompts")

    def rate(self, template: str, fields: Mapping[str, Any]) -> Reply:
        """The judge's reply to one rubric call.

        Args:
            template: ``crux`` (either CRUX rubric), ``ac``, ``er`` or ``ep``.
            fields: the values the rubric's prompt shows (see :mod:`core.judges.runs`).
        """
        t0 = time.perf_counter()
        try:
            if template == "crux":
                text, _ = _crux(fields["question"], fields["context"])
            elif template == "ac":
                text = _ac(fields["claims"], fields["reference_answer"], fields["answer"])
            elif template == "er":
                text = _er(fields["gold_unit"], fields["pack"])
            elif template == "ep":
                text = _ep(fields["segment"], fields["gold_units"])
            else:
                return Reply(text="", error=f"lexical judge: unknown template {template!r}")
        except Exception as exc:
            return Reply(text="", error=f"lexical judge failed: {type(exc).__name__}: {exc}")
        return Reply(
            text=text, latency_ms=(time.perf_counter() - t0) * 1e3, model_digest=self.model
        )
