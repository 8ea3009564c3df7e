"""The per-line half of the data checker: one worker checks one byte range of one manifest.

A chunk is a run of whole lines. The worker parses them, checks structure, text, language and
(optionally) the referenced files, and returns compact per-entry arrays plus its problems with
chunk-local line numbers; ``data_tools.check_merge`` merges chunks in order and does everything that
needs the whole data set (duplicates, leakage, speakers, histograms).

The parse loop is lean on purpose: a line that passes a quick type check is taken as it is, and
only a line that fails it goes through ``data_tools.manifest.parse_manifest_line``, the single
definition of a valid manifest line, which names the problem.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from data_tools import item_files
from data_tools.chunk_lines import IO_ERROR, MARKERS, read_lines
from data_tools.manifest import FORMAT_V15, MAX_LINE_BYTES, ManifestError, parse_manifest_line
from data_tools.shape_rules import (
    MAX_COND_FRAMES,
    MAX_ID_CHARS,
    DataLimits,
    RuleError,
    valid_duration,
)
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
    format: str = FORMAT_V15
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
# Structure


def problem_code(err: ManifestError) -> str:
    """A stable short code for a ManifestError (for filtering and tables)."""
    message = err.message
    for prefix, code in (
        ("malformed JSON", "malformed-json"),
        ("not valid UTF-8", "not-utf8"),
        ("expected a JSON object", "not-an-object"),
        ("missing field", "missing-field"),
        ("needs 'cond_mel' or 'cond_audio'", "missing-field"),
        ("empty", "empty-field"),
        ("field 'duration'", "wrong-type"),
        ("field '", "wrong-type"),
    ):
        if message.startswith(prefix):
            return code
    return "invalid-entry"


_SCAN_ONCE = json.JSONDecoder().scan_once  # json.loads' own scanner (the C one), without its Python layers


def _quick_entry(obj: object) -> tuple | None:
    """The fields of a line that is certainly valid, else None (then the manifest parser decides)."""
    if type(obj) is not dict:
        return None
    uid = obj.get("id")
    text = obj.get("text")
    codes = obj.get("codes")
    if type(uid) is not str or type(text) is not str or type(codes) is not str:
        return None
    cond_mel = obj.get("cond_mel")
    cond_audio = obj.get("cond_audio")
    speaker = obj.get("speaker")
    language = obj.get("language")
    duration = obj.get("duration")
    for value in (cond_mel, cond_audio, speaker, language):
        if value is not None and type(value) is not str:
            return None
    if duration is not None and valid_duration(duration) is None:
        return None
    if not (uid.strip() and text.strip() and codes.strip() and (cond_mel or cond_audio)) or len(uid) > MAX_ID_CHARS:
        return None
    for value in (codes, cond_mel, cond_audio):
        if value and (value[0] == "~" or "\x00" in value or len(value) > 4096 or value.isspace()):
            return None  # the manifest parser expands or refuses it
    if "prompt_condition_path" in obj or "target_codes_path" in obj:
        return None
    return uid, text, codes, cond_mel or None, cond_audio or None, speaker, language, duration


def _entry_fields(raw: str, manifest: Path, lineno: int) -> tuple:
    """Fields of a line the quick check refused; raises ManifestError naming the problem."""
    from data_tools.fileio import expand_path

    entry = parse_manifest_line(raw, manifest, lineno)
    if entry is None:
        raise ManifestError(manifest, lineno, "blank line")  # unreachable: blanks are skipped earlier
    obj = json.loads(raw)

    def path(key: str) -> str | None:  # relative paths stay relative (the chunk joins its folder); ~ expanded
        value = obj.get(key) or None
        return str(expand_path(value)) if value else None

    return (entry.id, entry.text, path("codes"), path("cond_mel"), path("cond_audio"), entry.speaker,
            entry.language, entry.duration)


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

    ``data_tools.check_data.check_chunk`` picks this or ``check_pairs.check_pair_chunk`` by the format.
    """
    lines, nbytes = read_lines(task)
    result = ChunkResult(manifest_index=task.manifest_index, start=task.start, line_count=len(lines),
                         bytes_read=nbytes)
    entries, entry_lines = _parse_lines(lines, Path(task.manifest), result.problems)
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


def unreadable_line_problem(raw: str | None, lineno: int) -> tuple[str, str, int, str]:
    """The problem for a line the reader gave as None (not UTF-8) or ``TOO_LONG`` (not held in memory)."""
    if raw is None:
        return ("error", "not-utf8", lineno, "not valid UTF-8")
    if raw is IO_ERROR:
        return ("error", "manifest-unreadable", lineno, "cannot read the manifest from this line on (an I/O error)")
    return ("error", "invalid-entry", lineno, f"line longer than {MAX_LINE_BYTES} bytes")


def _parse_lines(lines: list[str | None], manifest: Path, problems: list) -> tuple[list[tuple], list[int]]:
    """The lean parse loop: fields of every valid line, a problem for every invalid one."""
    loads = json.loads
    scan = _SCAN_ONCE
    quick = _quick_entry
    entries: list[tuple] = []
    entry_lines: list[int] = []
    append_entry, append_line = entries.append, entry_lines.append
    for lineno, raw in enumerate(lines, 1):
        if raw is None or raw in MARKERS:
            problems.append(unreadable_line_problem(raw, lineno))
            continue
        # The usual line: one JSON value from its first character to its last is exactly what json.loads
        # gives (no BOM, no whitespace around it), without json.loads' Python layers and two regex matches.
        try:
            obj, end = scan(raw, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end == len(raw):
            fields = quick(obj)
            if fields is not None:
                append_entry(fields)
                append_line(lineno)
                continue
        try:
            fields = quick(loads(raw))
        except (ValueError, RecursionError):
            if not raw or raw.isspace():
                continue
            fields = None
        if fields is None:
            if raw.isspace():
                continue
            try:
                fields = _entry_fields(raw, manifest, lineno)
            except ManifestError as err:
                problems.append(("error", problem_code(err), lineno, err.message))
                continue
        entries.append(fields)
        entry_lines.append(lineno)
    return entries, entry_lines


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
