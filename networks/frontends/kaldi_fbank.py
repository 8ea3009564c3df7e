"""Kaldi-compatible log-mel filterbank, as upstream gets it from ``torchaudio.compliance.kaldi.fbank``.

IndexTTS2 feeds CAMPPlus with this fbank of the 16 kHz prompt (80 bins, dither 0, every other Kaldi option at
its default), minus its per-bin mean over time. Implemented in plain PyTorch (torchaudio is not a dependency),
float32 throughout, step for step in the order Kaldi applies them:

frames of 25 ms every 10 ms with ``snip_edges`` (only whole frames: ``1 + (N - 400) // 160``), per-frame DC
removal, pre-emphasis 0.97 (the first sample is its own predecessor), povey window (non-periodic Hann ** 0.85),
zero padding to the next power of two (512), power spectrum, Kaldi's triangular mel banks (triangles in mel
space, 20 Hz .. Nyquist, no area normalisation, no VTLN warp), natural log with a floor at float32 epsilon.
Energy options stay at their defaults (no energy column), so they change nothing here.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

SAMPLE_RATE = 16000
NUM_MEL_BINS = 80
FRAME_LENGTH_MS = 25.0
FRAME_SHIFT_MS = 10.0
PREEMPHASIS = 0.97
LOW_FREQ_HZ = 20.0
LOG_FLOOR = torch.finfo(torch.float32).eps  # 1.1920929e-07, Kaldi's epsilon


def kaldi_mel(freq: Tensor | float) -> Tensor | float:
    """Kaldi's mel scale: 1127 ln(1 + f / 700)."""
    if isinstance(freq, Tensor):
        return 1127.0 * (1.0 + freq / 700.0).log()
    return 1127.0 * math.log(1.0 + freq / 700.0)


def kaldi_mel_banks(
    num_bins: int, fft_size: int, sample_rate: int, low_freq: float = LOW_FREQ_HZ, high_freq: float = 0.0
) -> Tensor:
    """Triangular filters (num_bins, fft_size // 2 + 1); the Nyquist column is zero, as in Kaldi.

    ``high_freq`` <= 0 counts down from Nyquist (0 = Nyquist itself), Kaldi's convention.
    """
    nyquist = 0.5 * sample_rate
    if high_freq <= 0.0:
        high_freq += nyquist
    if not 0.0 <= low_freq < high_freq <= nyquist:
        raise ValueError(
            f"mel banks need 0 <= low ({low_freq}) < high ({high_freq}) <= Nyquist ({nyquist}) Hz"
        )
    mel_low = kaldi_mel(low_freq)
    mel_step = (kaldi_mel(high_freq) - mel_low) / (num_bins + 1)
    bin_index = torch.arange(num_bins).unsqueeze(1)
    left = mel_low + bin_index * mel_step
    center = mel_low + (bin_index + 1) * mel_step
    right = mel_low + (bin_index + 2) * mel_step
    fft_bin_hz = sample_rate / fft_size
    mel = kaldi_mel(fft_bin_hz * torch.arange(fft_size // 2)).unsqueeze(0)
    rising = (mel - left) / (center - left)
    falling = (right - mel) / (right - center)
    banks = torch.clamp(torch.minimum(rising, falling), min=0.0)
    return torch.nn.functional.pad(banks, (0, 1))


def povey_window(size: int) -> Tensor:
    """Kaldi's default window: a non-periodic Hann window raised to 0.85."""
    return torch.hann_window(size, periodic=False, dtype=torch.float32).pow(0.85)


def kaldi_fbank(waveform: Tensor, sample_rate: int = SAMPLE_RATE, num_mel_bins: int = NUM_MEL_BINS) -> Tensor:
    """Log mel filterbank (frames, num_mel_bins) of one waveform: (N,) or (1, N) float samples.

    Like torchaudio's kaldi.fbank with dither 0 and defaults otherwise; a (C, N) input uses channel 0, as it does.
    """
    if waveform.dim() == 2:
        waveform = waveform[0]
    if waveform.dim() != 1:
        raise ValueError(f"kaldi_fbank wants a waveform (N,) or (1, N), got shape {list(waveform.shape)}")
    window_size = int(sample_rate * FRAME_LENGTH_MS / 1000.0)
    window_shift = int(sample_rate * FRAME_SHIFT_MS / 1000.0)
    if waveform.numel() < window_size:
        raise ValueError(
            f"kaldi_fbank: {waveform.numel()} samples is shorter than one {FRAME_LENGTH_MS:g} ms frame "
            f"({window_size} samples at {sample_rate} Hz)"
        )
    fft_size = 1 << (window_size - 1).bit_length()
    frames = waveform.to(torch.float32).unfold(0, window_size, window_shift)
    frames = frames - frames.mean(dim=1, keepdim=True)
    previous = torch.cat([frames[:, :1], frames[:, :-1]], dim=1)
    frames = frames - PREEMPHASIS * previous
    frames = frames * povey_window(window_size)
    frames = torch.nn.functional.pad(frames, (0, fft_size - window_size))
    power = torch.fft.rfft(frames).abs().pow(2.0)
    banks = kaldi_mel_banks(num_mel_bins, fft_size, sample_rate).to(power.dtype)
    mel_energies = torch.mm(power, banks.T)
    return torch.clamp(mel_energies, min=LOG_FLOOR).log()


def subtract_time_mean(fbank: Tensor) -> Tensor:
    """Per-bin mean over time removed: (frames, bins) -> same shape (upstream's CAMPPlus input normalisation)."""
    return fbank - fbank.mean(dim=0, keepdim=True)


def speaker_fbank(audio_16k: Tensor) -> Tensor:
    """CAMPPlus input for a batch of equal-length 16 kHz waveforms (B, N) or one (N,): (B, frames, 80)."""
    if audio_16k.dim() == 1:
        audio_16k = audio_16k.unsqueeze(0)
    if audio_16k.dim() != 2:
        raise ValueError(
            f"speaker_fbank wants 16 kHz audio (B, N) or (N,), got shape {list(audio_16k.shape)}"
        )
    return torch.stack([subtract_time_mean(kaldi_fbank(row)) for row in audio_16k])
