"""Long recordings with known sentence times: espeak-ng Amharic sentences joined by known silences."""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

REPO = Path(__file__).resolve().parents[1]
SENTENCES = REPO / "demo" / "assets" / "amharic_sentences.txt"


def amharic_sentences(count: int, start: int = 0) -> list[str]:
    """Demo sentences of Ethiopic letters and spaces only (punctuation makes espeak pause inside a sentence)."""
    lines = [line.strip() for line in SENTENCES.read_text(encoding="utf-8").splitlines()]
    plain = [line for line in lines if len(line) >= 12 and all(ch == " " or "\u1200" <= ch <= "\u135a" for ch in line)]
    return plain[start:start + count]


def speak_sentence(espeak: str, text: str, voice: str = "am", speed: int = 170) -> tuple[np.ndarray, int]:
    """One sentence, its leading and trailing silence trimmed (so its edges are the truth)."""
    with tempfile.TemporaryDirectory() as tmp:
        wav = Path(tmp) / "s.wav"
        subprocess.run([espeak, "-v", voice, "-s", str(speed), "-w", str(wav), text], check=True,
                       capture_output=True, timeout=60)
        audio, rate = sf.read(str(wav), dtype="float32")
    loud = np.flatnonzero(np.abs(audio) > 0.02 * np.abs(audio).max())
    return audio[loud[0]:loud[-1] + 1], rate


@dataclass
class Recording:
    path: Path
    rate: int
    sentences: list[tuple[float, float, str]]  # (start, end, text) of each sentence's speech

    @property
    def edges(self) -> list[float]:
        return [t for start, end, _ in self.sentences for t in (start, end)]


def build_recording(espeak: str, path: Path, texts: list[str], gaps: list[float], lead: float = 0.7,
                    noise: float = 0.0, seed: int = 0, voices: tuple[str, ...] = ("am",)) -> Recording:
    """``texts`` spoken one after another with ``gaps[k]`` seconds of silence after sentence k, sentence k in
    ``voices[k % len(voices)]`` (an espeak-ng voice, e.g. ``am+f3``)."""
    rng = np.random.default_rng(seed)
    pieces: list[np.ndarray] = []
    sentences: list[tuple[float, float, str]] = []
    rate = 0
    position = 0
    for k, text in enumerate(texts):
        audio, rate = speak_sentence(espeak, text, voices[k % len(voices)])
        if not pieces:
            pieces.append(np.zeros(int(lead * rate), dtype=np.float32))
            position = len(pieces[0])
        sentences.append((position / rate, (position + len(audio)) / rate, text))
        pieces.append(audio)
        gap = np.zeros(int(gaps[k % len(gaps)] * rate), dtype=np.float32)
        pieces.append(gap)
        position += len(audio) + len(gap)
    signal = np.concatenate(pieces)
    if noise:
        signal = signal + rng.normal(0, noise, len(signal)).astype(np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), signal, rate, subtype="PCM_16")
    return Recording(path, rate, sentences)


def srt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3600000:02d}:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def write_srt(path: Path, cues: list[tuple[float, float, str]], encoding: str = "utf-8") -> None:
    blocks = [f"{k}\n{srt_time(s)} --> {srt_time(e)}\n{text}\n" for k, (s, e, text) in enumerate(cues, 1)]
    path.write_bytes("\n".join(blocks).encode(encoding))


def write_vtt(path: Path, cues: list[tuple[float, float, str]]) -> None:
    blocks = [f"{srt_time(s).replace(',', '.')} --> {srt_time(e).replace(',', '.')}\n{text}\n" for s, e, text in cues]
    path.write_text("WEBVTT\n\n" + "\n".join(blocks), encoding="utf-8")


class EnergyVad:
    """A stand-in for silero (same call shape): speech where a 32 ms frame's RMS passes ``level``."""

    def __init__(self, level: float = 0.01) -> None:
        self.level = level

    def reset_states(self) -> None:
        pass

    def __call__(self, frame, rate: int) -> float:
        return 1.0 if float(frame.square().mean().sqrt()) > self.level else 0.0


@dataclass
class FakeTranscript:
    text: str
    confidence: float


class FakeAsr:
    """A stand-in for data_tools.asr: the same answer for every clip, counting what it was asked."""

    WORDS = ("ሰላም", "ለዓለም", "እንዴት", "ናችሁ", "ዛሬ", "ጥሩ", "ቀን", "ነው", "ነገ", "እንገናኝ")

    def __init__(self, confidence: float = 0.9) -> None:
        self.confidence, self.calls = confidence, 0

    def transcribe(self, waves, sample_rate: int, batch_size: int = 8) -> list[FakeTranscript]:
        assert all(w.ndim == 1 and len(w) for w in waves) and sample_rate >= 22050
        out = []
        for wave in waves:  # a different sentence for each clip length, so no two clips read the same
            words = int(len(wave) / sample_rate * 2) + 1
            out.append(FakeTranscript(" ".join(self.WORDS[(self.calls + k) % 10] for k in range(words)) +
                                      f" {self.calls}", self.confidence))
            self.calls += 1
        return out


