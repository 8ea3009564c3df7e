"""Speech -> clip spans: pauses of ``min_pause`` or more end a clip; longer speech is cut at its longest
pause, recursively, until every clip (padding included) is at most ``aim_max`` seconds; fragments shorter
than ``min_seconds`` are left out and counted.

Long clips (``long_clips``, for prosody): the sentences are joined into clips of ``aim_min``..``aim_max``
seconds, cut only at sentence ends (a pause of ``min_pause`` or more; for subtitles, a cue whose text ends in
sentence-final punctuation), and the pauses inside a clip can be capped (``max_inner_pause``)."""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from data_tools.ingest.vad import FRAME_SECONDS, pauses_in, speech_regions


@dataclass(frozen=True)
class SliceSettings:
    min_seconds: float = 1.0  # accepted clip length
    max_seconds: float = 20.0
    aim_min: float = 3.0  # what cutting aims for
    aim_max: float = 15.0
    pad: float = 0.2  # silence kept around speech (less where the next speech is closer)
    min_pause: float = 0.4  # a pause at least this long always ends a clip (silero hears ~0.1 s less)
    threshold: float = 0.5  # silero speech probability
    snap: float = 0.5  # how far a subtitle cue's edge may move to the nearest pause
    long_clips: bool = False  # join sentences into clips of aim-min..aim-max, cut only at sentence ends
    max_inner_pause: float | None = None  # pauses inside a clip longer than this are shortened to it (s)

    def check(self) -> None:
        if not 0 < self.min_seconds <= self.aim_min <= self.aim_max <= self.max_seconds:
            raise ValueError(f"clip lengths must satisfy 0 < min ({self.min_seconds}) <= aim-min ({self.aim_min}) "
                             f"<= aim-max ({self.aim_max}) <= max ({self.max_seconds})")
        if self.pad < 0 or self.min_pause <= 0 or self.snap < 0 or not 0 < self.threshold < 1:
            raise ValueError("--pad and --snap must be >= 0, --min-pause > 0, --threshold between 0 and 1")
        if self.aim_max - 2 * self.pad < 2 * FRAME_SECONDS:
            raise ValueError(f"--aim-max {self.aim_max} s leaves no room for speech inside the padding")
        if self.max_inner_pause is not None and self.max_inner_pause < 2 * FRAME_SECONDS:
            raise ValueError(f"--max-inner-pause must be at least {2 * FRAME_SECONDS:g} s")

    def fit_to(self, longest: float) -> SliceSettings:
        """These settings with no clip longer than ``longest`` seconds (a model's limit): the longest accepted
        and aimed-for clip become ``longest`` (to the millisecond below), the shortest ones at most half of it."""
        longest = math.floor(longest * 1000) / 1000
        if self.max_seconds <= longest:
            return self
        aim_max = min(self.aim_max, longest)
        aim_min = min(self.aim_min, round(aim_max / 2, 3))
        return replace(self, max_seconds=longest, aim_max=aim_max, aim_min=aim_min,
                       min_seconds=min(self.min_seconds, aim_min))

    def as_dict(self) -> dict[str, Any]:
        """The settings clips depend on; the later options only when set (older folders stay comparable)."""
        values = asdict(self)
        for name in ("long_clips", "max_inner_pause"):
            if values[name] == getattr(SliceSettings, name):
                del values[name]
        return values


@dataclass(frozen=True)
class Span:
    """A clip: ``start``/``end`` the audio written (padded), ``speech_start``/``speech_end`` the speech."""

    start: float
    end: float
    speech_start: float
    speech_end: float
    text: str | None = None  # a subtitle cue's text
    pauses: tuple[tuple[float, float], ...] = ()  # pauses between the sentences a long clip joins

    def kept(self, cap: float | None) -> list[tuple[float, float]]:
        """The (start, end) seconds written: the whole span, or with each inner pause over ``cap`` shortened to
        ``cap`` (half of it kept after the speech before, half before the speech after)."""
        if cap is None:
            return [(self.start, self.end)]
        pieces, at = [], self.start
        for pause_start, pause_end in self.pauses:
            if pause_end - pause_start > cap:
                pieces.append((at, pause_start + cap / 2))
                at = pause_end - cap / 2
        return [*pieces, (at, self.end)]

    @property
    def seconds(self) -> float:
        return self.end - self.start


def plan_vad_spans(probs: np.ndarray, duration: float, settings: SliceSettings
                   ) -> tuple[list[Span], list[tuple[float, float]]]:
    """Clip spans of a recording from its speech probabilities, and the (start, end) fragments left out."""
    pieces: list[tuple[float, float]] = []
    for start, end in speech_regions(probs, settings.threshold, settings.min_pause):
        pieces.extend(_split(probs, start, min(end, duration), settings))
    if settings.long_clips:  # every pause of min-pause or more ends a sentence: join them into long clips
        return _padded_groups(join_sentences(pieces, [True] * len(pieces), settings), pieces, duration, settings)
    return padded_spans(pieces, duration, settings.pad, settings.min_seconds)


