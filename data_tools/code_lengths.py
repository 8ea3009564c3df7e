"""Finding and fixing the padded ``target_code_len`` of the IndexTTS2 community preprocessing.

The community ``preprocess_data.py`` extracts semantic codes in padded batches and saves, for every item of
a batch, the codes AND ``code_len`` of the batch's longest item. Training on them teaches the model to keep
"speaking" padding after the utterance ends.

The rule (codes are 50 per second, one per 20 ms):

1. The target's duration comes from its audio file (``target_audio_path``, when that file exists: its
   header), else from the line's ``target_duration`` / ``duration`` field.
2. With a duration d: ``target_code_len`` is padded when it exceeds ``50 d`` by more than
   ``max(PAD_TOLERANCE_FRAMES, PAD_TOLERANCE_SHARE * 50 d)``. The corrected length is where the trailing
   run of one repeated code starts when that lies within the same tolerance of ``50 d`` (the padding
   quantises to one code, so its start is the exact end of speech), else ``round(50 d)``.
3. Without a duration: a trailing run of one repeated code of at least ``MIN_TRAILING_RUN`` codes (0.5 s)
   that reaches ``target_code_len`` is a hint (reported as a warning); the corrected length is the run's start.

``fix_manifest`` writes a corrected manifest BESIDE the original (``<name>.codelen_fixed.jsonl``), never
over it: only ``target_code_len`` of the flagged lines changes, every other line is copied byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_tools.fileio import UnusableFile, atomic_open, open_regular, regular_file_size
from data_tools.shape_rules import V2_CODES_PER_SECOND

PAD_TOLERANCE_FRAMES = 3
PAD_TOLERANCE_SHARE = 0.02
MIN_TRAILING_RUN = 25
FIXED_SUFFIX = ".codelen_fixed.jsonl"


@dataclass(frozen=True)
class CodeLenFix:
    line: int
    id: str
    old: int
    new: int
    basis: str  # "duration" (certain) or "repeated code" (a hint)

    @property
    def certain(self) -> bool:
        return self.basis == "duration"


def trailing_run_start(codes: np.ndarray) -> int:
    """Index where the final run of one repeated value begins (len(codes) - 1 for no repeat at the end)."""
    if codes.size == 0:
        return 0
    different = np.flatnonzero(codes != codes[-1])
    return int(different[-1]) + 1 if different.size else 0


def target_duration(audio: Path | None, declared: float | None) -> float | None:
    """The target's seconds: its audio header when the file exists (a regular file), else the line's value."""
    if audio is not None:
        try:
            regular_file_size(audio)
        except UnusableFile:
            return declared
        from data_tools.audio import AudioError, audio_info

        try:
            return audio_info(audio)[0]
        except AudioError:
            return declared
    return declared


def padded_length(codes: np.ndarray, duration: float | None) -> tuple[int, str] | None:
    """(corrected length, basis) when ``codes`` (cut to the manifest's length) look batch-padded, else None."""
    n = int(codes.size)
    run_start = trailing_run_start(codes)
    if duration is not None:
        expected = duration * V2_CODES_PER_SECOND
        tolerance = max(PAD_TOLERANCE_FRAMES, PAD_TOLERANCE_SHARE * expected)
        if n <= expected + tolerance:
            return None
        if run_start >= 1 and abs(run_start - expected) <= tolerance:
            return run_start, "duration"
        return max(1, min(n - 1, round(expected))), "duration"
    if run_start >= 1 and n - run_start >= MIN_TRAILING_RUN:
        return run_start, "repeated code"
    return None


def fixed_path(manifest: Path) -> Path:
    name = manifest.name[: -len(".jsonl")] if manifest.name.endswith(".jsonl") else manifest.name
    return manifest.with_name(name + FIXED_SUFFIX)


def fix_manifest(manifest: str | Path, fixes: list[CodeLenFix], out: str | Path | None = None) -> Path:
    """Write ``manifest`` with the fixed ``target_code_len`` values beside it; returns the new file's path.

    Raises ValueError when ``out`` is the manifest itself or a fixed line no longer holds the expected value
    (the manifest changed since it was checked).
    """
    manifest = Path(manifest)
    target = Path(out) if out is not None else fixed_path(manifest)
    if target.resolve() == manifest.resolve():
        raise ValueError(f"{target}: refusing to write the corrected manifest over the original")
    by_line = {fix.line: fix for fix in fixes}
    with open_regular(manifest) as source, atomic_open(target, "wb") as sink:
        for lineno, raw in enumerate(source, 1):
            fix = by_line.get(lineno)
            if fix is None:
                sink.write(raw)
                continue
            obj = json.loads(raw)
            if obj.get("target_code_len") not in (fix.old, None):
                raise ValueError(f"{manifest}:{lineno}: target_code_len is {obj.get('target_code_len')!r}, the check "
                                 f"saw {fix.old}: check the manifest again")
            obj["target_code_len"] = fix.new
            sink.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))
    return target
