"""The codes manifest: one JSON object per line, the data the GPT trains on.

Fields (README "Codes manifest" documents them for users):

- ``id`` (str, required): unique utterance id.
- ``text`` (str, required): the transcript, raw; the text front-end normalises it.
- ``codes`` (str, required): path to an ``.npy`` of integer DVAE codes, shape [frames].
- ``cond_mel`` (str): path to an ``.npy`` float log-mel [100, frames] of the speaker prompt, or
- ``cond_audio`` (str): path to an audio file of the prompt (mel computed on the fly).
  One of the two is required.
- ``speaker`` (str), ``language`` (str), ``duration`` (float seconds): optional.

Relative paths are resolved against the manifest's folder. Errors carry ``file:line``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REQUIRED_STR_FIELDS = ("id", "text", "codes")
OPTIONAL_STR_FIELDS = ("cond_mel", "cond_audio", "speaker", "language")


class ManifestError(ValueError):
    """A problem with one manifest line (or the file): ``str(err)`` is ``file:line: what``."""

    def __init__(self, path: Path, line: int | None, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.message = message
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class ManifestEntry:
    id: str
    text: str
    codes: Path
    cond_mel: Path | None
    cond_audio: Path | None
    speaker: str | None
    language: str | None
    duration: float | None
    manifest: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.manifest}:{self.line}"


def _resolve(base: Path, value: str) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def parse_manifest_line(raw: str, manifest: Path, lineno: int) -> ManifestEntry | None:
    """Parse one line; ``None`` for a blank line; raises ManifestError saying what is wrong."""
    if not raw.strip():
        return None
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ManifestError(manifest, lineno, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise ManifestError(manifest, lineno, f"expected a JSON object, got {type(obj).__name__}")
    for key in REQUIRED_STR_FIELDS:
        if key not in obj:
            raise ManifestError(manifest, lineno, f"missing field '{key}'")
        if not isinstance(obj[key], str):
            raise ManifestError(manifest, lineno, f"field '{key}' must be a string, got {type(obj[key]).__name__}")
    for key in OPTIONAL_STR_FIELDS:
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise ManifestError(manifest, lineno, f"field '{key}' must be a string, got {type(obj[key]).__name__}")
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
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration < 0:
            raise ManifestError(manifest, lineno, f"field 'duration' must be a non-negative number, got {duration!r}")
        duration = float(duration)
    base = manifest.parent
    return ManifestEntry(
        id=obj["id"],
        text=obj["text"],
        codes=_resolve(base, obj["codes"]),
        cond_mel=_resolve(base, obj["cond_mel"]) if obj.get("cond_mel") else None,
        cond_audio=_resolve(base, obj["cond_audio"]) if obj.get("cond_audio") else None,
        speaker=obj.get("speaker"),
        language=obj.get("language"),
        duration=duration,
        manifest=manifest,
        line=lineno,
    )


def iter_manifest(path: str | Path) -> Iterator[ManifestEntry | ManifestError]:
    """Yield every entry or the error of its line, streaming (the checker collects them all)."""
    path = Path(path)
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 (closed by the with below)
    except FileNotFoundError:
        raise ManifestError(path, None, "manifest not found") from None
    except OSError as exc:
        raise ManifestError(path, None, f"cannot read manifest ({exc.strerror or exc})") from None
    with handle:
        lineno = 0
        while True:
            lineno += 1
            try:
                raw = handle.readline()
            except UnicodeDecodeError:
                yield ManifestError(path, lineno, "not valid UTF-8")
                continue
            if not raw:
                break
            try:
                entry = parse_manifest_line(raw, path, lineno)
            except ManifestError as err:
                yield err
                continue
            if entry is not None:
                yield entry


def read_manifest(path: str | Path) -> list[ManifestEntry]:
    """Read a whole manifest, raising the first ManifestError (the trainer refuses bad data)."""
    entries: list[ManifestEntry] = []
    seen: dict[str, int] = {}
    for item in iter_manifest(path):
        if isinstance(item, ManifestError):
            raise item
        if item.id in seen:
            raise ManifestError(item.manifest, item.line, f"duplicate id '{item.id}' (first at line {seen[item.id]})")
        seen[item.id] = item.line
        entries.append(item)
    if not entries:
        raise ManifestError(Path(path), None, "manifest has no entries")
    return entries


def entry_to_json(entry: ManifestEntry, relative_to: Path | None = None) -> str:
    """Serialise an entry back to a manifest line (paths relative to ``relative_to`` if given)."""

    def rel(p: Path | None) -> str | None:
        if p is None:
            return None
        if relative_to is not None:
            try:
                return p.relative_to(relative_to).as_posix()
            except ValueError:
                return str(p)
        return str(p)

    obj = {"id": entry.id, "text": entry.text, "codes": rel(entry.codes)}
    for key, value in (("cond_mel", rel(entry.cond_mel)), ("cond_audio", rel(entry.cond_audio)),
                       ("speaker", entry.speaker), ("language", entry.language), ("duration", entry.duration)):
        if value is not None:
            obj[key] = value
    return json.dumps(obj, ensure_ascii=False)
