"""Demo recordings for the Data tab's "Recordings -> clips" (ingest): made without espeak-ng, in well under a second.

``recordings/spk_abebe/story.wav`` with ``story.srt`` beside it: a speech-like sound (a few harmonics with a
syllable rhythm and a falling pitch) for each of six demo sentences, with pauses between them; the subtitles carry
the sentences, so its clips arrive with their Amharic transcripts. ``recordings/spk_abebe/interview.wav`` has no
subtitles: voice activity cuts it, and its clips have no transcript until an ASR model is given (the gates then
say ``no_text``). The sound is not speech: it is there to learn the tool with, like the demo's random weights.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf

from data_tools.fileio import atomic_open, atomic_write_text

RATE = 22_050
SPEAKER = "spk_abebe"
LETTERS_PER_SECOND = 11.0
STORY_SENTENCES = 6
INTERVIEW_PIECES = (2.6, 3.4, 2.2)


def recordings_dir(root: Path) -> Path:
    return Path(root) / "recordings"


def story_sentences(sentences: list[str], count: int = STORY_SENTENCES) -> list[str]:
    """Sentences of a speakable length, without a trailing colon (headings in the demo text)."""
    picked = [s.strip() for s in sentences if 15 <= len(s.strip()) <= 45 and not s.strip().endswith(":")]
    return picked[:count]


def speech_like(seconds: float, seed: int) -> np.ndarray:
    """Five harmonics of one pitch per stretch, loud on each syllable (3.5 a second) and 26 dB down between them.

    (A gliding pitch looks less like speech to silero: it stops hearing it after about 1.5 s.)
    """
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * RATE)) / RATE
    pitch = 120 + 20 * rng.random()
    voice = sum(np.sin(2 * np.pi * pitch * k * t) / k for k in range(1, 6))
    syllables = 0.05 + 0.95 * np.clip(np.sin(2 * np.pi * 3.5 * t), 0, 1)
    return (0.2 * voice * syllables).astype(np.float32)


def _join(pieces: list[float], gaps: list[float], seed: int, lead: float = 0.6) -> tuple[np.ndarray, list[tuple[float, float]]]:
    audio = [np.zeros(int(lead * RATE), dtype=np.float32)]
    spans, position = [], len(audio[0])
    for k, seconds in enumerate(pieces):
        speech = speech_like(seconds, seed + k)
        spans.append((position / RATE, (position + len(speech)) / RATE))
        gap = np.zeros(int(gaps[k % len(gaps)] * RATE), dtype=np.float32)
        audio += [speech, gap]
        position += len(speech) + len(gap)
    noise = np.random.default_rng(seed).normal(0, 1e-4, position).astype(np.float32)  # a room, not digital silence
    return np.concatenate(audio) + noise, spans


def _srt_time(seconds: float) -> str:
    ms = round(seconds * 1000)
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d}"


def _write_wav(path: Path, audio: np.ndarray) -> None:
    with atomic_open(path, "wb") as handle:
        sf.write(handle, audio, RATE, format="WAV", subtype="PCM_16")


def write_demo_recordings(root: Path, sentences: list[str]) -> Path:
    """Write the two demo recordings under ``root/recordings``; returns that folder."""
    folder = recordings_dir(root) / SPEAKER
    texts = story_sentences(sentences)
    lengths = [min(6.0, max(1.6, len(text.replace(" ", "")) / LETTERS_PER_SECOND)) for text in texts]
    story, spans = _join(lengths, [0.9, 1.2], seed=7)
    _write_wav(folder / "story.wav", story)
    cues = [f"{k}\n{_srt_time(start)} --> {_srt_time(end)}\n{text}\n"
            for k, ((start, end), text) in enumerate(zip(spans, texts, strict=True), 1)]
    atomic_write_text(folder / "story.srt", "\n".join(cues))
    interview, _ = _join(list(INTERVIEW_PIECES), [1.0], seed=31)
    _write_wav(folder / "interview.wav", interview)
    return recordings_dir(root)


def demo_recordings_exist(root: Path) -> bool:
    folder = recordings_dir(root) / SPEAKER
    return all((folder / name).is_file() for name in ("story.wav", "story.srt", "interview.wav"))
