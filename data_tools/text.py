"""The text front-end: one implementation for tokenizer training, data checks, training and export.

``normalize_text(text, language)`` runs the language's own normaliser (a pluggable hook; see
``register_language``) and then IndexTTS's convention: CJK characters split by spaces and
everything upper-cased (IndexTTS's BPE models are trained on upper-case text).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

LanguageNormalizer = Callable[[str], str]

_LANGUAGES: dict[str, LanguageNormalizer] = {}

_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf\u2ff0-\u303f\u3040-\u30ff\u3100-\u31ef\u3200-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff65-\uffdc"
    "\U00020000-\U0002ffff"
)
_CJK_CHAR = re.compile(f"([{_CJK_RANGES}])")
_SPACES = re.compile(r"\s+")


def register_language(code: str, normalizer: LanguageNormalizer) -> None:
    """Add or replace the normaliser for a language code (e.g. ``"am"``)."""
    _LANGUAGES[code] = normalizer


def registered_languages() -> list[str]:
    _load_builtin_languages()
    return sorted(_LANGUAGES)


def _load_builtin_languages() -> None:
    if "am" not in _LANGUAGES:
        from data_tools.languages import load_builtin

        load_builtin()


def indextts_convention(text: str) -> str:
    """IndexTTS's tokenizer-side convention: split CJK characters, collapse spaces, upper-case."""
    parts = [part.strip() for part in _CJK_CHAR.split(text.strip())]
    return " ".join(part.upper() for part in parts if part)


def basic_normalize(text: str) -> str:
    """Language-independent clean-up: Unicode NFC, control characters dropped, whitespace folded."""
    text = unicodedata.normalize("NFC", text)
    text = "".join(ch if unicodedata.category(ch)[0] != "C" or ch in "\t\n" else " " for ch in text)
    return _SPACES.sub(" ", text).strip()


def normalize_text(text: str, language: str | None = None) -> str:
    """Normalise ``text`` for tokenization. ``language=None`` picks by script (Ethiopic -> ``am``)."""
    _load_builtin_languages()
    text = basic_normalize(text)
    code = language or detect_language(text)
    hook = _LANGUAGES.get(code) if code else None
    if hook is not None:
        text = hook(text)
    return indextts_convention(text)


def is_ethiopic(ch: str) -> bool:
    cp = ord(ch)
    return 0x1200 <= cp <= 0x139F or 0x2D80 <= cp <= 0x2DDF or 0xAB00 <= cp <= 0xAB2F or 0x1E7E0 <= cp <= 0x1E7FF


def script_of(ch: str) -> str | None:
    """``"ethiopic"``, ``"latin"``, ``"other"`` for letters; ``None`` for spaces, digits, punctuation."""
    if is_ethiopic(ch):
        # Ethiopic punctuation and numerals are script-neutral for language shares.
        return "ethiopic" if unicodedata.category(ch).startswith("L") else None
    if not ch.isalpha():
        return None
    if "LATIN" in unicodedata.name(ch, ""):
        return "latin"
    return "other"


def script_counts(text: str) -> dict[str, int]:
    counts = {"ethiopic": 0, "latin": 0, "other": 0}
    for ch in text:
        script = script_of(ch)
        if script is not None:
            counts[script] += 1
    return counts


def detect_language(text: str) -> str | None:
    """A script-level guess: ``"am"`` when Ethiopic letters dominate, ``"en"`` for Latin, else None."""
    counts = script_counts(text)
    total = sum(counts.values())
    if not total:
        return None
    if counts["ethiopic"] / total >= 0.5:
        return "am"
    if counts["latin"] / total >= 0.5:
        return "en"
    return None
