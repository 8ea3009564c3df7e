"""Amharic text for scoring (CER / WER): one spelling per spoken form, no punctuation, numbers as words.

Not the training normaliser (``amharic.normalize_amharic`` keeps spelling and punctuation, which the model
must learn); this one decides which differences between a reference and a transcript count as errors.
In order:

1. Unicode NFC; the wordspace ``፡`` becomes a space (it separates words).
2. Numbers read out by ``amharic_numbers`` (``2025`` -> ሁለት ሺህ ሃያ አምስት; ``፲፻`` -> አንድ ሺህ), before the
   punctuation goes, so ``1,000``, ``3.25`` and ``50%`` are read as numbers.
3. Homophone letters folded to one representative, in every order of the row (the Ethiopic block keeps a
   consonant's orders in one row of 8 code points: base + 0..6 are the seven vowel orders, so the fold is
   built from the layout, not typed letter by letter):
   ሐ ኀ -> ሀ, ሠ -> ሰ, ዐ -> አ, ፀ -> ጸ (ሓ ኃ -> ሃ, ሡ -> ሱ, ዑ -> ኡ, ፅ -> ጽ, ...). The eighth place of a row
   is folded only where both rows hold the same labialised -wa syllable there (ሧ -> ሷ).
   Then, in the two laryngeal rows that remain (ሀ, አ), the fourth order folds into the first (ሃ -> ሀ,
   ኣ -> አ): after a laryngeal the first-order vowel is spoken /a/, so ሀያ and ሃያ, አለ and ኣለ sound the same
   and are written both ways.
4. Combining marks of the Ethiopic block (gemination, vowel length) removed; Ethiopic punctuation
   (። ፣ ፤ ፥ ፦ ፧ ፨ ፠) and every other punctuation or symbol character become spaces, except ``'`` and
   ``.`` between two letters (contractions, abbreviations such as ዓ.ም), which are dropped.
5. Lower case (for Latin words inside Amharic text), whitespace collapsed.

The result is idempotent: scoring normalised text again changes nothing.
"""

from __future__ import annotations

import unicodedata

from data_tools.languages.amharic_numbers import expand_numbers
from data_tools.languages.generic_scoring import collapse_spaces, strip_punctuation

WORDSPACE = "\u1361"  # ፡
ROW_LENGTH = 8  # code points per consonant row of the Ethiopic block
VOWEL_ORDERS = 7  # places 0..6 of a row; place 7 holds a labialised or extra syllable, or nothing

# (representative row, rows spoken the same), each row named by its first-order letter.
HOMOPHONE_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ሀ", ("ሐ", "ኀ")),
    ("ሰ", ("ሠ",)),
    ("አ", ("ዐ",)),
    ("ጸ", ("ፀ",)),
)
# Rows whose first-order vowel is spoken like the fourth order (laryngeals), after the fold above.
LARYNGEAL_ROWS = ("ሀ", "አ")
FIRST_ORDER, FOURTH_ORDER = 0, 3


def _labialised(letter: str) -> bool:
    return unicodedata.name(letter, "").endswith("WA")


def homophone_table() -> dict[int, str]:
    """``str.translate`` table: every letter of a homophone row -> the representative's letter."""
    table: dict[int, str] = {}
    for representative, others in HOMOPHONE_ROWS:
        base = ord(representative)
        for other in others:
            other_base = ord(other)
            for order in range(VOWEL_ORDERS):
                table[other_base + order] = chr(base + order)
            extra, kept = chr(other_base + VOWEL_ORDERS), chr(base + VOWEL_ORDERS)
            if _labialised(extra) and _labialised(kept):
                table[ord(extra)] = kept
    for row in LARYNGEAL_ROWS:
        base = ord(row)
        first = chr(base + FIRST_ORDER)
        table[base + FOURTH_ORDER] = first
        for source, target in list(table.items()):
            if target == chr(base + FOURTH_ORDER):
                table[source] = first
    return table


_HOMOPHONES = homophone_table()


def normalize_amharic_for_scoring(text: str) -> str:
    """Amharic reference or transcript -> the form CER and WER compare (see the module doc)."""
    text = unicodedata.normalize("NFC", text).replace(WORDSPACE, " ")
    text = expand_numbers(text)
    text = text.translate(_HOMOPHONES)
    return collapse_spaces(strip_punctuation(text).lower())
