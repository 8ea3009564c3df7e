"""Amharic number reading: Arabic digits and Ethiopic numerals to Amharic cardinal (and ordinal) words.

Spelling conventions (one form per word, chosen to match the standard dictionary spellings; the
tokenizer and the model only ever see these):

- 1-10: አንድ ሁለት ሦስት አራት አምስት ስድስት ሰባት ስምንት ዘጠኝ አሥር (ሦስት and አሥር with ሦ/ሥ, not ሶ/ስ).
- 11-19: አሥራ + unit (አሥራ አንድ ... አሥራ ዘጠኝ).
- tens: ሃያ ሠላሳ አርባ ሃምሳ ስልሳ ሰባ ሰማንያ ዘጠና; 21 = ሃያ አንድ.
- hundreds: 100 = መቶ (no "one"), 200 = ሁለት መቶ, 101 = መቶ አንድ.
- scales: ሺህ (10^3), ሚሊዮን (10^6), ቢሊዮን (10^9), ትሪሊዮን (10^12); with the count always spoken:
  1000 = አንድ ሺህ, 1,000,000 = አንድ ሚሊዮን, 100,000 = መቶ ሺህ, 2025 = ሁለት ሺህ ሃያ አምስት.
- 0 = ዜሮ; numbers of 16+ digits, and numbers with a leading zero (e.g. "007", phone numbers) are
  read digit by digit.
- decimals: 3.25 = ሦስት ነጥብ ሁለት አምስት (the fraction digit by digit); 50% = ሃምሳ በመቶ.
- ordinals (a number written with the suffix ኛ): 1ኛ = አንደኛ, 2ኛ = ሁለተኛ, 9ኛ = ዘጠነኛ, 20ኛ = ሃያኛ.

Ethiopic numerals (፩-፱, ፲-፺, ፻, ፼) are parsed to integers first. Two writing conventions are accepted:
the standard one where each group of two digits carries its own power of a hundred, written ፻ first
and then ፼s (7,654,321 = ፯፻፼፷፭፼፵፫፻፳፩: 7x100x10000, 65x10000, 43x100, 21; 1,000,000 = ፻፼, while
፼፻ is 10,100), and the compact one where ፼ multiplies everything before it (7,654,321 =
፯፻፷፭፼፵፫፻፳፩). A numeral is read the standard way when its groups' powers strictly decrease (which the
standard way always produces), otherwise the compact way.
"""

from __future__ import annotations

import itertools
import re

ONES = ("", "አንድ", "ሁለት", "ሦስት", "አራት", "አምስት", "ስድስት", "ሰባት", "ስምንት", "ዘጠኝ")
TENS = ("", "አሥር", "ሃያ", "ሠላሳ", "አርባ", "ሃምሳ", "ስልሳ", "ሰባ", "ሰማንያ", "ዘጠና")
TEEN_PREFIX = "አሥራ"
HUNDRED = "መቶ"
SCALES = ((10**12, "ትሪሊዮን"), (10**9, "ቢሊዮን"), (10**6, "ሚሊዮን"), (10**3, "ሺህ"))
ZERO = "ዜሮ"
POINT = "ነጥብ"
PERCENT = "በመቶ"
ORDINAL_SUFFIX = "ኛ"
MAX_CARDINAL = 10**15 - 1

# Ordinal form of a number's last word: the final consonant takes the first order, then ኛ.
_ORDINAL_LAST_WORD = {
    "አንድ": "አንደኛ", "ሁለት": "ሁለተኛ", "ሦስት": "ሦስተኛ", "አራት": "አራተኛ", "አምስት": "አምስተኛ",
    "ስድስት": "ስድስተኛ", "ሰባት": "ሰባተኛ", "ስምንት": "ስምንተኛ", "ዘጠኝ": "ዘጠነኛ", "አሥር": "አሥረኛ",
    "ሺህ": "ሺኛ", "ሚሊዮን": "ሚሊዮነኛ", "ቢሊዮን": "ቢሊዮነኛ", "ትሪሊዮን": "ትሪሊዮነኛ", ZERO: "ዜሮኛ",
}

