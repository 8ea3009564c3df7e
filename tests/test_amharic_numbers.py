"""Amharic number reading: cardinal words, ordinals, Ethiopic numerals (table-driven)."""

from __future__ import annotations

import random

import pytest

from data_tools.languages.amharic_numbers import (
    NumberError,
    cardinal_words,
    ethiopic_numeral,
    expand_numbers,
    ordinal_words,
    parse_ethiopic_numeral,
)

CARDINALS = [
    (0, "ዜሮ"),
    (1, "አንድ"),
    (2, "ሁለት"),
    (3, "ሦስት"),
    (4, "አራት"),
    (5, "አምስት"),
    (6, "ስድስት"),
    (7, "ሰባት"),
    (8, "ስምንት"),
    (9, "ዘጠኝ"),
    (10, "አሥር"),
    (11, "አሥራ አንድ"),
    (15, "አሥራ አምስት"),
    (19, "አሥራ ዘጠኝ"),
    (20, "ሃያ"),
    (21, "ሃያ አንድ"),
    (30, "ሠላሳ"),
    (45, "አርባ አምስት"),
    (50, "ሃምሳ"),
    (60, "ስልሳ"),
    (77, "ሰባ ሰባት"),
    (80, "ሰማንያ"),
    (99, "ዘጠና ዘጠኝ"),
    (100, "መቶ"),
    (101, "መቶ አንድ"),
    (110, "መቶ አሥር"),
    (111, "መቶ አሥራ አንድ"),
    (200, "ሁለት መቶ"),
    (999, "ዘጠኝ መቶ ዘጠና ዘጠኝ"),
    (1000, "አንድ ሺህ"),
    (1001, "አንድ ሺህ አንድ"),
    (1100, "አንድ ሺህ መቶ"),
    (2025, "ሁለት ሺህ ሃያ አምስት"),
    (10_000, "አሥር ሺህ"),
    (11_000, "አሥራ አንድ ሺህ"),
    (100_000, "መቶ ሺህ"),
    (123_456, "መቶ ሃያ ሦስት ሺህ አራት መቶ ሃምሳ ስድስት"),
    (1_000_000, "አንድ ሚሊዮን"),
    (2_500_000, "ሁለት ሚሊዮን አምስት መቶ ሺህ"),
    (999_999_999, "ዘጠኝ መቶ ዘጠና ዘጠኝ ሚሊዮን ዘጠኝ መቶ ዘጠና ዘጠኝ ሺህ ዘጠኝ መቶ ዘጠና ዘጠኝ"),
    (1_000_000_000, "አንድ ቢሊዮን"),
    (3_000_000_007, "ሦስት ቢሊዮን ሰባት"),
]


@pytest.mark.parametrize(("number", "words"), CARDINALS)
def test_cardinal_words(number: int, words: str) -> None:
    assert cardinal_words(number) == words


ORDINALS = [
    (1, "አንደኛ"),
    (2, "ሁለተኛ"),
    (3, "ሦስተኛ"),
    (9, "ዘጠነኛ"),
    (10, "አሥረኛ"),
    (11, "አሥራ አንደኛ"),
    (20, "ሃያኛ"),
    (100, "መቶኛ"),
    (1000, "አንድ ሺኛ"),
]


@pytest.mark.parametrize(("number", "words"), ORDINALS)
def test_ordinal_words(number: int, words: str) -> None:
    assert ordinal_words(number) == words


ETHIOPIC = [
    ("፩", 1),
    ("፱", 9),
    ("፲", 10),
    ("፲፩", 11),
    ("፳", 20),
    ("፺፱", 99),
    ("፻", 100),
    ("፻፩", 101),
    ("፪፻", 200),
    ("፲፻", 1000),
    ("፳፻፳፭", 2025),
    ("፺፱፻፺፱", 9999),
    ("፼", 10_000),
    ("፪፼", 20_000),
    ("፼፻", 10_100),
    ("፲፼", 100_000),
    ("፻፼", 1_000_000),
    ("፯፻፼፷፭፼፵፫፻፳፩", 7_654_321),  # standard: each group carries its own power
    ("፼፼፳፫፻፼፵፭፼፷፯፻፹፱", 123_456_789),
    ("፯፻፷፭፼፵፫፻፳፩", 7_654_321),  # compact: ፼ multiplies everything before it
    ("፼፳፫፻፵፭፼፷፯፻፹፱", 123_456_789),
    ("፼፼", 100_000_000),
]


@pytest.mark.parametrize(("numeral", "value"), ETHIOPIC)
def test_parse_ethiopic_numeral(numeral: str, value: int) -> None:
    assert parse_ethiopic_numeral(numeral) == value


@pytest.mark.parametrize(("value", "numeral"), [
    (1, "፩"), (10, "፲"), (100, "፻"), (101, "፻፩"), (1000, "፲፻"), (2025, "፳፻፳፭"), (10_000, "፼"),
    (1_000_000, "፻፼"), (7_654_321, "፯፻፼፷፭፼፵፫፻፳፩"), (10_010_000, "፲፻፼፩፼"),
])
def test_format_ethiopic_numeral(value: int, numeral: str) -> None:
    assert ethiopic_numeral(value) == numeral


def test_ethiopic_numerals_round_trip_up_to_a_billion() -> None:
    rng = random.Random(7)
    values = list(range(1, 12_000)) + [rng.randrange(1, 10**k) for k in range(5, 13) for _ in range(2000)]
    wrong = [v for v in values if parse_ethiopic_numeral(ethiopic_numeral(v)) != v]
    assert wrong == []


def test_bad_inputs_raise() -> None:
    with pytest.raises(NumberError):
        parse_ethiopic_numeral("፩a")
    with pytest.raises(NumberError):
        parse_ethiopic_numeral("")
    with pytest.raises(NumberError):
        cardinal_words(-1)
    with pytest.raises(NumberError):
        ethiopic_numeral(0)


EXPANSIONS = [
    ("1", "አንድ"),
    ("11", "አሥራ አንድ"),
    ("20", "ሃያ"),
    ("101", "መቶ አንድ"),
    ("1000", "አንድ ሺህ"),
    ("2025", "ሁለት ሺህ ሃያ አምስት"),
    ("1,000,000", "አንድ ሚሊዮን"),
    ("999,999,999", cardinal_words(999_999_999)),
    ("3.25", "ሦስት ነጥብ ሁለት አምስት"),
    ("50%", "ሃምሳ በመቶ"),
    ("007", "ዜሮ ዜሮ ሰባት"),
    ("5ኛ", "አምስተኛ"),
    ("21ኛው", "ሃያ አንደኛው"),
    ("፳፻፳፭", "ሁለት ሺህ ሃያ አምስት"),
    ("፫ኛ", "ሦስተኛ"),
    ("1234567890123456789", "አንድ ሁለት ሦስት አራት አምስት ስድስት ሰባት ስምንት ዘጠኝ ዜሮ አንድ ሁለት ሦስት አራት አምስት "
                             "ስድስት ሰባት ስምንት ዘጠኝ"),
    ("ከ10 እስከ 20", "ከአሥር እስከ ሃያ"),
    ("1,2", "አንድ,ሁለት"),  # not a thousands group: two numbers (the comma is punctuation, mapped later)
]


@pytest.mark.parametrize(("text", "expected"), EXPANSIONS)
def test_expand_numbers_in_text(text: str, expected: str) -> None:
    assert expand_numbers(text) == expected
