"""Per-language normalisers. Each language is one small module that registers a hook.

A new language ``xx``: add ``data_tools/languages/xx.py`` with ``normalize_xx(text) -> str`` (NFC text
in, idempotent) and ``LANGUAGE = ("xx", normalize_xx, "<script>")``, then list it in ``builtin_languages``
below; ``data_tools.text`` registers them. ``amharic.py`` is the worked example.

Scoring (CER / WER) has its own normaliser per language, which decides what counts as an error
(``amharic_scoring.py``); ``scoring_normaliser`` picks it, falling back to the generic one.
"""

from __future__ import annotations

from collections.abc import Callable

from data_tools.languages import amharic, amharic_scoring
from data_tools.languages.generic_scoring import normalize_generic_for_scoring


def builtin_languages() -> list[tuple[str, Callable[[str], str], str | None]]:
    """(code, normaliser, script) of every built-in language."""
    return [amharic.LANGUAGE]


# Language code (ISO 639-1 as in the manifests, ISO 639-3 as MMS names it, or the name) -> scoring normaliser.
_SCORING_NORMALISERS: dict[str, Callable[[str], str]] = {
    code: amharic_scoring.normalize_amharic_for_scoring for code in ("am", "amh", "amharic")
}


def scoring_normaliser(language: str | None) -> Callable[[str], str]:
    """The text normaliser CER / WER use for ``language``; other languages get lower case, no punctuation."""
    return _SCORING_NORMALISERS.get((language or "").strip().lower(), normalize_generic_for_scoring)
