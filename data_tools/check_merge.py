"""Merging one split's chunk results (``data_tools.check_chunks`` / ``check_pairs``) into its report part.

Chunks arrive in manifest order from ``data_tools.check_data``; ``SplitAccumulator`` turns their chunk-local
lines into manifest lines, sums the tallies, and at the end finds duplicates (ids, texts, codes) inside the split,
train/val leakage, v2 prompt/speaker mismatches and the speaker table; ``speaker_warnings`` judges that table.
Duplicates and leakage are found on 64-bit hashes with numpy. ``ProblemList`` keeps the problems in order.
"""

from __future__ import annotations

from array import array
from pathlib import Path

import numpy as np

from data_tools.check_records import CheckSettings, ChunkResult
from data_tools.check_report import NumberSummary, Problem, SpeakerStat, SplitStats, UnknownChar
from data_tools.text_keys import SCRIPTS

SINGLE_SPEAKER_SHARE = 0.75  # warn when one speaker holds more than this share of a multi-speaker set


class ProblemList:
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


class SplitAccumulator:
    """Merges one split's chunk results in order: problems with global lines, duplicates, leakage, tallies."""

    def __init__(self, name: str, manifests: list[Path], first_index: int, problems: ProblemList) -> None:
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
        self.body_tokens = 0
        self.body_chars = 0
        self.unknown_tokens = 0
        self.unknown_chars: dict[str, list] = {}  # char -> [count, where]
        self.target_ids: list[str | None] = []  # v2 pairs: the target and prompt utterance of each entry
        self.prompt_ids: list[str | None] = []
        self.fixes: list[dict] = []
        self.has_pairs = False  # some chunk named target or prompt utterances (else those lists are all None)
        self.speaker_parts: list[tuple[np.ndarray, list[str]]] = []  # each chunk's speaker indices and names

    def where(self, i: int) -> str:
        return f"{self.manifest_names[self.loc_manifest[i] - self.first_index]}:{self.loc_line[i]}"

    def speaker_names(self) -> list[str | None]:
        """Each entry's speaker name (None for none), built on each call (only paired manifests need it)."""
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
        self.body_tokens += chunk.body_tokens
        self.body_chars += chunk.body_chars
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

    def find_leakage(self, train: SplitAccumulator) -> dict[str, int]:
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
        speaker_of = self.speaker_names()
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

    def _utterance_leaks(self, train: SplitAccumulator) -> int:
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

    def refused(self, index: int) -> None:
        """Manifest ``index`` was refused as a whole (one error said why): no "has no entries" on top of it."""
        self.problems_per_manifest[index] = self.problems_per_manifest.get(index, 0) + 1

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
            if settings.text_scheme is not None:
                stats.text_scheme = settings.text_scheme
                stats.tokens_per_char = self.body_tokens / self.body_chars if self.body_chars else None
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


def speaker_warnings(stats: SplitStats, problems: ProblemList) -> None:
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
