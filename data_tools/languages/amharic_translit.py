"""A deterministic, reversible Ethiopic -> Latin transliteration: ``from_latin(to_latin(text)) == text``.

Why: IndexTTS-2.5's byte-level BPE has no Ethiopic merges, so every Ethiopic letter costs 2-3 tokens.
Written in Latin letters, Amharic reuses the table's Latin merges (and their trained embeddings).

Scheme. Each letter of the Ethiopic block (U+1200-U+137F) is a consonant row (8 code points each) and a
vowel column; it is written as the row's consonant code followed by the column's vowel code:

- vowel codes (columns 0..7): ``e u i a ie`` (nothing) ``o ua``: ``በ bu ቢ ባ ቤ ብ ቦ ቧ`` ->
  ``be bu bi ba bie b bo bua``; the 6th order (the most frequent) has no vowel letter;
- consonant codes use only consonant letters (never ``a e i o u``) and form a prefix-free set (no code
  starts another), so a word splits back into letters in exactly one way: read a consonant code, then the
  whole run of vowel letters after it is that letter's vowel code;
- the frequent Amharic consonants get one lower-case letter (``ለ l``, ``ሸ x``, ``ቸ c``, ``ጀ j``...), the
  glottal and pharyngeal carriers ``A`` (አ) and ``O`` (ዐ), ejectives and rarer rows one upper-case letter
  (``ጠ T``, ``ጨ C``, ``ጸ S``, ``ጰ P``, ``ሐ H``...), labialised rows ``W`` + their plain row's code (``ቈ Wq``);
- everything else (spaces, digits, punctuation, Ethiopic punctuation and numerals, other scripts) is kept as
  it is, except ASCII letters, which could be read as transliteration: each run of them is written between
  backticks (```PDF```), and a literal backtick is written twice.

Decoding refuses text that no ``to_latin`` output could be (a one-line error saying where).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

ESCAPE = "`"
VOWELS = ("e", "u", "i", "a", "ie", "", "o", "ua")  # columns 0..7 of a consonant row
_VOWEL_LETTERS = frozenset("aeiou")

# First code point of each row -> consonant code.
CONSONANTS: dict[int, str] = {
    0x1200: "h", 0x1208: "l", 0x1210: "H", 0x1218: "m", 0x1220: "X", 0x1228: "r", 0x1230: "s", 0x1238: "x",
    0x1240: "q", 0x1248: "Wq", 0x1250: "Q", 0x1258: "WQ", 0x1260: "b", 0x1268: "v", 0x1270: "t",
    0x1278: "c", 0x1280: "K", 0x1288: "WK", 0x1290: "n", 0x1298: "N", 0x12A0: "A", 0x12A8: "k",
    0x12B0: "Wk", 0x12B8: "J", 0x12C0: "WJ", 0x12C8: "w", 0x12D0: "O", 0x12D8: "z", 0x12E0: "Z",
    0x12E8: "y", 0x12F0: "d", 0x12F8: "D", 0x1300: "j", 0x1308: "g", 0x1310: "Wg", 0x1318: "M",
    0x1320: "T", 0x1328: "C", 0x1330: "P", 0x1338: "S", 0x1340: "F", 0x1348: "f", 0x1350: "p",
    0x1358: "L",
}


def _build_tables() -> tuple[dict[str, str], dict[tuple[str, str], str]]:
    import unicodedata

    to_latin: dict[str, str] = {}
    for row, consonant in CONSONANTS.items():
        for column, vowel in enumerate(VOWELS):
            ch = chr(row + column)
            if unicodedata.category(ch).startswith("L"):
                to_latin[ch] = consonant + vowel
    from_latin = {}
    for ch, code in to_latin.items():
        consonant = code.rstrip("aeiou")
        from_latin[(consonant, code[len(consonant):])] = ch
    return to_latin, from_latin


_TO_LATIN, _FROM_LATIN = _build_tables()
_CONSONANT_CODES = frozenset(CONSONANTS.values())
_ASCII_LETTERS = re.compile(r"[A-Za-z]+")
_ENCODE = re.compile(r"[A-Za-z]+|`")


class TransliterationError(ValueError):
    pass


def _check_prefix_free() -> None:
    codes = sorted(_CONSONANT_CODES)
    for code in codes:
        assert not _VOWEL_LETTERS & set(code), code
        assert not any(other != code and other.startswith(code) for other in codes), code


_check_prefix_free()


def to_latin(text: str) -> str:
    """Ethiopic letters to Latin codes; ASCII letters escaped in backticks, a backtick doubled."""
    return "".join(_latin_pieces(text))


def _latin_pieces(text: str) -> Iterator[str]:
    last = 0
    for match in _ENCODE.finditer(text):
        yield from _transliterate(text[last:match.start()])
        piece = match.group()
        yield ESCAPE + ESCAPE if piece == ESCAPE else ESCAPE + piece + ESCAPE
        last = match.end()
    yield from _transliterate(text[last:])


def _transliterate(chunk: str) -> Iterator[str]:
    for ch in chunk:
        yield _TO_LATIN.get(ch, ch)


def from_latin(text: str) -> str:
    """Inverse of ``to_latin``."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ESCAPE:
            if i + 1 < n and text[i + 1] == ESCAPE:
                out.append(ESCAPE)
                i += 2
                continue
            end = text.find(ESCAPE, i + 1)
            run = text[i + 1:end] if end > i + 1 else ""
            if not run or not _ASCII_LETTERS.fullmatch(run):
                raise TransliterationError(f"column {i + 1}: unclosed or empty escape")
            out.append(run)
            i = end + 1
            continue
        if not ("A" <= ch <= "Z" or "a" <= ch <= "z"):
            out.append(ch)
            i += 1
            continue
        consonant = ch if ch in _CONSONANT_CODES else text[i:i + 2]
        if consonant not in _CONSONANT_CODES:
            raise TransliterationError(f"column {i + 1}: {text[i:i + 2]!r} is no consonant code")
        j = i + len(consonant)
        k = j
        while k < n and text[k] in _VOWEL_LETTERS:
            k += 1
        letter = _FROM_LATIN.get((consonant, text[j:k]))
        if letter is None:
            raise TransliterationError(f"column {i + 1}: {text[i:k]!r} is no Ethiopic letter")
        out.append(letter)
        i = k
    return "".join(out)
