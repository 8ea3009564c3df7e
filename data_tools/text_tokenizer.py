"""A SentencePiece model behind the text front-end: the tokenizer the trainer and tools share."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import sentencepiece as spm

from data_tools.fileio import sha256_file
from data_tools.text import normalize_text


class TokenizerError(ValueError):
    pass


class TextTokenizer:
    """Load ``bpe.model`` (or any SentencePiece model); ``encode`` runs the front-end first."""

    def __init__(self, path: str | Path, language: str | None = None) -> None:
        self.path = Path(path)
        self.language = language
        if not self.path.is_file():
            raise TokenizerError(f"tokenizer not found: {self.path}")
        self.sp = spm.SentencePieceProcessor()
        try:
            ok = self.sp.Load(str(self.path))
        except (OSError, RuntimeError) as exc:
            raise TokenizerError(f"{self.path}: not a SentencePiece model ({exc})") from None
        if not ok:
            raise TokenizerError(f"{self.path}: not a SentencePiece model")

    @property
    def vocab_size(self) -> int:
        return int(self.sp.GetPieceSize())

    @property
    def unk_id(self) -> int:
        return int(self.sp.unk_id())

    @cached_property
    def sha256(self) -> str:
        return sha256_file(self.path)

    def normalize(self, text: str, language: str | None = None) -> str:
        return normalize_text(text, language or self.language)

    def encode(self, text: str, language: str | None = None) -> list[int]:
        return list(self.sp.EncodeAsIds(self.normalize(text, language)))

    def encode_normalized(self, text: str) -> list[int]:
        """Encode text that already went through ``normalize`` (no second pass)."""
        return list(self.sp.EncodeAsIds(text))

    def pieces(self, text: str, language: str | None = None) -> list[str]:
        return list(self.sp.EncodeAsPieces(self.normalize(text, language)))

    def decode(self, ids: list[int]) -> str:
        return str(self.sp.DecodeIds(list(ids)))
