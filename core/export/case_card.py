"""The case card: one instance for a paper, as LaTeX and as a figure (issue 19 item 5).

What the Case view shows, on one card: the question and the gold answer, the passages the
model was shown (in context order, each marked gold or distractor), and per run and condition
the answer, the cited ids (gold ones marked) and the chosen score. A failed call says so and
has no score (never a 0). Built from :func:`core.views.case.case_data`; no store, no
streamlit. Data strings are text: escaped for LaTeX, drawn as text in the figure
(:func:`core.figures.plain_text.plain_label`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from core.export.render import ExportSettings, latex_escape
from core.figures.plain_text import plain_label
from core.types import stored_ids

__all__ = ["CARD_SETTINGS", "CONDITION_ORDER", "card_rows", "case_card_figure", "case_card_latex"]

#: Conditions in the order a card lists them (others after, in stored order).
CONDITION_ORDER = ("no_evidence", "full_context", "retrieved", "oracle")
#: The card's size when drawn as a figure (PDF / SVG / PNG).
CARD_SETTINGS = ExportSettings(width=900, height=650, font_size=11)
#: Characters of a passage's text on the card (the rest is cut with an ellipsis).
PASSAGE_CHARS = 240


def _cut(text: str, n: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= n else text[: n - 1].rstrip() + "…"


def card_rows(
    case: Mapping[str, Any], score_field: str = "f1_relaxed"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(passages, answers)`` of a card.

    ``passages``: the passages shown to any listed prediction (every passage for
    ``full_context``, the input pack otherwise), in context order, with ``mark`` ``gold`` or
    ``distractor``. ``answers``: one row per plain-condition prediction (``variant`` empty),
    conditions in :data:`CONDITION_ORDER`: ``run``, ``condition``, ``answer`` (``call failed:
    <error>`` for a failed call), ``cited`` (ids, a gold id followed by ``*``) and ``score``
    (NaN for a failed or unscored call).
    """
    passages: pd.DataFrame = case["passages"]
    preds: pd.DataFrame = case["predictions"]
    plain = preds[preds["variant"].fillna("") == ""] if "variant" in preds else preds
    gold = set(passages.loc[passages["is_gold"].astype(bool), "passage_id"])
    shown: set[str] = set()
    for row in plain.itertuples(index=False):
        if row.condition == "full_context":
            shown |= set(passages["passage_id"])
        shown |= set(stored_ids(getattr(row, "input_passage_ids", None)))
    keep = passages[passages["passage_id"].isin(shown)].sort_values("ord")
    shown_rows = pd.DataFrame(
        {
            "passage_id": keep["passage_id"].astype(str),
            "mark": ["gold" if p in gold else "distractor" for p in keep["passage_id"]],
            "title": keep["title"].fillna("").astype(str),
            "text": [_cut(t, PASSAGE_CHARS) for t in keep["text"]],
        }
    )
    rank = {c: i for i, c in enumerate(CONDITION_ORDER)}
    ordered = plain.assign(_o=plain["condition"].map(lambda c: rank.get(c, len(rank))))
    ordered = ordered.sort_values(["run", "_o"], kind="stable")
    answers = []
    for row in ordered.to_dict("records"):
        error = row.get("error")
        error = "" if error is None or pd.isna(error) else str(error).strip()
        score = row.get(score_field)
        score = math.nan if error or score is None or pd.isna(score) else float(score)
        answers.append(
            {
                "run": str(row["run"]),
                "condition": str(row["condition"]),
                "answer": f"call failed: {_cut(error, 80)}"
                if error
                else str(row.get("answer") or ""),
                "cited": ", ".join(
                    i + ("*" if i in gold else "") for i in stored_ids(row.get("cited_ids"))
                ),
                "score": score,
            }
        )
    columns = ["run", "condition", "answer", "cited", "score"]
    return shown_rows, pd.DataFrame(answers, columns=columns)


def _score(value: float, digits: int) -> str:
    return "--" if value != value else f"{value:.{digits}f}"


