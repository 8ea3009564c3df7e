"""The text front-end: one implementation for tokenizer training, data checks, training and export.

``normalize_text(text, language)`` runs, in order:

1. ``basic_normalize``: Unicode NFC, control characters to spaces, whitespace folded (every language);
2. the language's own normaliser, a pluggable hook (``register_language``); ``language=None`` picks the
   language from the dominant script of the text (Ethiopic -> ``am``);
3. IndexTTS's convention: CJK characters split by spaces and everything upper-cased (IndexTTS's BPE
   models are trained on upper-case text).

Adding a language is one small module under ``data_tools/languages/`` that defines its normaliser and
declares ``LANGUAGE = ("xx", normalize_xx, "<script>")``, listed in ``data_tools.languages.builtin_languages``
(or a call ``register_language(...)`` from outside). The function must be idempotent: normalising twice gives the
same text as normalising once (tests check this for every registered language).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable

from data_tools.languages import builtin_languages

LanguageNormalizer = Callable[[str], str]

_LANGUAGES: dict[str, LanguageNormalizer] = {}
_SCRIPT_LANGUAGE: dict[str, str] = {"latin": "en"}  # script -> language guessed for text dominated by it
_builtins_loaded = False

_CJK_RANGES = (
    "\u1100-\u11ff"  # Hangul Jamo
    "\u2e80-\u2fdf\u2ff0-\u303f\u3040-\u30ff\u3100-\u31ef\u3200-\u9fff"
    "\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff65-\uffdc"
    "\U00020000-\U0002ffff"
)
_CJK_CHAR = re.compile(f"([{_CJK_RANGES}])")
_SPACES = re.compile(r"\s+")


def register_language(code: str, normalizer: LanguageNormalizer, *, script: str | None = None) -> None:
    """Add or replace the normaliser for a language code (e.g. ``"am"``).

    ``script`` (a name from ``script_of``, e.g. ``"ethiopic"``) makes ``detect_language`` answer ``code``
    for text dominated by that script.
    """
    _LANGUAGES[code] = normalizer
    if script is not None:
        _SCRIPT_LANGUAGE[script] = code


def registered_languages() -> list[str]:
    _load_builtin_languages()
    return sorted(_LANGUAGES)



def _load_builtin_languages() -> None:
    global _builtins_loaded
    if not _builtins_loaded:
        _builtins_loaded = True
        for code, normalizer, script in builtin_languages():
            register_language(code, normalizer, script=script)


def indextts_convention(text: str) -> str:
    """IndexTTS's tokenizer-side convention: split CJK characters, collapse spaces, upper-case."""
    parts = [part.strip() for part in _CJK_CHAR.split(text.strip())]
    return " ".join(part.upper() for part in parts if part)


def basic_normalize(text: str) -> str:
    """Language-independent clean-up: Unicode NFC, control characters dropped, whitespace folded."""
    text = unicodedata.normalize("NFC", text)
    if not text.isprintable():  # fast path: printable text has no control or format characters
        text = "".join(ch if unicodedata.category(ch)[0] != "C" or ch in "\t\n" else " " for ch in text)
    return _SPACES.sub(" ", text).strip()


def language_normalize(text: str, language: str | None = None) -> str:
    """Steps 1 and 2 only (no upper-casing, no CJK split): what IndexTTS-2.5's tiktoken front-end starts from."""
    _load_builtin_languages()
    text = basic_normalize(text)
    code = language or detect_language(text)
    hook = _LANGUAGES.get(code) if code else None
    if hook is not None:
        text = _SPACES.sub(" ", hook(text))
    return text


def normalize_text(text: str, language: str | None = None) -> str:
    """Normalise ``text`` for tokenization. ``language=None`` picks by script (Ethiopic -> ``am``)."""
    return indextts_convention(language_normalize(text, language))


def is_ethiopic(ch: str) -> bool:
    cp = ord(ch)
    return 0x1200 <= cp <= 0x139F or 0x2D80 <= cp <= 0x2DDF or 0xAB00 <= cp <= 0xAB2F or 0x1E7E0 <= cp <= 0x1E7FF


@functools.lru_cache(maxsize=8192)
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
    """A script-level guess: ``"am"`` when Ethiopic letters dominate, ``"en"`` for Latin, else None.

    Each registered script maps to one language (``register_language(..., script=...)``); a script
    "dominates" with at least half of the letters (Ethiopic wins a tie with Latin).
    """
    _load_builtin_languages()
    counts = script_counts(text)
    total = sum(counts.values())
    if not total:
        return None
    for script in ("ethiopic", "latin"):
        if counts[script] / total >= 0.5:
            return _SCRIPT_LANGUAGE.get(script)
    return None


# Character repertoires of scripts, for tokenizer extension ("every letter of the script is a piece")
# and coverage reports. Ethiopic: every assigned code point of the main block U+1200-U+137F
# (syllables, gemination marks, punctuation, numerals).
_REPERTOIRE_BLOCKS = {"ethiopic": ((0x1200, 0x137F),)}


def script_repertoire(script: str) -> str:
    """All assigned characters of ``script``'s main block ("" for scripts without one)."""
    chars = []
    for start, end in _REPERTOIRE_BLOCKS.get(script, ()):
        chars.extend(chr(cp) for cp in range(start, end + 1) if unicodedata.category(chr(cp)) != "Cn")
    return "".join(chars)


def script_letters(script: str) -> str:
    """The letters (syllabary) of ``script``'s main block: e.g. the 326 Ethiopic syllables."""
    return "".join(ch for ch in script_repertoire(script) if unicodedata.category(ch).startswith("L"))


def scripts_in(text: str) -> set[str]:
    """Names of the scripts whose repertoire has characters in ``text`` (e.g. ``{"ethiopic"}``)."""
    found = set()
    for script in _REPERTOIRE_BLOCKS:
        repertoire = set(script_repertoire(script))
        if any(ch in repertoire for ch in text):
            found.add(script)
    return found
