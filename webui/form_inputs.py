"""Form fields typed by people, read the way the trainer reads its flags (``data_tools.paths``).

``~`` and ``~user`` are expanded by the one rule the trainer and the run supervisor use; a single-path field
refuses a line break; a multi-path field takes one path per line. Every problem is an ``InputProblem`` whose
text is the one line the tab shows, never a traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from data_tools.paths import PathError, expand_text


class InputProblem(ValueError):
    """Bad input in a form field; ``str(err)`` is the one-line message the tab shows."""


def _clean(text: str) -> str:
    return text.strip().strip("'\"").strip()


def split_paths(text: str | Sequence[str] | None) -> list[str]:
    """Paths typed one per line (a list is taken as is); blanks dropped, quotes around a path removed."""
    if text is None:
        return []
    parts = text.splitlines() if isinstance(text, str) else [str(part) for part in text]
    return [_clean(part) for part in parts if _clean(part)]


def user_path(text: str, what: str = "path") -> Path:
    """One typed path with ``~`` expanded; InputProblem (one line naming ``what``) when it cannot be used."""
    try:
        return Path(expand_text(_clean(text), what))
    except PathError as exc:
        raise InputProblem(str(exc)) from None


def resolve_path(text: str | None, base: Path | str, what: str = "path") -> Path | None:
    """A typed path as a Path: ``~`` expanded, relative paths taken from ``base``; None for an empty field."""
    if not _clean(text or ""):
        return None
    path = user_path(text or "", what)
    return path if path.is_absolute() else Path(base) / path


def existing_file(text: str | None, base: Path | str, what: str, *, required: bool = True) -> Path | None:
    """Resolve a typed path that must be a file; raises InputProblem with a one-line message otherwise."""
    path = resolve_path(text, base, what)
    if path is None:
        if required:
            raise InputProblem(f"no {what} given")
        return None
    if not path.exists():
        raise InputProblem(f"{what} not found: {path}")
    if not path.is_file():
        raise InputProblem(f"{what} is not a file: {path}")
    return path
