"""What an input holds, and its audio read in bounded pieces (an hour of 48 kHz never sits in memory).

Inputs (``find_sources``):

- a folder: each recording becomes a source: wav, flac, ogg, mp3 read by libsndfile, video and other audio
  containers (mp4, mkv, webm, m4a, opus, aac, ...) decoded by PyAV (``media``). One with a
  ``.txt`` beside it is a finished clip with its transcript; one with a ``.srt`` or ``.vtt`` beside it is
  cut at its cues; any other is sliced by voice activity. A file name that is not UTF-8 is refused by name.
- an LJSpeech ``metadata.csv`` (``id|text|...``, audio in ``wavs/``): finished clips with transcripts.

The speaker is ``--speaker``, else a folder level under the input (``speaker_level``: 1 = the first
subfolder), else a metadata column (``speaker_column``), else the input's name.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from data_tools.audio import AudioError, error_reason, read_header

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".mp3")
# read with PyAV (FFmpeg's decoders), decoded block by block: video files' audio tracks and what libsndfile lacks
CONTAINER_SUFFIXES = (".opus", ".m4a", ".aac", ".wma", ".mp4", ".webm", ".mkv", ".mov", ".amr", ".ac3", ".ape",
                      ".aiff", ".aif", ".alac", ".3gp", ".avi", ".flv", ".m4v", ".mka", ".ts", ".wmv")
SUBTITLE_SUFFIXES = (".srt", ".vtt")
ORIGIN_SUFFIX = ".source.json"  # beside a recording fetched from a link: where it came from (``links``)
MIN_SOURCE_RATE = 16_000
STANDARD_RATES = (22_050, 24_000, 32_000, 44_100, 48_000)
BLOCK_SECONDS = 30.0
_UNSAFE = re.compile(r"[^\w.\-]+")


class SourceError(ValueError):
    """An input (or one recording of it) that cannot be used; one line naming the file and the reason."""


@dataclass(frozen=True)
class Source:
    id: str  # file-name-safe, unique in the input: the folder path and stem joined by "_"
    audio: Path
    speaker: str
    kind: str  # "recording" (VAD slicing), "subtitled" (cut at cues), "transcribed" (one finished clip)
    subtitles: Path | None = None
    text: str | None = None
    origin_url: str | None = None  # a fetched recording's link (its .source.json), None for a local file
    licence: str | None = None


@dataclass(frozen=True)
class Problem:
    where: str
    reason: str

    def line(self) -> str:
        return f"{self.where}: {self.reason}" if self.where else self.reason


def utf8_name(path: Path) -> bool:
    """False for a name whose bytes are not UTF-8 (Python holds them as lone surrogates: unwritable as text)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(path: Path) -> str:
    """A path as text that can be printed and saved: bytes that are not UTF-8 shown as ``\\xe9``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def safe_name(text: str) -> str:
    return (_UNSAFE.sub("_", text).strip("._") or "item")[:150]


def find_sources(path: Path, speaker: str | None = None, speaker_level: int = 1,
                 speaker_column: int | None = None) -> tuple[list[Source], list[Problem]]:
    """The sources of an input folder or metadata.csv, and the entries that were refused (SourceError if none)."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".csv":
        return _metadata_sources(path, speaker, speaker_column)
    if path.is_dir() and (path / "metadata.csv").is_file():
        return _metadata_sources(path / "metadata.csv", speaker, speaker_column)
    if not path.is_dir():
        raise SourceError(f"{path}: input not found (a folder of recordings or clips, or a metadata.csv)")
    sources: list[Source] = []
    problems: list[Problem] = []
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
        suffix = file.suffix.lower()
        if suffix not in AUDIO_SUFFIXES and suffix not in CONTAINER_SUFFIXES:
            continue
        relative = file.relative_to(path)
        if not utf8_name(relative):
            problems.append(Problem(printable(file), "file name is not valid UTF-8 (rename it, e.g. with "
                                                     "convmv -f latin1 -t utf8)"))
            continue
        source_id = safe_name("_".join(relative.with_suffix("").parts))
        who = speaker or _folder_speaker(relative, speaker_level) or path.name
        transcript = file.with_suffix(".txt")
        subtitles = next((file.with_suffix(s) for s in SUBTITLE_SUFFIXES if file.with_suffix(s).is_file()), None)
        origin = read_origin(file) or {}
        fetched = {"origin_url": origin.get("url"), "licence": origin.get("licence")}
        if transcript.is_file():
            try:
                text = " ".join(transcript.read_text(encoding="utf-8-sig").split())
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(Problem(str(transcript), f"unreadable transcript ({error_reason(exc)})"))
                continue
            sources.append(Source(source_id, file, who, "transcribed", text=text, **fetched))
        elif subtitles is not None:
            sources.append(Source(source_id, file, who, "subtitled", subtitles=subtitles, **fetched))
        else:
            sources.append(Source(source_id, file, who, "recording", **fetched))
    if not sources and not problems:
        raise SourceError(f"{path}: no recordings found ({', '.join(AUDIO_SUFFIXES + CONTAINER_SUFFIXES)})")
    kept, clashes = unique_sources(sources)
    return kept, problems + clashes


def _folder_speaker(relative: Path, level: int) -> str | None:
    folders = relative.parts[:-1]
    return folders[level - 1] if level >= 1 and len(folders) >= level else None


