"""What the data checker does alike for every paired manifest format (``generations/<gen>/data/check.py``: IndexTTS2's
and IndexTTS-2.5's per-line halves, see ``data_tools.check_chunks``): parse each line with the format's object
parser, tally scripts, speakers, ids and hashes, refuse a prompt that is its own target, and report a pair the
trainer would drop.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import numpy as np

from data_tools.check_chunks import _check_durations, _hash_strings, _tally_scripts
from data_tools.check_lines import problem_code, unreadable_line_problem
from data_tools.check_records import CheckSettings, ChunkResult, ChunkTask
from data_tools.chunk_lines import MARKERS, read_lines
from data_tools.manifest import ManifestError, load_json_object
from data_tools.pair_fields import PairLine
from data_tools.shape_rules import drop_reason
from data_tools.text_keys import TextBatch

DROP_CODES = {"empty_text": "empty-text", "empty_codes": "codes-empty", "too_many_text_tokens": "text-too-long",
              "too_many_codes": "codes-too-long"}

Pair = TypeVar("Pair", bound=PairLine)  # one paired format's entry


def parse_pair_lines(lines: list[str | None], manifest: Path, problems: list, language: str | None,
                     parse_object: Callable[[dict, Path, int, str | None], Pair]) -> tuple[list[Pair], list[int]]:
    """The entries ``parse_object`` makes of the valid lines (and their line numbers); a problem per bad line."""
    entries: list[Pair] = []
    entry_lines: list[int] = []
    for lineno, raw in enumerate(lines, 1):
        if raw is None or raw in MARKERS:
            problems.append(unreadable_line_problem(raw, lineno))
            continue
        if raw.isspace() or not raw:
            continue
        try:
            entry = parse_object(load_json_object(raw, manifest, lineno), manifest, lineno, language)
        except ManifestError as err:
            problems.append(("error", problem_code(err), lineno, err.message))
            continue
        entries.append(entry)
        entry_lines.append(lineno)
    return entries, entry_lines


def start_pair_chunk(task: ChunkTask, settings: CheckSettings,
                     parse_object: Callable[[dict, Path, int, str | None], Pair]
                     ) -> tuple[ChunkResult, list[Pair], list[int], np.ndarray]:
    """What every paired format checks alike: parse, scripts, speakers, ids, hashes, lengths, prompt-is-target.

    Returns (result, entries, their line numbers, durations); ``result.text_tokens`` is left for the format.
    """
    lines, nbytes = read_lines(task)
    result = ChunkResult(manifest_index=task.manifest_index, start=task.start, line_count=len(lines),
                         bytes_read=nbytes)
    entries, entry_lines = parse_pair_lines(lines, Path(task.manifest), result.problems, task.language,
                                            parse_object)
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
    result.codes_lengths = np.array([-1 if e.code_len is None else e.code_len for e in entries], dtype=np.int64)
    durations = np.array([np.nan if e.duration is None else e.duration for e in entries], dtype=np.float64)
    for i, entry in enumerate(entries):
        if entry.target_id and entry.target_id == entry.prompt_id:
            result.problems.append(("warning", "prompt-is-target", entry_lines[i],
                                    f"the prompt is the target utterance itself ({entry.target_id}): the model "
                                    f"learns to copy its prompt (id {entry.id})"))
    if not settings.check_files:
        result.codes_hash = _hash_strings([f"{os.path.normpath(e.codes)}:{e.code_len}" for e in entries])
        result.codes_by_path = True
    return result, entries, entry_lines, durations


def finish_pair_chunk(result: ChunkResult, ids: list[str], entry_lines: list[int],
                      durations: np.ndarray) -> ChunkResult:
    """The duration checks, then the problems in line order (whatever the chunking)."""
    _check_durations(result.problems, ids, entry_lines, durations, result.text_chars)
    result.durations = durations
    result.problems.sort(key=lambda problem: problem[2])
    return result


def check_drop(result: ChunkResult, settings: CheckSettings, entry: PairLine,
               lineno: int, text_len: int, code_len: int, text_limit_note: str = "") -> None:
    """An error when the trainer would drop the pair (``drop_reason``); ``text_limit_note`` says how text counts."""
    reason = drop_reason(text_len, code_len, 0, settings.limits())
    if reason is not None:
        limit = {"too_many_text_tokens": f", more than gpt.max_text_tokens {settings.max_text_tokens}"
                                         f"{text_limit_note}",
                 "too_many_codes": f", more than gpt.max_mel_tokens {settings.max_mel_tokens}"}.get(reason, "")
        result.problems.append(("error", DROP_CODES[reason], lineno,
                                f"{text_len} text ids, {code_len} codes{limit} (the trainer drops it) (id {entry.id})"))
