"""The two resamplers IndexTTS2's audio path goes through, reproduced number for number.

- ``sinc_resample``: torchaudio's band-limited windowed-sinc resampler (``torchaudio.functional.resample`` and
  ``torchaudio.transforms.Resample`` with their defaults: Hann window, 6 zero crossings, roll-off 0.99).
  torchaudio is not a dependency: the kernel is rebuilt from its definition, step by step in the same float
  order, so results are bit-identical. The two torchaudio entry points differ in one detail that matters at
  the last bit: the functional form builds its kernel in the waveform's dtype, the transform builds it in
  float64 and rounds it to float32 (``kernel_dtype="float64"``).
- ``soxr_resample`` / ``load_audio_like_librosa``: ``librosa.load(path, sr=...)`` with its default ``soxr_hq``
  resampler (soxr "HQ", then the output cut or zero-padded to ceil(N * ratio) samples).

Upstream inference uses soxr to 22.05 kHz then the sinc transform to 16 kHz for the speaker prompt, and
soxr straight to 16 kHz for the emotion prompt; the community preprocessing uses the functional sinc
resampler to 24 kHz and then to 16 kHz.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import numpy as np
import soxr
import torch
import torch.nn.functional as F

LOWPASS_FILTER_WIDTH = 6
ROLLOFF = 0.99


def sinc_resample_kernel(
    orig_freq: int,
    new_freq: int,
    *,
    dtype: torch.dtype = torch.float32,
    kernel_dtype: Literal["waveform", "float64"] = "waveform",
    lowpass_filter_width: int = LOWPASS_FILTER_WIDTH,
    rolloff: float = ROLLOFF,
) -> tuple[torch.Tensor, int]:
    """The (new, 1, 2 * width + orig) polyphase kernel for gcd-reduced rates, and its half-width ``width``.

    ``kernel_dtype="waveform"`` computes in ``dtype`` (the functional form); ``"float64"`` computes in
    float64 and rounds to float32 at the end (the transform built with its default dtype).
    """
    gcd = math.gcd(int(orig_freq), int(new_freq))
    orig, new = int(orig_freq) // gcd, int(new_freq) // gcd
    cutoff = min(orig, new) * rolloff
    width = math.ceil(lowpass_filter_width * orig / cutoff)
    if kernel_dtype == "waveform":
        phase_dtype: torch.dtype | None = dtype
        tap_dtype = dtype
    else:
        # The transform asks for no dtype: the output-phase ramp is an integer arange divided in the
        # default float dtype, the tap positions are float64.
        phase_dtype = None
        tap_dtype = torch.float64
    taps = torch.arange(-width, width + orig, dtype=tap_dtype)[None, None] / orig
    phases = torch.arange(0, -new, -1, dtype=phase_dtype)[:, None, None] / new
    t = phases + taps
    t *= cutoff
    t = t.clamp_(-lowpass_filter_width, lowpass_filter_width)
    window = torch.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    t *= math.pi
    scale = cutoff / orig
    kernel = torch.where(t == 0, torch.tensor(1.0).to(t), t.sin() / t)
    kernel *= window * scale
    if kernel_dtype == "float64":
        kernel = kernel.to(torch.float32)
    return kernel, width


def sinc_resample(
    waveform: torch.Tensor,
    orig_freq: int,
    new_freq: int,
    *,
    kernel_dtype: Literal["waveform", "float64"] = "waveform",
) -> torch.Tensor:
    """Resample the last axis of a float waveform from ``orig_freq`` to ``new_freq`` Hz (torchaudio's sinc).

    Output length is ceil(N * new / orig). Equal rates return the input unchanged (as torchaudio does).
    """
    if orig_freq <= 0 or new_freq <= 0:
        raise ValueError(f"sample rates must be positive, got {orig_freq} -> {new_freq}")
    if not waveform.is_floating_point():
        raise TypeError(f"sinc_resample needs a floating-point waveform, got {waveform.dtype}")
    if int(orig_freq) == int(new_freq):
        return waveform
    kernel, width = sinc_resample_kernel(orig_freq, new_freq, dtype=waveform.dtype, kernel_dtype=kernel_dtype)
    kernel = kernel.to(waveform.device)
    gcd = math.gcd(int(orig_freq), int(new_freq))
    orig, new = int(orig_freq) // gcd, int(new_freq) // gcd
    shape = waveform.shape
    rows = waveform.reshape(-1, shape[-1])
    length = rows.shape[-1]
    padded = F.pad(rows, (width, width + orig))
    phases = F.conv1d(padded[:, None], kernel, stride=orig)
    out = phases.transpose(1, 2).reshape(rows.shape[0], -1)
    # ceil of the float product in a float32 tensor, as torchaudio computes the output length
    target = int(torch.ceil(torch.as_tensor(new * length / orig)).item())
    return out[..., :target].reshape(*shape[:-1], -1)


def soxr_resample(samples: np.ndarray, orig_sr: int, target_sr: int) -> np.ndarray:
    """librosa.resample(..., res_type="soxr_hq") of a 1-D signal: soxr HQ, length fixed to ceil(N * ratio)."""
    samples = np.asarray(samples)
    if samples.ndim != 1:
        raise ValueError(f"soxr_resample expects a mono 1-D signal, got shape {samples.shape}")
    if int(orig_sr) == int(target_sr):
        return samples
    n_out = int(np.ceil(samples.shape[-1] * float(target_sr) / orig_sr))
    out = soxr.resample(samples, orig_sr, target_sr, quality="HQ")
    if out.shape[-1] > n_out:
        out = out[:n_out]
    elif out.shape[-1] < n_out:
        out = np.pad(out, (0, n_out - out.shape[-1]))
    return np.asarray(out, dtype=samples.dtype)


def load_audio_like_librosa(
    path: str | Path, sr: int = 22050, max_seconds: float | None = None
) -> np.ndarray:
    """``librosa.load(path, sr=sr)`` (float32, channels averaged, soxr_hq), then cut to ``max_seconds``.

    This is how IndexTTS2's inference reads its prompts: the speaker prompt at librosa's default 22050 Hz,
    the emotion prompt at 16000 Hz, both cut to 15 s after resampling.
    """
    import soundfile

    path = Path(path)
    try:
        data, native_sr = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (OSError, RuntimeError) as exc:  # soundfile raises LibsndfileError (a RuntimeError) on bad files
        raise ValueError(f"cannot read audio {path}: {exc}") from None
    mono = data.mean(axis=1, dtype=np.float32) if data.shape[1] > 1 else data[:, 0]
    mono = np.ascontiguousarray(mono, dtype=np.float32)
    out = soxr_resample(mono, int(native_sr), int(sr))
    if max_seconds is not None:
        out = out[: int(max_seconds * sr)]
    return out
