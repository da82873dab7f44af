"""Text measured as a figure draws it: widths in the embedded font, wrapping, SVG text boxes."""

from __future__ import annotations

import functools
import glob
import html
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

__all__ = [
    "ASCENT",
    "BR",
    "DESCENT",
    "FONT_SIZE",
    "LINE_EM",
    "SVG",
    "TAG",
    "TextBox",
    "svg_text_boxes",
    "text_width",
    "translate",
    "wrap_text",
]


SVG = "{http://www.w3.org/2000/svg}"


#: Ascent and descent of Liberation Serif (Times metrics) as fractions of the font size.
ASCENT, DESCENT = 0.891, 0.216


#: Plotly's line height of multi-line text, in em.
LINE_EM = 1.3


#: Wrapped lines are kept this much narrower than their room (the browser's text can be a
#: little wider than the sum of advance widths).
_WRAP_SAFETY = 0.95


TAG = re.compile(r"<(?!br\s*/?>)[^>]+>", re.IGNORECASE)


BR = re.compile(r"<br\s*/?>", re.IGNORECASE)


#: Where a name with no spaces may break (after ``_``, ``/`` or a hyphen between letters):
#: ``hotpotqa_qwen25_14b_200``, ``fanin-embedded``; never inside a number.
_JOINT = re.compile(r"(?<=[_/])(?=\w)|(?<=[^\W\d]-)(?=[^\W\d])")


# ------------------------------------------------------------------------------ metrics
@functools.lru_cache(maxsize=4)
def _advances(family: str) -> tuple[dict[int, int], int, float] | None:
    """``(advance per code point, default advance, units per em)`` of ``family`` (None: no file)."""
    stem = family.replace(" ", "")
    paths = sorted(glob.glob(f"/usr/share/fonts/**/{stem}-Regular.ttf", recursive=True))
    if not paths:
        return None
    try:
        from fontTools.ttLib import TTFont

        font = TTFont(paths[0], lazy=True)
        cmap = font.getBestCmap()
        hmtx = font["hmtx"].metrics
        units = float(font["head"].unitsPerEm)
        widths = {cp: hmtx[name][0] for cp, name in cmap.items() if name in hmtx}
        default = hmtx.get(".notdef", (int(units / 2), 0))[0]
    except Exception:
        return None
    return widths, default, units


def text_width(text: str, size_px: float, family: str = "Liberation Serif") -> float:
    """Width in px of the widest line of ``text`` (plotly markup: ``<br>`` breaks lines).

    Advance widths of ``family`` (no kerning); 0.5 em per character when the font file is not
    on the machine.
    """
    lines = BR.split(html.unescape(TAG.sub("", str(text))))
    metrics = _advances(family)
    if metrics is None:
        return max(len(line) for line in lines) * 0.5 * size_px
    widths, default, units = metrics
    return max(sum(widths.get(ord(c), default) for c in line) for line in lines) * size_px / units


def wrap_text(text: str, max_px: float, size_px: float, family: str = "Liberation Serif") -> str:
    """``text`` with ``<br>`` between words so that no line is wider than ``max_px``.

    Existing ``<br>`` are kept; a single word wider than ``max_px`` stays on its own line.
    """
    out = []
    room = max_px * _WRAP_SAFETY
    for line in BR.split(str(text)):
        current = ""
        for word in line.split(" "):
            trial = f"{current} {word}" if current else word
            if current and text_width(trial, size_px, family) > room:
                out.append(current)
                current = word
            else:
                current = trial
            if text_width(current, size_px, family) > room and _JOINT.search(current):
                # one name wider than the room (a run name): broken after its _ / -
                pieces, current = _JOINT.split(current), ""
                for piece in pieces:
                    if current and text_width(current + piece, size_px, family) > room:
                        out.append(current)
                        current = piece
                    else:
                        current += piece
        out.append(current)
    return "<br>".join(out)