def _metadata_sources(path: Path, speaker: str | None, speaker_column: int | None
                      ) -> tuple[list[Source], list[Problem]]:
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise SourceError(f"{path}: cannot read the metadata ({error_reason(exc)})") from None
    wavs = path.parent / "wavs"
    sources: list[Source] = []
    problems: list[Problem] = []
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        where = f"{path}:{number}"
        fields = raw.split("|")
        if len(fields) < 2 or not fields[0].strip() or not fields[1].strip():
            problems.append(Problem(where, "expected 'id|text[|...]'"))
            continue
        who = speaker or path.parent.name
        if speaker_column is not None:
            if len(fields) <= speaker_column or not fields[speaker_column].strip():
                problems.append(Problem(where, f"no speaker in column {speaker_column}"))
                continue
            who = fields[speaker_column].strip()
        item = fields[0].strip()
        audio = wavs / f"{item}.wav"
        if not audio.exists():
            audio = next((p for p in sorted(wavs.glob(f"{item}.*")) if p.suffix.lower() in AUDIO_SUFFIXES + CONTAINER_SUFFIXES),
                         audio)
        sources.append(Source(safe_name(item), audio, who, "transcribed", text=" ".join(fields[1].split())))
    kept, clashes = unique_sources(sources)
    return kept, problems + clashes


def unique_sources(sources: list[Source]) -> tuple[list[Source], list[Problem]]:
    """The sources with distinct ids (case-blind: clip files share one folder), and one problem per clash."""
    seen: dict[str, Source] = {}
    kept = []
    problems: list[Problem] = []
    for source in sources:
        key = source.id.casefold()
        if key in seen:
            problems.append(Problem(str(source.audio), f"same name as {seen[key].audio} ({source.id})"))
            continue
        seen[key] = source
        kept.append(source)
    return kept, problems


def read_origin(media: Path) -> dict | None:
    """The ``<name>.source.json`` a fetched recording has beside it (``links``); None for a local file."""
    import json

    try:
        value = json.loads(media.with_name(media.stem + ORIGIN_SUFFIX).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


# ----- audio, streamed -----------------------------------------------------------------------------


@dataclass(frozen=True)
class AudioInfo:
    frames: int
    rate: int
    channels: int
    declared_frames: int | None = None  # more than ``frames`` when the header promises audio the file lacks

    @property
    def seconds(self) -> float:
        return self.frames / self.rate


def clip_rate(source_rate: int) -> int:
    """The rate clips are stored at: the source's when standard, else the nearest standard rate above it."""
    if source_rate in STANDARD_RATES:
        return source_rate
    return next((rate for rate in STANDARD_RATES if rate >= source_rate), STANDARD_RATES[-1])


def audio_info(path: Path) -> AudioInfo:
    """Header facts; SourceError for what cannot be sliced (unreadable, empty, a rate below 16 kHz)."""
    if Path(path).is_file() and Path(path).stat().st_size == 0:
        raise SourceError(f"{path}: empty file (0 bytes)")
    try:
        info = read_header(Path(path))
    except AudioError as exc:
        raise SourceError(str(exc)) from None
    if info.frames <= 0:
        raise SourceError(f"{path}: no audio in it (zero length)")
    if info.samplerate < MIN_SOURCE_RATE:
        raise SourceError(f"{path}: sample rate {info.samplerate} Hz is too low for TTS training "
                          f"(at least {MIN_SOURCE_RATE} Hz)")
    declared = declared_wav_frames(Path(path))
    return AudioInfo(int(info.frames), int(info.samplerate), int(info.channels),
                     declared if declared is not None and declared > info.frames else None)


def declared_wav_frames(path: Path) -> int | None:
    """The frames a RIFF/WAVE header's data chunk declares (None: not a WAV, or a size left open by a
    streaming writer). libsndfile trusts the file's length instead, so a cut-off WAV reads as whole."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
            if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
                return None
            block_align = 0
            while chunk := handle.read(8):
                if len(chunk) < 8:
                    return None
                name, size = chunk[:4], struct.unpack("<I", chunk[4:])[0]
                if name == b"fmt ":
                    fmt = handle.read(size + size % 2)
                    block_align = struct.unpack("<H", fmt[12:14])[0] if len(fmt) >= 14 else 0
                elif name == b"data":
                    if not block_align or size in (0, 0xFFFFFFFF):
                        return None
                    return size // block_align
                else:
                    handle.seek(size + size % 2, os.SEEK_CUR)
    except OSError:
        return None
    return None


def stream_blocks(path: Path, block_seconds: float = BLOCK_SECONDS) -> Iterator[np.ndarray]:
    """Mono float32 blocks of ``block_seconds`` at the file's own rate, front to back."""
    try:
        with sf.SoundFile(str(path)) as handle:
            block = max(1, int(block_seconds * handle.samplerate))
            while True:
                data = handle.read(block, dtype="float32", always_2d=True)
                if not len(data):
                    return
                yield _mono(data)
    except (sf.LibsndfileError, RuntimeError) as exc:
        raise SourceError(f"{path}: audio breaks off ({error_reason(exc)})") from None


def read_span(path: Path, start: int, stop: int, rate: int, out_rate: int) -> np.ndarray:
    """Mono float32 samples ``[start, stop)`` (source frames), resampled to ``out_rate`` when it differs."""
    try:
        with sf.SoundFile(str(path)) as handle:
            handle.seek(start)
            data = _mono(handle.read(stop - start, dtype="float32", always_2d=True))
    except (sf.LibsndfileError, RuntimeError) as exc:
        raise SourceError(f"{path}: audio breaks off near {start / rate:.2f} s ({error_reason(exc)})") from None
    if out_rate != rate:
        data = soxr.resample(data, rate, out_rate, quality="HQ").astype(np.float32)
    return data


def _mono(data: np.ndarray) -> np.ndarray:
    mono = data.mean(axis=1) if data.shape[1] > 1 else data[:, 0]
    return np.nan_to_num(np.ascontiguousarray(mono, dtype=np.float32), nan=0.0, posinf=0.0, neginf=0.0)


