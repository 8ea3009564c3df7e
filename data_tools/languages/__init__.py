"""Per-language normalisers. Each language is one small module that registers a hook.

A new language ``xx``: add ``data_tools/languages/xx.py`` with ``normalize_xx(text) -> str`` (NFC text
in, idempotent) and ``LANGUAGE = ("xx", normalize_xx, "<script>")``, then list it in ``builtin_languages``
below; ``data_tools.text`` registers them. ``amharic.py`` is the worked example.
"""

from __future__ import annotations

from collections.abc import Callable

from data_tools.languages import amharic


def builtin_languages() -> list[tuple[str, Callable[[str], str], str | None]]:
    """(code, normaliser, script) of every built-in language."""
    return [amharic.LANGUAGE]