ETHIOPIC_DIGITS = {chr(0x1369 + i): i + 1 for i in range(9)}  # ፩..፱
ETHIOPIC_TENS = {chr(0x1372 + i): (i + 1) * 10 for i in range(9)}  # ፲..፺
ETHIOPIC_HUNDRED = "\u137b"  # ፻
ETHIOPIC_TEN_THOUSAND = "\u137c"  # ፼
ETHIOPIC_NUMERAL_CHARS = "".join(ETHIOPIC_DIGITS) + "".join(ETHIOPIC_TENS) + ETHIOPIC_HUNDRED + ETHIOPIC_TEN_THOUSAND

_DIGIT_WORDS = (ZERO, *ONES[1:])


class NumberError(ValueError):
    pass


def _below_thousand(n: int) -> list[str]:
    words: list[str] = []
    hundreds, rest = divmod(n, 100)
    if hundreds:
        words.extend([HUNDRED] if hundreds == 1 else [ONES[hundreds], HUNDRED])
    tens, ones = divmod(rest, 10)
    if tens == 1 and ones:
        words.extend([TEEN_PREFIX, ONES[ones]])
    else:
        if tens:
            words.append(TENS[tens])
        if ones:
            words.append(ONES[ones])
    return words


def cardinal_words(n: int) -> str:
    """Amharic cardinal words for ``0 <= n <= 999,999,999,999,999``."""
    if n < 0 or n > MAX_CARDINAL:
        raise NumberError(f"{n} is outside 0..{MAX_CARDINAL}")
    if n == 0:
        return ZERO
    words: list[str] = []
    for scale, name in SCALES:
        count, n = divmod(n, scale)
        if count:
            words.extend([*_below_thousand(count), name] if count > 1 else [ONES[1], name])
    words.extend(_below_thousand(n))
    return " ".join(words)


def ordinal_words(n: int) -> str:
    """Amharic ordinal words (1 -> አንደኛ, 20 -> ሃያኛ, 101 -> መቶ አንደኛ)."""
    words = cardinal_words(n).split(" ")
    last = words[-1]
    words[-1] = _ORDINAL_LAST_WORD.get(last, last + ORDINAL_SUFFIX)
    return " ".join(words)


def digit_words(digits: str) -> str:
    """Read a digit string one digit at a time (for leading zeros, very long numbers, fractions)."""
    return " ".join(_DIGIT_WORDS[int(d)] for d in digits)


def read_digits(digits: str) -> str:
    """Words for a run of ASCII digits (thousands commas removed by the caller)."""
    if len(digits) > 1 and digits.startswith("0"):
        return digit_words(digits)
    value = int(digits)
    if value > MAX_CARDINAL:
        return digit_words(digits)
    return cardinal_words(value)


def parse_ethiopic_numeral(numeral: str) -> int:
    """The integer value of an Ethiopic numeral (raises NumberError on other characters)."""
    if not numeral:
        raise NumberError("empty numeral")
    # Standard reading: groups of [digits] [፻] [፼...]; a group without digits stands for 1.
    groups: list[tuple[int, int]] = []  # (value of the digits, power of a hundred of the marks)
    digits = 0
    power = 0
    have_digits = False
    for ch in numeral:
        is_digit = ch in ETHIOPIC_DIGITS or ch in ETHIOPIC_TENS
        if not is_digit and ch not in (ETHIOPIC_HUNDRED, ETHIOPIC_TEN_THOUSAND):
            raise NumberError(f"{ch!r} is not an Ethiopic numeral")
        # A new group starts at digits after marks, and at a ፻ after a ፼ (marks are ፻ first, then ፼s).
        if (is_digit and power) or (ch == ETHIOPIC_HUNDRED and (power % 2 or power >= 2)):
            groups.append((digits if have_digits else 1, power))
            digits, power, have_digits = 0, 0, False
        if is_digit:
            digits += ETHIOPIC_DIGITS.get(ch, 0) + ETHIOPIC_TENS.get(ch, 0)
            have_digits = True
        else:
            power += 1 if ch == ETHIOPIC_HUNDRED else 2
    groups.append((digits if have_digits else 1, power))
    powers = [p for _, p in groups]
    if all(a > b for a, b in itertools.pairwise(powers)):
        return sum(value * 100**p for value, p in groups)
    return _parse_compact(numeral)


