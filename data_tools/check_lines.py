"""Parsing one chunk's lines for the v1.5 data checker: the fields of each valid line, a problem for each other.

The parse loop is lean on purpose: a line that passes a quick type check is taken as it is, and
only a line that fails it goes through its format's line parser (IndexTTS-1.5's
``generations.indextts15.data.manifest.parse_manifest_line`` for a codes manifest), the single definition of a valid
line, which names the problem.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from data_tools.chunk_lines import IO_ERROR, MARKERS
from data_tools.manifest import MAX_LINE_BYTES, ManifestError, line_parser
from data_tools.shape_rules import MAX_ID_CHARS, valid_duration

LineParser = Callable[[str, Path, int], Any]  # (raw line, manifest, line number) -> a codes entry or None


def problem_code(err: ManifestError) -> str:
    """A stable short code for a ManifestError (for filtering and tables)."""
    message = err.message
    for prefix, code in (
        ("malformed JSON", "malformed-json"),
        ("not valid UTF-8", "not-utf8"),
        ("expected a JSON object", "not-an-object"),
        ("missing field", "missing-field"),
        ("needs 'cond_mel' or 'cond_audio'", "missing-field"),
        ("empty", "empty-field"),
        ("field 'duration'", "wrong-type"),
        ("field '", "wrong-type"),
    ):
        if message.startswith(prefix):
            return code
    return "invalid-entry"


_SCAN_ONCE = json.JSONDecoder().scan_once  # json.loads' own scanner (the C one), without its Python layers


def paired_marks() -> frozenset[str]:
    """The fields that mark a line of a paired format (``generations.registry``): a codes line has none of them."""
    from generations.registry import formats

    return frozenset(mark for found in formats() if found.pairs for mark in found.marks)


def _quick_entry(obj: object, pair_marks: frozenset[str] = frozenset()) -> tuple | None:
    """The fields of a line that is certainly valid, else None (then the manifest parser decides)."""
    if type(obj) is not dict:
        return None
    uid = obj.get("id")
    text = obj.get("text")
    codes = obj.get("codes")
    if type(uid) is not str or type(text) is not str or type(codes) is not str:
        return None
    cond_mel = obj.get("cond_mel")
    cond_audio = obj.get("cond_audio")
    speaker = obj.get("speaker")
    language = obj.get("language")
    duration = obj.get("duration")
    for value in (cond_mel, cond_audio, speaker, language):
        if value is not None and type(value) is not str:
            return None
    if duration is not None and valid_duration(duration) is None:
        return None
    if not (uid.strip() and text.strip() and codes.strip() and (cond_mel or cond_audio)) or len(uid) > MAX_ID_CHARS:
        return None
    for value in (codes, cond_mel, cond_audio):
        if value and (value[0] == "~" or "\x00" in value or len(value) > 4096 or value.isspace()):
            return None  # the manifest parser expands or refuses it
    if not obj.keys().isdisjoint(pair_marks):
        return None
    return uid, text, codes, cond_mel or None, cond_audio or None, speaker, language, duration


def _entry_fields(raw: str, manifest: Path, lineno: int, parse: LineParser) -> tuple:
    """Fields of a line the quick check refused, as ``parse`` (its format's line parser) reads it; raises
    ManifestError naming the problem."""
    entry = parse(raw, manifest, lineno)
    if entry is None:
        raise ManifestError(manifest, lineno, "blank line")  # unreachable: blanks are skipped earlier

    def path(value: Path | None) -> str | None:  # resolved against the manifest's folder, as the chunk's are
        return str(value) if value is not None else None

    return (entry.id, entry.text, path(entry.codes), path(entry.cond_mel), path(entry.cond_audio), entry.speaker,
            entry.language, entry.duration)


def unreadable_line_problem(raw: str | None, lineno: int) -> tuple[str, str, int, str]:
    """The problem for a line the reader gave as None (not UTF-8) or ``TOO_LONG`` (not held in memory)."""
    if raw is None:
        return ("error", "not-utf8", lineno, "not valid UTF-8")
    if raw is IO_ERROR:
        return ("error", "manifest-unreadable", lineno, "cannot read the manifest from this line on (an I/O error)")
    return ("error", "invalid-entry", lineno, f"line longer than {MAX_LINE_BYTES} bytes")


def parse_lines(lines: list[str | None], manifest: Path, problems: list, parse: LineParser | None = None
                ) -> tuple[list[tuple], list[int]]:
    """The lean parse loop: fields of every valid line, a problem for every invalid one (a line the quick check
    refuses is read by ``parse``, its format's line parser)."""
    if parse is None:  # the default format's (a codes manifest's)
        from generations.registry import default_format

        parse = line_parser(default_format())
    loads = json.loads
    scan = _SCAN_ONCE
    quick = _quick_entry
    pair_marks = paired_marks()
    entries: list[tuple] = []
    entry_lines: list[int] = []
    append_entry, append_line = entries.append, entry_lines.append
    for lineno, raw in enumerate(lines, 1):
        if raw is None or raw in MARKERS:
            problems.append(unreadable_line_problem(raw, lineno))
            continue
        # The usual line: one JSON value from its first character to its last is exactly what json.loads
        # gives (no BOM, no whitespace around it), without json.loads' Python layers and two regex matches.
        try:
            obj, end = scan(raw, 0)
        except (StopIteration, ValueError, RecursionError):
            end = -1
        if end == len(raw):
            fields = quick(obj, pair_marks)
            if fields is not None:
                append_entry(fields)
                append_line(lineno)
                continue
        try:
            fields = quick(loads(raw), pair_marks)
        except (ValueError, RecursionError):
            if not raw or raw.isspace():
                continue
            fields = None
        if fields is None:
            if raw.isspace():
                continue
            try:
                fields = _entry_fields(raw, manifest, lineno, parse)
            except ManifestError as err:
                problems.append(("error", problem_code(err), lineno, err.message))
                continue
        entries.append(fields)
        entry_lines.append(lineno)
    return entries, entry_lines
