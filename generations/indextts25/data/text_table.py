"""IndexTTS-2.5's text front-end: (text, language, scheme) -> token ids, one function for every caller.

Training, samples, the Test tab, the data checker, pre-flight and export all call ``TextTable.encode``
(or ``encode_text``), so a choice of scheme applies to all of them identically. The steps:

1. the studio's language normalisation (``data_tools.text.language_normalize``: NFC, whitespace, the
   language's own hook, e.g. Amharic numbers as words; no upper-casing, 2.5 does not use it);
2. ``translit`` scheme and Amharic only: ``amharic_translit.to_latin``;
3. inference's own step (``tiktoken_table.inference_text``: character map, case rule) and the ``"<|am|> "``
   prefix, then the 2.5 tiktoken table, extended with Ethiopic merges for the ``merges`` scheme.

Schemes ("Amharic without the byte tax", measured by ``bench/tokens_per_char_v25.py``):

- ``bytes``: the stock table: Amharic is raw UTF-8 bytes (about 2.3 tokens per character);
- ``merges``: the stock table plus Ethiopic merges (``ethiopic_merges``) appended as new ids; the default,
  as it measured best (0.34 tokens per character with 2000 merges; ``translit`` 0.71, ``bytes`` 2.33);
- ``translit``: Amharic written in Latin letters by a reversible scheme; the stock table, no new ids.

Steps 2 and 3 are what stock upstream inference can be made to do (``stock_inference_notes``); step 1 is the
studio's, so text given to a trained model should be normalised the same way (numbers written as words).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal, get_args

from data_tools.fileio import sha256_file
from data_tools.languages.amharic_translit import to_latin
from data_tools.text import language_normalize
from generations.indextts25.data.ethiopic_merges import load_extended
from generations.indextts25.data.tiktoken_table import (
    BASE_RANK_COUNT,
    BASE_TEXT_ROWS,
    BASE_VOCAB_SIZE,
    LANGUAGE_ROWS,
    TABLE_NAME,
    TableError,
    TiktokenTable,
    language_index,
    language_prefix,
)

TextScheme = Literal["bytes", "merges", "translit"]
TEXT_SCHEMES: tuple[str, ...] = get_args(TextScheme)
DEFAULT_SCHEME: TextScheme = "merges"
TRANSLITERATED_LANGUAGES = frozenset({"am"})

TOKENIZER_DIR = Path(__file__).resolve().parents[3] / "tokenizers" / "indextts25"
DEFAULT_TABLE = TOKENIZER_DIR / TABLE_NAME
DEFAULT_MERGES = TOKENIZER_DIR / "ethiopic_merges_am.json"


def check_scheme(scheme: str) -> TextScheme:
    if scheme not in TEXT_SCHEMES:
        raise TableError(f"unknown text scheme {scheme!r} (choose one of {', '.join(TEXT_SCHEMES)})")
    return scheme  # type: ignore[return-value]


class TextTable:
    """The 2.5 table (``table``) with a scheme; ``merges`` (a merges JSON) is used by the ``merges`` scheme."""

    def __init__(self, table: str | Path = DEFAULT_TABLE, scheme: str = DEFAULT_SCHEME,
                 merges: str | Path | None = DEFAULT_MERGES, *, normalize: bool = True) -> None:
        self.scheme = check_scheme(scheme)
        self.table = Path(table)
        if not self.table.is_file():
            raise TableError(f"2.5 tokenizer table not found: {self.table}")
        self.merges = Path(merges) if self.scheme == "merges" and merges is not None else None
        if self.scheme == "merges" and (self.merges is None or not self.merges.is_file()):
            raise TableError(f"the merges scheme needs a merges file (python -m data_tools.tokenizer extend25): "
                             f"{self.merges or 'none given'}")
        self.normalize = normalize
        self.tokenizer: TiktokenTable = load_extended(self.table, self.merges)

    @property
    def vocab_size(self) -> int:
        """One more than the largest id (every id lies in ``[0, vocab_size)``)."""
        return self.tokenizer.vocab_size

    @property
    def number_text_tokens(self) -> int:
        """The GPT config value: 60509, plus one per added merge (the text table has one row more)."""
        return self.tokenizer.number_text_tokens

    @property
    def spare_text_rows(self) -> int:
        """Rows of the base text table after its ids that no piece has (added merges come after them)."""
        return BASE_TEXT_ROWS - BASE_VOCAB_SIZE

    @property
    def added_tokens(self) -> int:
        return len(self.tokenizer.added)

    @cached_property
    def sha256(self) -> str:
        return sha256_file(self.table)

    @cached_property
    def merges_sha256(self) -> str:
        return sha256_file(self.merges) if self.merges is not None else ""

    def describe(self) -> dict[str, object]:
        """What a checkpoint or manifest should record to reproduce these ids."""
        return {"scheme": self.scheme, "table_sha256": self.sha256, "merges_sha256": self.merges_sha256,
                "added_tokens": self.added_tokens, "vocab_size": self.vocab_size,
                "number_text_tokens": self.number_text_tokens, "language_rows": LANGUAGE_ROWS}

    def language_index(self, language: str) -> int:
        return language_index(language)

    def model_text(self, text: str, language: str) -> str:
        """The text after steps 1 and 2: what stock inference must be given (before its own step 3)."""
        if self.normalize:
            text = language_normalize(text, language)
        if self.scheme == "translit" and language.strip().lower() in TRANSLITERATED_LANGUAGES:
            text = to_latin(text)
        return text

    def encode(self, text: str, language: str) -> list[int]:
        """Token ids of ``"<|code|> " + text``, as a 2.5 model is trained and run on them."""
        return self.tokenizer.encode_for_language(self.model_text(text, language), language).ids

    def encode_text_only(self, text: str, language: str) -> list[int]:
        """``encode`` without the language prefix's own ids (for per-character counts)."""
        encoded = self.tokenizer.encode_for_language(self.model_text(text, language), language)
        return encoded.ids[encoded.prefix_length:]

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids)

    def measure(self, texts: Iterable[str], language: str = "am") -> TextCost:
        """Text cost of ``texts`` under this scheme (for the Tokenizer tab, the data checker, pre-flight)."""
        cost = TextCost()
        for text in texts:
            encoded = self.tokenizer.encode_for_language(self.model_text(text, language), language)
            cost.add(len(text), len(encoded.ids) - encoded.prefix_length, len(encoded.ids))
        return cost

    def tokens_per_char(self, texts: Iterable[str], language: str = "am") -> float:
        """Tokens (without the prefix) per character of the given texts; 0.0 for no characters."""
        return self.measure(texts, language).tokens_per_char


