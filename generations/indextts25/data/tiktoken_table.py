"""IndexTTS-2.5's text tokenizer: tiktoken's byte-level BPE over the download's ``.tiktoken`` table.

Facts (shared/reference/indextts25/README.md section 6; checked against its fixtures):

- the table (``multilingual_zh_ja_yue_char_del.tiktoken``, one ``base64 rank`` line each) holds 58,836
  mergeable ranks, ids 0..58835; all 256 single bytes are ranks; id 0 is ``!`` and id 1 is ``"``;
- 1,673 special tokens follow, numbered from the number of ranks up in this order: ``<|endoftext|>``,
  ``<|startoftranscript|>``, a token for each of the first 99 language codes, 11 audio-event, 4 emotion and
  6 task tokens, ``<|SPECIAL_TOKEN_1..30|>``, 20 TTS vocal tokens, 1501 timestamps ``<|0.00|>``..``<|30.00|>``
  (so ``<|am|>`` is 58913 and the vocabulary has 60,509 ids; the GPT's text table has one spare row more);
- pre-tokenisation is GPT-2's split pattern; encoding allows every special token in the text;
- the language *index* (the ``lang_embedding`` row) is a code's position in a 106-entry list: 99 codes with
  a special token, then 7 without one (``yue`` 99 ... ``common`` 105); an unknown code is ``common``;
- the text a 2.5 model sees is ``"<|code|> " + text`` after the inference-side mapping (``inference_text``).
  For the 7 codes without a special token the prefix is encoded as plain text pieces.

Only the counts and positions of the audio-event, emotion, task and TTS blocks are in the reference; their
names here follow the CosyVoice vocabulary they come from and matter only to text that spells them out.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import tiktoken

from data_tools.fileio import sha256_file
from data_tools.text_tokenizer import TokenizerError

TABLE_NAME = "multilingual_zh_ja_yue_char_del.tiktoken"
BASE_RANK_COUNT = 58_836
BASE_VOCAB_SIZE = 60_509  # ranks + specials: the config's number_text_tokens
BASE_TEXT_ROWS = BASE_VOCAB_SIZE + 1  # rows of text_embedding / text_head in a 2.5 checkpoint

# GPT-2's split pattern (contractions, letter runs, digit runs, other runs, whitespace), as tiktoken spells it.
SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""

# Language codes in lang_embedding order. The first 99 also have a special token.
LANGUAGE_CODES: tuple[str, ...] = (
    "en", "zh", "de", "es", "ru", "ko", "fr", "ja", "pt", "tr", "pl", "ca", "nl", "ar", "sv", "it", "id", "hi",
    "fi", "vi", "he", "uk", "el", "ms", "cs", "ro", "da", "hu", "ta", "no", "th", "ur", "hr", "bg", "lt", "la",
    "mi", "ml", "cy", "sk", "te", "fa", "lv", "bn", "sr", "az", "sl", "kn", "et", "mk", "br", "eu", "is", "hy",
    "ne", "mn", "bs", "kk", "sq", "sw", "gl", "mr", "pa", "si", "km", "sn", "yo", "so", "af", "oc", "ka", "be",
    "tg", "sd", "gu", "am", "yi", "lo", "uz", "fo", "ht", "ps", "tk", "nn", "mt", "sa", "lb", "my", "bo", "tl",
    "mg", "as", "tt", "haw", "ln", "ha", "ba", "jw", "su",
    "yue", "minnan", "wuyu", "dialect", "zh/en", "en/zh", "common",
)
LANGUAGES_WITH_TOKEN = 99
LANGUAGE_ROWS = 107  # lang_embedding rows: the 106 codes and one spare
COMMON_LANGUAGE = "common"

_AUDIO_EVENTS = ("ASR", "AED", "SER", "Speech", "/Speech", "BGM", "/BGM", "Laughter", "/Laughter", "Applause",
                 "/Applause")
_EMOTIONS = ("HAPPY", "SAD", "ANGRY", "NEUTRAL")
_TASKS = ("translate", "transcribe", "startoflm", "startofprev", "nospeech", "notimestamps")
_TTS_VOCAL = ("TTS/B", "TTS/O", "TTS/Q", "TTS/A", "TTS/CO", "TTS/CL", "TTS/H",
              *(f"TTS/SP{i:02d}" for i in range(1, 14)))


def special_tokens_in_order() -> list[str]:
    """The 1,673 special tokens in id order (the first gets the id equal to the number of ranks)."""
    return [
        "<|endoftext|>", "<|startoftranscript|>",
        *(f"<|{code}|>" for code in LANGUAGE_CODES[:LANGUAGES_WITH_TOKEN]),
        *(f"<|{name}|>" for name in _AUDIO_EVENTS),
        *(f"<|{name}|>" for name in _EMOTIONS),
        *(f"<|{name}|>" for name in _TASKS),
        *(f"<|SPECIAL_TOKEN_{i}|>" for i in range(1, 31)),
        *(f"<|{name}|>" for name in _TTS_VOCAL),
        *(f"<|{i * 0.02:.2f}|>" for i in range(1501)),
    ]


def language_index(code: str) -> int:
    """The ``lang_embedding`` row of a language code (case-insensitive); unknown codes get ``common`` (105)."""
    key = code.strip().lower()
    if key in _LANGUAGE_INDEX:
        return _LANGUAGE_INDEX[key]
    return _LANGUAGE_INDEX[COMMON_LANGUAGE]


_LANGUAGE_INDEX = {code: index for index, code in enumerate(LANGUAGE_CODES)}


def unknown_language(code: str) -> str | None:
    """Why training data in ``code`` cannot be trained (None: the code names a row of the language table).

    Inference maps an unknown code to ``common``; training on one would silently train that shared row."""
    if code.strip().lower() in _LANGUAGE_INDEX:
        return None
    return (f"language {code.strip()[:20]!r} is not a code of the IndexTTS-2.5 language table (e.g. en, zh, am; "
            f"'{COMMON_LANGUAGE}' for none): training it would change the shared '{COMMON_LANGUAGE}' row")


def language_prefix(code: str) -> str:
    """The text prefix inference puts before the text: ``"<|am|> "`` (a special token for 99 codes)."""
    return f"<|{code.strip().lower()}|> "


# Inference's character mapping, applied to the text of every language before tokenising: ASCII double
# quotes, brackets and CJK punctuation become ASCII look-alikes. Keys are tried in this order at each position
# (a regex alternation), so the single "，" wins over "，，，", as upstream's dict order makes it.
# The reference states the rule (" -> ', CJK punctuation -> ASCII, every language); the fixtures exercise
# none of the other entries, which follow our reading of IndexTTS's front-end map.
CHAR_MAP: dict[str, str] = {
    "：": ",", "；": ",", ";": ",", "，": ",", "。": ".", "！": "!", "？": "?", "\n": " ", "·": "-",
    "、": ",", "...": "…", ",,,": "…", "，，，": "…", "……": "…",
    "“": "'", "”": "'", '"': "'", "‘": "'", "’": "'", "（": "'", "）": "'", "(": "'", ")": "'",
    "《": "'", "》": "'", "【": "'", "】": "'", "[": "'", "]": "'", "—": "-", "～": "-", "~": "-",
    "「": "'", "」": "'", ":": ",",
}
_CHAR_MAP_PATTERN = re.compile("|".join(re.escape(key) for key in CHAR_MAP))
_TAG = re.compile(r"<\|[^|<>]*\|>")
_LOWERCASED = frozenset({"zh", "en", "zhen", "ja"})
_UPPERCASED = frozenset({"es"})


def map_characters(text: str) -> str:
    return _CHAR_MAP_PATTERN.sub(lambda match: CHAR_MAP[match.group()], text)


def inference_text(text: str, language: str) -> str:
    """What 2.5 inference does to ``text`` before the prefix: the character map, then the language's case rule.

    zh/en/ja are lower-cased and es upper-cased; every other language (Amharic included) keeps its case and
    only gets ``<|...|>`` tags upper-cased. Upstream's full normalisers for zh/en (TextNormalizer), ja (kana
    G2P) and es (NeMo) and the pronunciation-annotation rewrite are not reproduced here.
    """
    code = language.strip().lower()
    text = map_characters(text)
    if code in _LOWERCASED:
        return text.lower()
    if code in _UPPERCASED:
        return text.upper()
    return _TAG.sub(lambda match: match.group().upper(), text)


class TableError(TokenizerError):
    """A .tiktoken table that cannot be read or used; a TokenizerError, so hubs catch every text table's alike."""


