"""IndexTTS-1.5's codes manifest: one JSON object per line, the data its GPT trains on.

Fields (README "Codes manifest" documents them for users):

- ``id`` (str, required): unique utterance id.
- ``text`` (str, required): the transcript, raw; the text front-end normalises it.
- ``codes`` (str, required): path to an ``.npy`` of integer DVAE codes, shape [frames].
- ``cond_mel`` (str): path to an ``.npy`` float log-mel [100, frames] of the speaker prompt, or
- ``cond_audio`` (str): path to an audio file of the prompt (mel computed on the fly).
  One of the two is required.
- ``speaker`` (str), ``language`` (str), ``duration`` (float seconds): optional.

Relative paths are resolved against the manifest's folder (``~`` expanded). Errors carry ``file:line``. Its format
facts are ``generations.indextts15.data.format``'s; reading lines and files is ``data_tools.manifest``'s.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from data_tools.manifest import (
    ManifestError,
    ManifestLine,
    iter_lines,
    load_json_object,
    resolve_path,
    string_field,
)
from generations.registry import format_of_line

REQUIRED_STR_FIELDS = ("id", "text", "codes")
OPTIONAL_STR_FIELDS = ("cond_mel", "cond_audio", "speaker", "language")


@dataclass(frozen=True, kw_only=True)
class ManifestEntry(ManifestLine):
    id: str
    text: str
    codes: Path
    cond_mel: Path | None
    cond_audio: Path | None
    speaker: str | None
    language: str | None
    duration: float | None


def parse_manifest_line(raw: str, manifest: Path, lineno: int, default_language: str | None = None
                        ) -> ManifestEntry | None:
    """Parse one v1.5 line; ``None`` for a blank line; raises ManifestError saying what is wrong."""
    if not raw.strip():
        return None
    return parse_codes_object(load_json_object(raw, manifest, lineno), manifest, lineno, default_language)


def parse_codes_object(obj: dict, manifest: Path, lineno: int, default_language: str | None = None
                       ) -> ManifestEntry:
    """One codes line's fields, typed and bounded; raises ManifestError (``file:line: what``)."""
    from data_tools.shape_rules import MAX_ID_CHARS, valid_duration

    found = format_of_line(obj)
    if found is not None and found.pairs:
        raise ManifestError(manifest, lineno, f"{found.name} line in a v1.5 codes manifest")
    for key in REQUIRED_STR_FIELDS:
        string_field(obj, key, manifest, lineno, required=True)
    for key in OPTIONAL_STR_FIELDS:
        string_field(obj, key, manifest, lineno)
    if len(obj["id"]) > MAX_ID_CHARS:
        raise ManifestError(manifest, lineno, f"field 'id' is longer than {MAX_ID_CHARS} characters")
    if not obj["id"].strip():
        raise ManifestError(manifest, lineno, "empty 'id'")
    if not obj["text"].strip():
        raise ManifestError(manifest, lineno, f"empty 'text' (id {obj['id']})")
    if not obj["codes"].strip():
        raise ManifestError(manifest, lineno, f"empty 'codes' path (id {obj['id']})")
    if not obj.get("cond_mel") and not obj.get("cond_audio"):
        raise ManifestError(manifest, lineno, f"needs 'cond_mel' or 'cond_audio' (id {obj['id']})")
    duration = obj.get("duration")
    if duration is not None:
        duration = valid_duration(duration)
        if duration is None:
            raise ManifestError(manifest, lineno, f"field 'duration' must be a number of seconds in [0, 86400], "
                                                  f"got {_short(obj['duration'])}")
    base = manifest.parent
    return ManifestEntry(
        id=obj["id"],
        text=obj["text"],
        codes=resolve_path(base, obj["codes"], manifest, lineno, "codes"),
        cond_mel=resolve_path(base, obj["cond_mel"], manifest, lineno, "cond_mel") if obj.get("cond_mel") else None,
        cond_audio=(resolve_path(base, obj["cond_audio"], manifest, lineno, "cond_audio")
                    if obj.get("cond_audio") else None),
        speaker=obj.get("speaker"),
        language=obj.get("language") or default_language,
        duration=duration,
        manifest=manifest,
        line=lineno,
    )


def _short(value: object, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def iter_manifest(path: str | Path, default_language: str | None = None
                  ) -> Iterator[ManifestEntry | ManifestError]:
    """Yield every v1.5 entry or the error of its line, streaming (the checker collects them all)."""
    path = Path(path)
    for lineno, raw in iter_lines(path):
        if isinstance(raw, ManifestError):
            yield raw
            continue
        try:
            entry = parse_manifest_line(raw, path, lineno, default_language)
        except ManifestError as err:
            yield err
            continue
        if entry is not None:
            yield entry
