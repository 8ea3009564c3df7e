"""The per-line half of the data checker: one worker checks one byte range of one manifest.

A chunk is a run of whole lines. The worker parses them (``data_tools.check_lines``), checks structure,
text, language and (optionally) the referenced files, and returns compact per-entry arrays plus its
problems with chunk-local line numbers (``data_tools.check_records``); ``data_tools.check_merge`` merges
chunks in order and does everything that needs the whole data set (duplicates, leakage, speakers, histograms).
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np

from data_tools import item_files
from data_tools.check_lines import parse_lines
from data_tools.check_records import CheckSettings, ChunkResult, ChunkTask
from data_tools.chunk_lines import read_lines
from data_tools.shape_rules import MAX_COND_FRAMES, RuleError
from data_tools.shape_rules import (
    V1_SAMPLE_RATE as SAMPLE_RATE,
)
from data_tools.shape_rules import (
    V1_SAMPLES_PER_CODE as SAMPLES_PER_CODE,
)
from data_tools.text import detect_language, normalize_text
from data_tools.text_keys import SCRIPTS, TextBatch

LANGUAGE_SCRIPTS = {"am": "ethiopic", "ti": "ethiopic", "gez": "ethiopic", "tig": "ethiopic",
                    "en": "latin", "fr": "latin", "de": "latin", "es": "latin", "it": "latin",
                    "pt": "latin", "nl": "latin", "sw": "latin", "om": "latin", "so": "latin"}
MIN_DURATION_S = 0.5
MAX_CHARS_PER_SECOND = 40.0
MIN_CHARS_PER_SECOND = 1.0


# ---------------------------------------------------------------------------------------------
# Per-process state: the tokenizer is loaded once per worker, the script table grows as needed.

_TOKENIZER_CACHE: dict[str, object] = {}


def _tokenizer(path: str):
    tok = _TOKENIZER_CACHE.get(path)
    if tok is None:
        from data_tools.text_tokenizer import TextTokenizer

        tok = TextTokenizer(path)
        _TOKENIZER_CACHE[path] = tok
    return tok


def _hash64(data: bytes) -> int:
    """A deterministic 64-bit hash, never 0 (0 marks "unknown")."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "little") or 1


_BLAKE8 = hashlib.blake2b(digest_size=8)


def _hash_strings(keys: list[str]) -> np.ndarray:
    """Deterministic 64-bit hashes of strings (the same in every process), as a uint64 array.

    ``blake2b(key, digest_size=8)`` of each key; copying a prepared hasher skips the constructor's
    argument parsing, a good part of the cost for short keys such as paths.
    """
    if not keys:
        return np.zeros(0, dtype=np.uint64)
    copy = _BLAKE8.copy
    digests = []
    append = digests.append
    for key in keys:
        hasher = copy()
        hasher.update(key.encode("utf-8", "surrogatepass"))
        append(hasher.digest())
    return np.frombuffer(b"".join(digests), dtype=np.uint64).copy()


@functools.cache
def _script_language(script: str) -> str | None:
    """The language ``data_tools.text.detect_language`` answers for text of ``script``."""
    sample = {"ethiopic": "\u1200", "latin": "a"}.get(script)
    return detect_language(sample) if sample else None


# ---------------------------------------------------------------------------------------------
# Files


def check_codes_file(path: str, settings: CheckSettings) -> tuple[list[tuple[str, str, str]], int, int]:
    """Problems ``(severity, code, message)``, the number of codes (-1 unknown), the values' hash (0).

    Read with the trainer's own code (``data_tools.item_files``), so both judge a file alike.
    """
    try:
        codes = item_files.load_codes(Path(path), settings.limits())
    except RuleError as exc:
        if exc.code != "codes-range":
            return [("error", exc.code, str(exc))], -1, 0
        codes = item_files.array(Path(path), "codes")
        problems = [("error", exc.code, str(exc))]
    else:
        problems = []
    length = int(codes.shape[0])
    if length == 0:
        return [("error", "codes-empty", f"codes file holds no codes (the trainer drops it): {path}")], 0, 0
    if settings.max_mel_tokens is not None and length > settings.max_mel_tokens:
        problems.append(("error", "codes-too-long",
                         f"{length} codes, more than gpt.max_mel_tokens {settings.max_mel_tokens} (the trainer "
                         f"drops it): {path}"))
    return problems, length, _hash64(np.ascontiguousarray(codes, dtype=np.int64).tobytes())