# ------------------------------------------------------------------------- SVG geometry
@dataclass(frozen=True, slots=True)
class TextBox:
    """An estimated text box of a rendered SVG, in the SVG's px.

    Attributes:
        text: the text (lines joined by a space).
        cls: the class of the text or of its nearest classed ancestor (``xtick``,
            ``x2title``, ``legendtext``, ``annotation-text``, ``textpoint`` ...).
        left, top, right, bottom: the box.
    """

    text: str
    cls: str
    left: float
    top: float
    right: float
    bottom: float

    def overlaps(self, other: TextBox, slack: float = 1.0) -> bool:
        """Whether the boxes share more than ``slack`` px in both directions."""
        dx = min(self.right, other.right) - max(self.left, other.left)
        dy = min(self.bottom, other.bottom) - max(self.top, other.top)
        return dx > slack and dy > slack


_TRANSLATE = re.compile(r"translate\(\s*([-\d.e]+)(?:[\s,]+([-\d.e]+))?\s*\)")


FONT_SIZE = re.compile(r"font-size:\s*([\d.]+)px")


def translate(el: ET.Element) -> tuple[float, float] | None:
    """The element's translation; None when it is rotated or scaled (not estimated)."""
    t = re.sub(r"rotate\(\s*0(?:\.0*)?(?:[\s,][^)]*)?\)", "", el.get("transform") or "")
    if "rotate" in t or "scale" in t or "matrix" in t:
        return None
    m = _TRANSLATE.search(t)
    return (float(m.group(1)), float(m.group(2) or 0)) if m else (0.0, 0.0)


def svg_text_boxes(svg: bytes | str, family: str = "Liberation Serif") -> list[TextBox]:
    """Estimated boxes of every visible, unrotated, non-empty text of a plotly SVG."""
    root = ET.fromstring(svg)
    boxes: list[TextBox] = []

    def walk(el: ET.Element, dx: float, dy: float, cls: str, hidden: bool) -> None:
        move = translate(el)
        if move is None:
            return
        dx, dy = dx + move[0], dy + move[1]
        style = el.get("style") or ""
        hidden = hidden or "opacity: 0;" in style.replace("fill-opacity: 0;", "")
        own = (el.get("class") or "").split()
        cls = own[0] if own else cls
        if el.tag == SVG + "text":
            if not hidden:
                box = _text_box(el, dx, dy, cls, family)
                if box is not None:
                    boxes.append(box)
            return
        for child in el:
            walk(child, dx, dy, cls, hidden)

    walk(root, 0.0, 0.0, "", False)
    return boxes


def _text_box(el: ET.Element, dx: float, dy: float, cls: str, family: str) -> TextBox | None:
    m = FONT_SIZE.search(el.get("style") or "")
    size = float(m.group(1)) if m else 12.0
    spans = [t for t in el if t.tag == SVG + "tspan" and "line" in (t.get("class") or "")]
    lines = ["".join(t.itertext()) for t in spans] if spans else ["".join(el.itertext())]
    lines = [line for line in lines if line.strip()]
    if not lines:
        return None
    x, y = float(el.get("x") or 0) + dx, float(el.get("y") or 0) + dy
    base = [y]
    if spans and all(t.get("y") is not None for t in spans):
        # plotly gives each line the text's y and its own offset from it (0, 1.3, 2.6 em)
        base = [float(t.get("y")) + dy + _em(t, size, 0.0) for t in spans]
    else:
        for t in spans[1:]:
            base.append(base[-1] + _em(t, size, LINE_EM * size))
        if spans:
            base = [b + _em(spans[0], size, 0.0) for b in base]
    width = max(text_width(line, size, family) for line in lines)
    anchor = el.get("text-anchor") or "start"
    left = x - width / 2 if anchor == "middle" else x - width if anchor == "end" else x
    return TextBox(
        " ".join(lines),
        cls,
        left,
        min(base) - ASCENT * size,
        left + width,
        max(base) + DESCENT * size,
    )


def _em(span: ET.Element, size: float, default: float) -> float:
    """A tspan's ``dy`` in px (``default`` without one in em)."""
    em = re.match(r"([-\d.e]+)em", span.get("dy") or "")
    return float(em.group(1)) * size if em else default
