"""Names a researcher gives on import or run (datasets, runs): one check for all of them.

A name is shown in pages, CLI tables and exported file names, so it must be non-empty, at most
`NAME_MAX` characters, and printable (no line breaks, tabs or other control/format characters,
which would break a one-line listing or hide what the name is). Pure Python, no imports from core.
"""

from __future__ import annotations

import unicodedata

__all__ = ["ECHO_MAX", "NAME_MAX", "check_name", "ellipsize"]

NAME_MAX = 128
"""The longest name accepted, in characters (code points)."""

ECHO_MAX = 200
"""The most characters of a user's value an error message repeats (:func:`ellipsize`)."""


def ellipsize(value: object, limit: int = ECHO_MAX) -> str:
    """``value`` as one line of at most ``limit`` characters, cut with "..." when longer.

    What an error message echoes of a user's value (a name, a key, a flag's value): line
    breaks and tabs become spaces, so a hostile or huge value can neither split the one-line
    error nor make it megabytes long.
    """
    text = value if isinstance(value, str) else repr(value)
    if len(text) > 4 * limit:  # a huge value: cut before the split below scans it all
        text = text[: 4 * limit]
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# Unicode categories refused inside a name: control (Cc), format (Cf, e.g. U+200B, U+202E),
# line/paragraph separators (Zl, Zp), surrogates (Cs), private use (Co) and unassigned (Cn).
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn"})


def check_name(kind: str, value: str) -> str:
    """Return `value` when it is a valid name, else raise ValueError naming `kind` and the value.

    Args:
        kind: what is being named, for the message ("dataset", "run").
        value: the name as given.

    Returns:
        `value`, unchanged.

    Raises:
        ValueError: `value` is not a string, is empty or only blanks, is longer than `NAME_MAX`
            characters, has leading/trailing blanks, or contains a non-printable character.
    """
    if not isinstance(value, str):
        raise ValueError(f"{kind} name {value!r}: must be text, got {type(value).__name__}")
    if not value.strip():
        raise ValueError(f"{kind} name {value!r}: must not be empty")
    if len(value) > NAME_MAX:
        raise ValueError(
            f"{kind} name {value[:40]!r}...: {len(value)} characters, at most {NAME_MAX} allowed"
        )
    for position, char in enumerate(value):
        if char != " " and (unicodedata.category(char) in _REFUSED_CATEGORIES or char.isspace()):
            raise ValueError(
                f"{kind} name {value!r}: character {position + 1} is U+{ord(char):04X} "
                f"({unicodedata.name(char, 'unnamed')}), not printable; "
                "use letters, digits, spaces and punctuation"
            )
    if value != value.strip():
        raise ValueError(f"{kind} name {value!r}: must not start or end with a blank")
    return value
