"""The data checker's per-line half for IndexTTS-2.5 paired manifests (``data_tools.pairs_manifest_v25``).

Per line: the fields, the prompt is not the target, the text tokenised with the run's scheme
(``TextTokenizerV25``: ``"<|lang|> "`` prefix included, checked against ``max_text_tokens`` by the shared
``drop_reason``) or precomputed ids made with that scheme; with file checks the arrays through
``data_tools.item_files`` (the trainer's reading code): codes in [0, 8192), CAM++ vector [192] and emotion
vector [model_dim], finite. Tokens per character (prefix excluded) are summed for the report.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from data_tools import item_files
from data_tools.check_chunks import (
    CheckSettings,
    ChunkResult,
    ChunkTask,
    _check_durations,
    _hash64,
    _hash_strings,
    _tally_scripts,
    problem_code,
)
from data_tools.check_pairs import DROP_CODES
from data_tools.chunk_lines import TOO_LONG, read_lines
from data_tools.manifest import MAX_LINE_BYTES, ManifestError, load_json_object
from data_tools.pairs_manifest_v25 import PairEntryV25, parse_pair_object_v25
from data_tools.shape_rules import RuleError, drop_reason
from data_tools.text_keys import TextBatch

_TOKENIZERS: dict[tuple[str, str, str], object] = {}


def tokenizer_v25(table: str, scheme: str, merges: str | None):
    """One ``TextTokenizerV25`` per process and (table, scheme, merges)."""
    from data_tools.text_tokenizer_v25 import DEFAULT_MERGES, TextTokenizerV25

    key = (table, scheme, merges or "")
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = TextTokenizerV25(table, scheme=scheme, merges=merges or DEFAULT_MERGES)
    return _TOKENIZERS[key]


def _parse(lines: list[str | None], manifest: Path, problems: list, language: str | None
           ) -> tuple[list[PairEntryV25], list[int]]:
    entries: list[PairEntryV25] = []
    entry_lines: list[int] = []
    for lineno, raw in enumerate(lines, 1):
        if raw is None:
            problems.append(("error", "not-utf8", lineno, "not valid UTF-8"))
            continue
        if raw is TOO_LONG:
            problems.append(("error", "invalid-entry", lineno, f"line longer than {MAX_LINE_BYTES} bytes"))
            continue
        if raw.isspace() or not raw:
            continue
        try:
            entry = parse_pair_object_v25(load_json_object(raw, manifest, lineno), manifest, lineno, language)
        except ManifestError as err:
            problems.append(("error", problem_code(err), lineno, err.message))
            continue
        entries.append(entry)
        entry_lines.append(lineno)
    return entries, entry_lines


def check_pair_chunk_v25(task: ChunkTask, settings: CheckSettings) -> ChunkResult:
    lines, nbytes = read_lines(task)
    result = ChunkResult(manifest_index=task.manifest_index, start=task.start, line_count=len(lines),
                         bytes_read=nbytes)
    entries, entry_lines = _parse(lines, Path(task.manifest), result.problems, task.language)
    n = len(entries)
    ids = [e.id for e in entries]
    texts = [e.target_text or "" for e in entries]
    batch = TextBatch(texts)
    _tally_scripts(result, batch.script_counts(), [e.language or settings.language for e in entries], ids, texts,
                   entry_lines)
    speaker_index: dict[str, int] = {}
    result.speakers = np.array([-1 if e.speaker is None else speaker_index.setdefault(e.speaker, len(speaker_index))
                                for e in entries], dtype=np.int64)
    result.speaker_names = list(speaker_index)
    result.ids = ids
    result.target_ids = [e.target_id for e in entries]
    result.prompt_ids = [e.prompt_id for e in entries]
    result.text_hash = batch.key_hashes()
    result.lines = np.asarray(entry_lines, dtype=np.int64)
    result.text_chars = np.fromiter((len(t) for t in texts), dtype=np.int64, count=n)
    result.text_tokens = np.full(n, -1, dtype=np.int64)
    result.codes_lengths = np.array([-1 if e.code_len is None else e.code_len for e in entries], dtype=np.int64)
    durations = np.array([np.nan if e.duration is None else e.duration for e in entries], dtype=np.float64)
    tokenizer = (tokenizer_v25(settings.tokenizer, settings.text_scheme or "merges", settings.text_merges)
                 if settings.tokenizer else None)
    for i, entry in enumerate(entries):
        if entry.target_id and entry.target_id == entry.prompt_id:
            result.problems.append(("warning", "prompt-is-target", entry_lines[i],
                                    f"the prompt is the target utterance itself ({entry.target_id}): the model "
                                    f"learns to copy its prompt (id {entry.id})"))
        if tokenizer is not None:
            _check_text(result, settings, tokenizer, entry, i)
    if settings.check_files:
        result.codes_hash = np.zeros(n, dtype=np.uint64)
        for i, entry in enumerate(entries):
            _check_files(result, settings, entry, i)
    else:
        result.codes_hash = _hash_strings([f"{os.path.normpath(e.codes)}:{e.code_len}" for e in entries])
        result.codes_by_path = True
    for i, entry in enumerate(entries):
        tokens, codes = int(result.text_tokens[i]), int(result.codes_lengths[i])
        if tokens >= 0 and codes >= 0:
            _check_drop(result, settings, entry, entry_lines[i], tokens, codes)
    _check_durations(result.problems, ids, entry_lines, durations, result.text_chars)
    result.durations = durations
    result.problems.sort(key=lambda problem: problem[2])
    return result


def _check_text(result: ChunkResult, settings: CheckSettings, tokenizer, entry: PairEntryV25, i: int) -> None:
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


def _check_drop(result: ChunkResult, settings: CheckSettings, entry: PairEntryV25, lineno: int, text_len: int,
                code_len: int) -> None:
    reason = drop_reason(text_len, code_len, 0, settings.limits())
    if reason is not None:
        limit = {"too_many_text_tokens": f", more than gpt.max_text_tokens {settings.max_text_tokens} with the "
                                         f"'{settings.text_scheme or 'merges'}' text scheme, language prefix included",
                 "too_many_codes": f", more than gpt.max_mel_tokens {settings.max_mel_tokens}"}.get(reason, "")
        result.problems.append(("error", DROP_CODES[reason], lineno,
                                f"{text_len} text ids, {code_len} codes{limit} (the trainer drops it) (id {entry.id})"))


def _check_files(result: ChunkResult, settings: CheckSettings, entry: PairEntryV25, i: int) -> None:
    lineno = int(result.lines[i])
    limits = settings.limits()
    try:
        facts = item_files.inspect_pair_v25(entry.codes, entry.code_len, entry.spk_vec, entry.emo_vec, limits)
        codes = item_files.load_codes(entry.codes, limits, facts.num_codes)
        item_files.load_spk_vec(entry.spk_vec)
        item_files.load_emo_vec(entry.emo_vec, limits)
    except RuleError as exc:
        result.problems.append(("error", exc.code, lineno, f"{exc} (id {entry.id})"))
        return
    result.codes_lengths[i] = facts.num_codes
    result.codes_hash[i] = _hash64(np.ascontiguousarray(codes, dtype=np.int64).tobytes())
