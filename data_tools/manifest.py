"""The codes manifest: one JSON object per line, the data the GPT trains on.

Fields (README "Codes manifest" documents them for users):

- ``id`` (str, required): unique utterance id.
- ``text`` (str, required): the transcript, raw; the text front-end normalises it.
- ``codes`` (str, required): path to an ``.npy`` of integer DVAE codes, shape [frames].
- ``cond_mel`` (str): path to an ``.npy`` float log-mel [100, frames] of the speaker prompt, or
- ``cond_audio`` (str): path to an audio file of the prompt (mel computed on the fly).
  One of the two is required.
- ``speaker`` (str), ``language`` (str), ``duration`` (float seconds): optional.

Relative paths are resolved against the manifest's folder (``~`` expanded). Errors carry ``file:line``.
A manifest argument may end in ``::lang`` (``train.jsonl::am``): that manifest's default language.

Each generation's manifest format (``generations/<gen>/data/format.py``: this one is IndexTTS-1.5's, the paired
ones IndexTTS2's and IndexTTS-2.5's) is told apart by its fields (``generations.registry.format_of_line``);
``manifest_format`` says which one a file is. Lines
are read as bytes and decoded one by one (a bad byte is reported at its own line), at most
``MAX_LINE_BYTES`` each, from regular files only.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from generations.registry import default_format, format_of_line

if TYPE_CHECKING:
    from generations.format_facts import ManifestFormat

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


@dataclass(frozen=True, kw_only=True)
class ManifestLine:
    """Where an entry was read: every manifest format's entries carry it (errors and reports name it)."""

    manifest: Path
    line: int

    @property
    def where(self) -> str:
        return f"{self.manifest}:{self.line}"


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


MAX_LINE_BYTES = 1 << 20  # a longer line is refused (and skipped) without reading it into memory
MAX_FIELD_CHARS = 100_000
UTTERANCE_FEATURE_FIELDS = ("codes_path", "condition_path")
_LANGUAGE_SUFFIX = re.compile(r"[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})?")


@dataclass(frozen=True)
class ManifestSpec:
    """A manifest argument: ``path``, ``path::lang`` (every line without its own language gets ``lang``) or
    ``path::lang@weight`` (also its sampling weight, for replay: ``trainer.replay``). ``weight_text`` keeps a
    weight that is not a positive number, so the run plan can refuse it by name."""

    path: Path
    language: str | None = None
    weight: float | None = None
    weight_text: str | None = None


_WEIGHTED_SUFFIX = re.compile(r"(?P<lang>[A-Za-z]{2,3}([-_][A-Za-z0-9]{1,8})?)@(?P<weight>[^@/\\:]*)")


def _weight(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) and value > 0 else None


def parse_manifest_spec(spec: str | Path | ManifestSpec) -> ManifestSpec:
    if isinstance(spec, ManifestSpec):
        return spec
    text = str(spec)
    head, sep, tail = text.rpartition("::")
    if sep and head and _LANGUAGE_SUFFIX.fullmatch(tail):
        return ManifestSpec(Path(head), tail)
    weighted = _WEIGHTED_SUFFIX.fullmatch(tail) if sep and head else None
    if weighted:
        raw = weighted["weight"]
        return ManifestSpec(Path(head), weighted["lang"], _weight(raw), raw)
    return ManifestSpec(Path(text))


def resolve_path(base: Path, value: str, manifest: Path, lineno: int, field: str) -> Path:
    """A path field resolved against the manifest's folder (``~`` expanded); ManifestError if unusable."""
    from data_tools.fileio import UnusableFile, expand_path

    try:
        return expand_path(value, base)
    except UnusableFile as exc:
        raise ManifestError(manifest, lineno, f"field '{field}': {exc}") from None



