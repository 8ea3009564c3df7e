"""Amharic normaliser: canonical Ethiopic punctuation, numbers read out as words, tidy whitespace.

It runs inside ``normalize_text`` after the language-independent clean-up (Unicode NFC, control
characters, whitespace) and before IndexTTS's convention (upper-casing, CJK split), so tokenizer
training, data checks, training and export all see the same text.

Punctuation: one canonical form per mark, always the Ethiopic one.

====================  ======================================  =========
mark                  look-alikes mapped to it                canonical
====================  ======================================  =========
full stop             ``::``  ``፡፡``  ``፡ ፡``  ``: :``           ።
comma                 ``,``  (thousands commas are numbers)    ፣
semicolon             ``;``  ``፡,``  ``:,``                     ፤
colon                 ``:`` before a space or the end          ፥
preface colon         ``:-``  ``፡-``                           ፦
question mark         ``?``                                   ፧
paragraph separator   (none)                                  ፨
wordspace             ``፡`` alone: a word separator            a space
====================  ======================================  =========

A ``:`` inside a token (``10:30``, ``http://``) and ``.`` (abbreviations such as ``ዓ.ም``, decimals)
are left alone. No space before a mark; one space after it when a letter follows.

Spelling is not otherwise changed: homophone letters (ሀ/ሐ/ኀ, ሰ/ሠ, አ/ዐ, ጸ/ፀ) are kept as written.
Numbers: see ``amharic_numbers`` (1 -> አንድ, 2025 -> ሁለት ሺህ ሃያ አምስት, ፲፻ -> አንድ ሺህ).
"""

from __future__ import annotations

import re

from data_tools.languages.amharic_numbers import expand_numbers

FULL_STOP = "\u1362"  # ።
COMMA = "\u1363"  # ፣
SEMICOLON = "\u1364"  # ፤
COLON = "\u1365"  # ፥
PREFACE_COLON = "\u1366"  # ፦
QUESTION_MARK = "\u1367"  # ፧
PARAGRAPH_SEPARATOR = "\u1368"  # ፨
WORDSPACE = "\u1361"  # ፡

CANONICAL_MARKS = FULL_STOP + COMMA + SEMICOLON + COLON + PREFACE_COLON + QUESTION_MARK + PARAGRAPH_SEPARATOR

# Applied in this order (longer look-alikes first).
_LOOKALIKES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(f"[:{WORDSPACE}] ?[:{WORDSPACE}]"), FULL_STOP),
    (re.compile(f"[:{WORDSPACE}]-"), PREFACE_COLON),
    (re.compile(f"[:{WORDSPACE}],"), SEMICOLON),
    (re.compile(WORDSPACE), " "),
    (re.compile(","), COMMA),
    (re.compile(";"), SEMICOLON),
    (re.compile(r"\?"), QUESTION_MARK),
    (re.compile(r":(?=\s|$)"), COLON),
)
_SPACE_BEFORE_MARK = re.compile(f" +([{CANONICAL_MARKS}!])")
_LETTER_AFTER_MARK = re.compile(f"([{CANONICAL_MARKS}])(?=[^\\W\\d_])")
_SPACES = re.compile(r"\s+")


def canonical_punctuation(text: str) -> str:
    for pattern, replacement in _LOOKALIKES:
        text = pattern.sub(replacement, text)
    text = _SPACE_BEFORE_MARK.sub(r"\1", text)
    return _LETTER_AFTER_MARK.sub(r"\1 ", text)


def normalize_amharic(text: str) -> str:
    """Numbers to words, canonical punctuation, single spaces (input is already NFC)."""
    text = expand_numbers(text)  # first: "1,000" is a number before "," becomes ፣
    text = canonical_punctuation(text)
    return _SPACES.sub(" ", text).strip()


LANGUAGE = ("am", normalize_amharic, "ethiopic")  # (code, normaliser, script): registered by data_tools.text