def check_cond_mel_file(path: str) -> list[tuple[str, str, str]]:
    """A conditioning mel: float [100, frames >= 3], finite, and not longer than the trainer keeps."""
    try:
        mel = item_files.load_cond_mel(Path(path))
    except RuleError as exc:
        return [("error", exc.code, str(exc))]
    if mel.shape[1] > MAX_COND_FRAMES:
        return [("error", "cond-mel-too-long",
                 f"cond_mel has {mel.shape[1]} frames, more than {MAX_COND_FRAMES} (the trainer drops it): {path}")]
    return []


def check_cond_audio_file(path: str) -> list[tuple[str, str, str]]:
    try:
        frames = item_files.cond_audio_frames(Path(path))
    except RuleError as exc:
        return [("error", exc.code, str(exc))]
    if frames > MAX_COND_FRAMES:
        return [("error", "cond-mel-too-long",
                 f"cond_audio gives {frames} mel frames, more than {MAX_COND_FRAMES} (the trainer drops it): {path}")]
    return []


# ---------------------------------------------------------------------------------------------
# The chunk


def check_codes_chunk(task: ChunkTask, settings: CheckSettings) -> ChunkResult:
    """Check one chunk of whole lines of a v1.5 codes manifest; line numbers are 1-based within the chunk.

    ``data_tools.check_pool.check_chunk`` picks the checker of the manifest's format (``ManifestFormat.check_chunk``).
    """
    lines, nbytes = read_lines(task)
    result = ChunkResult(manifest_index=task.manifest_index, start=task.start, line_count=len(lines),
                         bytes_read=nbytes)
    from data_tools.manifest import line_parser
    from generations.registry import default_format, format_of

    found = format_of(task.format) if task.format else default_format()
    entries, entry_lines = parse_lines(lines, Path(task.manifest), result.problems, line_parser(found))
    n = len(entries)
    ids = [e[0] for e in entries]
    texts = [e[1] for e in entries]
    languages = [e[6] or task.language or settings.language for e in entries]
    durations = np.array([np.nan if e[7] is None else e[7] for e in entries], dtype=np.float64)
    batch = TextBatch(texts)
    counts = batch.script_counts()
    _tally_scripts(result, counts, languages, ids, texts, entry_lines)

    speaker_index: dict[str, int] = {}
    result.speakers = np.array(
        [-1 if e[5] is None else speaker_index.setdefault(e[5], len(speaker_index)) for e in entries],
        dtype=np.int64,
    )
    result.speaker_names = list(speaker_index)
    result.ids = ids
    result.text_hash = batch.key_hashes()
    result.lines = np.asarray(entry_lines, dtype=np.int64)
    result.text_chars = np.fromiter(map(len, texts), dtype=np.int64, count=n)
    result.text_tokens = np.full(n, -1, dtype=np.int64)
    result.codes_lengths = np.full(n, -1, dtype=np.int64)

    base = os.path.dirname(task.manifest)
    prefix = base + os.sep if base else ""
    codes_paths = [e[2] if e[2].startswith("/") else prefix + e[2] for e in entries]
    if settings.tokenizer:
        _check_texts(result, settings, entries, entry_lines, counts, task.language)
    if settings.check_files:
        result.codes_hash = _check_files(result, settings, entries, entry_lines, codes_paths, base, durations)
    else:
        normpath = os.path.normpath
        result.codes_hash = _hash_strings([normpath(p) if "/." in p or "//" in p else p for p in codes_paths])
        result.codes_by_path = True
        _estimate_lengths(result, settings, entries, entry_lines, durations)
    _check_durations(result.problems, ids, entry_lines, durations, result.text_chars)
    result.durations = durations
    result.problems.sort(key=lambda problem: problem[2])  # line order, whatever the chunking
    return result


