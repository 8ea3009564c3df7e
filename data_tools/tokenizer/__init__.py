"""Tokenizer tools: train new-language pieces, extend a base model without moving its ids, verify.

CLI: ``python -m data_tools.tokenizer train | extend | verify | extend25`` (``--help`` on each).
IndexTTS-2.5's tiktoken table: ``generations.indextts25.data.tiktoken_table`` (the tokenizer) and ``ethiopic_merges``
(``extend25``).
"""

from __future__ import annotations

from data_tools.tokenizer.extend import ExtendReport, extend_tokenizer
from data_tools.tokenizer.spm_model import TokenizerToolError
from data_tools.tokenizer.train import train_tokenizer
from data_tools.tokenizer.verify import Check, VerifyReport, verify_tokenizer

__all__ = [
    "Check",
    "ExtendReport",
    "TokenizerToolError",
    "VerifyReport",
    "extend_tokenizer",
    "train_tokenizer",
    "verify_tokenizer",
]
