"""Check manifests before a long training run: structure, files, lengths, language, speakers,
durations, duplicates and train/val leakage. Both formats the trainer reads: the v1.5 codes manifest and
the IndexTTS2 paired manifest (``data_tools.check_pairs``); a manifest argument may end in ``::lang``.

Library: ``check_manifests(train, val, tokenizer, config, language, workers) -> DataReport`` (the web
UI calls it and shows the report's tables); ``write_code_len_fixes(report)`` writes corrected paired
manifests beside the originals (``data_tools.code_lengths``). CLI::

    python -m data_tools.check_data --manifest M [--manifest M2 ...] [--val-manifest V ...]
        [--tokenizer T] [--config C] [--language am] [--json report.json] [--workers N] [--no-file-checks]
        [--fix-code-len]

Exit codes: 0 clean; 1 problems found (errors or warnings; the verdict says which); 2 usage (bad flags,
a manifest, tokenizer or config that cannot be opened) with one ``error: ...`` line on stderr; 3 the
checker itself failed (a bug: ``error: ...`` and the traceback on stderr), never confused with a verdict.

Agreement with the trainer: lines are parsed by the same parsers, files read by the trainer's own code
(``data_tools.item_files``) and judged by the same rules (``data_tools.shape_rules``), so whatever the
trainer refuses is an error here, and data with no errors loads in the trainer.

Severity: an *error* means training would fail or learn garbage (unparseable lines, missing or broken
files, codes containing start/stop ids or out of range, text or codes longer than the model fits,
duplicate ids, the same utterance (id or codes) in train and val, an empty manifest). Everything else
is a *warning*: duplicate texts or codes inside a split, the same text in train and val, lines not in
the expected language, unknown tokens, very short clips, transcripts that do not fit their audio's
length, and speaker-diversity concerns.

Speed: manifests are cut into chunks of whole lines, checked in worker processes (one per core) and
merged in order; duplicate and leakage detection run on 64-bit hashes with numpy. ``.npy`` conditioning
mels are checked from their header; codes files are read (they are small) to check their values.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import multiprocessing
import os
import sys
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from data_tools.check_chunks import LANGUAGE_SCRIPTS, CheckSettings, ChunkResult, ChunkTask, check_codes_chunk
from data_tools.check_pairs import check_pair_chunk
from data_tools.check_report import (
    DataReport,
    NumberSummary,
    Problem,
    SpeakerStat,
    SplitStats,
    UnknownChar,
)
from data_tools.cli import OneLineErrorParser, progress_bar, run_refusing, usage_error
from data_tools.code_lengths import CodeLenFix, fix_manifest
from data_tools.fileio import UnusableFile, regular_file_size
from data_tools.manifest import FORMAT_NAMES, FORMAT_V2, ManifestError, manifest_format, parse_manifest_spec
from data_tools.text_keys import SCRIPTS
from data_tools.workers import pool_results

MAX_LISTED_PER_CODE = 1000
CHUNK_TIMEOUT_S = 900.0
MIN_CHUNK_BYTES = 256 * 1024
MAX_CHUNK_BYTES = 4 * 1024 * 1024
EXIT_CLEAN, EXIT_PROBLEMS, EXIT_USAGE, EXIT_CHECKER_ERROR = 0, 1, 2, 3
SINGLE_SPEAKER_SHARE = 0.75  # warn when one speaker holds more than this share of a multi-speaker set

ProgressCallback = Callable[[int, int], None]  # (bytes done, bytes total)


class CheckUsageError(ValueError):
    """Inputs the checker cannot start on (missing manifest, unreadable tokenizer/config, bad option)."""


def check_chunk(task: ChunkTask, settings: CheckSettings) -> ChunkResult:
    """Check one chunk of whole lines with the checker of its manifest's format."""
    if task.format == FORMAT_V2:
        return check_pair_chunk(task, settings)
    return check_codes_chunk(task, settings)


