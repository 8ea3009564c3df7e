"""Loudness normalisation (ITU-R BS.1770 via pyloudnorm) with a peak guard."""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pyloudnorm

TARGET_LUFS = -20.0
PEAK_DBFS = -1.0


@functools.lru_cache(maxsize=8)
def _meter(rate: int) -> pyloudnorm.Meter:
    return pyloudnorm.Meter(rate)


def normalize_loudness(samples: np.ndarray, rate: int, target_lufs: float = TARGET_LUFS,
                       peak_dbfs: float = PEAK_DBFS) -> tuple[np.ndarray, float]:
    """``samples`` at ``target_lufs`` (less where the peak would pass ``peak_dbfs``); returns (audio, gain dB).

    Clips too short to measure (under 0.4 s) or silent are returned unchanged (gain 0).
    """
    if len(samples) < int(0.4 * rate) + 1:
        return samples, 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyloudnorm warns about clipping; the clipping gate reports that
        loudness = _meter(rate).integrated_loudness(samples.astype(np.float64))
    if not np.isfinite(loudness):
        return samples, 0.0
    gain_db = target_lufs - loudness
    peak = float(np.max(np.abs(samples)))
    if peak > 0:
        gain_db = min(gain_db, peak_dbfs - 20 * np.log10(peak))
    return (samples * np.float32(10 ** (gain_db / 20))).astype(np.float32), round(float(gain_db), 2)


def integrated_loudness(samples: np.ndarray, rate: int) -> float | None:
    """BS.1770 loudness in LUFS (None: too short or silent)."""
    if len(samples) < int(0.4 * rate) + 1:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loudness = _meter(rate).integrated_loudness(samples.astype(np.float64))
    return round(float(loudness), 3) if np.isfinite(loudness) else None


def dataset_gain(clips: list[tuple[float, float | None]], target_lufs: float = TARGET_LUFS) -> float:
    """One gain (dB) bringing a whole dataset to ``target_lufs``: its loudness is the duration-weighted power
    mean of its clips' (``(seconds, lufs)``; unmeasurable clips left out), so loud and soft clips keep their
    difference, which per-clip normalisation erases."""
    measured = [(seconds, lufs) for seconds, lufs in clips if lufs is not None and seconds > 0]
    if not measured:
        return 0.0
    power = sum(seconds * 10 ** (lufs / 10) for seconds, lufs in measured) / sum(s for s, _ in measured)
    return round(float(target_lufs - 10 * np.log10(power)), 2)
