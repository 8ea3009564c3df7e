"""The S2Mel log-mel of 22.05 kHz audio (IndexTTS2's ``ref_mel``; also BigVGAN v2's input mel).

Reflect-pad (n_fft - hop) / 2 samples on both sides, STFT without centering (periodic Hann window),
magnitude sqrt(re^2 + im^2 + 1e-9), Slaney-scale Slaney-normalised mel filters (librosa's default recipe),
ln(max(mel, 1e-5)). Frames = (N + n_fft - hop - n_fft) // hop + 1. Pure torch; no librosa needed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

LOG_FLOOR = 1e-5
MAGNITUDE_EPS = 1e-9


@dataclass(frozen=True)
class S2MelMelSettings:
    """STFT / mel settings (defaults: IndexTTS2's ``s2mel.preprocess_params``)."""

    sample_rate: int = 22050
    n_fft: int = 1024
    win_length: int = 1024
    hop_length: int = 256
    n_mels: int = 80
    fmin: float = 0.0
    fmax: float | None = None  # None: Nyquist

    @classmethod
    def from_preprocess_params(cls, params: Mapping[str, Any]) -> S2MelMelSettings:
        """From a config's ``s2mel.preprocess_params`` (``fmax`` may be the string "None")."""
        spect = params.get("spect_params")
        if not isinstance(spect, Mapping) or "sr" not in params:
            raise ValueError("config s2mel.preprocess_params needs 'sr' and a 'spect_params' mapping")
        fmax = spect.get("fmax")
        return cls(
            sample_rate=int(params["sr"]),
            n_fft=int(spect["n_fft"]),
            win_length=int(spect["win_length"]),
            hop_length=int(spect["hop_length"]),
            n_mels=int(spect["n_mels"]),
            fmin=float(spect.get("fmin", 0) or 0),
            fmax=None if fmax in (None, "None", "none", "null") else float(fmax),
        )


def _hz_to_slaney_mel(hz: Tensor) -> Tensor:
    linear_step = 200.0 / 3
    log_start_hz = 1000.0
    log_start_mel = log_start_hz / linear_step
    log_step = math.log(6.4) / 27.0
    return torch.where(
        hz >= log_start_hz,
        log_start_mel + torch.log(hz.clamp_min(log_start_hz) / log_start_hz) / log_step,
        hz / linear_step,
    )


def _slaney_mel_to_hz(mel: Tensor) -> Tensor:
    linear_step = 200.0 / 3
    log_start_hz = 1000.0
    log_start_mel = log_start_hz / linear_step
    log_step = math.log(6.4) / 27.0
    return torch.where(
        mel >= log_start_mel, log_start_hz * torch.exp(log_step * (mel - log_start_mel)), mel * linear_step
    )


@functools.cache
def slaney_mel_filters(sample_rate: int, n_fft: int, n_mels: int, fmin: float, fmax: float) -> Tensor:
    """(n_mels, n_fft // 2 + 1) float32 triangles on the Slaney mel scale, scaled to unit area (Slaney norm).

    Computed in float64 and cast, as librosa's ``filters.mel(htk=False, norm="slaney")`` does in effect.
    """
    fft_freqs = torch.linspace(0.0, sample_rate / 2, n_fft // 2 + 1, dtype=torch.float64)
    mel_edges = torch.linspace(
        float(_hz_to_slaney_mel(torch.tensor(fmin, dtype=torch.float64))),
        float(_hz_to_slaney_mel(torch.tensor(fmax, dtype=torch.float64))),
        n_mels + 2,
        dtype=torch.float64,
    )
    hz_edges = _slaney_mel_to_hz(mel_edges)
    widths = hz_edges[1:] - hz_edges[:-1]
    offsets = hz_edges[:, None] - fft_freqs[None, :]  # (n_mels + 2, n_freqs)
    rising = -offsets[:-2] / widths[:-1, None]
    falling = offsets[2:] / widths[1:, None]
    triangles = torch.clamp(torch.minimum(rising, falling), min=0.0)
    area_norm = 2.0 / (hz_edges[2:] - hz_edges[:-2])
    return (triangles * area_norm[:, None]).to(torch.float32)


def s2mel_log_mel(audio: Tensor, settings: S2MelMelSettings | None = None) -> Tensor:
    """Log-mel of (samples,) or (batch, samples) audio at the settings' rate -> (batch, n_mels, frames)."""
    s = settings or S2MelMelSettings()
    if audio.dim() == 1:
        audio = audio.unsqueeze(0)
    if audio.dim() != 2:
        raise ValueError(f"s2mel_log_mel expects (samples,) or (batch, samples), got {tuple(audio.shape)}")
    audio = audio.float() if not torch.is_floating_point(audio) else audio
    pad = (s.n_fft - s.hop_length) // 2
    if audio.shape[-1] <= pad:
        raise ValueError(
            f"audio too short for the S2Mel mel: {audio.shape[-1]} samples; need more than {pad}"
        )
    padded = torch.nn.functional.pad(audio.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    if padded.shape[-1] < s.n_fft:
        raise ValueError(f"audio too short for the S2Mel mel: {audio.shape[-1]} samples give no frame")
    window = torch.hann_window(s.win_length, periodic=True, dtype=padded.dtype, device=padded.device)
    spec = torch.stft(
        padded,
        s.n_fft,
        hop_length=s.hop_length,
        win_length=s.win_length,
        window=window,
        center=False,
        normalized=False,
        onesided=True,
        return_complex=True,
    )
    magnitude = torch.sqrt(spec.real.pow(2) + spec.imag.pow(2) + MAGNITUDE_EPS)
    fmax = s.fmax if s.fmax is not None else s.sample_rate / 2
    filters = slaney_mel_filters(s.sample_rate, s.n_fft, s.n_mels, float(s.fmin), float(fmax))
    mel = torch.matmul(filters.to(device=magnitude.device, dtype=magnitude.dtype), magnitude)
    return torch.log(torch.clamp(mel, min=LOG_FLOOR))
