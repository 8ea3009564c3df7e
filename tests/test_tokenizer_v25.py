"""IndexTTS-2.5's tokenizer, Ethiopic merges, the Amharic transliteration and the scheme front-end."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path

import pytest
import tiktoken
from tiktoken.load import load_tiktoken_bpe

from data_tools.languages.amharic_translit import TransliterationError, from_latin, to_latin
from data_tools.text import language_normalize
from data_tools.tokenizer.__main__ import main as tokenizer_cli
from generations.indextts25.data.ethiopic_merges import (
    added_token_base_ids,
    ethiopic_words,
    is_ethiopic_token,
    learn_merges,
    load_extended,
    load_merges,
    save_merges,
    write_upstream_table,
)
from generations.indextts25.data.text_table import (
    DEFAULT_MERGES,
    DEFAULT_TABLE,
    TEXT_SCHEMES,
    TextTable,
    encode_text,
    stock_inference_notes,
    tokens_per_char,
)
from generations.indextts25.data.tiktoken_table import (
    BASE_RANK_COUNT,
    BASE_TEXT_ROWS,
    BASE_VOCAB_SIZE,
    SPLIT_PATTERN,
    TableError,
    TiktokenTable,
    inference_text,
    language_index,
    language_prefix,
    read_table,
    special_tokens_in_order,
)
from tests.conftest import FIXTURES, REPO, shared_file

TABLE_SHA256 = "747979631e813193436aabcff7c1c235d37de8097b71c563ec8b63b7a515c718"
CORPUS = FIXTURES / "corpus"
PROJECT_AMHARIC = [CORPUS / "amharic_train.txt", CORPUS / "amharic_heldout.txt",
                   REPO / "demo" / "assets" / "amharic_corpus.txt",
                   REPO / "demo" / "assets" / "amharic_sentences.txt"]


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")


@pytest.fixture(scope="module")
def base() -> TiktokenTable:
    return TiktokenTable.load(DEFAULT_TABLE)


@pytest.fixture(scope="module")
def schemes() -> dict[str, TextTable]:
    return {scheme: TextTable(scheme=scheme) for scheme in TEXT_SCHEMES}


# --- the table and the tokenizer ---------------------------------------------------------------------

def test_committed_table_is_the_real_one_with_its_licence():
    assert hashlib.sha256(DEFAULT_TABLE.read_bytes()).hexdigest() == TABLE_SHA256
    licence = DEFAULT_TABLE.with_name(DEFAULT_TABLE.name + ".LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence


def test_table_reads_as_tiktoken_reads_it():
    ranks = read_table(DEFAULT_TABLE)
    assert ranks == load_tiktoken_bpe(str(DEFAULT_TABLE))
    assert len(ranks) == BASE_RANK_COUNT
    assert ranks[b"!"] == 0 and ranks[b'"'] == 1
    assert all(bytes([b]) in ranks for b in range(256))


def test_special_tokens_follow_the_documented_order(base):
    specials = special_tokens_in_order()
    assert len(specials) == 1673 == len(set(specials))
    assert BASE_RANK_COUNT + len(specials) == BASE_VOCAB_SIZE == base.vocab_size
    facts = json.loads(shared_file("reference", "indextts25", "tokenizer_facts_v25.json").read_text())
    for token, token_id in facts["special_ids"].items():
        assert base.specials[token] == token_id, token
    assert base.specials["<|SPECIAL_TOKEN_30|>"] == 58987
    assert base.specials["<|0.02|>"] == 59009


def test_encode_examples_and_language_indexes_match_the_facts(base):
    facts = json.loads(shared_file("reference", "indextts25", "tokenizer_facts_v25.json").read_text())
    for text, ids in facts["encode_examples"].items():
        assert base.encode(text) == ids, text
    assert base.encode("<|yue|> ") == facts["encode_<|yue|>"]  # no special token past index 98
    for code, index in facts["lang_to_token"].items():
        assert language_index(code) == index, code
    assert language_index("su") == 98 and language_index("common") == 105
    assert language_prefix("AM") == "<|am|> "


def test_reproduces_every_sample_of_tokenizer_samples_am_en(base):
    samples = json.loads(shared_file("reference", "indextts25", "tokenizer_samples_am_en.json").read_text())
    checked = 0
    for key, code in (("amharic", "am"), ("english", "en")):
        for sample in samples[key]:
            assert base.encode(language_prefix(code) + sample["text"]) == sample["ids_with_prefix"], sample["text"]
            checked += 1
    assert checked == 100


def test_reproduces_the_gpt_fixture_ids(base):
    import torch

    expected = torch.load(shared_file("reference", "indextts25", "tiny_expected_v25.pt"), weights_only=True)
    for text, row, length in zip(expected["texts"], expected["text_ids"].tolist(),
                                 expected["text_lengths"].tolist(), strict=True):
        assert base.encode(text) == row[:length]
    assert [language_index(code) for code in expected["lang_codes"]] == expected["langs"].tolist()


def test_reproduces_the_audio_fixture_text_path(base):
    """``"<|am|> " + text`` after inference's mapping (the en item is lower-cased) gives the stored ids."""
    import torch

    expected = torch.load(shared_file("reference", "indextts25", "fixtures_audio", "audio_expected_v25.pt"),
                          weights_only=True)
    for item in expected["items"]:
        assert inference_text(item["text"], item["lang_code"]) == item["text_processed"]
        encoded = base.encode_for_language(item["text"], item["lang_code"])
        assert encoded.ids == item["text_ids"].tolist()
        assert encoded.prefix_length == 1
        assert language_index(item["lang_code"]) == item["lang_id"]


