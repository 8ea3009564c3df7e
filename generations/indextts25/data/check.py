"""The data checker's per-line half for IndexTTS-2.5 paired manifests (``generations.indextts25.data.manifest``).

Per line: the fields, the prompt is not the target, the text tokenised with the run's scheme
(``TextTable``: ``"<|lang|> "`` prefix included, checked against ``max_text_tokens`` by the shared
``drop_reason``) or precomputed ids made with that scheme; with file checks the arrays through
``data_tools.item_files`` (the trainer's reading code): codes in [0, 8192), CAM++ vector [192] and emotion
vector [model_dim], finite. Tokens per character (prefix excluded) are summed for the report.
"""

from __future__ import annotations

import numpy as np

from data_tools import item_files
from data_tools.check_chunks import _hash64
from data_tools.check_pairs import check_drop, finish_pair_chunk, start_pair_chunk
from data_tools.check_records import CheckSettings, ChunkResult, ChunkTask
from data_tools.shape_rules import RuleError
from generations.indextts25.data.manifest import PairEntry, pair_facts, parse_pair_object

_TOKENIZERS: dict[tuple[str, str, str], object] = {}


def text_table_of(table: str, scheme: str, merges: str | None):
    """One ``TextTable`` per process and (table, scheme, merges)."""
    from generations.indextts25.data.text_table import DEFAULT_MERGES, TextTable

    key = (table, scheme, merges or "")
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = TextTable(table, scheme=scheme, merges=merges or DEFAULT_MERGES)
    return _TOKENIZERS[key]


def table_settings(table: str, scheme: str, merges: str | None) -> dict:
    """The data checker's settings from a .tiktoken ``table`` read with ``scheme`` (TableError, a ValueError)."""
    loaded = text_table_of(table, scheme, merges)
    return {"text_vocab": loaded.vocab_size, "unk_id": None, "text_scheme": scheme, "text_merges": merges}


def check_pair_chunk(task: ChunkTask, settings: CheckSettings) -> ChunkResult:
    result, entries, entry_lines, durations = start_pair_chunk(task, settings, parse_pair_object)
    n = len(entries)
    result.text_tokens = np.full(n, -1, dtype=np.int64)
    tokenizer = (text_table_of(settings.tokenizer, settings.text_scheme or "merges", settings.text_merges)
                 if settings.tokenizer else None)
    if tokenizer is not None:
        for i, entry in enumerate(entries):
            _check_text(result, settings, tokenizer, entry, i)
    if settings.check_files:
        result.codes_hash = np.zeros(n, dtype=np.uint64)
        for i, entry in enumerate(entries):
            _check_files(result, settings, entry, i)
    text_note = f" with the '{settings.text_scheme or 'merges'}' text scheme, language prefix included"
    for i, entry in enumerate(entries):
        tokens, codes = int(result.text_tokens[i]), int(result.codes_lengths[i])
        if tokens >= 0 and codes >= 0:
            check_drop(result, settings, entry, entry_lines[i], tokens, codes, text_note)
    return finish_pair_chunk(result, result.ids, entry_lines, durations)


def _check_text(result: ChunkResult, settings: CheckSettings, tokenizer, entry: PairEntry, i: int) -> None:
    lineno = int(result.lines[i])
    if entry.text_ids is not None:
        if entry.text_scheme != tokenizer.scheme:
            result.problems.append(("error", "text-scheme", lineno,
                                    f"text ids {entry.text_ids} were made with the '{entry.text_scheme}' text scheme, "
                                    f"the check uses '{tokenizer.scheme}' (id {entry.id})"))
            return
        if not settings.check_files:
            return
        try:
            ids = item_files.read_text_ids(entry.text_ids, entry.text_len, tokenizer.vocab_size)
        except RuleError as exc:
            result.problems.append(("error", exc.code, lineno, f"{exc} (id {entry.id})"))
            return
        result.text_tokens[i] = int(ids.size)
        result.tokens_total += int(ids.size)
        return
    cost = tokenizer.measure([entry.target_text or ""], entry.language or "")
    result.text_tokens[i] = cost.longest
    result.tokens_total += cost.longest
    result.body_tokens += cost.tokens
    result.body_chars += cost.chars


def _check_files(result: ChunkResult, settings: CheckSettings, entry: PairEntry, i: int) -> None:
    lineno = int(result.lines[i])
    limits = settings.limits()
    try:
        facts = pair_facts(entry, limits)  # the trainer's own check of the vectors
        codes = item_files.load_codes(entry.codes, limits, facts.num_codes)
    except RuleError as exc:
        result.problems.append(("error", exc.code, lineno, f"{exc} (id {entry.id})"))
        return
    result.codes_lengths[i] = facts.num_codes
    result.codes_hash[i] = _hash64(np.ascontiguousarray(codes, dtype=np.int64).tobytes())
