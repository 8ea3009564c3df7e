"""Voice activity with silero-vad: speech probabilities per 32 ms frame, the audio streamed through.

The model ships inside the silero-vad wheel (works offline). It takes 16 kHz audio in 512-sample frames and
keeps its state between calls, so a recording is fed block by block (resampled by a streaming resampler)
and only the probabilities, 31 floats a second, are kept: an hour needs the memory of one block.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator

import numpy as np
import soxr
import torch

VAD_RATE = 16_000
FRAME = 512
FRAME_SECONDS = FRAME / VAD_RATE


def load_vad():
    """The silero model (TorchScript). Importing silero_vad sets torch to one thread: that is undone here."""
    threads = torch.get_num_threads()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # silero's importlib.resources and jit.load use
            from silero_vad import load_silero_vad

            return load_silero_vad()
    finally:
        torch.set_num_threads(threads)


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """torch at one intra-op thread, the caller's count restored after. A 512-sample frame is far too small to
    share out: under the default count every call pays the threads' hand-offs, and on a busy machine it waits
    for cores other processes hold (31 s of audio: about 30 s at the default, 10 s at one thread, 2 busy cores)."""
    threads = torch.get_num_threads()
    if threads == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


class StreamingVad:
    """Feed mono blocks at ``rate``; ``finish()`` returns one speech probability per 32 ms frame."""

    def __init__(self, model, rate: int) -> None:
        self.model = model
        self.model.reset_states()
        self.resampler = None if rate == VAD_RATE else soxr.ResampleStream(rate, VAD_RATE, 1, dtype="float32",
                                                                            quality="HQ")
        self.pending = np.zeros(0, dtype=np.float32)
        self.probs: list[float] = []

    def feed(self, block: np.ndarray, last: bool = False) -> None:
        audio = block if self.resampler is None else self.resampler.resample_chunk(block, last=last)
        audio = np.concatenate([self.pending, np.asarray(audio, dtype=np.float32)])
        whole = len(audio) // FRAME * FRAME
        if last and whole < len(audio):
            audio = np.concatenate([audio, np.zeros(FRAME - len(audio) % FRAME, dtype=np.float32)])
            whole = len(audio)
        self.pending = audio[whole:]
        frames = torch.from_numpy(np.ascontiguousarray(audio[:whole])).view(-1, FRAME)
        with one_thread(), torch.inference_mode():
            for frame in frames:
                self.probs.append(float(self.model(frame, VAD_RATE)))

    def finish(self) -> np.ndarray:
        self.feed(np.zeros(0, dtype=np.float32), last=True)
        return np.asarray(self.probs, dtype=np.float32)


def speech_probabilities(model, blocks: Iterable[np.ndarray], rate: int) -> np.ndarray:
    vad = StreamingVad(model, rate)
    for block in blocks:
        vad.feed(block)
    return vad.finish()


def speech_regions(probs: np.ndarray, threshold: float = 0.5, min_pause: float = 0.1,
                   min_speech: float = 0.1) -> list[tuple[float, float]]:
    """(start, end) seconds of speech; pauses shorter than ``min_pause`` do not separate regions."""
    from silero_vad import get_speech_timestamps_from_probs

    stamps = get_speech_timestamps_from_probs(
        probs.tolist(), sampling_rate=VAD_RATE, threshold=threshold, min_speech_duration_ms=int(min_speech * 1000),
        min_silence_duration_ms=int(min_pause * 1000), speech_pad_ms=0, audio_length_samples=len(probs) * FRAME)
    return [(stamp["start"] / VAD_RATE, stamp["end"] / VAD_RATE) for stamp in stamps]


def pauses_in(probs: np.ndarray, start: float, end: float, threshold: float = 0.5) -> list[tuple[float, float]]:
    """(start, end) seconds of the runs of non-speech frames strictly inside ``[start, end)``."""
    low = max(threshold - 0.15, 0.01)
    first, last = round(start / FRAME_SECONDS), round(end / FRAME_SECONDS)
    quiet = probs[first:last] < low
    runs: list[tuple[float, float]] = []
    edges = np.flatnonzero(np.diff(np.concatenate([[0], quiet.astype(np.int8), [0]])))
    for run_start, run_end in zip(edges[::2], edges[1::2], strict=True):
        if run_start == 0 or run_end == len(quiet):
            continue  # a pause must have speech on both sides
        runs.append(((first + run_start) * FRAME_SECONDS, (first + run_end) * FRAME_SECONDS))
    return runs