def read_table(path: str | Path) -> dict[bytes, int]:
    """The ``.tiktoken`` ranks: ``{token bytes: rank}``; a one-line error naming the file and line when malformed."""
    path = Path(path)
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise TableError(f"cannot read tokenizer table {path}: {exc.strerror or exc}") from None
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            token_b64, rank_text = line.split()
            token = base64.b64decode(token_b64)  # as tiktoken reads it: the 2.5 table has one "=" (empty) line
            rank = int(rank_text)
        except ValueError:
            raise TableError(f"{path}:{number}: not a '<base64> <rank>' line of a .tiktoken table") from None
        if token in ranks:
            raise TableError(f"{path}:{number}: token listed twice")
        ranks[token] = rank
    if not ranks:
        raise TableError(f"{path}: empty tokenizer table")
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise TableError(f"{path}: ranks are not 0..{len(ranks) - 1} without gaps")
    return ranks


@dataclass(frozen=True)
class Encoded:
    ids: list[int]
    prefix_length: int  # ids of the language prefix at the front


class TiktokenTable:
    """The 2.5 tokenizer. ``added`` (Ethiopic merges, in merge order) extend the base table.

    Ids: base ranks 0..58835 and the specials 58836..60508 keep their ids; added tokens get ids from
    ``BASE_TEXT_ROWS`` (60510) up, after the checkpoint's spare row, so every base row of a 2.5 text table
    stays where it is. The upstream file layout (added ranks before the specials) is ``upstream_id_order``.
    """

    def __init__(self, ranks: dict[bytes, int], added: list[bytes] | tuple[bytes, ...] = (),
                 source: Path | None = None) -> None:
        if len(ranks) != BASE_RANK_COUNT:
            hint = " (an exported table? load the base table with its merges JSON)" if len(ranks) > BASE_RANK_COUNT else ""
            raise TableError(f"{source or 'table'}: {len(ranks)} ranks, a 2.5 table has {BASE_RANK_COUNT}{hint}")
        self.base_ranks = ranks
        self.added = tuple(added)
        self.source = source
        self.specials = {token: BASE_RANK_COUNT + i for i, token in enumerate(special_tokens_in_order())}
        mergeable = dict(ranks)
        for i, token in enumerate(self.added):
            if token in mergeable:
                raise TableError(f"added token {token!r} is already in the table")
            mergeable[token] = BASE_TEXT_ROWS + i
        self.encoding = tiktoken.Encoding(f"indextts25+{len(self.added)}", pat_str=SPLIT_PATTERN,
                                          mergeable_ranks=mergeable, special_tokens=self.specials)

    @classmethod
    def load(cls, path: str | Path, added: list[bytes] | tuple[bytes, ...] = ()) -> TiktokenTable:
        return cls(read_table(path), added, source=Path(path))

    @cached_property
    def sha256(self) -> str:
        return sha256_file(self.source) if self.source is not None else ""

    @property
    def vocab_size(self) -> int:
        """One more than the largest id this tokenizer produces (60509 for the stock table)."""
        return BASE_TEXT_ROWS + len(self.added) if self.added else BASE_VOCAB_SIZE

    @property
    def number_text_tokens(self) -> int:
        """The GPT config's ``number_text_tokens``: its text table has one row more than this."""
        return BASE_VOCAB_SIZE + len(self.added)

    @property
    def first_added_id(self) -> int:
        return BASE_TEXT_ROWS

    def encode(self, text: str) -> list[int]:
        """Tokenise ``text`` exactly as given (special tokens in it are recognised)."""
        return self.encoding.encode(text, allowed_special="all")

    def decode(self, ids: list[int]) -> str:
        return self.encoding.decode(list(ids), errors="replace")

    def token_bytes(self, token_id: int) -> bytes:
        return self.encoding.decode_single_token_bytes(token_id)

    def encode_for_language(self, text: str, language: str) -> Encoded:
        """``"<|code|> " + inference_text(text)`` tokenised: the ids a 2.5 model is trained and run on."""
        prefix = self.encode(language_prefix(language).rstrip(" "))
        ids = self.encode(language_prefix(language) + inference_text(text, language))
        return Encoded(ids, len(prefix))

    def base_ids_of(self, token: bytes) -> list[int]:
        """The base table's tokenisation of ``token``'s bytes (how the base model saw them)."""
        return base_bpe(token, self.base_ranks)

    def upstream_id_order(self) -> list[int]:
        """For each id of the upstream layout (ranks, added ranks, specials, spare row): this tokenizer's id.

        Upstream numbers specials from the number of ranks in the file, so an extended file moves them up by
        ``len(added)``. Re-ordering a trained text table with this list gives the rows upstream expects.
        """
        added = len(self.added)
        order = list(range(BASE_RANK_COUNT))
        order += [BASE_TEXT_ROWS + i for i in range(added)]
        order += [BASE_RANK_COUNT + i for i in range(len(self.specials))]
        order.append(BASE_VOCAB_SIZE)  # the spare row
        return order


def base_bpe(token: bytes, ranks: dict[bytes, int]) -> list[int]:
    """Byte-pair merge of one pre-token's bytes with ``ranks`` (lowest rank first, leftmost on ties)."""
    return merge_parts([token[i:i + 1] for i in range(len(token))], ranks)


def merge_parts(parts: list[bytes], ranks: dict[bytes, int]) -> list[int]:
    """tiktoken's merge rule from ``parts`` (lowest rank first, leftmost on ties); the ids of what remains.

    ``parts`` is merged in place.
    """
    while len(parts) > 1:
        best_rank, best_at = None, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank, best_at = rank, i
        if best_rank is None:
            break
        parts[best_at:best_at + 2] = [parts[best_at] + parts[best_at + 1]]
    return [ranks[part] for part in parts]
