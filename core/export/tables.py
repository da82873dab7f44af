r"""Table export: CSV for data, LaTeX (booktabs) a paper can use as it is.

:func:`latex_table` is the paper table: chosen columns, readable headers, a value and its
confidence interval in one cell (``0.583 [0.506, 0.663]``), columns that are empty everywhere
left out, a missing value shown as ``--``, and a ``table`` float with ``\caption`` and
``\label``. :func:`table_csv` keeps every column (the data behind the table).
:func:`table_file_stem` names the files after the table, dataset and runs so two exports do
not overwrite each other. No store, no streamlit: :mod:`core.export` and the pages call these.
"""

from __future__ import annotations

import csv
import hashlib
import io
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

__all__ = [
    "DEFAULT_COLUMNS",
    "HEADERS",
    "MISSING",
    "header",
    "latex_escape",
    "latex_table",
    "csv_text",
    "neutralize_frame",
    "p_as_text",
    "safe_csv_cell",
    "table_caption",
    "table_csv",
    "table_file_stem",
    "table_latex",
]

#: How a missing value is shown in a LaTeX table (an en dash; never "nan").
MISSING = "--"

_LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}

#: LaTeX headers of known columns (already LaTeX; other headers are escaped text).
HEADERS: dict[str, str] = {
    "oncu_clipped": "ONCU",
    "oncu_raw": "raw ONCU",
    "oncu_raw_mean": "raw ONCU (mean)",
    "oncu_weighted": "weighted ONCU",
    "valid_groups": "valid groups",
    "total_groups": "groups",
    "n": "$n$",
    "k": "$k$",
    "eta": r"$\eta$",
    "p": "$p$",
    "p_holm": "$p$ (Holm)",
    "p_bh": "$p$ (BH)",
    "p_mcnemar": "$p$ (McNemar)",
    "t": "$t$",
    "se": "SE",
    "r_squared": "$R^2$",
    "s_none": r"$S_{\mathrm{none}}$",
    "s_oracle": r"$S_{\mathrm{oracle}}$",
    "s_c": "$S_c$",
    "n_above_oracle": "above oracle",
    "n_below_baseline": "below baseline",
    "n_parse_error": "parse errors",
    "em_strict": "EM (strict)",
    "f1_strict": "F1 (strict)",
    "em_relaxed": "EM (relaxed)",
    "f1_relaxed": "F1 (relaxed)",
    "ev_precision": "evidence P",
    "ev_recall": "evidence R",
    "ev_f1": "evidence F1",
    "alpha_ndcg": r"$\alpha$-nDCG",
    "score_field": "score",
    "ci_method": "CI method",
    "delta": r"$\Delta$",
}

#: Columns a registered table shows by default in LaTeX where all of them are too many (in
#: order; a value's CI columns follow it into one cell; absent ones are skipped).
# a table, one row per line: the formatter would put each item on a line of its own
DEFAULT_COLUMNS: dict[str, tuple[str, ...]] = {
    "oncu_summary": ("run", "condition", "valid_groups", "total_groups", "oncu_clipped", "n",
                     "missing"),
    "oncu_groups": ("run", "condition", "source", "reasoning_type", "context_length",
                    "evidence_position", "n", "s_none", "s_oracle", "s_c", "oncu_raw",
                    "oncu_clipped", "valid"),
    "condition_matrix": ("run", "condition", "n", "missing", "em_relaxed", "f1_relaxed",
                         "ev_f1"),
    "length_position": ("run", "condition", "context_length", "evidence_position",
                        "valid_groups", "total_groups", "oncu_clipped", "n", "missing"),
    "crux_table": ("retriever", "k", "n", "coverage", "alpha_ndcg", "density", "tokens"),
    "fanin_degradation": ("run", "condition", "model", "n", "AC single", "AC high",
                          "rel. drop %", "oracle drop %", "construction loss pp"),
}  # fmt: skip

_LABEL = re.compile(r"[A-Za-z0-9:._-]+")
_IDENTIFIER = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")
_P_VALUE = re.compile(r"p(?:_[a-z]+)?")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
#: ``x_ci_low`` / ``ci_low`` / ``CI low %`` and their high ends.
_CI_END = re.compile(r"^(?P<pre>.*?)[_ ]?ci[_ ](?P<end>low|high)(?P<post>.*)$", re.IGNORECASE)


