"""The one way data enters Markdown: md_escape for text, md_code for inline code."""

from __future__ import annotations

import re
import string

__all__ = [
    "md_code",
    "md_escape",
]


#: Every ASCII punctuation character: CommonMark lets each be backslash-escaped, and an escaped
#: one starts no construct (emphasis, link, image, HTML, heading, table, LaTeX ``$``,
#: Streamlit's ``:color[...]`` directives, entities ``&...;``). ``? , ; ' " /`` start nothing
#: in one line of text and stay as they are; ``_ . : -`` are escaped only where they could
#: start something (see :func:`md_escape`), so plain messages keep a readable source.
_MD_SPECIAL = frozenset(string.punctuation) - frozenset("?,;'\"/")


#: U+2060 WORD JOINER (invisible, no width): breaks what Streamlit's Markdown finds in the
#: *parsed* text, where escapes are gone: GFM autolink literals (``http://``, ``www.``,
#: ``a@b.c``), ``:emoji:`` shortcodes and ``:material/icon:`` names.
_JOINER = "\u2060"


def md_escape(text: object) -> str:
    """``text`` made inert inside ``st.markdown``: shown as the same characters, as text.

    Line breaks become spaces (one line: no block structure past its start). Then every
    ASCII punctuation character but ``? , ; ' " /`` is backslash-escaped, except where it
    cannot start anything: ``_`` inside a word (CommonMark: no emphasis there), ``.`` and
    ``-`` other than in a list marker at the start (``1.``, ``-``) or after ``www``, ``:``
    followed by a space or the end. A word joiner follows each escaped ``:`` and ``@`` and
    splits ``www.``: no autolink (``http://``, ``www.``, ``a@b.c``), emoji (``:smile:``),
    icon or directive (``:red[...]``) can form. So no Markdown, HTML, LaTeX or Streamlit
    directive starts from the data. For short data (names, answers, error lines) inside
    constant Markdown; longer data goes through ``st.text`` / ``st.code`` (STYLE 14).
    """
    s = " ".join(str(text).replace("\r", "\n").split("\n"))
    out = []
    for i, ch in enumerate(s):
        if ch not in _MD_SPECIAL or _inert(s, i):
            out.append(ch)
            continue
        out.append("\\" + ch)
        if ch in ":@":
            out.append(_JOINER)
    return re.sub(r"(?i)(www)(?=\\?\.)", "\\1" + _JOINER, "".join(out))


def md_code(text: object) -> str:
    """``text`` as one Markdown code span: shown exactly, in monospace, with nothing parsed.

    Inside a code span CommonMark parses nothing, and Streamlit's text-level additions
    (autolinks, emoji) skip code; the fence is longer than any run of backticks in the text,
    and a space inside each end (which CommonMark strips) lets the text start or end with
    one. Line breaks become spaces. Streamlit rewrites ``:material/`` anywhere in its
    Markdown source: a word joiner after the colon keeps it as written.
    """
    s = " ".join(str(text).replace("\r", "\n").split("\n"))
    s = s.replace(":material/", ":" + _JOINER + "material/")
    if not s.strip():
        return ""
    fence = "`" * (max((len(r) for r in re.findall(r"`+", s)), default=0) + 1)
    return f"{fence} {s} {fence}"


def _inert(s: str, i: int) -> bool:
    """Whether the punctuation ``s[i]`` starts nothing where it stands (see md_escape)."""
    ch, prev, nxt = s[i], s[i - 1] if i else "", s[i + 1] if i + 1 < len(s) else ""
    if ch == "_":
        return prev.isalnum() and nxt.isalnum()
    if ch == ":":
        return nxt == "" or nxt.isspace()
    if ch in ".-":
        head = s[:i].strip()
        return bool(head) and not head.isdigit() and not head.lower().endswith("www")
    return False
