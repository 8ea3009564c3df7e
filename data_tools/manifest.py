"""Reading training manifests, whatever their format: one JSON object per line, read as bytes and decoded one by one
(a bad byte is reported at its own line), at most ``MAX_LINE_BYTES`` each, from regular files only; errors carry
``file:line`` (``ManifestError``). Relative paths are resolved against the manifest's folder (``~`` expanded). A
manifest argument may end in ``::lang`` (``train.jsonl::am``): that manifest's default language.

Each generation's manifest format lives in its folder (``generations/<gen>/data/format.py``: IndexTTS-1.5's codes
manifest, ``generations.indextts15.data.manifest``; the paired ones, ``generations.indextts2.data.manifest`` and
``generations.indextts25.data.manifest``), told apart by its fields (``generations.registry.format_of_line``);
``manifest_format`` says which one a file is and ``line_parser`` reads its lines.
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


MAX_LINE_BYTES = 1 << 20  # a longer line is refused (and skipped) without reading it into memory
MAX_FIELD_CHARS = 100_000
UTTERANCE_FEATURE_FIELDS = ("codes_path", "condition_path")
ENTRY_FIELDS = ("id", "text", "codes")  # a line that means to be a codes entry has one of these (the refusal's words)
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
    if first_object is not None and not any(key in first_object[1] for key in ENTRY_FIELDS):
        lineno, obj = first_object
        fields = ", ".join(sorted(map(str, obj))[:8]) or "none"
        raise ManifestError(path, lineno, f"no line is a training manifest entry (fields here: {fields}); a codes "
                                          "manifest has id/text/codes, a paired one prompt_*/target_* paths")
    return default_format().id


