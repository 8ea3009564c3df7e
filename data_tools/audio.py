"""Loading speech audio: any format libsndfile reads, any rate -> mono float32 at 24 kHz (soxr)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

TARGET_SAMPLE_RATE = 24_000


class AudioError(ValueError):
    """Audio that cannot be used; the message names the file and the reason (one line)."""


def read_header(path: Path):
    """libsndfile's header facts (``soundfile.info``); AudioError when the file is missing or unreadable."""
    if not path.is_file():
        raise AudioError(f"{path}: audio file not found")
    try:
        return sf.info(str(path))
    except (sf.LibsndfileError, RuntimeError, OSError) as exc:
        raise AudioError(f"{path}: unreadable audio ({error_reason(exc)})") from None


def audio_info(path: str | Path) -> tuple[float, int]:
    """(duration in seconds, sample rate) from the file header, without decoding the samples."""
    path = Path(path)
    info = read_header(path)
    if info.samplerate <= 0:
        raise AudioError(f"{path}: invalid sample rate {info.samplerate}")
    return info.frames / info.samplerate, int(info.samplerate)


def to_mono(samples: np.ndarray) -> np.ndarray:
    """Average the channels of (frames, channels) audio; 1-D input is returned as is."""
    if samples.ndim == 1:
        return samples
    return samples.mean(axis=1)


def resample(samples: np.ndarray, from_rate: int, to_rate: int = TARGET_SAMPLE_RATE) -> np.ndarray:
    """High-quality resampling (soxr VHQ); a no-op when the rates agree."""
    if from_rate == to_rate:
        return samples
    return soxr.resample(samples, from_rate, to_rate, quality="VHQ")


def load_audio(path: str | Path, sample_rate: int = TARGET_SAMPLE_RATE) -> np.ndarray:
    """Read ``path`` -> mono float32 samples at ``sample_rate`` (raises AudioError, never crashes)."""
    path = Path(path)
    if not path.is_file():
        raise AudioError(f"{path}: audio file not found")
    try:
        samples, rate = sf.read(str(path), dtype="float32", always_2d=False)
    except (sf.LibsndfileError, RuntimeError, OSError, ValueError) as exc:
        raise AudioError(f"{path}: unreadable audio ({error_reason(exc)})") from None
    if samples.size == 0:
        raise AudioError(f"{path}: audio has no samples")
    mono = to_mono(np.asarray(samples, dtype=np.float32))
    if not np.all(np.isfinite(mono)):
        raise AudioError(f"{path}: audio contains NaN or infinite samples")
    out = resample(mono, int(rate), sample_rate)
    return np.ascontiguousarray(out, dtype=np.float32)


def error_reason(exc: BaseException) -> str:
    """The last line of an exception's message (libsndfile's are several lines), else its type's name."""
    text = str(exc).strip().splitlines()
    return text[-1] if text else type(exc).__name__