def _check_texts(result: ChunkResult, settings: CheckSettings, entries: list[tuple], entry_lines: list[int],
                 counts: np.ndarray, default_language: str | None) -> None:
    """The text front-end and the tokenizer: token counts, unknown pieces, length limit."""
    tokenizer = _tokenizer(settings.tokenizer)
    detected = _detected_languages(counts)
    cache: dict[tuple[str, str | None], str] = {}
    for i, fields in enumerate(entries):
        code = fields[6] or default_language or detected[i]  # as the trainer: the entry's language, else the script
        key = (fields[1], code)
        normalized = cache.get(key)
        if normalized is None:
            normalized = cache[key] = normalize_text(fields[1], code)
        if not normalized:
            result.problems.append(("error", "empty-text", entry_lines[i],
                                    f"text is empty after normalisation (id {fields[0]})"))
            continue
        _check_tokens(result, tokenizer, normalized, fields[0], entry_lines[i], i, result.text_tokens, settings)


def _check_files(result: ChunkResult, settings: CheckSettings, entries: list[tuple], entry_lines: list[int],
                 codes_paths: list[str], base: str, durations: np.ndarray) -> np.ndarray:
    """Codes (values read), conditioning mel (header) or audio (header); returns the codes' hashes."""
    problems = result.problems
    digests = np.zeros(len(entries), dtype=np.uint64)
    for i, (uid, _text, _codes, cond_mel, cond_audio, _spk, _lang, duration) in enumerate(entries):
        lineno = entry_lines[i]
        found, length, digest = check_codes_file(codes_paths[i], settings)
        if cond_mel is not None:
            found += check_cond_mel_file(os.path.join(base, cond_mel))
        elif cond_audio is not None:
            found += check_cond_audio_file(os.path.join(base, cond_audio))
        for severity, code, message in found:
            problems.append((severity, code, lineno, f"{message} (id {uid})"))
        result.codes_lengths[i] = length
        digests[i] = digest
        if length > 0:
            _check_duration_against_codes(problems, lineno, uid, duration, length)
            if duration is None:
                durations[i] = length * SAMPLES_PER_CODE / SAMPLE_RATE
    return digests


def _estimate_lengths(result: ChunkResult, settings: CheckSettings, entries: list[tuple], entry_lines: list[int],
                      durations: np.ndarray) -> None:
    """Without file checks, codes lengths are estimated from durations (one code per 1024 samples)."""
    if settings.max_mel_tokens is None or not len(durations):
        return
    estimates = np.ceil(np.nan_to_num(durations, nan=0.0) * SAMPLE_RATE / SAMPLES_PER_CODE)
    limit = settings.max_mel_tokens
    for i in np.flatnonzero(estimates > limit).tolist():
        result.problems.append(("error", "codes-too-long", entry_lines[i],
                                f"{durations[i]:.2f} s is about {int(estimates[i])} codes, more than "
                                f"gpt.max_mel_tokens {limit} (the trainer drops it) (id {entries[i][0]})"))


def _detected_languages(counts: np.ndarray) -> list[str | None]:
    """``data_tools.text.detect_language`` from precomputed letter counts."""
    letters = counts[:, 1:].sum(axis=1)
    ethiopic, latin = _script_language("ethiopic"), _script_language("latin")
    out: list[str | None] = []
    for total, eth, lat in zip(letters.tolist(), counts[:, 1].tolist(), counts[:, 2].tolist()):
        if total and eth / total >= 0.5:
            out.append(ethiopic)
        elif total and lat / total >= 0.5:
            out.append(latin)
        else:
            out.append(None)
    return out


