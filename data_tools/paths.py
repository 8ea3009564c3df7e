"""Paths typed by people (form fields, command-line flags): one rule for ``~`` and line breaks.

The studio's form, its run supervisor and the trainer's option parser all read paths through
``expand_path``, so ``~/runs/a`` names the same folder for the UI's ``run.json`` and for the trainer's
checkpoints. A field that takes several paths takes one per line (``path_lines``).
"""

from __future__ import annotations

import os
from pathlib import Path


class PathError(ValueError):
    """A typed path that cannot be used as given; the message is one line naming the field."""


def expand_text(text: str | os.PathLike[str], what: str) -> str:
    """``text`` with a leading ``~`` or ``~user`` expanded; refuses line breaks and unknown users.

    ``what`` names the field or flag in the error (e.g. ``--output-dir``). Empty text stays empty.
    Surrounding spaces are kept: a path may really end in a space, and the form strips its fields itself.
    """
    text = os.fspath(text)
    if "\n" in text or "\r" in text:
        raise PathError(f"{what}: one path only, got a line break in {text!r}")
    if not text.startswith("~"):
        return text
    expanded = os.path.expanduser(text)
    if expanded.startswith("~"):
        user = text[1:].split("/", 1)[0]
        raise PathError(f"{what}: cannot expand {text!r}: no user named {user!r} on this machine")
    return expanded


def expand_path(text: str | os.PathLike[str], what: str) -> Path:
    """``expand_text`` as a Path (empty text is refused: a Path of "" would mean the current folder)."""
    expanded = expand_text(text, what)
    if not expanded.strip():
        raise PathError(f"{what}: no path given")
    return Path(expanded)


def path_lines(text: str, what: str) -> list[str]:
    """Several paths, one per line (blank lines ignored, each line stripped and ``~``-expanded)."""
    return [expand_text(line.strip(), what) for line in text.splitlines() if line.strip()]
