"""Reading a toy codes line (``format.py`` names its fields), and writing one from an IndexTTS-1.5 codes line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from data_tools.manifest import ManifestError, resolve_path, string_field
from data_tools.shape_rules import valid_duration
from generations.indextts15.data.manifest import ManifestEntry
from tests.toy_generation.data.format import DURATION_FIELD, OPTIONAL_FIELDS, REQUIRED_FIELDS

# an IndexTTS-1.5 codes field -> the toy's field of the same meaning (the prompt is either of two 1.5 fields)
FROM_CODES = {"id": "uid", "text": "sentence", "codes": "tokens_file", "cond_mel": "voice_file",
              "cond_audio": "voice_file", "speaker": "talker", "language": "lang", "duration": DURATION_FIELD}


def parse_toy_object(obj: dict, manifest: Path, lineno: int, default_language: str | None = None) -> ManifestEntry:
    """A toy line as the codes entry IndexTTS-1.5's items are made from; ManifestError (``file:line: what``)."""
    uid, sentence, tokens, voice = (string_field(obj, key, manifest, lineno, required=True) or ""
                                    for key in REQUIRED_FIELDS)
    talker, lang = (string_field(obj, key, manifest, lineno) for key in OPTIONAL_FIELDS)
    for key, value in zip(REQUIRED_FIELDS, (uid, sentence, tokens, voice), strict=True):
        if not value.strip():
            raise ManifestError(manifest, lineno, f"empty '{key}'" + (f" (uid {uid})" if uid.strip() else ""))
    seconds = obj.get(DURATION_FIELD)
    if seconds is not None and valid_duration(seconds) is None:
        raise ManifestError(manifest, lineno, f"field '{DURATION_FIELD}' must be a number of seconds")
    voice_path = resolve_path(manifest.parent, voice, manifest, lineno, "voice_file")
    is_mel = voice_path.suffix == ".npy"
    return ManifestEntry(id=uid, text=sentence, codes=resolve_path(manifest.parent, tokens, manifest, lineno,
                                                                   "tokens_file"),
                         cond_mel=voice_path if is_mel else None, cond_audio=None if is_mel else voice_path,
                         speaker=talker, language=lang or default_language,
                         duration=None if seconds is None else valid_duration(seconds), manifest=manifest, line=lineno)


def toy_line(codes_line: dict[str, Any]) -> dict[str, Any]:
    """An IndexTTS-1.5 codes line spelt as a toy line (its paths kept as they are written)."""
    return {toy: codes_line[key] for key, toy in FROM_CODES.items() if codes_line.get(key)}


def convert_codes_manifest(source: Path, target: Path) -> Path:
    """Write ``source`` (an IndexTTS-1.5 codes manifest) to ``target`` as a toy manifest, line for line."""
    lines = [json.loads(raw) for raw in source.read_text(encoding="utf-8").splitlines() if raw.strip()]
    text = "".join(json.dumps(toy_line(line), ensure_ascii=False) + "\n" for line in lines)
    target.write_text(text, encoding="utf-8")
    return target