def tone_speech(seconds: float, rate: int, seed: int = 0) -> np.ndarray:
    """A voice-like signal (a few harmonics with a syllable rhythm), for tests that need no espeak."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = 120 + 20 * rng.random()
    voice = sum(np.sin(2 * np.pi * f0 * k * t) / k for k in range(1, 6))
    syllables = 0.05 + 0.95 * np.clip(np.sin(2 * np.pi * 3.5 * t), 0, 1)  # dips 26 dB down between syllables
    return (0.2 * voice * syllables).astype(np.float32)


def tone_recording(path: Path, pieces: list[float], gaps: list[float], rate: int = 24000, lead: float = 0.5,
                   seed: int = 0) -> Recording:
    """Speech-like pieces of the given lengths separated by silent gaps (truth times recorded)."""
    audio = [np.zeros(int(lead * rate), dtype=np.float32)]
    sentences, position = [], len(audio[0])
    for k, seconds in enumerate(pieces):
        speech = tone_speech(seconds, rate, seed + k)
        sentences.append((position / rate, (position + len(speech)) / rate, f"piece {k}"))
        gap = np.zeros(int(gaps[k % len(gaps)] * rate), dtype=np.float32)
        audio += [speech, gap]
        position += len(speech) + len(gap)
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), np.concatenate(audio), rate, subtype="PCM_16")
    return Recording(path, rate, sentences)


def encode_media(path: Path, audio: np.ndarray | None, rate: int, video_seconds: float = 0.0,
                 codec: str | None = None) -> Path:
    """A container (mp4, mkv, webm, m4a, ...) written with PyAV: ``audio`` (mono float32) as its audio track,
    and ``video_seconds`` of a tiny moving picture when asked (``audio=None``: a video-only file)."""
    import av

    codecs = {".mp4": "aac", ".m4a": "aac", ".mkv": "flac", ".webm": "libopus", ".opus": "libopus",
              ".mka": "flac"}
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        video = None
        if video_seconds:
            video = container.add_stream("mpeg4" if path.suffix != ".webm" else "libvpx", rate=10)
            video.width, video.height, video.pix_fmt = 32, 32, "yuv420p"
        sound = None
        if audio is not None:
            name = codec or codecs.get(path.suffix.lower(), "aac")
            sound_rate = 48000 if name == "libopus" else rate
            sound = container.add_stream(name, rate=sound_rate, layout="mono")
            if sound_rate != rate:
                audio = soxr_resample(audio, rate, sound_rate)
        if video is not None:
            for k in range(int(video_seconds * 10)):
                picture = np.full((32, 32, 3), (k * 9) % 255, dtype=np.uint8)
                for packet in video.encode(av.VideoFrame.from_ndarray(picture, format="rgb24")):
                    container.mux(packet)
            for packet in video.encode():
                container.mux(packet)
        if sound is not None:
            frame_size = 960 if sound.codec_context.name == "libopus" else 1024
            fmt = sound.codec_context.format.name
            for first in range(0, len(audio), frame_size):
                piece = audio[first:first + frame_size]
                frame = av.AudioFrame.from_ndarray(_planar(piece, fmt), format=fmt, layout="mono")
                frame.sample_rate = sound.codec_context.sample_rate
                frame.pts = first
                for packet in sound.encode(frame):
                    container.mux(packet)
            for packet in sound.encode():
                container.mux(packet)
    return path


def _planar(piece: np.ndarray, fmt: str) -> np.ndarray:
    if fmt.startswith("s16"):
        return (np.clip(piece, -1, 32767 / 32768) * 32768).astype(np.int16).reshape(1, -1)
    if fmt.startswith("s32"):
        return (np.clip(piece, -1, 1) * 2147483647).astype(np.int32).reshape(1, -1)
    return piece.astype(np.float32).reshape(1, -1)


def soxr_resample(audio: np.ndarray, rate: int, to_rate: int) -> np.ndarray:
    import soxr

    return soxr.resample(audio, rate, to_rate).astype(np.float32)


def tiny_campplus(path: Path, seed: int = 0) -> Path:
    """A shrunk CAM++ state dict with random weights (the real one's layout), saved as a plain .bin."""
    import torch

    from networks.campplus import CAMPPlus

    torch.manual_seed(seed)
    model = CAMPPlus(embedding_size=32, growth_rate=8, bn_size=2, init_channels=16).eval()
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return path


def tiny_demucs(path: Path, seed: int = 0) -> Path:
    """A tiny HTDemucs (stems ``other`` and ``vocals``, random weights) in demucs' own file format: its class,
    arguments and state in one ``.th`` (what ``demucs.states.load_model`` reads)."""
    import torch
    from demucs.htdemucs import HTDemucs

    torch.manual_seed(seed)
    model = HTDemucs(sources=["other", "vocals"], audio_channels=2, channels=4, depth=2, nfft=512, t_layers=1,
                     t_heads=1, samplerate=16000, segment=4, dconv_comp=2)
    args, kwargs = model._init_args_kwargs
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"klass": HTDemucs, "args": args, "kwargs": kwargs, "state": model.state_dict(),
                "training_args": {}}, path)
    return path
