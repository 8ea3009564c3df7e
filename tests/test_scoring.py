"""Scoring normalisers (Amharic and generic) and CER / WER on hand-computed examples."""

from __future__ import annotations

import pytest

from data_tools.languages import scoring_normaliser
from data_tools.languages.amharic_scoring import homophone_table
from data_tools.languages.amharic_scoring import normalize_amharic_for_scoring as norm
from data_tools.languages.generic_scoring import normalize_generic_for_scoring
from data_tools.scoring import ScoringError, cer, wer


def test_wordspace_becomes_a_space():
    assert norm("ሰላም፡ለዓለም") == "ሰላም ለአለም"
    assert norm("አንድ፡፡ሁለት") == "አንድ ሁለት"


@pytest.mark.parametrize("mark", list("።፣፤፥፦፧፨፠") + list(",.;:!?\"()[]-«»"))
def test_punctuation_removed(mark):
    assert norm(f"ቤት{mark} ዛፍ{mark}") == "ቤት ዛፍ"


def test_abbreviation_dot_and_gemination_mark_dropped():
    assert norm("በ2000 ዓ.ም.") == norm("በ2000 ዓም")
    assert norm("ለ\u135fማ") == "ለማ"


@pytest.mark.parametrize(("variants", "representative"), [
    # ሀ family in each order (first and fourth orders meet: laryngeal /a/)
    ("ሀሐኀሃሓኃ", "ሀ"), ("ሁሑኁ", "ሁ"), ("ሂሒኂ", "ሂ"), ("ሄሔኄ", "ሄ"), ("ህሕኅ", "ህ"), ("ሆሖኆ", "ሆ"),
    # ሰ / ሠ, all seven orders and the labialised -wa
    ("ሰሠ", "ሰ"), ("ሱሡ", "ሱ"), ("ሲሢ", "ሲ"), ("ሳሣ", "ሳ"), ("ሴሤ", "ሴ"), ("ስሥ", "ስ"), ("ሶሦ", "ሶ"), ("ሷሧ", "ሷ"),
    # አ / ዐ (first and fourth meet)
    ("አዐኣዓ", "አ"), ("ኡዑ", "ኡ"), ("ኢዒ", "ኢ"), ("ኤዔ", "ኤ"), ("እዕ", "እ"), ("ኦዖ", "ኦ"),
    # ጸ / ፀ
    ("ጸፀ", "ጸ"), ("ጹፁ", "ጹ"), ("ጺፂ", "ጺ"), ("ጻፃ", "ጻ"), ("ጼፄ", "ጼ"), ("ጽፅ", "ጽ"), ("ጾፆ", "ጾ"),
])
def test_homophone_families_fold_in_every_order(variants, representative):
    for letter in variants:
        assert norm(letter) == representative, letter


def test_homophone_table_built_from_layout_leaves_other_letters():
    table = homophone_table()
    # rows ሐ ኀ ሠ ዐ ፀ (7 orders each), ሧ (-wa), ሃ and ኣ (fourth order of the laryngeal representatives)
    assert len(table) == 5 * 7 + 1 + 2
    untouched = "ለመረቀበተነከወዘየደገጠጰፈፐቨ ሇሗፇኸ"
    assert "".join(ch.translate(table) for ch in untouched) == untouched


def test_words_with_homophones_match():
    assert norm("ፀሐይ ሠላም ዓለም ኃይል") == norm("ጸሀይ ሰላም አለም ሀይል")


def test_digits_read_out_then_folded():
    assert norm("2025") == "ሁለት ሺህ ሀያ አምስት"  # ሃያ folds to ሀያ
    assert norm("3") == norm("ሦስት") == "ሶስት"
    assert norm("1,000 ብር።") == "አንድ ሺህ ብር"
    assert norm("፲፻") == "አንድ ሺህ"
    assert norm("50%") == "ሀምሳ በመቶ"


def test_whitespace_and_latin_case():
    assert norm("  ሰላም \t\n World  ") == "ሰላም world"


@pytest.mark.parametrize("text", ["ሰላም፡ለዓለም። 2025 ዓ.ም", "ፀሐይ, ኃይል!", "Hello ሠላም ፲፪"])
def test_idempotent(text):
    once = norm(text)
    assert norm(once) == once


def test_generic_normaliser_and_dispatch():
    assert normalize_generic_for_scoring("Hello, World! Don't  stop.") == "hello world dont stop"
    assert scoring_normaliser("en") is normalize_generic_for_scoring
    assert scoring_normaliser(None) is normalize_generic_for_scoring
    for code in ("am", "amh", "AM", "Amharic"):
        assert scoring_normaliser(code) is norm


def test_cer_hand_computed():
    # "abcd" -> "abxd": 1 substitution / 4; "hello" -> "helo": 1 deletion / 5; corpus 2 / 9
    result = cer(["abcd", "hello"], ["abxd", "helo"], language="en")
    assert result.per_utterance == [pytest.approx(0.25), pytest.approx(0.2)]
    assert (result.substitutions, result.deletions, result.insertions, result.reference_length) == (1, 1, 0, 9)
    assert result.corpus == pytest.approx(2 / 9)


def test_cer_counts_the_space_between_words():
    # "ab cd" (5 characters) -> "abcd": the space is deleted
    result = cer(["ab cd"], ["abcd"], language="en")
    assert (result.deletions, result.reference_length) == (1, 5)


def test_wer_hand_computed():
    # 1 substitution + 1 insertion over 3 words; then 1 deletion over 2 words; corpus 3 / 5
    result = wer(["the cat sat", "good day"], ["the cat sit down", "good"], language="en")
    assert result.per_utterance == [pytest.approx(2 / 3), pytest.approx(0.5)]
    assert (result.substitutions, result.deletions, result.insertions) == (1, 1, 1)
    assert result.corpus == pytest.approx(3 / 5)


def test_amharic_differences_that_are_not_heard_score_zero():
    refs = ["ፀሐይ፡ወጣች።", "በ2025 ዓ.ም ሠላም ነው፣"]
    hyps = ["ጸሀይ ወጣች", "በሁለት ሺህ ሃያ አምስት ዓም ሰላም ነው"]
    assert wer(refs, hyps, language="am").corpus == 0.0
    assert cer(refs, hyps, language="am").corpus == 0.0


def test_amharic_real_error_counts():
    # one word of three is different: WER 1/3; CER: ቤት -> ቦት is one substitution in 9 characters (3 + 1 + 2 + 1 + 2)
    result = wer(["ሰላም ቤት ውሃ"], ["ሰላም ቦት ውሃ"], language="am")
    assert result.corpus == pytest.approx(1 / 3)
    assert cer(["ሰላም ቤት ውሃ"], ["ሰላም ቦት ውሃ"], language="am").corpus == pytest.approx(1 / 9)


def test_empty_reference_and_transcript():
    result = wer(["", "a b", "።"], ["", "a b", "x y"], language="en")
    assert result.per_utterance == [0.0, 0.0, 1.0]
    assert result.insertions == 2 and result.reference_length == 2
    assert result.corpus == pytest.approx(1.0)
    assert wer([], [], language="am").corpus == 0.0


def test_mismatched_inputs_refused_in_one_line():
    with pytest.raises(ScoringError, match="2 references but 1 transcripts"):
        wer(["a", "b"], ["a"])
    with pytest.raises(ScoringError, match="not one string"):
        cer("abc", "abd")
