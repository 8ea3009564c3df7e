"""The data checker's per-line half for IndexTTS2 paired manifests (see ``data_tools.check_chunks``; what every
paired format checks alike is ``data_tools.check_pairs``').

Per line: the fields (typed, bounded), the prompt is not the target, and with file checks every array
through ``data_tools.item_files`` (the trainer's own reading code): text ids inside the tokenizer, lengths
that fit their arrays, codes in range, condition [32, model_dim] and emo vec [model_dim] finite float, and
batch-padded ``target_code_len`` values (``data_tools.code_lengths``).
"""

from __future__ import annotations

import numpy as np

from data_tools import item_files
from data_tools.check_chunks import _hash64
from data_tools.check_pairs import check_drop, finish_pair_chunk, start_pair_chunk
from data_tools.check_records import CheckSettings, ChunkResult, ChunkTask
from data_tools.code_lengths import padded_length, target_duration
from data_tools.shape_rules import V2_CODES_PER_SECOND, RuleError
from generations.indextts2.data.manifest import PairEntry, parse_pair_object


def check_pair_chunk(task: ChunkTask, settings: CheckSettings) -> ChunkResult:
    result, entries, entry_lines, durations = start_pair_chunk(task, settings, parse_pair_object)
    result.text_tokens = np.array([-1 if e.text_len is None else e.text_len for e in entries], dtype=np.int64)
    if settings.check_files:
        result.codes_hash = np.zeros(len(entries), dtype=np.uint64)
        for i, entry in enumerate(entries):
            _check_files(result, settings, entry, i, durations)
    else:
        for i, entry in enumerate(entries):
            if entry.text_len is not None and entry.code_len is not None:
                check_drop(result, settings, entry, entry_lines[i], entry.text_len, entry.code_len)
    return finish_pair_chunk(result, result.ids, entry_lines, durations)


def _check_files(result: ChunkResult, settings: CheckSettings, entry: PairEntry, i: int,
                 durations: np.ndarray) -> None:
    lineno = int(result.lines[i])
    limits = settings.limits()
    try:
        facts = item_files.inspect_pair(entry.text_ids, entry.text_len, entry.codes, entry.code_len,
                                        entry.condition, entry.emo_vec, limits)
        codes = item_files.load_codes(entry.codes, limits, facts.num_codes)
        item_files.load_condition(entry.condition, limits)
        item_files.load_emo_vec(entry.emo_vec, limits)
    except RuleError as exc:
        result.problems.append(("error", exc.code, lineno, f"{exc} (id {entry.id})"))
        return
    text_len = int(facts.text_ids.size)
    result.text_tokens[i] = text_len
    result.codes_lengths[i] = facts.num_codes
    result.codes_hash[i] = _hash64(np.ascontiguousarray(codes, dtype=np.int64).tobytes())
    check_drop(result, settings, entry, lineno, text_len, facts.num_codes)
    if settings.unk_id is not None and settings.unk_id >= 0:
        unknown = int(np.sum(facts.text_ids == settings.unk_id))
        if unknown:
            result.unknown_tokens += unknown
            result.problems.append(("warning", "unknown-tokens", lineno,
                                    f"{unknown} of {text_len} text ids are the tokenizer's unknown id (id {entry.id})"))
    result.tokens_total += text_len
    duration = target_duration(entry.target_audio, entry.duration)
    padded = padded_length(codes, duration)
    if padded is not None:
        new, basis = padded
        result.code_len_fixes.append((lineno, entry.id, facts.num_codes, new, basis))
        if basis == "duration":
            result.problems.append(("error", "padded-code-len", lineno,
                                    f"target_code_len {facts.num_codes} but the target lasts {duration:.2f} s "
                                    f"(about {duration * V2_CODES_PER_SECOND:.0f} codes): batch-padded codes; "
                                    f"the fix sets {new} (id {entry.id})"))
        else:
            result.problems.append(("warning", "padded-code-len", lineno,
                                    f"the last {facts.num_codes - new} of {facts.num_codes} codes repeat one code: "
                                    f"probably batch padding; the fix sets {new} (id {entry.id})"))
    elif duration is not None:
        expected = duration * V2_CODES_PER_SECOND
        if facts.num_codes < expected - max(3, 0.05 * expected):
            result.problems.append(("warning", "duration-mismatch", lineno,
                                    f"duration {duration:.2f} s means about {expected:.0f} codes, target_code_len is "
                                    f"{facts.num_codes} (id {entry.id})"))
    durations[i] = duration if duration is not None else facts.num_codes / V2_CODES_PER_SECOND