def test_inference_mapping_and_case_rules():
    assert inference_text('"ሰላም" (ዓለም)...', "am") == "'ሰላም' 'ዓለም'…"
    assert inference_text("你好。世界！", "zh") == "你好.世界!"
    assert inference_text("Hello <|x|>", "en") == "hello <|x|>"
    assert inference_text("Hola", "es") == "HOLA"
    assert inference_text("ሰላም <|special_token_1|> Abc", "am") == "ሰላም <|SPECIAL_TOKEN_1|> Abc"


def test_bad_tables_are_refused_in_one_line(tmp_path):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("IQ== 0\nnot-a-line\n")
    with pytest.raises(TableError, match=r"bad.tiktoken:2: not a"):
        read_table(bad)
    small = tmp_path / "small.tiktoken"
    small.write_text("IQ== 0\nIg== 1\n")
    with pytest.raises(TableError, match=r"2 ranks, a 2\.5 table has 58836"):
        TiktokenTable.load(small)
    with pytest.raises(TableError, match="cannot read"):
        read_table(tmp_path / "missing.tiktoken")


# --- the transliteration -----------------------------------------------------------------------------

def test_transliteration_round_trips_every_line_of_the_project_corpora():
    for path in [*PROJECT_AMHARIC, CORPUS / "english_train.txt"]:
        for line in lines_of(path):
            assert from_latin(to_latin(line)) == line, (path.name, line)


def test_transliteration_round_trips_every_line_of_the_shared_corpus():
    for name in ("amharic_libreoffice_ui.txt", "english_libreoffice_ui.txt"):
        lines = lines_of(shared_file("corpora", name))
        assert len(lines) > 14_000
        for line in lines:
            assert from_latin(to_latin(line)) == line, line


def test_every_ethiopic_letter_gets_a_unique_latin_code():
    letters = [chr(cp) for cp in range(0x1200, 0x1380) if unicodedata.category(chr(cp)).startswith("L")]
    codes = [to_latin(ch) for ch in letters]
    assert len(set(codes)) == len(letters) > 300
    assert all(code.isascii() and code.isalpha() for code in codes)
    joined = "".join(letters)  # letters written without spaces still split back one way
    assert from_latin(to_latin(joined)) == joined
    assert from_latin("".join(codes)) == joined


def test_transliteration_examples_and_escapes():
    assert to_latin("ሰላም ለዓለም።") == "selam leOalem።"
    assert to_latin("ፋይል PDF ነው") == "fayl `PDF` new"
    assert to_latin("a`b") == "`a````b`"
    for text in ("", "`", "``", "x`", "ሰ`ላ", "%PRODUCTNAME ሰ1", "ሸ ቈ ኰ ጐ ዀ ፚ ፙ", "ሰ\u135d", "日本 ሰ"):
        assert from_latin(to_latin(text)) == text, text


@pytest.mark.parametrize("bad", ["`abc", "``` ", "e", "Wz", "bae", "`a1`"])
def test_from_latin_refuses_what_to_latin_never_writes(bad):
    with pytest.raises(TransliterationError, match="column"):
        from_latin(bad)


# --- Ethiopic merges ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def small_merges(base):
    lines = [language_normalize(line, "am") for line in lines_of(CORPUS / "amharic_train.txt")]
    return lines, learn_merges(base, lines, 300)


