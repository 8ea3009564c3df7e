"""Mel features: parity with IndexTTS's extractor (fixture from the reference implementation)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from data_tools.audio import AudioError, load_audio
from data_tools.features import HOP_LENGTH, mel_filterbank, mel_spectrogram, num_frames

FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="module")
def mel_expected() -> dict[str, torch.Tensor]:
    return torch.load(FIXTURES / "mel_expected.pt", weights_only=True)


def test_log_mel_matches_reference(mel_expected: dict[str, torch.Tensor]) -> None:
    mel = mel_spectrogram(mel_expected["wav"])
    assert mel.shape == (1, 100, 94)
    torch.testing.assert_close(mel, mel_expected["mel"], atol=1e-4, rtol=1e-4)


def test_filterbank_matches_reference(mel_expected: dict[str, torch.Tensor]) -> None:
    torch.testing.assert_close(mel_filterbank(), mel_expected["mel_filterbank"], atol=1e-6, rtol=0)


def test_leading_dims_and_frame_count(mel_expected: dict[str, torch.Tensor]) -> None:
    wav = mel_expected["wav"][0]
    unbatched = mel_spectrogram(wav)
    assert unbatched.shape == (100, num_frames(wav.numel()))
    batched = mel_spectrogram(torch.stack([wav, wav * 0.5]).unsqueeze(0))
    assert batched.shape == (1, 2, 100, 94)
    torch.testing.assert_close(batched[0, 0], unbatched)
    # Halving the amplitude shifts every unfloored log-mel bin by ln(0.5).
    torch.testing.assert_close(batched[0, 1], unbatched + math.log(0.5), atol=1e-4, rtol=0)


def test_silence_hits_the_log_floor() -> None:
    mel = mel_spectrogram(torch.zeros(HOP_LENGTH * 10))
    assert torch.all(mel == torch.log(torch.tensor(1e-7)))


def test_too_short_audio_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="too short"):
        mel_spectrogram(torch.zeros(100))


def test_load_audio_resamples_and_downmixes(tmp_path: Path) -> None:
    import soundfile as sf

    rate = 16_000
    t = np.arange(rate) / rate
    left = 0.5 * np.sin(2 * np.pi * 440 * t)
    stereo = np.stack([left, np.zeros_like(left)], axis=1)
    path = tmp_path / "tone.flac"
    sf.write(path, stereo, rate)
    samples = load_audio(path)
    assert samples.dtype == np.float32
    assert abs(samples.size - 24_000) <= 1
    # Mono is the mean of the channels: peak 0.25; the resampler keeps the tone at 440 Hz.
    assert 0.23 < np.abs(samples[1000:-1000]).max() < 0.27
    spectrum = np.abs(np.fft.rfft(samples))
    assert abs(np.argmax(spectrum) * 24_000 / samples.size - 440) < 2


def test_load_audio_reports_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "bad.wav"
    bad.write_bytes(b"RIFF not really a wav")
    with pytest.raises(AudioError, match="unreadable audio"):
        load_audio(bad)
    with pytest.raises(AudioError, match="not found"):
        load_audio(tmp_path / "missing.wav")
