"""Writing synthesized speech: float samples in [-1, 1] -> 16-bit PCM WAV, as upstream's infer.py converts."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from data_tools.fileio import atomic_write_with

INT16_SCALE = 32767.0


def to_int16(waveform: np.ndarray) -> np.ndarray:
    """clamp(32767 * x, -32767, 32767), truncated toward zero (infer.py's ``.type(torch.int16)``)."""
    scaled = np.clip(np.asarray(waveform, dtype=np.float32) * np.float32(INT16_SCALE), -INT16_SCALE, INT16_SCALE)
    return np.trunc(scaled).astype(np.int16)


def write_wav(path: str | Path, waveform: np.ndarray, sample_rate: int) -> Path:
    """Write a mono 16-bit PCM WAV atomically (a reader never sees half a file)."""
    import soundfile as sf

    path = Path(path)
    samples = to_int16(waveform)
    atomic_write_with(path, lambda handle: sf.write(handle, samples, sample_rate, format="WAV", subtype="PCM_16"))
    return path
