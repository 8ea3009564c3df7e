"""Writing one clip: cut from its recording, measured for the gates, loudness-normalised, saved atomically as
mono 16-bit WAV at the clip rate. (The JSON state-file helpers live in ``jsonfiles``; they are re-exported here.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from data_tools.fileio import atomic_open
from data_tools.ingest.gates import measure
from data_tools.ingest.jsonfiles import read_json, read_jsonl, write_json, write_jsonl  # noqa: F401 (re-exported)
from data_tools.ingest.loudness import normalize_loudness
from data_tools.ingest.slicing import Span
from data_tools.ingest.sources import read_span, safe_name


def clip_name(source_id: str, span: Span | None) -> str:
    """Stable names, so a rerun finds its clips: ``<source>_<start ms>`` (the whole file: ``<source>``)."""
    return source_id if span is None else f"{source_id}_{round(span.start * 1000):09d}"


def clip_path(out_dir: Path, speaker: str, name: str) -> Path:
    return out_dir / "clips" / safe_name(speaker) / f"{name}.wav"


def write_clip(audio: Path, rate: int, out_rate: int, start: float, end: float, target: Path,
               target_lufs: float | None) -> dict[str, Any]:
    """Cut ``[start, end)`` seconds of ``audio`` into ``target``; returns its measurements."""
    samples = read_span(audio, round(start * rate), round(end * rate), rate, out_rate)
    measured = measure(samples, out_rate)
    gain = 0.0
    if target_lufs is not None:
        samples, gain = normalize_loudness(samples, out_rate, target_lufs)
    pcm = np.clip(samples, -1.0, 32767 / 32768)
    with atomic_open(target, "wb") as handle:
        sf.write(handle, pcm, out_rate, format="WAV", subtype="PCM_16")
    return {**measured, "gain_db": gain, "seconds": round(len(samples) / out_rate, 3)}