def join_sentences(pieces: list[tuple[float, float]], ends_sentence: list[bool], settings: SliceSettings
                   ) -> list[list[int]]:
    """Consecutive pieces grouped into clips of aim-min..aim-max seconds (padding included), cut only after a
    piece that ends a sentence; at the longest such pause in the window when there is a choice. A group that
    cannot reach aim-min before aim-max is cut at the last sentence end that fits (or where it must)."""
    def pause_after(last: int) -> float:
        return pieces[last + 1][0] - pieces[last][1] if last + 1 < len(pieces) else 1e9

    groups: list[list[int]] = []
    first = 0
    while first < len(pieces):
        lengths = {last: pieces[last][1] - pieces[first][0] + 2 * settings.pad for last in range(first, len(pieces))}
        fits = [last for last, length in lengths.items() if length <= settings.aim_max] or [first]
        ends = [last for last in fits if ends_sentence[last] or last == len(pieces) - 1]
        aimed = [last for last in ends if lengths[last] >= settings.aim_min]
        last = max(aimed, key=pause_after) if aimed else (ends[-1] if ends else fits[-1])
        groups.append(list(range(first, last + 1)))
        first = last + 1
    return groups


def _padded_groups(groups: list[list[int]], pieces: list[tuple[float, float]], duration: float,
                   settings: SliceSettings, texts: list[str | None] | None = None
                   ) -> tuple[list[Span], list[tuple[float, float]]]:
    joined = [(pieces[group[0]][0], pieces[group[-1]][1]) for group in groups]
    spans, left_out = padded_spans(joined, duration, settings.pad, float("-inf"))
    out: list[Span] = []
    for span, group in zip(spans, groups, strict=True):
        pauses = tuple((pieces[a][1], pieces[b][0]) for a, b in itertools.pairwise(group))
        text = " ".join(t for t in (texts[k] for k in group) if t) if texts else None
        joined_span = Span(span.start, span.end, span.speech_start, span.speech_end, text, pauses)
        if joined_span.seconds < settings.min_seconds:
            left_out.append((span.speech_start, span.speech_end))
        else:
            out.append(joined_span)
    return out, left_out


def _split(probs: np.ndarray, start: float, end: float, settings: SliceSettings) -> list[tuple[float, float]]:
    longest = settings.aim_max - 2 * settings.pad
    if end - start <= longest:
        return [(start, end)]
    pauses = pauses_in(probs, start, end, settings.threshold)
    cut = best_pause(pauses, start, end, settings)
    if cut is None:  # no pause at all: cut where the speech is least likely, near the middle
        left, right = _frame(start + (end - start) / 4), _frame(end - (end - start) / 4)
        at = (left + int(np.argmin(probs[left:right]))) * FRAME_SECONDS
        cut = (at, at)
    return _split(probs, start, cut[0], settings) + _split(probs, cut[1], end, settings)


def best_pause(pauses: list[tuple[float, float]], start: float, end: float, settings: SliceSettings
                ) -> tuple[float, float] | None:
    """The longest pause leaving both sides at least aim-min long (else at least min, else any)."""
    speech = lambda seconds: seconds + 2 * settings.pad  # noqa: E731 - the clip length of this much speech
    for shortest in (settings.aim_min, settings.min_seconds, 0.0):
        fitting = [p for p in pauses if speech(p[0] - start) >= shortest and speech(end - p[1]) >= shortest]
        if fitting:
            middle = (start + end) / 2
            return max(fitting, key=lambda p: (round(p[1] - p[0], 3), -abs((p[0] + p[1]) / 2 - middle)))
    return None


def _frame(seconds: float) -> int:
    return round(seconds / FRAME_SECONDS)


def padded_spans(pieces: list[tuple[float, float]], duration: float, pad: float, min_seconds: float
            ) -> tuple[list[Span], list[tuple[float, float]]]:
    spans: list[Span] = []
    left_out: list[tuple[float, float]] = []
    for index, (start, end) in enumerate(pieces):
        before = pieces[index - 1][1] if index else 0.0
        after = pieces[index + 1][0] if index + 1 < len(pieces) else duration
        pad_start = max(0.0, start - min(pad, (start - before) / 2 if index else pad))
        pad_end = min(duration, end + min(pad, (after - end) / 2 if index + 1 < len(pieces) else pad))
        span = Span(round(pad_start, 3), round(pad_end, 3), round(start, 3), round(end, 3))
        if span.seconds < min_seconds:
            left_out.append((span.speech_start, span.speech_end))
        else:
            spans.append(span)
    return spans, left_out


def pad_cues(cues: list[tuple[float, float, str]], duration: float, settings: SliceSettings) -> list[Span]:
    """Subtitle cues (already refined) -> spans padded like VAD clips; their text travels with them."""
    inside = [(start, min(end, duration), text) for start, end, text in cues if start < duration]
    if settings.long_clips:
        pieces = [(start, end) for start, end, _ in inside]
        ends = [ends_sentence(text) for _, _, text in inside]
        groups = join_sentences(pieces, ends, settings)
        return _padded_groups(groups, pieces, duration, settings, [text for _, _, text in inside])[0]
    spans, _ = padded_spans([(start, end) for start, end, _ in inside], duration, settings.pad, float("-inf"))
    return [Span(s.start, s.end, s.speech_start, s.speech_end, text) for s, (_, _, text) in zip(spans, inside,
                                                                                              strict=True)]


SENTENCE_ENDS = ("።", "፧", "?", "!", ".", "…", "؟", "。", "！", "？", '"', "»", "”")


def ends_sentence(text: str | None) -> bool:
    """Whether a caption ends a sentence (Ethiopic full stop and question mark, Latin and others)."""
    return bool(text) and text.rstrip().endswith(SENTENCE_ENDS)
