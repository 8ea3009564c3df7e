"""What a file given as a manifest is when it is no JSON-lines manifest at all: one rule for every reader.

``format_refusal(path, max_line_bytes)`` looks at the file's first bytes and first non-blank line and says in
one line what the file is and at which line, or None when it may be a manifest (its lines are then judged one
by one); ``data_tools.manifest.manifest_format_refusal`` makes that a ``ManifestError`` (``file:line: what``).
The data checker, the run pre-flight and the trainer all reach it through ``data_tools.manifest.manifest_format``,
so they refuse the same files with the same words. (It imports nothing of ``data_tools.manifest``: no cycle.)

Recognised: an empty or blank-only file, compressed archives (gzip, bzip2, xz, zstd, zip), UTF-16/UTF-32
text (with or without a byte-order mark), a UTF-8 byte-order mark, binary data (NUL bytes or bytes that are
no UTF-8), classic-Mac CR-only line ends, a JSON array, a pretty-printed JSON object (one object over many
lines) and a first line over ``max_line_bytes`` (a whole JSON document on one line, or no text at all).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from data_tools.fileio import UnusableFile, open_regular

SNIFF_BYTES = 64 * 1024
COMPRESSED_MAGIC = (
    (b"\x1f\x8b", "gzip-compressed", "gunzip"),
    (b"BZh", "bzip2-compressed", "bunzip2"),
    (b"\xfd7zXZ\x00", "xz-compressed", "unxz"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed", "unzstd"),
    (b"PK\x03\x04", "a zip archive", "unzip"),
)
WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"),
)
JSONL_HINT = "a manifest is UTF-8 JSON lines, one object per line"


class FileRefusal(NamedTuple):
    line: int | None  # None: the file as a whole
    message: str


def format_refusal(path: Path, max_line_bytes: int) -> FileRefusal | None:
    """Why ``path`` cannot be a JSON-lines manifest (what, and at which line), or None."""
    try:
        with open_regular(path) as handle:
            head = handle.read(SNIFF_BYTES)
        if not head:
            return FileRefusal(None, f"empty file: {JSONL_HINT}")
        whole = _whole_file_refusal(head)
        if whole is not None:
            return whole
        return _first_line_refusal(path, head, max_line_bytes)
    except UnusableFile as exc:
        return FileRefusal(None, "manifest not found" if exc.kind == "missing"
                           else str(exc).replace(f"{path} is ", "manifest is "))
    except OSError as exc:
        return FileRefusal(1, f"cannot read the manifest: {exc.strerror or exc}")


def _whole_file_refusal(head: bytes) -> FileRefusal | None:
    for magic, what, tool in COMPRESSED_MAGIC:
        if head.startswith(magic):
            return FileRefusal(None, f"{what} data, not a text manifest: unpack it first ({tool})")
    for bom, encoding in WIDE_BOMS:
        if head.startswith(bom):
            return FileRefusal(1, f"{encoding} text (byte-order mark): save it as UTF-8")
    if b"\x00" in head:
        if _looks_wide(head):
            return FileRefusal(1, "UTF-16 text (NUL every other byte): save it as UTF-8")
        nul = head.index(b"\x00")
        line = head[:nul].count(b"\n") + 1
        return FileRefusal(line, f"binary data (a NUL byte at byte {nul + 1}), not a text manifest: "
                                         f"{JSONL_HINT}")
    if head.startswith(b"\xef\xbb\xbf"):
        return FileRefusal(1, "starts with a UTF-8 byte-order mark: save it as UTF-8 without BOM")
    if b"\r" in head and b"\n" not in head and head.strip(b"\r \t"):
        return FileRefusal(1, "lines end in CR only (classic Mac line ends): convert them to LF")
    if not head.strip() and len(head) < SNIFF_BYTES:
        return FileRefusal(None, f"only blank lines: {JSONL_HINT}")
    return None


def _looks_wide(head: bytes) -> bool:
    """UTF-16 without a byte-order mark: ASCII text with a NUL beside nearly every character."""
    sample = head[:4096]
    return sample[1::2].count(0) * 4 >= len(sample) or sample[0::2].count(0) * 4 >= len(sample)


def _first_line_refusal(path: Path, head: bytes, max_line_bytes: int) -> FileRefusal | None:
    """The first non-blank line: too long, not UTF-8 (binary), a JSON array, or the start of a pretty-printed object."""
    first = _first_line(path, max_line_bytes)
    if first is None:
        return FileRefusal(None, f"only blank lines: {JSONL_HINT}")
    lineno, raw = first
    if raw is None:
        return FileRefusal(lineno, f"line {lineno} is longer than {max_line_bytes} bytes: not JSON lines (one object "
                                   "per line), or not text at all")
    try:
        stripped = raw.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        return FileRefusal(lineno, f"binary data or another encoding (not valid UTF-8 at byte {exc.start + 1} of the "
                                   f"line): {JSONL_HINT}")
    if stripped.startswith("["):
        return FileRefusal(lineno, "a JSON array, not JSON lines: write one object per line (e.g. jq -c '.[]')")
    if stripped.startswith("{") and not _is_json(stripped) and _object_spans_lines(stripped, head):
        return FileRefusal(lineno, "a pretty-printed JSON object spread over several lines: write one object per "
                                   "line (e.g. jq -c)")
    return None


def _first_line(path: Path, max_line_bytes: int) -> tuple[int, bytes | None] | None:
    """(line number, bytes) of the first non-blank line, bytes None when it is over ``max_line_bytes``; None: none."""
    with open_regular(path) as handle:
        lineno = 0
        while raw := handle.readline(max_line_bytes + 1):
            lineno += 1
            if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
                return lineno, None
            if raw.strip():
                return lineno, raw
    return None


def _object_spans_lines(first_line: str, head: bytes) -> bool:
    """The first line opens a JSON object that the following lines close (not a line that is merely broken)."""
    if first_line == "{":
        return True
    text = head.decode("utf-8", errors="replace").lstrip()
    try:
        _obj, end = json.JSONDecoder().raw_decode(text)
    except (ValueError, RecursionError):
        return False
    return "\n" in text[:end]


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True