def case_card_latex(
    case: Mapping[str, Any],
    score_field: str = "f1_relaxed",
    *,
    digits: int = 2,
    caption: str | None = None,
    label: str | None = None,
) -> str:
    """The card as a LaTeX ``table`` (booktabs): question, gold answer, passages, answers.

    Needs ``booktabs`` and ``tabularx`` in the preamble. Every data string is escaped.
    """
    inst = case["instance"]
    passages, answers = card_rows(case, score_field)
    esc = latex_escape
    lines = [
        r"\begin{table}[t]",
        r"\centering\small",
        r"\begin{tabularx}{\linewidth}{@{}lX@{}}",
        r"\toprule",
        rf"Question & {esc(inst['question'] or '')} \\",
        rf"Gold answer & {esc(inst['gold_answer'] or '')} \\",
        r"\midrule",
    ]
    for p in passages.itertuples(index=False):
        mark = r"\textbf{gold}" if p.mark == "gold" else "distractor"
        title = f"{esc(p.title)}: " if p.title else ""
        lines.append(rf"{esc(p.passage_id)} ({mark}) & {title}{esc(p.text)} \\")
    lines += [r"\bottomrule", r"\end{tabularx}", r"\par\medskip"]
    lines += [
        r"\begin{tabularx}{\linewidth}{@{}llXlr@{}}",
        r"\toprule",
        rf"Run & Condition & Answer & Cited (* gold) & {esc(score_field)} \\",
        r"\midrule",
    ]
    for a in answers.itertuples(index=False):
        cells = (a.run, a.condition, a.answer, a.cited)
        lines.append(" & ".join(esc(c) for c in cells) + rf" & {_score(a.score, digits)} \\")
    default = f"Instance {inst['instance_id']} of {inst.get('dataset', '')}: answers by condition."
    lines += [
        r"\bottomrule",
        r"\end{tabularx}",
        rf"\caption{{{esc(caption or default)}}}",
        rf"\label{{{label or 'tab:case-' + _label_part(inst['instance_id'])}}}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _label_part(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in str(text))[:60]


def case_card_figure(
    case: Mapping[str, Any], score_field: str = "f1_relaxed", *, digits: int = 2
) -> go.Figure:
    """The card as a figure (two Plotly tables: passages, then answers) for PNG/SVG/PDF."""
    inst = case["instance"]
    passages, answers = card_rows(case, score_field)
    text = plain_label  # data strings drawn as text, never as Plotly markup
    fig = go.Figure()
    fig.add_trace(
        go.Table(
            domain={"y": [0.5, 0.88]},
            columnwidth=[1.2, 1, 5],
            header={"values": ["passage", "gold?", "title: text"], "align": "left"},
            cells={
                "values": [
                    [text(p) for p in passages["passage_id"]],
                    list(passages["mark"]),
                    [
                        text(f"{t}: {x}" if t else x)
                        for t, x in zip(passages["title"], passages["text"], strict=True)
                    ],
                ],
                "align": "left",
            },
        )
    )
    fig.add_trace(
        go.Table(
            domain={"y": [0.0, 0.46]},
            columnwidth=[1.4, 1.3, 3, 1.6, 0.9],
            header={
                "values": ["run", "condition", "answer", "cited (* gold)", score_field],
                "align": "left",
            },
            cells={
                "values": [
                    [text(v) for v in answers["run"]],
                    list(answers["condition"]),
                    [text(v) for v in answers["answer"]],
                    [text(v) for v in answers["cited"]],
                    [_score(v, digits) for v in answers["score"]],
                ],
                "align": "left",
            },
        )
    )
    fig.update_layout(
        title={
            "text": text(f"Q: {_cut(inst['question'] or '', 140)}")
            + "<br>"
            + text(f"Gold answer: {inst['gold_answer'] or ''}"),
            "x": 0,
            "font": {"size": 12},
        },
        margin={"l": 10, "r": 10, "t": 70, "b": 10},
    )
    return fig