@dataclass
class TextCost:
    """Characters and tokens of some texts. ``longest`` counts the prefix too: it is what a text limit
    (``max_text_tokens``) is checked against."""

    texts: int = 0
    chars: int = 0
    tokens: int = 0  # without the language prefix
    longest: int = 0  # ids of the longest text, prefix included

    def add(self, chars: int, tokens: int, ids: int) -> None:
        self.texts += 1
        self.chars += chars
        self.tokens += tokens
        self.longest = max(self.longest, ids)

    @property
    def tokens_per_char(self) -> float:
        return self.tokens / self.chars if self.chars else 0.0


def encode_text(text: str, language: str, scheme: str = DEFAULT_SCHEME,
                tokenizer: TextTable | None = None) -> list[int]:
    """``TextTable(scheme=scheme).encode(text, language)`` (pass ``tokenizer`` to reuse one)."""
    tokenizer = tokenizer or TextTable(scheme=scheme)
    if tokenizer.scheme != scheme:
        raise TableError(f"tokenizer uses the {tokenizer.scheme!r} scheme, not {scheme!r}")
    return tokenizer.encode(text, language)


def tokens_per_char(texts: Iterable[str], scheme: str = DEFAULT_SCHEME, language: str = "am",
                    tokenizer: TextTable | None = None) -> float:
    tokenizer = tokenizer or TextTable(scheme=scheme)
    return tokenizer.tokens_per_char(texts, language)


def stock_inference_notes(tokenizer: TextTable, language: str = "am") -> str:
    """Markdown for an export's model card: exactly what stock IndexTTS-2.5 inference needs for these ids."""
    code = language.strip().lower()
    prefix_id = tokenizer.tokenizer.specials.get(language_prefix(code).strip())
    prefix_kind = f"special token {prefix_id}" if prefix_id is not None else "plain text pieces"
    lines = [f"## Text ({tokenizer.scheme} scheme)", "",
             f"- Call inference with language `{code}`: it adds the prefix `<|{code}|> ` ({prefix_kind} in the "
             f"stock table) and the language row {language_index(code)}.",
             "- Write numbers as words and punctuation as the studio's normaliser does; inference itself only "
             "maps quotes, brackets and CJK punctuation."]
    if tokenizer.scheme == "merges":
        n = tokenizer.added_tokens
        moved = f" (`<|{code}|>` becomes {prefix_id + n})" if prefix_id is not None else ""
        lines += [
            f"- Replace `{TABLE_NAME}` in the model folder with the exported file of the same name: the stock "
            f"table plus {n} Ethiopic ranks ({BASE_RANK_COUNT}..{BASE_RANK_COUNT + n - 1}). Upstream numbers its "
            f"special tokens after the ranks, so they all move up by {n}{moved}.",
            f"- `config.yaml`: `gpt.number_text_tokens: {BASE_VOCAB_SIZE + n}`. The exported `gpt.pth` holds its "
            f"{BASE_VOCAB_SIZE + n + 1} text rows in that order. No code change is needed.",
        ]
    elif tokenizer.scheme == "translit" and code in TRANSLITERATED_LANGUAGES:
        lines.append("- Give inference the text in the studio's Latin transliteration, not in Ethiopic script: "
                     "`text = to_latin(text)` with `data_tools/languages/amharic_translit.py` (a single file with "
                     "no dependencies; `from_latin` reverses it). The stock table and `config.yaml` are used "
                     "unchanged.")
    else:
        lines.append("- The stock table and `config.yaml` are used unchanged.")
    return "\n".join(lines) + "\n"
