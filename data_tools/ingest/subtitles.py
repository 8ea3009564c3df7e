"""SRT / WebVTT cues -> clip spans: captions repeated across cues merged, edges moved to the nearest pauses.

A file that is not UTF-8 (a legacy encoding), has a broken timestamp, a cue that ends before it starts or
cues that overlap is refused in one line naming the file and the cue; ``encoding`` reads a legacy file.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import srt
import webvtt
from webvtt.errors import MalformedCaptionError, MalformedFileError

OVERLAP_TOLERANCE = 0.05  # seconds two cues may overlap by rounding alone


class SubtitleError(ValueError):
    """A subtitle file that cannot be used (one line: the file, the cue, the reason)."""


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str
    where: str  # "file.srt cue 4", for messages


def read_cues(path: Path, encoding: str | None = None) -> list[Cue]:
    """The cues of an .srt or .vtt file in time order, repeated captions merged (SubtitleError if unusable)."""
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode(encoding or "utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SubtitleError(f"{path}: not UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start}); convert it or "
                            "give its encoding with --subtitle-encoding (e.g. cp1252)") from None
    except LookupError:
        raise SubtitleError(f"{path}: unknown encoding {encoding!r}") from None
    cues = _vtt_cues(path, text) if path.suffix.lower() == ".vtt" else _srt_cues(path, text)
    if not cues:
        raise SubtitleError(f"{path}: no cues in it (an empty subtitle file); remove it to have the recording "
                            "sliced by voice activity")
    for cue in cues:
        if cue.end <= cue.start:
            raise SubtitleError(f"{cue.where}: ends ({cue.end:.3f} s) before it starts ({cue.start:.3f} s)")
    merged = merge_repeats(cues)
    for before, after in itertools.pairwise(merged):
        if after.start < before.end - OVERLAP_TOLERANCE:
            raise SubtitleError(f"{after.where}: starts at {after.start:.3f} s, inside {before.where} "
                                f"(which ends at {before.end:.3f} s): overlapping cues")
    return merged


def check_within(cues: list[Cue], seconds: float, path: Path) -> list[Cue]:
    """The cues, refused in one line when one starts at or after the end of the audio (the wrong recording,
    or subtitles of a longer cut); an end a little past it is clipped to it."""
    for cue in cues:
        if cue.start >= seconds:
            raise SubtitleError(f"{cue.where}: starts at {cue.start:.3f} s, after the end of its audio "
                                f"({seconds:.3f} s): subtitles of another recording?")
    return [Cue(c.start, min(c.end, seconds), c.text, c.where) for c in cues]


def _srt_cues(path: Path, text: str) -> list[Cue]:
    try:
        parsed = list(srt.parse(text))
    except (srt.SRTParseError, ValueError) as exc:
        raise SubtitleError(f"{path}: broken SRT ({' '.join(str(exc).split())[:160]})") from None
    for cue in parsed:  # the srt package is lenient: junk after a time, or a broken cue swallowed as text
        if cue.proprietary.strip() or "-->" in cue.content:
            raise SubtitleError(f"{path} cue {cue.index}: broken SRT timestamp line")
    return [Cue(s.start.total_seconds(), s.end.total_seconds(), _clean(s.content), f"{path} cue {s.index}")
            for s in parsed]


def _vtt_cues(path: Path, text: str) -> list[Cue]:
    try:
        parsed = webvtt.from_string(text, strict=True)
    except (MalformedFileError, MalformedCaptionError, ValueError) as exc:
        raise SubtitleError(f"{path}: broken WebVTT ({' '.join(str(exc).split())[:160]})") from None
    return [Cue(c.start_time.in_milliseconds() / 1000, c.end_time.in_milliseconds() / 1000, _clean(c.text),
                f"{path} cue {k}") for k, c in enumerate(parsed.captions, 1)]


def _clean(text: str) -> str:
    return "\n".join(" ".join(line.split()) for line in text.splitlines() if line.strip())


def merge_repeats(cues: list[Cue]) -> list[Cue]:
    """Rolling captions: lines a cue repeats from the end of the one before are dropped; a cue left with
    nothing new (or the same text again) extends the one before it."""
    merged: list[Cue] = []
    for cue in sorted(cues, key=lambda c: (c.start, c.end)):
        lines = cue.text.splitlines()
        if merged:
            previous = merged[-1].text.splitlines()
            overlap = next((n for n in range(min(len(lines), len(previous)), 0, -1) if previous[-n:] == lines[:n]), 0)
            lines = lines[overlap:]
            if not lines and cue.start <= merged[-1].end + 1.0:
                merged[-1] = Cue(merged[-1].start, max(merged[-1].end, cue.end), merged[-1].text, merged[-1].where)
                continue
            if overlap and cue.start < merged[-1].end:
                cue = Cue(merged[-1].end, cue.end, cue.text, cue.where)  # only the new line is spoken from here
        if lines:
            merged.append(Cue(cue.start, cue.end, "\n".join(lines), cue.where))
    return [Cue(c.start, c.end, " ".join(c.text.split()), c.where) for c in merged]


def refine(cues: list[Cue], regions: list[tuple[float, float]], snap: float) -> list[tuple[float, float, str]]:
    """Each cue's start moved to the nearest speech onset, its end to the nearest speech offset, within
    ``snap`` seconds (kept where none is that close, or where moving would leave nothing)."""
    starts = [start for start, _ in regions]
    ends = [end for _, end in regions]
    out: list[tuple[float, float, str]] = []
    for cue in cues:
        start = _nearest(starts, cue.start, snap)
        end = _nearest(ends, cue.end, snap)
        if end - start <= 0.05:
            start, end = cue.start, cue.end
        if out and start < out[-1][1]:  # two cues snapped onto one pause: they meet there
            start = out[-1][1]
        out.append((start, end, cue.text))
    return out


def _nearest(times: list[float], target: float, snap: float) -> float:
    close = [t for t in times if abs(t - target) <= snap]
    return min(close, key=lambda t: abs(t - target)) if close else target
