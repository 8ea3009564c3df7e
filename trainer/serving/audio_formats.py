"""The OpenAI audio API's response formats, written from float waveforms.

``wav``, ``pcm`` and ``mp3`` stream: a header first (wav: sizes left open, as streaming servers write it), then
each sentence's audio as it is spoken. ``flac`` and ``opus`` are written once the whole text is spoken (a FLAC or
Ogg stream cannot be cut into independent pieces). ``pcm`` is what OpenAI's clients expect of it: 16-bit signed
little-endian samples at 24 kHz, mono, no header; Opus takes 48 kHz. Other formats keep the voice's own rate.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from math import gcd

import numpy as np

PCM_RATE = 24_000
OPUS_RATE = 48_000


@dataclass(frozen=True)
class AudioFormat:
    name: str
    media_type: str
    streams: bool  # each sentence is sent as soon as it is spoken


FORMATS: dict[str, AudioFormat] = {f.name: f for f in (
    AudioFormat("wav", "audio/wav", True), AudioFormat("pcm", "audio/pcm", True),
    AudioFormat("mp3", "audio/mpeg", True), AudioFormat("flac", "audio/flac", False),
    AudioFormat("opus", "audio/ogg", False))}


def resample(wave: np.ndarray, rate: int, target: int) -> np.ndarray:
    if rate == target:
        return wave
    from scipy.signal import resample_poly

    common = gcd(rate, target)
    return resample_poly(wave, target // common, rate // common).astype(np.float32)


def _int16(wave: np.ndarray) -> bytes:
    return (np.clip(wave, -1.0, 1.0) * 32767.0).astype("<i2").tobytes()


def open_wav_header(rate: int) -> bytes:
    """A 16-bit mono WAV header whose sizes say "unknown" (0xFFFFFFFF): players read to the end of the stream."""
    unknown = 0xFFFFFFFF
    return (b"RIFF" + struct.pack("<I", unknown) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 1, rate, rate * 2, 2, 16)
            + b"data" + struct.pack("<I", unknown))


def _soundfile_bytes(wave: np.ndarray, rate: int, container: str, subtype: str) -> bytes:
    import soundfile

    buffer = io.BytesIO()
    soundfile.write(buffer, np.clip(wave, -1.0, 1.0), rate, format=container, subtype=subtype)
    return buffer.getvalue()


class StreamWriter:
    """Bytes of one response: ``start()``, then ``add(wave)`` per spoken sentence, then ``finish()``."""

    def __init__(self, fmt: AudioFormat, rate: int) -> None:
        self.fmt, self.rate = fmt, rate
        self.held: list[np.ndarray] = []

    def start(self) -> bytes:
        return open_wav_header(self.rate) if self.fmt.name == "wav" else b""

    def add(self, wave: np.ndarray) -> bytes:
        wave = np.asarray(wave, dtype=np.float32).reshape(-1)
        if self.fmt.name == "wav":
            return _int16(wave)
        if self.fmt.name == "pcm":
            return _int16(resample(wave, self.rate, PCM_RATE))
        if self.fmt.name == "mp3":  # MP3 frames of separate encodes play one after another as one stream
            return _soundfile_bytes(wave, self.rate, "MP3", "MPEG_LAYER_III")
        self.held.append(wave)
        return b""

    def finish(self) -> bytes:
        if not self.held:
            return b""
        whole = np.concatenate(self.held)
        if self.fmt.name == "flac":
            return _soundfile_bytes(whole, self.rate, "FLAC", "PCM_16")
        return _soundfile_bytes(resample(whole, self.rate, OPUS_RATE), OPUS_RATE, "OGG", "OPUS")
