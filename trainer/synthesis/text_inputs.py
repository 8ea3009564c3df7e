"""What every generation's synthesizer does alike with its GPT and its text (``trainer.synthesis.pipeline``,
``s2mel_pipeline`` and its variants): it keeps the GPT, the tokenizer and the language, refuses a tokenizer
whose ids the GPT has no rows for, and refuses text that is missing, empty or outside the text vocabulary.
The length rules are the generation's (one text, or segments)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainer.synthesis.errors import SynthesisError


def check_tokenizer_rows(model: Any, tokenizer: Any | None) -> None:
    """A SentencePiece tokenizer must not make ids past the GPT's ``number_text_tokens``."""
    number_text_tokens = int(model.gpt_config["number_text_tokens"])
    if tokenizer is not None and tokenizer.vocab_size > number_text_tokens:
        raise SynthesisError(f"the tokenizer has {tokenizer.vocab_size} pieces but the GPT only "
                             f"{number_text_tokens} text tokens: use the tokenizer the model was trained with")


class GptTextInputs:
    """The GPT, the tokenizer and the language of a synthesizer, and the text checks every generation makes."""

    model: Any
    tokenizer: Any | None
    language: str | None
    max_text_tokens: int

    def bind_text(self, model: Any, tokenizer: Any | None, language: str | None) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.language = language
        self.max_text_tokens = int(model.gpt_config["max_text_tokens"])

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def require_text(self, text: str, where: str) -> None:
        """A tokenizer to read ``text`` with, and some text."""
        if self.tokenizer is None:
            raise SynthesisError("no tokenizer: pass one to synthesize text (or use synthesize_ids)")
        if not text.strip():
            raise SynthesisError(f"{where} is empty")

    def check_decode(self, settings: Any, *more_problems: str) -> None:
        """Refuse decode settings (``DecodeSettings``) with problems, theirs and ``more_problems`` (the
        generation's own settings), or asking for more codes than the GPT takes."""
        problems = [*settings.problems(), *more_problems]
        limit = int(self.model.gpt_config["max_mel_tokens"])
        if settings.max_codes is not None and settings.max_codes > limit:
            problems.append(f"max_codes {settings.max_codes} exceeds the model's limit of {limit} "
                            "(gpt.max_mel_tokens)")
        if problems:
            raise SynthesisError("; ".join(problems))

    def check_vocabulary(self, ids: Sequence[int], where: str) -> None:
        bad = [i for i in ids if not 0 <= int(i) < self.model.text_vocab_size]
        if bad:
            raise SynthesisError(f"{where} has token ids outside the model's text vocabulary: {bad[:5]}")