def check_manifests(
    train: Sequence[str | Path],
    val: Sequence[str | Path] = (),
    tokenizer: str | Path | None = None,
    config: str | Path | None = None,
    language: str | None = None,
    workers: int = 0,
    *,
    check_files: bool = True,
    chunk_bytes: int | None = None,
    progress: ProgressCallback | None = None,
    max_listed: int = MAX_LISTED_PER_CODE,
) -> DataReport:
    """Check train (and val) manifests; ``workers=0`` uses every core. Raises CheckUsageError on bad inputs."""
    started = time.perf_counter()
    train_specs = [parse_manifest_spec(p) for p in train]
    val_specs = [parse_manifest_spec(p) for p in val]
    train_paths = [spec.path for spec in train_specs]
    val_paths = [spec.path for spec in val_specs]
    if not train_paths:
        raise CheckUsageError("no train manifest given")
    sizes = []
    for path in (*train_paths, *val_paths):
        try:
            sizes.append(regular_file_size(path))
        except UnusableFile as exc:
            raise CheckUsageError(f"{path}: manifest not found" if exc.kind == "missing" else str(exc)) from None
    settings = _settings(tokenizer, config, language, check_files)
    workers = workers or _cpu_count()

    problems = _ProblemList(max_listed)
    specs = [*train_specs, *val_specs]
    formats = _formats(specs, problems)
    step = chunk_bytes or max(MIN_CHUNK_BYTES, min(MAX_CHUNK_BYTES, sum(sizes) // max(1, 4 * workers) + 1))
    tasks = [task for index, spec in enumerate(specs) if formats[index] is not None
             for task in _chunk_tasks(spec.path, index, step, formats[index], spec.language)]
    train_acc = _SplitAccumulator("train", train_paths, 0, problems)
    val_acc = _SplitAccumulator("val", val_paths, len(train_paths), problems)
    total_bytes = sum(sizes)
    done_bytes = 0
    for result in _run_chunks(tasks, settings, workers):
        (train_acc if result.manifest_index < len(train_paths) else val_acc).add(result)
        done_bytes += result.bytes_read
        if progress is not None:
            progress(done_bytes, total_bytes)

    train_stats = train_acc.finish(settings)
    val_stats = val_acc.finish(settings) if val_paths else None
    leakage = val_acc.find_leakage(train_acc) if val_paths else {}
    _speaker_warnings(train_stats, problems)
    fixes = train_acc.fixes + val_acc.fixes

    elapsed = time.perf_counter() - started
    lines = train_stats.lines + (val_stats.lines if val_stats else 0)
    errors = [p for p in problems.items if p.severity == "error"]
    warnings = [p for p in problems.items if p.severity == "warning"]
    verdict = "errors" if errors else "warnings" if warnings else "clean"
    return DataReport(
        verdict=verdict,
        errors=errors,
        warnings=warnings,
        problem_counts=dict(problems.counts),
        train=train_stats,
        val=val_stats,
        leakage=leakage,
        settings={
            "check_files": check_files,
            "language": language,
            "tokenizer": str(tokenizer) if tokenizer else None,
            "config": str(config) if config else None,
            "max_text_tokens": settings.max_text_tokens,
            "max_mel_tokens": settings.max_mel_tokens,
            "mel_code_limit": settings.mel_code_limit,
            "workers": min(workers, len(tasks)) if len(tasks) > 1 else 1,
        },
        elapsed_s=round(elapsed, 3),
        lines_per_s=round(lines / elapsed, 1) if elapsed > 0 else 0.0,
        formats={str(spec.path): fmt or "unknown" for spec, fmt in zip(specs, formats)},
        code_len_fixes=fixes,
    )


def _formats(specs: list, problems: _ProblemList) -> list[str | None]:
    """Each manifest's format; a manifest of another format than the first is an error (the trainer refuses)."""
    formats: list[str | None] = []
    first: tuple[Path, str] | None = None
    for spec in specs:
        try:
            fmt = manifest_format(spec.path)
        except ManifestError as exc:
            problems.add("error", "not-a-training-manifest", f"{exc.path}:{exc.line}" if exc.line else str(exc.path),
                         exc.message)
            formats.append(None)
            continue
        if first is None:
            first = (spec.path, fmt)
        elif fmt != first[1]:
            problems.add("error", "mixed-formats", str(spec.path),
                         f"{spec.path} is {FORMAT_NAMES[fmt]} but {first[0]} is {FORMAT_NAMES[first[1]]}: one run "
                         "trains one format")
        formats.append(fmt)
    return formats


def write_code_len_fixes(report: DataReport | Sequence[dict]) -> list[Path]:
    """Write a corrected manifest beside each manifest with padded ``target_code_len`` values (never over it).

    Takes a report or its ``code_len_fixes`` list (what the web UI keeps); returns the files written.
    """
    by_manifest: dict[str, list[CodeLenFix]] = {}
    for fix in report.code_len_fixes if isinstance(report, DataReport) else report:
        by_manifest.setdefault(fix["manifest"], []).append(
            CodeLenFix(fix["line"], fix["id"], fix["old"], fix["new"], fix["basis"]))
    return [fix_manifest(Path(manifest), fixes) for manifest, fixes in by_manifest.items()]


# ---------------------------------------------------------------------------------------------
# Inputs


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _settings(tokenizer: str | Path | None, config: str | Path | None, language: str | None,
              check_files: bool) -> CheckSettings:
    if language is not None and language not in LANGUAGE_SCRIPTS:
        known = ", ".join(sorted(LANGUAGE_SCRIPTS))
        raise CheckUsageError(f"--language {language}: no script known for it (known: {known})")
    values: dict = {}
    if tokenizer is not None:
        from data_tools.text_tokenizer import TextTokenizer, TokenizerError

        try:
            loaded = TextTokenizer(tokenizer)
        except TokenizerError as exc:
            raise CheckUsageError(str(exc)) from None
        values.update(text_vocab=loaded.vocab_size, unk_id=loaded.unk_id)
    if config is not None:
        from data_tools.config import ConfigError, load_config
        from data_tools.shape_rules import code_limit

        try:
            gpt = load_config(config)["gpt"]
        except ConfigError as exc:
            raise CheckUsageError(str(exc)) from None
        values = {
            **values,
            "max_text_tokens": int(gpt["max_text_tokens"]),
            "max_mel_tokens": int(gpt["max_mel_tokens"]),
            "start_mel_token": int(gpt["start_mel_token"]),
            "stop_mel_token": int(gpt["stop_mel_token"]),
            "model_dim": int(gpt["model_dim"]),
            "condition_latents": int(gpt.get("condition_num_latent", 32)),
            "mel_code_limit": code_limit(gpt),
        }
    return CheckSettings(check_files=check_files, language=language,
                         tokenizer=str(tokenizer) if tokenizer is not None else None, **values)


def _chunk_tasks(path: Path, index: int, step: int, fmt: str, language: str | None) -> list[ChunkTask]:
    """Byte ranges of whole lines, about ``step`` bytes each (a boundary is found a block at a time)."""
    from data_tools.fileio import open_regular

    tasks: list[ChunkTask] = []
    start = 0
    with open_regular(path) as handle:
        size = os.fstat(handle.fileno()).st_size
        while start < size:
            end = min(size, start + step)
            handle.seek(end)
            while end < size:
                block = handle.read(1 << 16)
                if not block:
                    break
                newline = block.find(b"\n")
                if newline >= 0:
                    end += newline + 1
                    break
                end += len(block)
            end = min(end, size)
            tasks.append(ChunkTask(str(path), index, start, end, fmt, language))
            start = end
    if not tasks:
        tasks.append(ChunkTask(str(path), index, 0, 0, fmt, language))
    return tasks


def _run_chunks(tasks: list[ChunkTask], settings: CheckSettings, workers: int):
    """Chunk results in task order; a process pool when there is more than one chunk and core."""
    run = functools.partial(check_chunk, settings=settings)
    if workers <= 1 or len(tasks) <= 1:
        for task in tasks:
            yield run(task)
        return
    yield from pool_results(multiprocessing.get_context(_start_method()), workers, run, tasks,
                            timeout_s=CHUNK_TIMEOUT_S, what="data-check", initializer=_worker_start)


def _worker_start() -> None:
    """A forked worker holds every object of its parent: frozen, its garbage collections never walk them
    (nor copy their pages, which writing their GC headers would). What the worker makes is collected as usual."""
    gc.freeze()


# ---------------------------------------------------------------------------------------------
# Merging


def _start_method() -> str:
    """fork where it is safe (a single-threaded process: CLI, scripts), spawn beside threads (the web UI).

    fork starts workers in milliseconds and needs no ``if __name__ == "__main__"`` guard in the caller;
    forking a process with other threads can deadlock a child on a lock one of them held.
    """
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return "fork"
    return "spawn"


class _ProblemList:
    """Problems in order, at most ``max_listed`` listed per code; every occurrence counted."""

    def __init__(self, max_listed: int) -> None:
        self.max_listed = max_listed
        self.items: list[Problem] = []
        self.counts: dict[str, int] = {}

    def add(self, severity: str, code: str, where: str, message: str) -> None:
        count = self.counts.get(code, 0)
        self.counts[code] = count + 1
        if count < self.max_listed:
            self.items.append(Problem(severity, code, where, message))


class _SplitAccumulator:
    """Merges one split's chunk results in order: problems with global lines, duplicates, leakage, tallies."""

    def __init__(self, name: str, manifests: list[Path], first_index: int, problems: _ProblemList) -> None:
        self.name = name
        self.manifests = manifests
        self.manifest_names = [str(path) for path in manifests]  # where() runs for every duplicate
        self.first_index = first_index
        self.problems = problems
        self.line_offsets: dict[int, int] = {}
        self.entries_per_manifest: dict[int, int] = {}
        self.problems_per_manifest: dict[int, int] = {}
        self.ids: list[str] = []
        self.loc_manifest = array("q")  # filled from int64 arrays' bytes (no Python int per entry)
        self.loc_line = array("q")
        self.codes_by_path = False
        self.first_id: dict[str, int] = {}
        self.duplicates = {"ids": 0, "texts": 0, "codes": 0}
        self.arrays: dict[str, list[np.ndarray]] = {}
        self.speakers: dict[str, list[float]] = {}  # name -> [utterances, seconds]
        self.entries_without_speaker = 0
        self.script_letters: dict[str, int] = {}
        self.lines_by_script: dict[str, int] = {}
        self.lines_not_expected = 0
        self.tokens_total = 0
        self.unknown_tokens = 0
        self.unknown_chars: dict[str, list] = {}  # char -> [count, where]
        self.target_ids: list[str | None] = []  # v2 pairs: the target and prompt utterance of each entry
        self.prompt_ids: list[str | None] = []
        self.fixes: list[dict] = []
        self.has_pairs = False  # some chunk named target or prompt utterances (else those lists are all None)
        self.speaker_parts: list[tuple[np.ndarray, list[str]]] = []  # each chunk's speaker indices and names

    def where(self, i: int) -> str:
        return f"{self.manifest_names[self.loc_manifest[i] - self.first_index]}:{self.loc_line[i]}"

    @property
    def speaker_of(self) -> list[str | None]:
        """Each entry's speaker name (None for none); built when asked (only paired manifests need it)."""
        out: list[str | None] = []
        for speakers, names in self.speaker_parts:
            out.extend(None if k < 0 else names[k] for k in speakers.tolist())
        return out

    def add(self, chunk: ChunkResult) -> None:
        index = chunk.manifest_index
        offset = self.line_offsets.get(index, 0)
        self.line_offsets[index] = offset + chunk.line_count
        path = self.manifests[index - self.first_index]
        for severity, code, line, message in chunk.problems:
            self.problems.add(severity, code, f"{path}:{offset + line}", message)
        self.problems_per_manifest[index] = self.problems_per_manifest.get(index, 0) + len(chunk.problems)
        n = len(chunk.ids)
        self.entries_per_manifest[index] = self.entries_per_manifest.get(index, 0) + n
        self.ids.extend(chunk.ids)
        if chunk.target_ids or chunk.prompt_ids:
            self.has_pairs = True
            self.target_ids.extend(chunk.target_ids)
            self.prompt_ids.extend(chunk.prompt_ids)
        else:
            self.target_ids.extend([None] * n)
            self.prompt_ids.extend([None] * n)
        for line, uid, old, new, basis in chunk.code_len_fixes:
            self.fixes.append({"manifest": str(path), "line": offset + line, "id": uid, "old": old, "new": new,
                               "basis": basis})
        self.speaker_parts.append((chunk.speakers, chunk.speaker_names))
        self.loc_manifest.frombytes(np.full(n, index, dtype=np.int64).tobytes())
        self.loc_line.frombytes((chunk.lines + offset).astype(np.int64).tobytes())
        self.codes_by_path = chunk.codes_by_path
        for key in ("text_hash", "codes_hash", "durations", "text_chars", "text_tokens", "codes_lengths"):
            self.arrays.setdefault(key, []).append(getattr(chunk, key))
        seconds = np.nan_to_num(chunk.durations, nan=0.0)
        # Entries grouped by speaker once (a stable sort keeps each speaker's entries in line order, so each
        # sum adds the same values in the same order as a mask per speaker would), not a pass per speaker.
        order = np.argsort(chunk.speakers, kind="stable")
        bounds = np.searchsorted(chunk.speakers[order], np.arange(len(chunk.speaker_names) + 1)).tolist()
        for k, name in enumerate(chunk.speaker_names):
            mine = order[bounds[k]:bounds[k + 1]]
            entry = self.speakers.setdefault(name, [0, 0.0])
            entry[0] += int(mine.size)
            entry[1] += float(seconds[mine].sum())
        self.entries_without_speaker += int(np.sum(chunk.speakers < 0))
        for key, value in chunk.script_letters.items():
            self.script_letters[key] = self.script_letters.get(key, 0) + value
        for key, value in chunk.lines_by_script.items():
            self.lines_by_script[key] = self.lines_by_script.get(key, 0) + value
        self.lines_not_expected += chunk.lines_not_expected
        self.tokens_total += chunk.tokens_total
        self.unknown_tokens += chunk.unknown_tokens
        for ch, count in chunk.unknown_chars.items():
            entry = self.unknown_chars.setdefault(ch, [0, f"{path}:{offset + chunk.unknown_where[ch]}"])
            entry[0] += count

    def codes_what(self) -> str:
        return "codes file" if self.codes_by_path else "codes"

    def find_duplicates(self) -> None:
        """Every entry whose id, text or codes repeat an earlier entry of this split."""
        ids = self.ids
        first = dict(zip(reversed(ids), range(len(ids) - 1, -1, -1)))  # each id's first index, built in C
        if len(first) < len(ids):  # some id repeats: name every repeat, in order
            for i, uid in enumerate(ids):
                j = first[uid]
                if j != i:
                    self.duplicates["ids"] += 1
                    self.problems.add("error", "duplicate-id", self.where(i),
                                      f"duplicate id '{uid}' (first at {self.where(j)})")
        self.first_id = first
        self._pair_checks()
        for kind, key, code in (("texts", "text_hash", "duplicate-text"), ("codes", "codes_hash", "duplicate-codes")):
            what = "text" if kind == "texts" else self.codes_what()
            for i, j in _repeats(self.unique_targets(key)):
                self.duplicates[kind] += 1
                self.problems.add("warning", code, self.where(i),
                                  f"duplicate {what}: id {self.ids[i]} repeats {self.where(j)} (id {self.ids[j]})")

    def find_leakage(self, train: _SplitAccumulator) -> dict[str, int]:
        """Val entries (this split) whose id, text or codes also occur in train."""
        leakage = {"ids": 0}
        for i, uid in enumerate(self.ids):
            j = train.first_id.get(uid)
            if j is not None:
                leakage["ids"] += 1
                self.problems.add("error", "val-leak-id", self.where(i),
                                  f"val id '{uid}' is also in train ({train.where(j)})")
        for kind, key, severity, code in (("texts", "text_hash", "warning", "val-leak-text"),
                                          ("codes", "codes_hash", "error", "val-leak-codes")):
            what = "text" if kind == "texts" else self.codes_what()
            leakage[kind] = 0
            for i, j in _matches(self.unique_targets(key), train.unique_targets(key)):
                leakage[kind] += 1
                self.problems.add(severity, code, self.where(i),
                                  f"val entry {self.ids[i]} has the same {what} as train {train.where(j)} "
                                  f"(id {train.ids[j]})")
        if self.has_pairs and any(target is not None for target in self.target_ids):
            leakage["utterances"] = self._utterance_leaks(train)
        return leakage

    def unique_targets(self, key: str) -> np.ndarray:
        """Hashes, 0 (ignored) for a pair whose target utterance an earlier pair of the split already had:
        in a paired manifest each target appears with several prompts, which is not duplication."""
        hashes = self.array(key).astype(np.uint64)
        if not self.has_pairs:
            return hashes
        seen: set[str] = set()
        for i, target in enumerate(self.target_ids):
            if target is not None:
                if target in seen:
                    hashes[i] = 0
                seen.add(target)
        return hashes

    def _pair_checks(self) -> None:
        """v2: a pair's prompt should be an utterance of the pair's speaker (known where it is some target)."""
        if not self.has_pairs:
            return  # no prompts to check
        speaker_of = self.speaker_of
        speaker_of_target: dict[str, tuple[str, int]] = {}
        for i, (target, speaker) in enumerate(zip(self.target_ids, speaker_of)):
            if target is not None and speaker is not None:
                speaker_of_target.setdefault(target, (speaker, i))
        for i, (prompt, speaker) in enumerate(zip(self.prompt_ids, speaker_of)):
            known = speaker_of_target.get(prompt) if prompt is not None else None
            if known is not None and speaker is not None and known[0] != speaker:
                self.problems.add("warning", "prompt-other-speaker", self.where(i),
                                  f"prompt {prompt} is speaker {known[0]} ({self.where(known[1])}), the pair says "
                                  f"{speaker} (id {self.ids[i]})")

    def _utterance_leaks(self, train: _SplitAccumulator) -> int:
        """Val pairs whose target or prompt utterance is a train target (its codes were trained on)."""
        train_targets: dict[str, int] = {}
        for j, target in enumerate(train.target_ids):
            if target is not None:
                train_targets.setdefault(target, j)
        leaks = 0
        for i, (target, prompt) in enumerate(zip(self.target_ids, self.prompt_ids)):
            for role, utterance in (("target", target), ("prompt", prompt)):
                j = train_targets.get(utterance) if utterance is not None else None
                if j is not None:
                    leaks += 1
                    self.problems.add("error", "val-leak-utterance", self.where(i),
                                      f"val {role} {utterance} is a train target ({train.where(j)}) (id {self.ids[i]})")
                    break
        return leaks

    def array(self, key: str) -> np.ndarray:
        parts = self.arrays.get(key)
        return np.concatenate(parts) if parts else np.zeros(0)

    def finish(self, settings: CheckSettings) -> SplitStats:
        for k, path in enumerate(self.manifests):
            index = self.first_index + k
            if not self.entries_per_manifest.get(index) and not self.problems_per_manifest.get(index):
                self.problems.add("error", "empty-manifest", str(path), "manifest has no entries")
        durations = self.array("durations")
        stats = SplitStats(name=self.name, manifests=[str(p) for p in self.manifests],
                           lines=sum(self.line_offsets.values()), entries=len(self.ids))
        stats.hours = float(np.nansum(durations)) / 3600 if durations.size else 0.0
        stats.entries_without_duration = int(np.isnan(durations).sum()) if durations.size else 0
        stats.durations_s = NumberSummary.of(durations)
        stats.text_chars = NumberSummary.of(self.array("text_chars"))
        if settings.tokenizer:
            tokens = self.array("text_tokens")
            stats.text_tokens = NumberSummary.of(tokens[tokens >= 0])
        if settings.check_files:
            codes_lengths = self.array("codes_lengths")
            stats.codes_lengths = NumberSummary.of(codes_lengths[codes_lengths >= 0])
        letters = sum(self.script_letters.values())
        stats.script_letters = {name: self.script_letters.get(name, 0) for name in SCRIPTS}
        stats.script_shares = {name: (self.script_letters.get(name, 0) / letters if letters else 0.0)
                               for name in SCRIPTS}
        stats.lines_by_script = {name: self.lines_by_script.get(name, 0) for name in (*SCRIPTS, "none")}
        stats.lines_not_expected_language = self.lines_not_expected
        self._speaker_stats(stats)
        if settings.tokenizer:
            stats.tokens_total = self.tokens_total
            stats.unknown_tokens = self.unknown_tokens
            stats.unknown_rate = self.unknown_tokens / self.tokens_total if self.tokens_total else 0.0
            stats.unknown_chars = [
                UnknownChar(ch, f"U+{ord(ch):04X}", count, where)
                for ch, (count, where) in sorted(self.unknown_chars.items(), key=lambda kv: -kv[1][0])
            ]
        self.find_duplicates()
        stats.duplicate_ids = self.duplicates["ids"]
        stats.duplicate_texts = self.duplicates["texts"]
        stats.duplicate_codes = self.duplicates["codes"]
        return stats

    def _speaker_stats(self, stats: SplitStats) -> None:
        stats.speaker_count = len(self.speakers)
        stats.entries_without_speaker = self.entries_without_speaker
        total_seconds = sum(v[1] for v in self.speakers.values())
        total_utts = sum(v[0] for v in self.speakers.values())
        rows = []
        for name, (utts, seconds) in self.speakers.items():
            share = seconds / total_seconds if total_seconds > 0 else (utts / total_utts if total_utts else 0.0)
            rows.append(SpeakerStat(name, int(utts), round(seconds / 3600, 4), round(share, 4)))
        rows.sort(key=lambda s: (-s.share, s.speaker))
        stats.speakers = rows
        stats.largest_speaker_share = rows[0].share if rows else None


def _repeats(hashes: np.ndarray) -> list[tuple[int, int]]:
    """(i, j) for every entry i whose hash occurred first at j < i (0 = unknown, ignored)."""
    known = np.flatnonzero(hashes != 0)
    if known.size < 2:
        return []
    _values, first, inverse, counts = np.unique(hashes[known], return_index=True, return_inverse=True,
                                                return_counts=True)
    repeated = np.flatnonzero((counts[inverse] > 1) & (first[inverse] != np.arange(known.size)))
    return [(int(known[k]), int(known[first[inverse[k]]])) for k in repeated.tolist()]


def _matches(hashes: np.ndarray, reference: np.ndarray) -> list[tuple[int, int]]:
    """(i, j) for every i whose hash occurs in ``reference``, j its first occurrence there."""
    if not hashes.size or not reference.size:
        return []
    unique, first = np.unique(reference, return_index=True)
    hits = np.flatnonzero(np.isin(hashes, unique) & (hashes != 0))
    return [(int(i), int(first[np.searchsorted(unique, hashes[i])])) for i in hits.tolist()]


def _speaker_warnings(stats: SplitStats, problems: _ProblemList) -> None:
    if not stats.entries:
        return
    if stats.speaker_count == 0:
        problems.add("warning", "no-speakers", "", "no entry names a speaker: no speaker statistics, and a "
                     "split cannot keep speakers apart")
        return
    if stats.entries_without_speaker:
        problems.add("warning", "missing-speaker", "",
                     f"{stats.entries_without_speaker} of {stats.entries} train entries name no speaker")
    if stats.speaker_count == 1:
        problems.add("warning", "single-speaker", "", f"all train data is one speaker ({stats.speakers[0].speaker}): "
                     "the model may lose the ability to clone other voices")
    elif stats.largest_speaker_share is not None and stats.largest_speaker_share > SINGLE_SPEAKER_SHARE:
        top = stats.speakers[0]
        problems.add("warning", "dominant-speaker", "",
                     f"speaker {top.speaker} holds {100 * top.share:.0f}% of the train data")


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.check_data",
                                description="Check training manifests (v1.5 codes or IndexTTS2 paired) before training.",
                                epilog="exit codes: 0 clean, 1 problems found (errors or warnings), 2 usage error "
                                       "(bad flags, unreadable manifest/tokenizer/config), 3 the checker itself "
                                       "failed (a bug; traceback on stderr)")
    parser.add_argument("--manifest", action="append", required=True, metavar="M",
                        help="train manifest (repeatable); M::am sets that manifest's language")
    parser.add_argument("--val-manifest", action="append", default=[], metavar="V",
                        help="validation manifest (repeatable); enables the leakage check")
    parser.add_argument("--tokenizer", type=Path, help="SentencePiece model: text lengths and unknown tokens")
    parser.add_argument("--config", type=Path, help="IndexTTS config.yaml: length limits and the code range")
    parser.add_argument("--language", help="expected language of the text, e.g. am")
    parser.add_argument("--json", type=Path, dest="json_path", metavar="PATH", help="write the full report as JSON")
    parser.add_argument("--workers", type=int, default=0, help="worker processes (default: every core)")
    parser.add_argument("--no-file-checks", action="store_true", help="skip the referenced .npy / audio files")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--fix-code-len", action="store_true",
                        help="paired manifests: write <name>.codelen_fixed.jsonl beside each manifest whose "
                             "target_code_len values are batch-padded (the original is never changed)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return run_refusing(lambda: _main(args), (CheckUsageError,))
    except Exception as exc:  # the checker's own failure: exit 3, distinct from a verdict
        import traceback

        traceback.print_exc()
        print(f"error: the data checker failed ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
              "this is a bug in the checker, not a verdict on the data", file=sys.stderr)
        return EXIT_CHECKER_ERROR


def _main(args: argparse.Namespace) -> int:
    if args.workers < 0:
        return usage_error("--workers must be >= 0")
    with progress_bar(args.quiet, "checking", unit="B", unit_scale=True, leave=False) as progress:
        report = check_manifests(args.manifest, args.val_manifest, tokenizer=args.tokenizer, config=args.config,
                                 language=args.language, workers=args.workers,
                                 check_files=not args.no_file_checks, progress=progress)
    print(report.summary_text())
    if args.json_path is not None:
        from data_tools.fileio import atomic_write_text

        try:
            atomic_write_text(args.json_path, json.dumps(report.to_json(), ensure_ascii=False, indent=1) + "\n")
        except OSError as exc:
            return usage_error(f"cannot write {args.json_path}: {exc.strerror or exc}")
    if args.fix_code_len:
        try:
            written = write_code_len_fixes(report)
        except (OSError, ValueError) as exc:
            return usage_error(exc)
        for path in written:
            print(f"corrected target_code_len written to {path}")
        if not written:
            print("no padded target_code_len found: nothing to correct")
    return report.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
