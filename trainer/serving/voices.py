"""The voices a server speaks in: reference clips the user registers, by name.

``--voices DIR`` registers every audio file in DIR under its file name without the suffix (``DIR/amina.wav`` is
voice ``amina``); ``--voice NAME=CLIP`` one more. Names are letters, digits, ``-``, ``_`` and ``.``.
"""

from __future__ import annotations

import re
from pathlib import Path

AUDIO_SUFFIXES = (".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a")
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class VoiceError(ValueError):
    """A voice that cannot be registered or is not known: one line."""


def voices_in(folder: Path) -> dict[str, Path]:
    if not folder.is_dir():
        raise VoiceError(f"voices folder not found: {folder}")
    found = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix.lower() in AUDIO_SUFFIXES and NAME.match(path.stem):
            found[path.stem] = path.resolve()
    return found


def named_voice(spec: str) -> tuple[str, Path]:
    """``NAME=CLIP`` -> (name, clip)."""
    name, sep, clip = spec.partition("=")
    if not sep or not NAME.match(name.strip()) or not clip.strip():
        raise VoiceError(f"--voice must be NAME=AUDIO with a name of letters, digits, - _ . (got {spec!r})")
    path = Path(clip.strip()).expanduser()
    if not path.is_file():
        raise VoiceError(f"voice {name.strip()}: audio not found: {path}")
    if path.suffix.lower() not in AUDIO_SUFFIXES:
        raise VoiceError(f"voice {name.strip()}: {path.name} is not audio ({', '.join(AUDIO_SUFFIXES)})")
    return name.strip(), path.resolve()


def registered_voices(folder: Path | None, specs: list[str]) -> dict[str, Path]:
    voices = voices_in(folder) if folder is not None else {}
    for spec in specs:
        name, path = named_voice(spec)
        voices[name] = path
    if not voices:
        raise VoiceError("no voice registered: give --voices DIR (audio clips) or --voice NAME=AUDIO")
    return voices


def voice_path(voices: dict[str, Path], requested: object) -> Path:
    """The clip of a requested voice (a name, or OpenAI's ``{"id": name}``); VoiceError naming the known ones."""
    name = requested.get("id") if isinstance(requested, dict) else requested
    if not isinstance(name, str) or name not in voices:
        known = ", ".join(sorted(voices))
        raise VoiceError(f"unknown voice {name!r}: this server has {known}")
    return voices[name]
