"""Tokenizer tools: train new-language pieces, extend a base model without moving its ids, verify.

CLI: ``python -m data_tools.tokenizer train | extend | verify`` (``--help`` on each).
"""

from __future__ import annotations

from data_tools.tokenizer.extend import ExtendReport, extend_tokenizer
from data_tools.tokenizer.spm_model import TokenizerToolError
from data_tools.tokenizer.train import train_tokenizer

__all__ = ["ExtendReport", "TokenizerToolError", "extend_tokenizer", "train_tokenizer"]
