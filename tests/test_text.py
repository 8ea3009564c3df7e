"""The text front-end: IndexTTS's convention, the Amharic normaliser, language hooks, idempotence."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from data_tools import text as text_module
from data_tools.text import (
    detect_language,
    normalize_text,
    register_language,
    registered_languages,
    script_letters,
    script_repertoire,
    scripts_in,
)

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"

AMHARIC = [
    # punctuation: one canonical Ethiopic form per mark
    ("ሰላም::", "ሰላም።"),
    ("ሰላም፡፡", "ሰላም።"),
    ("ሰላም ፡ ፡", "ሰላም።"),
    ("ሰላም።", "ሰላም።"),
    ("ቤት, መኪና", "ቤት፣ መኪና"),
    ("ቤት፣መኪና", "ቤት፣ መኪና"),
    ("ቤት; መኪና", "ቤት፤ መኪና"),
    ("ስም: አበበ", "ስም፥ አበበ"),
    ("ስም:", "ስም፥"),
    ("እንደሚከተለው:- አንድ", "እንደሚከተለው፦ አንድ"),
    ("ደህና ነህ?", "ደህና ነህ፧"),
    ("ደህና ነህ ?", "ደህና ነህ፧"),
    ("ደህና ነህ፧", "ደህና ነህ፧"),
    ("ሰላም፡ለዓለም", "ሰላም ለዓለም"),  # the old wordspace separates words
    ("ሰዓት 10:30", "ሰዓት አሥር:ሠላሳ"),  # a colon inside a token stays
    ("ዓ.ም", "ዓ.ም"),  # abbreviation dots stay
    # whitespace
    ("  ሰላም \t  ለዓለም  ", "ሰላም ለዓለም"),
    ("ሰላም\u200bለዓለም", "ሰላም ለዓለም"),  # format characters become spaces
    # numbers
    ("በ2025 ዓ.ም", "በሁለት ሺህ ሃያ አምስት ዓ.ም"),
    ("ዋጋው 1,000,000 ብር ነው::", "ዋጋው አንድ ሚሊዮን ብር ነው።"),
    ("፳፻፳፭ ዓመት", "ሁለት ሺህ ሃያ አምስት ዓመት"),
    ("1, 2, 3", "አንድ፣ ሁለት፣ ሦስት"),
    ("5ኛ ክፍል", "አምስተኛ ክፍል"),
    # Latin words inside Amharic text follow IndexTTS's upper-case convention
    ("PDF ፋይል", "PDF ፋይል"),
    ("የ pdf ፋይል", "የ PDF ፋይል"),
]


@pytest.mark.parametrize(("raw", "expected"), AMHARIC)
def test_amharic_normalisation(raw: str, expected: str) -> None:
    assert normalize_text(raw, "am") == expected


def test_language_is_detected_from_the_script() -> None:
    assert detect_language("ሰላም ለዓለም") == "am"
    assert detect_language("Hello world") == "en"
    assert detect_language("12345 !?") is None
    # Auto-detection applies the Amharic rules to Ethiopic text only.
    assert normalize_text("ሰላም, 2 ቤቶች") == "ሰላም፣ ሁለት ቤቶች"
    assert normalize_text("Hello, 2 houses") == "HELLO, 2 HOUSES"


def test_indextts_convention_uppercases_and_splits_cjk() -> None:
    assert normalize_text("hello  world", "en") == "HELLO WORLD"
    assert normalize_text("你好world", "zh") == "你 好 WORLD"
    decomposed = "cafe\u0301"  # NFC composes it before upper-casing
    assert normalize_text(decomposed, "en") == "CAF\u00c9"


def test_every_normaliser_output_is_nfc_and_single_spaced() -> None:
    for raw, _ in AMHARIC:
        out = normalize_text(raw, "am")
        assert out == unicodedata.normalize("NFC", out)
        assert "  " not in out and out == out.strip()


@pytest.mark.parametrize("name", ["amharic_train.txt", "amharic_heldout.txt", "english_train.txt"])
def test_normalisation_is_idempotent_on_real_text(name: str) -> None:
    """Tokenizer training, data checks and training may normalise text that was normalised already."""
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    for language in (None, "am", "en"):
        not_stable = [line for line in lines
                      if normalize_text(normalize_text(line, language), language) != normalize_text(line, language)]
        assert not_stable == [], (language, not_stable[:3])


def test_amharic_corpus_has_no_digits_or_ascii_lookalikes_after_normalisation() -> None:
    lines = (CORPUS / "amharic_train.txt").read_text(encoding="utf-8").splitlines()
    out = "".join(normalize_text(line, "am") for line in lines)
    assert not any(ch.isdigit() for ch in out)
    assert not set(out) & set(",;?፡")
    assert "::" not in out


def test_a_new_language_is_one_registered_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(text_module, "_LANGUAGES", dict(text_module._LANGUAGES))
    monkeypatch.setattr(text_module, "_SCRIPT_LANGUAGE", dict(text_module._SCRIPT_LANGUAGE))
    register_language("xx", lambda t: t.replace("&", " and "), script="latin")
    assert "xx" in registered_languages()
    assert normalize_text("salt & pepper", "xx") == "SALT AND PEPPER"
    assert detect_language("salt & pepper") == "xx"
    assert normalize_text("salt & pepper") == "SALT AND PEPPER"
    assert normalize_text("salt & pepper", "en") == "SALT & PEPPER"


def test_ethiopic_repertoire() -> None:
    assert len(script_letters("ethiopic")) == 326
    repertoire = script_repertoire("ethiopic")
    assert len(repertoire) == 358
    assert set("።፣፤፥፦፧፨") <= set(repertoire)
    assert scripts_in("abc ሰ") == {"ethiopic"}
    assert scripts_in("abc") == set()
    assert script_repertoire("latin") == ""
