"""Scoring text for any language without its own rule: lower case, no punctuation, single spaces.

Also the shared pieces a language's own scoring normaliser builds on (``strip_punctuation``).
"""

from __future__ import annotations

import re
import unicodedata

_INNER_DOT_OR_APOSTROPHE = re.compile(r"(?<=[^\W\d_])['’.](?=[^\W\d_])")
_SPACES = re.compile(r"\s+")


def _is_punctuation_or_symbol(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def strip_punctuation(text: str) -> str:
    """Punctuation and symbols -> spaces, except ``'`` and ``.`` between two letters (don't, e.g, ዓ.ም),
    which are dropped; combining marks of NFC text (the Ethiopic gemination marks) removed."""
    text = _INNER_DOT_OR_APOSTROPHE.sub("", text)
    return "".join(" " if _is_punctuation_or_symbol(ch) else ch for ch in text
                   if unicodedata.category(ch) != "Mn")


def collapse_spaces(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def normalize_generic_for_scoring(text: str) -> str:
    """NFC, lower case, punctuation and symbols removed, whitespace collapsed (digits are kept as digits)."""
    text = unicodedata.normalize("NFC", text)
    return collapse_spaces(strip_punctuation(text).lower())