def test_learned_merges_are_ethiopic_and_counted_as_tiktoken_encodes(base, small_merges):
    lines, merges = small_merges
    assert len(merges.tokens) == 300 == len(set(merges.tokens))
    assert all(is_ethiopic_token(token) for token in merges.tokens)
    assert len(merges.counts) == 300 and min(merges.counts) >= 2
    extended = TiktokenTable.load(DEFAULT_TABLE, merges.tokens)
    # What learning counted is what tiktoken produces with the extended table, word for word.
    words = ethiopic_words(lines)
    encoded = sum(len(extended.encoding.encode_ordinary(word)) * count for word, count in words.items())
    assert encoded == merges.corpus_tokens
    again = learn_merges(base, lines, 300)
    assert again.tokens == merges.tokens  # deterministic


def test_merges_keep_every_base_id_and_leave_other_text_alone(base, small_merges):
    _lines, merges = small_merges
    extended = TiktokenTable.load(DEFAULT_TABLE, merges.tokens)
    assert extended.first_added_id == BASE_TEXT_ROWS == 60510
    assert extended.vocab_size == BASE_TEXT_ROWS + 300
    assert extended.specials == base.specials
    for line in [*lines_of(CORPUS / "english_heldout.txt"), "你好，世界", "Tiếng Việt", "ᐊᐃᐅ ∰ ⊰"]:
        assert extended.encode(language_prefix("en") + line) == base.encode(language_prefix("en") + line)
    amharic = [line for line in lines_of(CORPUS / "amharic_heldout.txt") if line]
    for line in amharic:
        ids = extended.encode_for_language(line, "am").ids
        assert extended.decode(ids) == language_prefix("am") + inference_text(line, "am")
    before = sum(len(base.encode_for_language(line, "am").ids) for line in amharic)
    after = sum(len(extended.encode_for_language(line, "am").ids) for line in amharic)
    assert after < 0.5 * before


def test_added_tokens_decompose_into_base_ids_of_their_bytes(small_merges):
    _lines, merges = small_merges
    extended = TiktokenTable.load(DEFAULT_TABLE, merges.tokens)
    table = added_token_base_ids(extended)
    assert sorted(table) == list(range(BASE_TEXT_ROWS, BASE_TEXT_ROWS + 300))
    for token_id, base_ids in table.items():
        assert all(i < BASE_RANK_COUNT for i in base_ids) and len(base_ids) >= 2
        assert b"".join(extended.token_bytes(i) for i in base_ids) == extended.token_bytes(token_id)