def load_json_object(raw: str, manifest: Path, lineno: int) -> dict:
    """One line's JSON object; ManifestError for malformed, absurdly nested or non-object lines."""
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ManifestError(manifest, lineno, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ManifestError(manifest, lineno, "malformed JSON (nested too deep)") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise ManifestError(manifest, lineno, f"malformed JSON ({str(exc).splitlines()[0][:80]})") from None
    if not isinstance(obj, dict):
        raise ManifestError(manifest, lineno, f"expected a JSON object, got {type(obj).__name__}")
    return obj


def line_parser(fmt: ManifestFormat) -> Callable[..., Any]:
    """The line parser of manifest format ``fmt``: (raw line, manifest, line number, default language) -> its entry,
    None for a blank line, ManifestError for a bad one (the format's object parser imported once, for a loop)."""
    from generations.spec import resolved

    parse_object = resolved(fmt.parse_object)

    def parse(raw: str, manifest: Path, lineno: int, default_language: str | None = None) -> Any:
        if not raw.strip():
            return None
        return parse_object(load_json_object(raw, manifest, lineno), manifest, lineno, default_language)

    return parse


def string_field(obj: dict, key: str, manifest: Path, lineno: int, required: bool = False,
                 limit: int = MAX_FIELD_CHARS) -> str | None:
    value = obj.get(key)
    if value is None:
        if required:
            raise ManifestError(manifest, lineno, f"missing field '{key}'")
        return None
    if not isinstance(value, str):
        raise ManifestError(manifest, lineno, f"field '{key}' must be a string, got {type(value).__name__}")
    if len(value) > limit:
        raise ManifestError(manifest, lineno, f"field '{key}' is longer than {limit} characters")
    return value


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


def iter_lines(path: str | Path) -> Iterator[tuple[int, str | ManifestError]]:
    """Every non-blank line as text, or the ManifestError of a line that is not UTF-8 or too long.

    Read as bytes and decoded line by line, so a bad byte is reported at its own line and the lines after
    it are read normally. Only a regular file is opened (a FIFO would block).
    """
    from data_tools.fileio import UnusableFile, open_regular

    path = Path(path)
    try:
        handle = open_regular(path)
    except UnusableFile as exc:
        message = "manifest not found" if exc.kind == "missing" else str(exc).replace(f"{path} is ", "manifest is ")
        raise ManifestError(path, None, message) from None
    with handle:
        lineno = 0
        while True:
            raw = _read_line(handle, path, lineno + 1, MAX_LINE_BYTES + 1)
            if not raw:
                break
            lineno += 1
            if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
                while raw and not raw.endswith(b"\n"):  # skip the rest of the line, a block at a time
                    raw = _read_line(handle, path, lineno, MAX_LINE_BYTES)
                yield lineno, ManifestError(path, lineno, f"line longer than {MAX_LINE_BYTES} bytes")
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield lineno, ManifestError(path, lineno, f"not valid UTF-8 (byte {exc.start + 1})")
                continue
            if text.strip():
                yield lineno, text


def _read_line(handle, path: Path, lineno: int, limit: int) -> bytes:
    """One line's bytes; an I/O error (a bad disk, a vanished share) is a ManifestError at that line."""
    try:
        return handle.readline(limit)
    except OSError as exc:
        raise ManifestError(path, lineno, f"cannot read the manifest: {exc.strerror or exc}") from None


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


def manifest_format_refusal(path: str | Path) -> ManifestError | None:
    """Why ``path`` is no JSON-lines manifest at all (empty, compressed, UTF-16, binary, a JSON array,
    pretty-printed, ...: ``data_tools.manifest_sniff``), as one ``file:line: what``; None when it may be one."""
    from data_tools.manifest_sniff import format_refusal

    path = Path(path)
    found = format_refusal(path, MAX_LINE_BYTES)
    return None if found is None else ManifestError(path, found.line, found.message)


def manifest_format(path: str | Path, max_lines: int = 1000) -> str:
    """The format of a manifest (the id of its ``generations.registry.format_of``), from its first line that is a
    JSON object with a field that marks a format (``generations.registry.format_of_line``).

    Raises ManifestError for a file that is no JSON-lines manifest at all (``manifest_sniff``: empty,
    compressed, UTF-16, binary, a JSON array, pretty-printed, ...), for the community's per-utterance feature
    manifest (the trainer needs pairs) and for one whose JSON objects have none of any format's fields.
    Lines that are not JSON objects are left to the line parsers (they report each at its line).
    """
    path = Path(path)
    refusal = manifest_format_refusal(path)
    if refusal is not None:
        raise refusal
    seen = 0
    first_object: tuple[int, dict] | None = None
    for lineno, raw in iter_lines(path):
        seen += 1
        if seen > max_lines:
            break
        if isinstance(raw, ManifestError):
            continue
        try:
            obj = load_json_object(raw, path, lineno)
        except ManifestError:
            continue
        first_object = first_object or (lineno, obj)
        found = format_of_line(obj)
        if found is not None:
            return found.id
        if all(key in obj for key in UTTERANCE_FEATURE_FIELDS):
            raise ManifestError(path, lineno, "a per-utterance feature manifest (codes_path/condition_path): the "
                                              "trainer needs the paired manifest (prompt_*/target_* fields) built "
                                              "from it")
    if first_object is not None and not any(key in first_object[1] for key in REQUIRED_STR_FIELDS):
        lineno, obj = first_object
        fields = ", ".join(sorted(map(str, obj))[:8]) or "none"
        raise ManifestError(path, lineno, f"no line is a training manifest entry (fields here: {fields}); a codes "
                                          "manifest has id/text/codes, a paired one prompt_*/target_* paths")
    return default_format().id



