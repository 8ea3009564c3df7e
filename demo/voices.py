"""Synthetic voices for the demos: speech-like audio made from a speaker's name and a sentence (no model).

- ``write_demo_audio``: ``<folder>/<speaker>/<utt>.wav`` + ``.txt``: a few seconds of synthetic voiced sound per
  speaker (a pitch and spectral tilt of its own, syllable-like bursts) with real Amharic transcripts, the input
  the Data tab's paired preparation turns into pairs;
- ``write_demo_wavs``: short audio of a demo's validation utterances (the paired generations read audio prompts).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from data_tools.fileio import atomic_write_text
from demo.data import stable_int

SAMPLE_RATE = 24_000
UTTERANCES_PER_SPEAKER = 4


def synthetic_voice(speaker: str, text: str, seconds: float) -> np.ndarray:
    """A voiced, speech-like float32 signal at 24 kHz: the speaker's pitch and tilt, one burst per word."""
    rng = np.random.default_rng(stable_int(f"{speaker}/{text}") % 2**32)
    pitch = 90.0 + stable_int(speaker) % 120
    tilt = 0.55 + (stable_int(speaker + "/tilt") % 30) / 100
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = pitch * (1.0 + 0.05 * np.sin(2 * np.pi * 1.5 * t + rng.uniform(0, np.pi)))
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voiced = sum(tilt**k * np.sin(k * phase) for k in range(1, 12))
    words = max(1, len(text.split()))
    envelope = np.clip(np.sin(np.pi * words * t / seconds), 0.0, None) ** 0.6
    signal = 0.12 * voiced * envelope + 0.003 * rng.standard_normal(t.size)
    return signal.astype(np.float32)


def write_demo_audio(folder: Path, sentences: list[str], speakers: tuple[str, ...]) -> list[Path]:
    """``folder/<speaker>/<utt>.wav`` + ``.txt`` for ``UTTERANCES_PER_SPEAKER`` short sentences per speaker."""
    import soundfile

    short = sorted((s for s in sentences if 2 <= len(s.split()) <= 6), key=lambda s: (len(s), s))
    written = []
    for k, sentence in enumerate(short[: UTTERANCES_PER_SPEAKER * len(speakers)]):
        speaker = speakers[k % len(speakers)]
        wav = folder / speaker / f"{k:02d}.wav"
        wav.parent.mkdir(parents=True, exist_ok=True)
        seconds = min(2.2, 0.6 + 0.25 * len(sentence.split()))
        soundfile.write(str(wav), synthetic_voice(speaker, sentence, seconds), SAMPLE_RATE, subtype="PCM_16")
        atomic_write_text(wav.with_suffix(".txt"), sentence + "\n")
        written.append(wav)
    return written

def write_demo_wavs(folder: Path, utterances: list[dict]) -> None:
    """Short synthetic 24 kHz audio of the utterances (the demo's validation prompts and targets: IndexTTS2 and
    2.5 read audio prompts)."""
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    for utterance in utterances:
        seconds = min(2.0, max(0.8, float(utterance["duration"])))
        audio = synthetic_voice(utterance["speaker"], utterance["text"], seconds)
        soundfile.write(str(folder / f"{utterance['id']}.wav"), audio, SAMPLE_RATE, subtype="PCM_16")
