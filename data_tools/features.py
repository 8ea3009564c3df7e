"""IndexTTS's log-mel features: the conditioning mel and the DVAE input.

24 kHz mono -> centred STFT (n_fft 1024, hop 256, periodic Hann, reflect padding) -> magnitude
-> 100 HTK-scale triangular mel filters over 0..12 kHz without area normalisation -> ln(max(x, 1e-7)).
Pure torch, so it runs wherever the trainer runs; no torchaudio needed.
"""

from __future__ import annotations

import functools
import math

import torch

SAMPLE_RATE = 24_000
N_FFT = 1024
WIN_LENGTH = 1024
HOP_LENGTH = 256
N_MELS = 100
F_MIN = 0.0
F_MAX = SAMPLE_RATE / 2
LOG_FLOOR = 1e-7


def num_frames(num_samples: int) -> int:
    """Mel frames for ``num_samples`` samples: 1 + floor(samples / hop)."""
    return 1 + num_samples // HOP_LENGTH


def _hz_to_mel(freq: float) -> float:
    return 2595.0 * math.log10(1.0 + freq / 700.0)


@functools.cache
def mel_filterbank(
    n_freqs: int = N_FFT // 2 + 1,
    n_mels: int = N_MELS,
    sample_rate: int = SAMPLE_RATE,
    f_min: float = F_MIN,
    f_max: float = F_MAX,
) -> torch.Tensor:
    """(n_freqs, n_mels) float32 triangular HTK filters, peak 1, no area normalisation.

    Computed in float32 like the reference, so the filter matrix matches it bit for bit.
    """
    bin_freqs = torch.linspace(0.0, sample_rate // 2, n_freqs, dtype=torch.float32)
    mel_points = torch.linspace(_hz_to_mel(f_min), _hz_to_mel(f_max), n_mels + 2, dtype=torch.float32)
    hz_points = 700.0 * (10.0 ** (mel_points / 2595.0) - 1.0)
    widths = hz_points[1:] - hz_points[:-1]
    offsets = hz_points.unsqueeze(0) - bin_freqs.unsqueeze(1)  # (n_freqs, n_mels + 2)
    rising = -offsets[:, :-2] / widths[:-1]
    falling = offsets[:, 2:] / widths[1:]
    return torch.clamp(torch.minimum(rising, falling), min=0.0)


@functools.cache
def _window(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return torch.hann_window(WIN_LENGTH, periodic=True, dtype=dtype, device=device)


@functools.cache
def _filterbank_on(device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    return mel_filterbank().to(device=device, dtype=dtype)


def mel_spectrogram(wav: torch.Tensor) -> torch.Tensor:
    """Log-mel of 24 kHz samples shaped (..., samples) -> (..., 100, 1 + samples // 256).

    Raises ValueError for input shorter than the reflect padding allows (513 samples).
    """
    if wav.dim() == 0:
        raise ValueError("mel_spectrogram expects (..., samples), got a scalar")
    if not torch.is_floating_point(wav):
        wav = wav.to(torch.float32)
    num_samples = wav.shape[-1]
    if num_samples <= N_FFT // 2:
        raise ValueError(
            f"audio too short for the mel features: {num_samples} samples "
            f"({num_samples / SAMPLE_RATE * 1000:.1f} ms); need at least {N_FFT // 2 + 1}"
        )
    leading = wav.shape[:-1]
    flat = wav.reshape(-1, num_samples)
    spec = torch.stft(
        flat,
        n_fft=N_FFT,
        hop_length=HOP_LENGTH,
        win_length=WIN_LENGTH,
        window=_window(flat.device, flat.dtype),
        center=True,
        pad_mode="reflect",
        normalized=False,
        onesided=True,
        return_complex=True,
    ).abs()  # (batch, 513, frames)
    mel = torch.matmul(spec.transpose(1, 2), _filterbank_on(flat.device, flat.dtype)).transpose(1, 2)
    mel = torch.log(torch.clamp(mel, min=LOG_FLOOR))
    return mel.reshape(*leading, N_MELS, mel.shape[-1])


