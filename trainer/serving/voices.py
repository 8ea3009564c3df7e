"""The voices a server speaks in: reference clips the user registers, by name.

``--voices DIR`` registers every audio file in DIR under its file name without the suffix (``DIR/amina.wav`` is
voice ``amina``); ``--voices-from MANIFEST`` one voice per speaker of a manifest (a project's validation set: the
speaker's first prompt clip); ``--voice NAME=CLIP`` one more. Names are letters, digits, ``-``, ``_`` and ``.``.
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


def speaker_voices(manifest: Path) -> dict[str, Path]:
    """One voice per speaker of a manifest (a project's validation set, any generation's format): the speaker's
    first prompt whose audio is at hand, named after the speaker (characters outside the name rule become ``_``)."""
    from data_tools.manifest import ManifestError, manifest_format
    from data_tools.manifest_entries import iter_entries, prompt_of

    found: dict[str, Path] = {}
    try:
        fmt = manifest_format(manifest)
        for entry in iter_entries(manifest, fmt):
            prompt = None if isinstance(entry, ManifestError) else prompt_of(entry, fmt)
            if prompt is None or prompt.audio is None or not prompt.speaker or not Path(prompt.audio).is_file():
                continue
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", prompt.speaker).lstrip("_.-")[:64] or "speaker"
            found.setdefault(name, Path(prompt.audio).resolve())
    except ManifestError as exc:
        raise VoiceError(f"--voices-from {manifest}: {exc}") from None
    except OSError as exc:
        raise VoiceError(f"--voices-from {manifest}: {exc.strerror or exc}") from None
    return found


def registered_voices(folder: Path | None, specs: list[str], manifest: Path | None = None) -> dict[str, Path]:
    voices = speaker_voices(manifest) if manifest is not None else {}
    voices.update(voices_in(folder) if folder is not None else {})
    for spec in specs:
        name, path = named_voice(spec)
        voices[name] = path
    if not voices:
        raise VoiceError("no voice registered: give --voices DIR (audio clips), --voices-from MANIFEST (its "
                         "speakers' prompts) or --voice NAME=AUDIO")
    return voices


def voice_path(voices: dict[str, Path], requested: object) -> Path:
    """The clip of a requested voice (a name, or OpenAI's ``{"id": name}``); VoiceError naming the known ones."""
    name = requested.get("id") if isinstance(requested, dict) else requested
    if not isinstance(name, str) or name not in voices:
        known = ", ".join(sorted(voices))
        raise VoiceError(f"unknown voice {name!r}: this server has {known}")
    return voices[name]
