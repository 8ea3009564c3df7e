"""Writing synthesized speech: float samples in [-1, 1] -> 16-bit PCM WAV, as upstream's infer.py converts.

One int16 rule for every generation: IndexTTS 1.5's ``infer.py`` and IndexTTS2 / 2.5's ``infer_v2`` both scale by
32767, clamp to +-32767 and cast with ``.type(torch.int16)`` (truncation toward zero). IndexTTS2 / 2.5 also join
the segments of a long text with 200 ms of zeros (``interval_silence``): ``join_segments_int16``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from data_tools.fileio import atomic_write_with

INT16_SCALE = 32767.0


INTERVAL_SILENCE_SECONDS = 0.2


def scale_to_int16_range(waveform: np.ndarray) -> np.ndarray:
    """clamp(32767 * x, -32767, 32767) in float32 (infer's value just before the int16 cast)."""
    return np.clip(np.asarray(waveform, dtype=np.float32) * np.float32(INT16_SCALE), -INT16_SCALE, INT16_SCALE)


def to_int16(waveform: np.ndarray) -> np.ndarray:
    """clamp(32767 * x, -32767, 32767), truncated toward zero (infer.py's ``.type(torch.int16)``)."""
    return np.trunc(scale_to_int16_range(waveform)).astype(np.int16)


def silence_samples(sample_rate: int, seconds: float = INTERVAL_SILENCE_SECONDS) -> int:
    """Zeros between two segments: ``int(sample_rate * 0.2)`` (4410 at 22050 Hz)."""
    return int(sample_rate * seconds)


def join_segments_int16(segments: list[np.ndarray], sample_rate: int,
                        silence_seconds: float = INTERVAL_SILENCE_SECONDS) -> np.ndarray:
    """IndexTTS2 / 2.5 output: each segment's float samples (any shape, flattened) scaled and clamped, joined
    with ``silence_samples`` zeros between segments (none after the last), cast to int16 by truncation."""
    if not segments:
        raise ValueError("no segments to join")
    gap = np.zeros(silence_samples(sample_rate, silence_seconds), dtype=np.float32)
    parts: list[np.ndarray] = []
    for index, segment in enumerate(segments):
        if index:
            parts.append(gap)
        parts.append(scale_to_int16_range(np.asarray(segment, dtype=np.float32).reshape(-1)))
    return np.trunc(np.concatenate(parts)).astype(np.int16)


def write_wav(path: str | Path, waveform: np.ndarray, sample_rate: int) -> Path:
    """Write a mono 16-bit PCM WAV atomically (a reader never sees half a file)."""
    import soundfile as sf

    path = Path(path)
    samples = to_int16(waveform)
    atomic_write_with(path, lambda handle: sf.write(handle, samples, sample_rate, format="WAV", subtype="PCM_16"))
    return path
