"""A subtitle cue longer than a clip may be (``--max-seconds``, or the base model's limit) split at the pauses
inside it, its text split where a CTC recogniser's forced alignment puts the words.

The speech of the cue is cut at its longest pause (voice activity), recursively, as the slicer cuts long speech,
until every piece fits or no pause is left; then the recogniser's emissions over the cue's speech align the
cue's words (``align``) and each word goes to the piece its middle falls in. Without a recogniser that can
align (``--asr-model``), when the cue has no pause to cut at, or when a piece would be left with no words, the
cue stays one clip and the gates flag it as too long, as before.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from data_tools.ingest.align import split_words, word_times
from data_tools.ingest.slicing import SliceSettings, Span, best_pause, padded_spans
from data_tools.ingest.sources import read_span
from data_tools.ingest.vad import pauses_in


class Aligner(Protocol):
    """What ``data_tools.asr.CtcAsr`` offers for alignment."""

    blank_id: int
    sample_rate: int

    def emissions(self, wave: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float]: ...

    def word_tokens(self, text: str) -> tuple[list[list[int]], int | None]: ...


def aligner_of(transcriber: Any) -> Aligner | None:
    """The transcriber when it can force-align (a CTC recogniser), else None."""
    return transcriber if callable(getattr(transcriber, "emissions", None)) else None


def speech_pieces(probs: np.ndarray, start: float, end: float, settings: SliceSettings) -> list[tuple[float, float]]:
    """``[start, end)`` of speech cut at its longest pauses until each piece fits ``aim_max`` with its padding
    (a piece with no pause inside is kept whole, however long)."""
    if end - start <= settings.aim_max - 2 * settings.pad:
        return [(start, end)]
    cut = best_pause(pauses_in(probs, start, end, settings.threshold), start, end, settings)
    if cut is None:
        return [(start, end)]
    return speech_pieces(probs, start, cut[0], settings) + speech_pieces(probs, cut[1], end, settings)


def split_long_cues(spans: list[Span], probs: np.ndarray, duration: float, settings: SliceSettings,
                    aligner: Aligner | None, audio: Path, rate: int) -> list[Span]:
    """The spans, each cue over ``max_seconds`` replaced by its pieces when it can be split (module text)."""
    if aligner is None:
        return spans
    out: list[Span] = []
    for span in spans:
        split = _split(span, probs, duration, settings, aligner, audio, rate) if span.seconds > settings.max_seconds \
            and span.text else None
        out += split or [span]
    return out


def _split(span: Span, probs: np.ndarray, duration: float, settings: SliceSettings, aligner: Aligner,
           audio: Path, rate: int) -> list[Span] | None:
    pieces = speech_pieces(probs, span.speech_start, span.speech_end, settings)
    if len(pieces) < 2:
        return None
    wave = read_span(audio, round(span.speech_start * rate), round(span.speech_end * rate), rate, rate)
    log_probs, seconds_per_frame = aligner.emissions(wave, rate)
    words = (span.text or "").split()
    tokens, delimiter = aligner.word_tokens(" ".join(words))
    times = word_times(log_probs, tokens, aligner.blank_id, seconds_per_frame, delimiter)
    if times is None or all(time is None for time in times):
        return None
    cuts = [(before[1] + after[0]) / 2 - span.speech_start for before, after in itertools.pairwise(pieces)]
    texts = split_words(words, times, cuts)
    if not all(texts):
        return None
    padded, _ = padded_spans(pieces, duration, settings.pad, float("-inf"))
    return [Span(max(p.start, span.start), min(p.end, span.end), p.speech_start, p.speech_end, text)
            for p, text in zip(padded, texts, strict=True)]
