"""What a data-checker worker is given and what it gives back: settings, one chunk's byte range, its result.

Shared by the per-line checkers (``data_tools.check_chunks``, ``check_pairs``,
``generations.indextts25.data.check``) and the merge (``data_tools.check_merge``); plain values so they pickle
cheaply between processes.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from data_tools.shape_rules import DataLimits


@dataclass(frozen=True)
class CheckSettings:
    """What every worker needs to know; plain values so it pickles cheaply."""

    check_files: bool = True
    language: str | None = None
    tokenizer: str | None = None
    max_text_tokens: int | None = None
    max_mel_tokens: int | None = None
    mel_code_limit: int = 8192  # valid codes are [0, limit): start/stop ids sit at limit, limit + 1
    start_mel_token: int = 8192
    stop_mel_token: int = 8193
    text_vocab: int | None = None  # v2 text ids lie below it (the tokenizer's size, else the config's)
    unk_id: int | None = None
    model_dim: int | None = None
    condition_latents: int = 32
    text_scheme: str | None = None  # IndexTTS-2.5: the scheme its tokenizer (a .tiktoken table) encodes with
    text_merges: str | None = None

    def limits(self) -> DataLimits:
        """The same limits the trainer applies (``data_tools.shape_rules``)."""
        return DataLimits(max_text_tokens=self.max_text_tokens, max_codes=self.max_mel_tokens,
                          code_limit=self.mel_code_limit, start_mel_token=self.start_mel_token,
                          stop_mel_token=self.stop_mel_token, text_vocab=self.text_vocab, model_dim=self.model_dim,
                          condition_latents=self.condition_latents)


@dataclass(frozen=True)
class ChunkTask:
    manifest: str
    manifest_index: int
    start: int
    end: int
    format: str | None = None  # its manifest format's id (None: the default one, ``registry.default_format``)
    language: str | None = None  # the manifest's default language (``path::lang``)


@dataclass
class ChunkResult:
    """Per-entry lists and arrays (one row per valid entry) plus chunk-level tallies."""

    manifest_index: int
    start: int
    line_count: int
    bytes_read: int
    problems: list[tuple[str, str, int, str]] = field(default_factory=list)  # severity, code, line, message
    ids: list[str] = field(default_factory=list)
    text_hash: np.ndarray | None = None  # uint64 of ``text_key``
    codes_hash: np.ndarray | None = None  # uint64 of the codes' values (file checks) or path; 0 = unknown
    codes_by_path: bool = False  # codes_hash identifies the file path, not the values
    lines: np.ndarray | None = None  # int64, chunk-local line numbers
    durations: np.ndarray | None = None  # float64 seconds, NaN when unknown
    text_chars: np.ndarray | None = None  # int64
    text_tokens: np.ndarray | None = None  # int64, -1 without a tokenizer
    codes_lengths: np.ndarray | None = None  # int64, -1 without file checks
    speakers: np.ndarray | None = None  # int64 index into speaker_names, -1 for none
    speaker_names: list[str] = field(default_factory=list)
    script_letters: dict[str, int] = field(default_factory=dict)
    lines_by_script: dict[str, int] = field(default_factory=dict)
    lines_not_expected: int = 0
    tokens_total: int = 0
    body_tokens: int = 0  # IndexTTS-2.5: tokens of raw texts without the language prefix, and their characters
    body_chars: int = 0
    unknown_tokens: int = 0
    unknown_chars: Counter = field(default_factory=Counter)
    unknown_where: dict[str, int] = field(default_factory=dict)  # char -> first chunk-local line
    target_ids: list[str | None] = field(default_factory=list)  # v2: per entry
    prompt_ids: list[str | None] = field(default_factory=list)
    code_len_fixes: list[tuple[int, str, int, int, str]] = field(default_factory=list)  # line, id, old, new, basis