def ethiopic_numeral(n: int) -> str:
    """Write ``n >= 1`` in Ethiopic numerals, the standard way: groups of two digits from the right, the
    group at position i followed by its power of a hundred (i odd: ፻ then i//2 x ፼; i even: i//2 x ፼),
    and a group equal to 1 written by its marks alone (100 = ፻, 10000 = ፼, 1,000,000 = ፻፼) where that
    cannot be misread (10,010,000 = ፲፻፼፩፼)."""
    if n < 1:
        raise NumberError(f"Ethiopic numerals have no zero or negatives: {n}")
    tens_chars = {v: k for k, v in ETHIOPIC_TENS.items()}
    digit_chars = {v: k for k, v in ETHIOPIC_DIGITS.items()}
    pairs: list[int] = []
    while n:
        n, pair = divmod(n, 100)
        pairs.append(pair)
    out: list[str] = []
    for position in range(len(pairs) - 1, -1, -1):
        pair = pairs[position]
        if not pair:
            continue
        # A lone 1 is left out before its marks (100 = ፻), except before ፼ in mid-number, where
        # "፻፼" + "፼" would read as one group (10^10), not 10^6 + 10^4.
        leading = position == len(pairs) - 1
        if not (pair == 1 and position > 0 and (leading or position % 2)):
            tens, ones = divmod(pair, 10)
            out.append(tens_chars.get(tens * 10, "") + digit_chars.get(ones, ""))
        out.append(ETHIOPIC_HUNDRED * (position % 2) + ETHIOPIC_TEN_THOUSAND * (position // 2))
    return "".join(out)


def _parse_compact(numeral: str) -> int:
    """The compact reading: ፻ multiplies the digits just before it, ፼ everything before it."""
    total = 0
    pending = 0
    for ch in numeral:
        if ch == ETHIOPIC_HUNDRED:
            total += (pending or 1) * 100
            pending = 0
        elif ch == ETHIOPIC_TEN_THOUSAND:
            total = (total + pending or 1) * 10000
            pending = 0
        else:
            pending += ETHIOPIC_DIGITS.get(ch, 0) + ETHIOPIC_TENS.get(ch, 0)
    return total + pending


_NUMBER = re.compile(
    r"(?P<num>\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
    r"(?:\.(?P<frac>\d+))?"
    r"(?P<percent>\s?[%٪])?"
    r"(?P<ordinal>" + ORDINAL_SUFFIX + ")?"
)
_ETHIOPIC_NUMBER = re.compile(f"(?P<num>[{ETHIOPIC_NUMERAL_CHARS}]+)(?P<ordinal>{ORDINAL_SUFFIX})?")


def _number_match_words(match: re.Match[str]) -> str:
    raw = match.group("num").replace(",", "")
    if match.group("ordinal") and not match.group("frac") and not match.group("percent") and not (
            len(raw) > 1 and raw.startswith("0")) and int(raw) <= MAX_CARDINAL:
        return ordinal_words(int(raw))
    words = read_digits(raw)
    if match.group("frac"):
        words += f" {POINT} {digit_words(match.group('frac'))}"
    if match.group("percent"):
        words += f" {PERCENT}"
    if match.group("ordinal"):
        words += ORDINAL_SUFFIX
    return words


def _ethiopic_match_words(match: re.Match[str]) -> str:
    value = parse_ethiopic_numeral(match.group("num"))
    if value > MAX_CARDINAL:
        return digit_words(str(value))
    return ordinal_words(value) if match.group("ordinal") else cardinal_words(value)


def expand_numbers(text: str) -> str:
    """Replace every Arabic-digit number and Ethiopic numeral in ``text`` by Amharic words."""
    text = _ETHIOPIC_NUMBER.sub(_ethiopic_match_words, text)
    return _NUMBER.sub(_number_match_words, text)
