"""The entry fields IndexTTS-1.5 and IndexTTS2 share: a SentencePiece ``--tokenizer`` and how a GPT of that
tokenizer starts (``sentencepiece_kit``, named lazily so that the entries import none of it)."""

from __future__ import annotations

from typing import Any

from generations.spec import lazy

KIT = "generations.sentencepiece_kit"
SENTENCEPIECE: dict[str, Any] = {
    "tokenizer_kind": "a SentencePiece model", "tokenizer_file": "a SentencePiece model (bpe.model)",
    **{name: lazy(KIT, name) for name in ("reads_tokenizer", "open_tokenizer", "describe_tokenizer",
                                          "target_gpt_config", "tokenizer_record", "start", "rows_refusal")},
}
# how an export of such a GPT is built (their ``export`` facet's ``build``)
SENTENCEPIECE_EXPORT = lazy("trainer.checkpoints.export", "export_sentencepiece")
