"""What ``data_tools.preprocess`` reads: audio + transcripts listed in one of three common layouts.

- a JSONL list, one ``{"audio": path, "text": ..., "speaker"?: ..., "id"?: ..., "language"?: ...}``
  per line (paths relative to the list's folder);
- an LJSpeech-style ``metadata.csv`` (``id|text|normalized text``, audio in ``wavs/<id>.wav``); the
  raw transcript (second column) is used, the text front-end normalises it;
- a folder of audio files, each with a ``.txt`` transcript of the same name beside it; a first-level
  subfolder names the speaker (``speaker/utt.wav``).

Entries without a speaker are taken as one speaker named after the input (or ``--speaker``).
Problems with single entries are returned, not raised: one bad line never stops a run.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

AUDIO_SUFFIXES = (".wav", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".au", ".caf", ".w64")
_UNSAFE = re.compile(r"[^\w.\-]+")


class InputError(ValueError):
    """An input that cannot be read at all (one-line message)."""


@dataclass(frozen=True)
class SourceItem:
    id: str  # the manifest id
    stem: str  # file-name-safe form of the id, for codes/<stem>.npy and cond_mels/<stem>.npy
    audio: Path
    text: str
    speaker: str
    language: str | None
    where: str  # input:line or the transcript file, for messages
    source: str = ""  # the recording the clip was cut from (raw ingest's ``source``), so splits keep it together


@dataclass(frozen=True)
class InputProblem:
    where: str
    reason: str


def safe_stem(item_id: str) -> str:
    """A file-name-safe, readable stem for an id (letters of any script, digits, ``._-``)."""
    stem = _UNSAFE.sub("_", item_id).strip("._") or "item"
    return stem[:150]


def read_inputs(path: Path, speaker: str | None = None, language: str | None = None
                ) -> tuple[list[SourceItem], list[InputProblem]]:
    """Items and per-entry problems from a JSONL list, a metadata.csv, or a folder (raises InputError)."""
    path = Path(path)
    if path.is_dir():
        if (path / "metadata.csv").is_file():
            items, problems = _read_ljspeech(path / "metadata.csv", speaker or path.name, language)
        else:
            items, problems = _read_folder(path, speaker, language)
    elif path.is_file():
        if path.suffix.lower() == ".csv":
            items, problems = _read_ljspeech(path, speaker or path.parent.name, language)
        else:
            items, problems = _read_jsonl(path, speaker or path.stem, language)
    else:
        raise InputError(f"{path}: input not found (a JSONL list, a metadata.csv, or a folder of audio + .txt)")
    return _unique(items, problems)


def _unique(items: list[SourceItem], problems: list[InputProblem]) -> tuple[list[SourceItem], list[InputProblem]]:
    seen_ids: dict[str, str] = {}
    seen_stems: dict[str, str] = {}
    out: list[SourceItem] = []
    for item in items:
        if item.id in seen_ids:
            problems.append(InputProblem(item.where, f"duplicate id '{item.id}' (first at {seen_ids[item.id]})"))
            continue
        if item.stem.casefold() in seen_stems:
            problems.append(InputProblem(item.where, f"id '{item.id}' needs the same file name as "
                                                     f"{seen_stems[item.stem.casefold()]}"))
            continue
        seen_ids[item.id] = item.where
        seen_stems[item.stem.casefold()] = item.where
        out.append(item)
    return out, problems


def _list_lines(path: Path, what: str) -> Iterator[tuple[str, str]]:
    """``(path:line, text)`` of each non-blank line of a UTF-8 list file; InputError when it cannot be read."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read {what} ({exc})") from None
    for lineno, raw in enumerate(text.splitlines(), 1):
        if raw.strip():
            yield f"{path}:{lineno}", raw


def _read_jsonl(path: Path, default_speaker: str, language: str | None
                ) -> tuple[list[SourceItem], list[InputProblem]]:
    items: list[SourceItem] = []
    problems: list[InputProblem] = []
    for where, raw in _list_lines(path, "the input list"):
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            problems.append(InputProblem(where, f"malformed JSON ({exc.msg})"))
            continue
        if not isinstance(obj, dict):
            problems.append(InputProblem(where, "expected a JSON object"))
            continue
        audio, transcript = obj.get("audio"), obj.get("text")
        if not isinstance(audio, str) or not audio.strip():
            problems.append(InputProblem(where, "missing 'audio' path"))
            continue
        if not isinstance(transcript, str) or not transcript.strip():
            problems.append(InputProblem(where, "missing or empty 'text'"))
            continue
        audio_path = Path(audio).expanduser()
        if not audio_path.is_absolute():
            audio_path = path.parent / audio_path
        item_id = obj.get("id") if isinstance(obj.get("id"), str) and obj["id"].strip() else audio_path.stem
        spk = obj.get("speaker") if isinstance(obj.get("speaker"), str) and obj["speaker"].strip() else default_speaker
        lang = obj.get("language") if isinstance(obj.get("language"), str) else language
        recording = obj.get("source") if isinstance(obj.get("source"), str) else ""
        items.append(SourceItem(item_id, safe_stem(item_id), audio_path, transcript.strip(), spk, lang, where,
                                recording.strip()))
    return items, problems


def _read_ljspeech(path: Path, speaker: str, language: str | None) -> tuple[list[SourceItem], list[InputProblem]]:
    items: list[SourceItem] = []
    problems: list[InputProblem] = []
    wavs = path.parent / "wavs"
    for where, raw in _list_lines(path, "metadata"):
        parts = raw.split("|")
        if len(parts) < 2 or not parts[0].strip() or not parts[1].strip():
            problems.append(InputProblem(where, "expected 'id|text[|normalized text]'"))
            continue
        item_id = parts[0].strip()
        audio = wavs / f"{item_id}.wav"
        if not audio.exists():
            matches = sorted(p for p in wavs.glob(f"{item_id}.*") if p.suffix.lower() in AUDIO_SUFFIXES)
            audio = matches[0] if matches else audio
        items.append(SourceItem(item_id, safe_stem(item_id), audio, parts[1].strip(), speaker, language, where))
    return items, problems


def _read_folder(root: Path, speaker: str | None, language: str | None) -> tuple[list[SourceItem], list[InputProblem]]:
    items: list[SourceItem] = []
    problems: list[InputProblem] = []
    for audio in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in AUDIO_SUFFIXES):
        relative = audio.relative_to(root)
        transcript = audio.with_suffix(".txt")
        where = str(transcript)
        if not transcript.is_file():
            problems.append(InputProblem(str(audio), f"no transcript {transcript.name} beside the audio"))
            continue
        try:
            text = transcript.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(InputProblem(where, f"unreadable transcript ({exc})"))
            continue
        if not text:
            problems.append(InputProblem(where, "empty transcript"))
            continue
        item_id = "_".join(relative.with_suffix("").parts)
        spk = speaker or (relative.parts[0] if len(relative.parts) > 1 else root.name)
        items.append(SourceItem(item_id, safe_stem(item_id), audio, " ".join(text.split()), spk, language, where))
    if not items and not problems:
        raise InputError(f"{root}: no audio files ({', '.join(AUDIO_SUFFIXES)}) with .txt transcripts found")
    return items, problems