# ------------------------------------------------------------------------------- cells
def _cell(value: Any, digits: int | None) -> str:
    """One cell as text; ``digits`` None keeps a float's full precision."""
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return ""
        return repr(value) if digits is None else f"{value:.{digits}f}"
    if hasattr(value, "item") and not isinstance(value, str | bytes):
        try:
            return _cell(value.item(), digits)
        except (ValueError, AttributeError):
            pass
    if isinstance(value, dict):
        return "; ".join(f"{k}: {_cell(v, digits)}" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "; ".join(_cell(v, digits) for v in value)
    if value is pd.NA or value is pd.NaT:
        return ""
    return str(value)


def _plain_frame(df: pd.DataFrame, digits: int | None) -> pd.DataFrame:
    return pd.DataFrame(
        {str(c): [_cell(v, digits) for v in df[c].tolist()] for c in df.columns},
        columns=[str(c) for c in df.columns],
    )


# --------------------------------------------------------------------------------- CSV
#: First characters that make a spreadsheet read a cell as a formula (OWASP "CSV injection").
_FORMULA_LEAD = ("=", "+", "-", "@", "\t", "\r")
#: A plain decimal number (sign, digits, point, exponent): left as it is, e.g. ``-0.25``.
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def safe_csv_cell(text: str) -> str:
    """``text`` made safe to open in a spreadsheet: ``'`` before a formula-leading cell.

    A cell starting with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return is read as a
    formula by Excel, LibreOffice and Google Sheets (a model name ``=HYPERLINK(...)`` from an
    imported file would become a live link), so it gets a leading ``'``; a plain number such as
    ``-0.25`` or ``+1e-3`` is left as it is.

    Args:
        text: one cell as written.

    Returns:
        ``text``, or ``"'" + text`` when it starts like a formula and is not a number.
    """
    if text.startswith(_FORMULA_LEAD) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def neutralize_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of a text frame with :func:`safe_csv_cell` on every cell and column name.

    The frame is :func:`_plain_frame`'s (text cells).
    """
    out = df.map(lambda v: safe_csv_cell(v) if isinstance(v, str) else v)
    out.columns = [safe_csv_cell(str(c)) for c in df.columns]
    return out


def csv_text(rows: Iterable[Sequence[Any]]) -> str:
    """CSV text of rows (LF line ends), every field with CR, LF, quote or comma quoted.

    The csv module quotes a field holding a character of its line terminator; with LF alone
    a bare carriage return went out unquoted, and a spreadsheet or reader split the row
    there (issue 35). Each row is written with CR LF (so both are quoted) and ends with LF.
    None is an empty field.
    """
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    out = []
    for row in rows:
        buf.seek(0)
        buf.truncate()
        writer.writerow(row)
        out.append(buf.getvalue()[:-2] + "\n")
    return "".join(out)


def table_csv(df: pd.DataFrame, digits: int | None = 3) -> str:
    """CSV text of a table: floats rounded to ``digits``, NaN empty, lists ``;``-joined.

    ``digits`` None writes floats at full precision (the CSV beside a LaTeX table). Every cell
    and column name that would start a spreadsheet formula gets a leading ``'``
    (:func:`safe_csv_cell`); numbers are written as they are; fields are quoted as
    :func:`csv_text` quotes them.
    """
    frame = neutralize_frame(_plain_frame(df, digits))
    rows = frame.astype(object).where(frame.notna(), None).values.tolist()
    return csv_text([list(frame.columns), *rows])


# ------------------------------------------------------------------------------- LaTeX
def latex_escape(text: str) -> str:
    """Escape LaTeX special characters in ``text``."""
    return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def _align(df: pd.DataFrame, col: str) -> str:
    s = df[col]
    return "r" if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s) else "l"


def table_latex(
    df: pd.DataFrame, digits: int = 3, caption: str | None = None, label: str | None = None
) -> str:
    r"""A plain LaTeX ``tabular`` of every column, booktabs rules, raw column names.

    Numeric columns are right-aligned, others left-aligned; cells are escaped. With a caption
    or label the tabular is wrapped in a ``table`` float. Needs ``\usepackage{booktabs}``.
    :func:`latex_table` is the paper table (headers, CI cells, chosen columns).
    """
    plain = _plain_frame(df, digits)
    align = "".join(_align(df, c) for c in df.columns)
    lines = [f"\\begin{{tabular}}{{{align or 'l'}}}", "\\toprule"]
    lines.append(" & ".join(latex_escape(c) for c in plain.columns) + r" \\")
    lines.append("\\midrule")
    for row in plain.itertuples(index=False):
        lines.append(" & ".join(latex_escape(v) for v in row) + r" \\")
    lines += ["\\bottomrule", "\\end{tabular}"]
    if caption is None and label is None:
        return "\n".join(lines) + "\n"
    return _float(lines, caption, label)


def _float(tabular: list[str], caption: str | None, label: str | None) -> str:
    wrapped = ["\\begin{table}[t]", "\\centering"]
    if caption is not None:
        wrapped.append(f"\\caption{{{latex_escape(caption)}}}")
    if label is not None:
        wrapped.append(f"\\label{{{_checked_label(label)}}}")
    return "\n".join(wrapped + tabular + ["\\end{table}"]) + "\n"


def _checked_label(label: str) -> str:
    if not _LABEL.fullmatch(label):
        raise ValueError(f"bad label {label!r}: use letters, digits and : . _ - (e.g. tab:oncu)")
    return label


def header(col: str) -> str:
    """The LaTeX header of column ``col``: :data:`HEADERS`, else readable escaped text.

    A snake_case name reads with spaces (``small_groups`` -> ``small groups``); a name that is
    already text (``full_context 4K``, ``rel. drop %``) is only escaped.
    """
    if col in HEADERS:
        return HEADERS[col]
    return latex_escape(col.replace("_", " ") if _IDENTIFIER.fullmatch(col) else col)


def _ci_pairs(columns: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{value column: (low column, high column)}`` for the CI columns of a table.

    ``x_ci_low`` / ``x_ci_high`` belong to ``x`` when there is one, else to the column just
    before the low end when it starts with ``x_`` (``oncu_clipped``, ``oncu_ci_low``); a bare
    ``ci_low`` / ``CI low %`` belongs to the column just before it (``mean``, ``ci_low``).
    """
    cols = list(columns)
    pairs: dict[str, tuple[str, str]] = {}
    for i, col in enumerate(cols):
        m = _CI_END.match(col)
        if not m or m["end"].lower() != "low":
            continue
        high = next(
            (
                c
                for c in cols
                if (h := _CI_END.match(c))
                and h["end"].lower() == "high"
                and h["pre"] == m["pre"]
                and h["post"] == m["post"]
            ),
            None,
        )
        if high is None:
            continue
        pre = m["pre"]
        prev = cols[i - 1] if i > 0 else None
        if pre and pre in cols:
            value = pre
        elif (
            prev is not None and not _CI_END.match(prev) and (not pre or prev.startswith(pre + "_"))
        ):
            value = prev
        else:
            continue
        pairs.setdefault(value, (col, high))
    return pairs


def _small_p(value: Any, cell: str, digits: int) -> str:
    """A p-value below 0.001 as ``$<0.001$`` (issue 34), never ``0.000``.

    One that rounds to zero at fewer ``digits`` as ``$<0.01$`` (at 2).
    """
    if isinstance(value, int | float) and 0 <= value < 0.001:
        return "$<0.001$"
    if isinstance(value, int | float) and 0 <= value < 0.5 * 10.0**-digits and digits > 0:
        return f"$<{10.0**-digits:.{digits}f}$"
    return cell


#: What each p test is called in a header (``p_test`` column values).
_P_TEST_WORDS = {"normal": "normal", "bootstrap": "bootstrap", "t": "t-test"}
#: The adjustment each adjusted p column names, and its family, in a header.
_P_ADJUSTED = {
    "p_holm": "Holm across runs",
    "p_bh": "BH across rows",
}


def _p_header(col: str, tests: Sequence[str]) -> str | None:
    """LaTeX header of a p column naming its test and adjustment (issue 34 item 4).

    ``$p$ (normal, Holm across runs)``; None for a column that is not a test's p.
    """
    if col == "p_mcnemar":
        return "$p$ (McNemar exact)"
    if col not in ("p", *_P_ADJUSTED):
        return None
    words = ", ".join(_P_TEST_WORDS.get(t, latex_escape(t)) for t in tests) or None
    parts = [w for w in (words, _P_ADJUSTED.get(col)) if w]
    return "$p$" + (f" ({', '.join(parts)})" if parts else "")


def p_as_text(df: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """``df`` with its numeric p columns (``p``, ``p_holm``, ``p_bh``, ...) as display text.

    ``< 0.001`` below 0.001 (never ``0``), else ``digits`` decimals, ``-`` when missing
    (issue 34 item 4). Other columns untouched; ``df`` itself is not modified.
    """
    from core.stats.inference import format_p

    cols = [
        c
        for c in df.columns
        if isinstance(c, str) and _P_VALUE.fullmatch(c) and pd.api.types.is_numeric_dtype(df[c])
    ]
    if not cols:
        return df
    out = df.copy()
    for c in cols:
        out[c] = [format_p(v, digits) for v in df[c].tolist()]
    return out


def _is_empty(cells: Sequence[str]) -> bool:
    return all(c == "" for c in cells)


def latex_table(
    df: pd.DataFrame,
    *,
    columns: Sequence[str] | None = None,
    digits: int = 3,
    caption: str | None = None,
    label: str | None = None,
    name: str | None = None,
) -> str:
    r"""A table a paper can use as it is: a ``table`` float with a booktabs ``tabular``.

    A value column with CI siblings (``oncu_clipped`` + ``oncu_ci_low``/``oncu_ci_high``,
    ``mean`` + ``ci_low``/``ci_high``) becomes one cell ``0.583 [0.506, 0.663]``; headers are
    readable (:func:`header`); every data string is escaped; a missing value is ``--``.
    Needs ``\usepackage{booktabs}``.

    Args:
        df: the table (every column; nothing is changed).
        columns: the columns to show, in order (CI siblings follow their value). None: the
            table's :data:`DEFAULT_COLUMNS` when ``name`` has some, else every column; columns
            empty in every row are then left out.
        digits: decimals of floats.
        caption: ``\caption`` text (escaped); None: no caption.
        label: ``\label`` key; None: ``tab:<name>`` when ``name`` is given.
        name: the registered table name (default columns and label).

    Returns:
        The LaTeX text, ending in a newline.

    Raises:
        ValueError: an unknown column in ``columns``, a bad label or ``digits``.
    """
    if not isinstance(digits, int) or not 0 <= digits <= 10:
        raise ValueError(f"digits {digits!r} must be an integer in [0, 10]")
    names = [str(c) for c in df.columns]
    frame = df.set_axis(names, axis=1)
    pairs = _ci_pairs(names)
    ci_cols = {c for lo_hi in pairs.values() for c in lo_hi}
    if columns is not None:
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ValueError(f"unknown column(s) {unknown}; the table has: {', '.join(names)}")
        chosen = list(dict.fromkeys(columns))
    else:
        default = DEFAULT_COLUMNS.get(name or "", ())
        chosen = [c for c in default if c in names] or names
    chosen = [c for c in chosen if c not in ci_cols or c in pairs]
    # the p columns' headers name their test (issue 34): a p_test column is said there
    tests = (
        [str(t) for t in dict.fromkeys(frame["p_test"].dropna().tolist())]
        if "p_test" in names
        else []
    )
    if tests and columns is None:
        chosen = [c for c in chosen if c != "p_test"]
    plain = _plain_frame(frame[list(dict.fromkeys(chosen + sorted(ci_cols)))], digits)
    if columns is None and len(frame):
        chosen = [c for c in chosen if not _is_empty(plain[c].tolist())]
    if not chosen:
        raise ValueError("no column left to show: every column is empty")
    heads, align, body = [], [], []
    for col in chosen:
        cells = [MISSING if v == "" else latex_escape(v) for v in plain[col].tolist()]
        if _P_VALUE.fullmatch(col):
            cells = [
                _small_p(x, c, digits) for x, c in zip(frame[col].tolist(), cells, strict=True)
            ]
        if col in pairs:
            lo, hi = (plain[c].tolist() for c in pairs[col])
            cells = [
                v
                if v == MISSING or (a == "" and b == "")
                else f"{v} [{latex_escape(a) or MISSING}, {latex_escape(b) or MISSING}]"
                for v, a, b in zip(cells, lo, hi, strict=True)
            ]
        head = (_p_header(col, tests) if tests or col == "p_mcnemar" else None) or header(col)
        heads.append(head + (" [CI]" if col in pairs else ""))
        align.append(_align(frame, col))
        body.append(cells)
    lines = [
        f"\\begin{{tabular}}{{{''.join(align)}}}",
        "\\toprule",
        " & ".join(heads) + r" \\",
        "\\midrule",
    ]
    lines += [" & ".join(row) + r" \\" for row in zip(*body, strict=True)]
    lines += ["\\bottomrule", "\\end{tabular}"]
    if label is None and name:
        label = f"tab:{name}"
    return _float(lines, caption, label)


# ------------------------------------------------------------------- captions and names
def table_caption(title: str, dataset: str | None, runs: Sequence[str] = ()) -> str:
    """The default caption: the table's title with the dataset and runs it shows.

    Example: ``ONCU by run and condition. Dataset controlled; run controlled.``
    """
    parts = [f"dataset {dataset}"] if dataset else []
    if runs:
        parts.append(f"run{'s' if len(runs) > 1 else ''} {', '.join(runs)}")
    text = "; ".join(parts)
    return f"{title}. {text[:1].upper()}{text[1:]}." if parts else f"{title}."


def _safe(part: str) -> str:
    return _UNSAFE.sub("_", part).strip("._") or "_"


def table_file_stem(name: str, dataset: str | None, runs: Sequence[str] = ()) -> str:
    """A file name (no suffix) carrying the table, dataset and runs; safe characters only.

    ``oncu_summary-controlled-200-demo-embedded``: parts joined by ``-``, every character
    outside ``A-Za-z0-9._-`` replaced by ``_``; more than three runs are named by their count
    and a short hash of their ids, so different selections get different names.
    """
    parts = [name] + ([dataset] if dataset else [])
    if len(runs) > 3:
        digest = hashlib.sha1(",".join(sorted(runs)).encode("utf-8")).hexdigest()[:8]
        parts.append(f"{len(runs)}runs-{digest}")
    else:
        parts += list(runs)
    return "-".join(_safe(p) for p in parts)[:150]