def test_saved_merges_load_back_and_check_their_base(tmp_path, base, small_merges):
    _lines, merges = small_merges
    path = tmp_path / "merges.json"
    save_merges(merges, base, path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["n_added"] == 300 and data["added"][0]["id"] == 60510 and data["added"][0]["upstream_rank"] == 58836
    assert load_merges(path, DEFAULT_TABLE) == merges.tokens
    other = tmp_path / "other.tiktoken"
    other.write_bytes(DEFAULT_TABLE.read_bytes() + b"\n")
    with pytest.raises(TableError, match="learned on another base table"):
        load_merges(path, other)
    (tmp_path / "junk.json").write_text("{}")
    with pytest.raises(TableError, match="not an Ethiopic merges file"):
        load_merges(tmp_path / "junk.json")


def test_upstream_table_gives_upstream_ids_in_the_reordered_rows(tmp_path, small_merges):
    """Stock inference reads the written table as tiktoken does (specials after the ranks); the ids it gets
    are this tokenizer's ids through ``upstream_id_order``."""
    _lines, merges = small_merges
    extended = TiktokenTable.load(DEFAULT_TABLE, merges.tokens)
    path = tmp_path / "multilingual_zh_ja_yue_char_del.tiktoken"
    write_upstream_table(extended, path)
    ranks = load_tiktoken_bpe(str(path))
    assert len(ranks) == BASE_RANK_COUNT + 300
    specials = {token: len(ranks) + i for i, token in enumerate(special_tokens_in_order())}
    upstream = tiktoken.Encoding("upstream", pat_str=SPLIT_PATTERN, mergeable_ranks=ranks, special_tokens=specials,
                                 explicit_n_vocab=len(ranks) + len(specials))
    order = extended.upstream_id_order()
    assert len(order) == BASE_VOCAB_SIZE + 300 + 1 and sorted(order) == list(range(len(order)))
    for line in [*lines_of(CORPUS / "amharic_heldout.txt")[:40], "hello world."]:
        text = language_prefix("am") + line
        assert [order[i] for i in upstream.encode(text, allowed_special="all")] == extended.encode(text)


# --- the scheme front-end ----------------------------------------------------------------------------

def test_each_scheme_encodes_through_one_front_end(schemes):
    text = "ሰላም ለዓለም። 2 ሰዓት"
    model_text = language_normalize(text, "am")
    assert "ሁለት" in model_text  # the studio's Amharic normaliser ran (numbers as words)
    assert schemes["bytes"].encode(text, "am") == TiktokenTable.load(DEFAULT_TABLE).encode("<|am|> " + model_text)
    translit_ids = schemes["translit"].encode(text, "am")
    assert translit_ids[0] == 58913
    assert from_latin(schemes["translit"].decode(translit_ids[1:])[1:]) == model_text
    assert max(schemes["translit"].encode(text, "am")) < BASE_VOCAB_SIZE
    assert max(schemes["merges"].encode(text, "am")) >= BASE_TEXT_ROWS
    assert encode_text(text, "am", "merges", schemes["merges"]) == schemes["merges"].encode(text, "am")
    for scheme in TEXT_SCHEMES:  # other languages are never transliterated, and merges never touch them
        assert schemes[scheme].encode("Hello world.", "en") == [58838, 7627, 1002, 13]


def test_merges_measure_best_on_the_corpus_slice(schemes):
    lines = [line for line in lines_of(CORPUS / "amharic_heldout.txt") if line]
    measured = {scheme: tokens_per_char(lines, scheme, tokenizer=schemes[scheme]) for scheme in TEXT_SCHEMES}
    assert measured["merges"] < measured["translit"] < measured["bytes"]
    assert measured["bytes"] > 2.0 and measured["merges"] < 0.5


def test_measure_reports_tokens_per_char_and_the_longest_text(schemes):
    lines = ["ሰላም ለዓለም።", "ሰላም"]
    cost = schemes["bytes"].measure(lines)
    assert (cost.texts, cost.chars) == (2, 12)
    assert cost.tokens == sum(len(schemes["bytes"].encode(line, "am")) - 1 for line in lines)
    assert cost.longest == len(schemes["bytes"].encode(lines[0], "am"))
    assert cost.tokens_per_char == pytest.approx(cost.tokens / 12)
    assert schemes["merges"].measure([]).tokens_per_char == 0.0


def test_default_merges_file_is_committed_and_matches_the_table():
    tokenizer = load_extended(DEFAULT_TABLE, DEFAULT_MERGES)
    assert len(tokenizer.added) == 2000
    assert TextTable().scheme == "merges"


def test_unknown_scheme_and_missing_files_are_one_line_errors(tmp_path):
    with pytest.raises(TableError, match="unknown text scheme 'bpe'"):
        TextTable(scheme="bpe")
    with pytest.raises(TableError, match="needs a merges file"):
        TextTable(scheme="merges", merges=tmp_path / "none.json")
    with pytest.raises(TableError, match="table not found"):
        TextTable(tmp_path / "none.tiktoken", scheme="bytes")


def test_model_card_notes_say_what_stock_inference_needs(schemes):
    merges = stock_inference_notes(schemes["merges"])
    assert "gpt.number_text_tokens: 62509" in merges and "<|am|>` becomes 60913" in merges
    assert "to_latin" in stock_inference_notes(schemes["translit"])
    assert "unchanged" in stock_inference_notes(schemes["bytes"])


# --- the CLI -----------------------------------------------------------------------------------------

def test_extend25_cli_writes_merges_and_the_upstream_table(tmp_path, capsys):
    out = tmp_path / "merges.json"
    upstream = tmp_path / "multilingual_zh_ja_yue_char_del.tiktoken"
    code = tokenizer_cli(["extend25", "--base", str(DEFAULT_TABLE), "--corpus", str(CORPUS / "amharic_heldout.txt"),
                          "--merges", "50", "--out", str(out), "--upstream-table", str(upstream)])
    assert code == 0
    assert "50 merges ->" in capsys.readouterr().out
    assert len(load_merges(out, DEFAULT_TABLE)) == 50
    assert len(read_table(upstream)) == BASE_RANK_COUNT + 50


def test_extend25_cli_refuses_bad_input_in_one_line(tmp_path, capsys):
    code = tokenizer_cli(["extend25", "--base", str(DEFAULT_TABLE), "--corpus", str(tmp_path / "none.txt"),
                          "--out", str(tmp_path / "m.json")])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    code = tokenizer_cli(["extend25", "--base", str(DEFAULT_TABLE), "--corpus", str(CORPUS / "amharic_heldout.txt"),
                          "--out", str(tmp_path / "m.json"), "--upstream-table", str(DEFAULT_TABLE)])
    assert code == 2
    assert "would overwrite the base table" in capsys.readouterr().err