def _tally_scripts(result: ChunkResult, counts: np.ndarray, languages: list[str | None], ids: list[str],
                   texts: list[str], entry_lines: list[int]) -> None:
    letters = counts[:, 1:]
    totals = letters.sum(axis=0)
    result.script_letters = {name: int(totals[k]) for k, name in enumerate(SCRIPTS)}
    per_line = letters.sum(axis=1)
    has_letters = per_line > 0
    dominant = letters.argmax(axis=1)
    result.lines_by_script = {name: int(np.sum(has_letters & (dominant == k))) for k, name in enumerate(SCRIPTS)}
    result.lines_by_script["none"] = int(np.sum(~has_letters))
    column_of = {lang: SCRIPTS.index(LANGUAGE_SCRIPTS[lang]) if lang in LANGUAGE_SCRIPTS else -1
                 for lang in set(languages)}  # a few languages, many lines
    columns = np.fromiter(map(column_of.__getitem__, languages), dtype=np.int64, count=len(languages))
    known = (columns >= 0) & has_letters
    expected = letters[np.arange(len(columns)), np.maximum(columns, 0)]
    flagged = np.flatnonzero(known & (2 * expected < per_line))
    result.lines_not_expected = int(flagged.size)
    for i in flagged.tolist():
        script = SCRIPTS[int(columns[i])]
        share = int(expected[i]) / int(per_line[i])
        found = SCRIPTS[int(dominant[i])]
        result.problems.append((
            "warning", "wrong-language", entry_lines[i],
            f"text is {100 * (1 - share):.0f}% non-{script.title()} letters (mostly {found.title()}), "
            f"expected {languages[i]} (id {ids[i]}): {_preview(texts[i])}",
        ))


def _check_tokens(result: ChunkResult, tokenizer, normalized: str, uid: str, lineno: int, i: int,
                  tokens: np.ndarray, settings: CheckSettings) -> None:
    ids = tokenizer.encode_normalized(normalized)
    tokens[i] = len(ids)
    result.tokens_total += len(ids)
    unk = tokenizer.unk_id
    if unk in ids:
        unknown = ids.count(unk)
        result.unknown_tokens += unknown
        pieces = tokenizer.sp.EncodeAsPieces(normalized)
        chars = [p.lstrip("▁") for p, t in zip(pieces, ids) if t == unk]
        for piece in chars:
            for ch in piece or "?":
                result.unknown_chars[ch] += 1
                result.unknown_where.setdefault(ch, lineno)
        shown = ", ".join(repr(c) for c in dict.fromkeys(chars))
        result.problems.append(("warning", "unknown-tokens", lineno,
                                f"{unknown} of {len(ids)} tokens unknown to the tokenizer ({shown}) (id {uid})"))
    if settings.max_text_tokens is not None and len(ids) > settings.max_text_tokens:
        result.problems.append(("error", "text-too-long", lineno,
                                f"{len(ids)} text tokens, more than gpt.max_text_tokens {settings.max_text_tokens} "
                                f"(the trainer drops it) (id {uid})"))


def _check_duration_against_codes(problems: list, lineno: int, uid: str, duration: float | None,
                                  length: int) -> None:
    if duration is None:
        return
    expected = duration * SAMPLE_RATE / SAMPLES_PER_CODE
    if abs(expected - length) > 2 + 0.05 * expected:
        problems.append(("warning", "duration-mismatch", lineno,
                         f"duration {duration:.2f} s means about {expected:.0f} codes, the codes file has "
                         f"{length} (id {uid})"))


def _check_durations(problems: list, ids: list[str], entry_lines: list[int], durations: np.ndarray,
                     chars: np.ndarray) -> None:
    """Very short clips, and transcripts whose length does not fit the audio's (a misaligned pair)."""
    if not len(durations):
        return
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = chars / durations
    known = np.isfinite(durations)
    short = known & (durations < MIN_DURATION_S)
    odd = known & ~short & ((rate > MAX_CHARS_PER_SECOND) | ((rate < MIN_CHARS_PER_SECOND) & (durations > 3)))
    for i in np.flatnonzero(short | odd).tolist():
        if short[i]:
            problems.append(("warning", "very-short", entry_lines[i], f"only {durations[i]:.2f} s of audio (id {ids[i]})"))
        else:
            problems.append(("warning", "text-audio-mismatch", entry_lines[i],
                             f"{int(chars[i])} characters in {durations[i]:.1f} s ({rate[i]:.1f}/s): transcript "
                             f"and audio may not belong together (id {ids[i]})"))


def _preview(text: str, limit: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
