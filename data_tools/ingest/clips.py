"""Writing one clip: cut from its recording, measured for the gates, loudness-normalised, saved atomically as
mono 16-bit WAV at the clip rate; and the JSON state files of an ingest folder, written atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from data_tools.fileio import atomic_open, atomic_write_text
from data_tools.ingest.gates import measure
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


def read_json(path: Path) -> Any:
    """A state file, or None when it is missing or torn (a torn one is redone, never trusted)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json(path: Path, value: Any) -> None:
    atomic_write_text(path, json.dumps(value, ensure_ascii=False, indent=1) + "\n")


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    atomic_write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]
