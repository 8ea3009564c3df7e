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
from data_tools.ingest.loudness import PEAK_DBFS, integrated_loudness, normalize_loudness
from data_tools.ingest.slicing import Span
from data_tools.ingest.sources import read_span, safe_name


def clip_name(source_id: str, span: Span | None) -> str:
    """Stable names, so a rerun finds its clips: ``<source>_<start ms>`` (the whole file: ``<source>``)."""
    return source_id if span is None else f"{source_id}_{round(span.start * 1000):09d}"


def clip_path(out_dir: Path, speaker: str, name: str) -> Path:
    return out_dir / "clips" / safe_name(speaker) / f"{name}.wav"


def write_clip(audio: Path, rate: int, out_rate: int, start: float, end: float, target: Path,
               target_lufs: float | None, pieces: list[tuple[float, float]] | None = None) -> dict[str, Any]:
    """Cut ``[start, end)`` seconds of ``audio`` (or the ``pieces`` of it, joined: a long clip with its inner
    pauses shortened) into ``target``; returns its measurements."""
    pieces = pieces or [(start, end)]
    samples = np.concatenate([read_span(audio, round(a * rate), round(b * rate), rate, out_rate)
                              for a, b in pieces])
    measured = {**measure(samples, out_rate), "lufs": integrated_loudness(samples, out_rate),
                "peak": round(float(np.max(np.abs(samples))) if len(samples) else 0.0, 6)}
    gain = 0.0
    if target_lufs is not None:
        samples, gain = normalize_loudness(samples, out_rate, target_lufs)
    pcm = np.clip(samples, -1.0, 32767 / 32768)
    with atomic_open(target, "wb") as handle:
        sf.write(handle, pcm, out_rate, format="WAV", subtype="PCM_16")
    return {**measured, "gain_db": gain, "seconds": round(len(samples) / out_rate, 3)}


def regain_clip(path: Path, clip: dict[str, Any], gain_db: float) -> bool:
    """Bring a written clip from its recorded ``gain_db`` to ``gain_db`` (less where its peak would pass
    -1 dBFS); rewritten atomically, ``clip`` updated. False when it already has that gain."""
    peak = clip.get("peak") or 0.0
    if peak > 0:
        gain_db = min(gain_db, PEAK_DBFS - 20 * float(np.log10(peak)))
    gain_db = round(float(gain_db), 2)
    change = gain_db - clip.get("gain_db", 0.0)
    if abs(change) < 0.01:
        return False
    samples, rate = sf.read(str(path), dtype="float32")
    pcm = np.clip(samples * np.float32(10 ** (change / 20)), -1.0, 32767 / 32768)
    with atomic_open(path, "wb") as handle:
        sf.write(handle, pcm, rate, format="WAV", subtype="PCM_16")
    clip["gain_db"] = gain_db
    return True
