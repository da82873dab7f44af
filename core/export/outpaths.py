"""Output files of the commands that write one (exports, samples, batch files): checked first.

A command that writes a file checks its path before it reads or writes anything else, so a
path that cannot be a file ends the command with one line naming the flag and the path: an
existing directory, a path under a file, a folder that cannot be written. The file itself is
written whole through a temporary file beside it and renamed into place (:func:`staged_file`),
so a failure (disk full, a killed process) never leaves half a file under its name.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core.names import ellipsize

__all__ = ["check_out_path", "staged_file"]


def check_out_path(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` as a Path when a file can be written there; else ValueError, one line.

    Args:
        path: the output file as given.
        flag: the option that gave it, for the message.

    Raises:
        ValueError: ``path`` is an existing directory, lies under a file, or its nearest
            existing folder is not writable.
    """
    out = Path(path)
    shown = ellipsize(str(out))
    if out.is_dir():
        raise ValueError(f"{flag} {shown}: is a directory; give a file name")
    for folder in out.parents:
        if not folder.exists() and not folder.is_symlink():
            continue
        if not folder.is_dir():
            raise ValueError(f"{flag} {shown}: {ellipsize(str(folder))} is a file, not a folder")
        if not os.access(folder, os.W_OK | os.X_OK):
            raise ValueError(f"{flag} {shown}: folder {ellipsize(str(folder))} is not writable")
        break
    if out.exists() and not os.access(out, os.W_OK):
        raise ValueError(f"{flag} {shown}: the file is not writable")
    return out


@contextmanager
def staged_file(path: Path) -> Iterator[Path]:
    """A temporary path beside ``path`` to write; renamed onto ``path`` when the block ends.

    The folder is made first. When the block raises, the temporary file is removed and
    ``path`` is left as it was.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
