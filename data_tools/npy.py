"""``.npy`` files read defensively: the header is parsed by hand and checked against the file size before
anything is allocated, only plain numeric arrays are accepted (never pickles), only regular files are opened.

Why not ``np.load``: a header that claims a huge shape makes it allocate (or mmap) that much, its header
parser (``ast.literal_eval``) is slow and can be made to recurse, and it opens FIFOs and devices (blocking
or reading forever). The data checker and the trainer both read through this module, so a file one of them
accepts the other accepts too. A file packed into its folder's shards (``data_tools.shard_reader``) is read
from there, through the same checks.
"""

from __future__ import annotations

import io
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from data_tools.fileio import UnusableFile, open_regular
from data_tools.shard_index import ArrayHead
from data_tools.shard_reader import packed_bytes, packed_head

MAGIC = b"\x93NUMPY"
MAX_HEADER_BYTES = 64 * 1024
HEAD_BYTES = 4096  # what a header read takes of a packed member (numpy's headers are 128 bytes or a few more)
MAX_DIMS = 32
NUMERIC_KINDS = "biuf"  # bool, signed, unsigned, float: everything a feature or id file may hold

_DESCR = re.compile(r"""['"]descr['"]\s*:\s*['"](?P<v>[<>|=]?[a-zA-Z]\d{0,3})['"]""")
_FORTRAN = re.compile(r"""['"]fortran_order['"]\s*:\s*(?P<v>True|False)""")
_SHAPE = re.compile(r"""['"]shape['"]\s*:\s*\((?P<v>[\d\s,]{0,400})\)""")


class NpyError(UnusableFile):
    """A file that is not a usable ``.npy`` array (one line: what and which file)."""

    def __init__(self, message: str) -> None:
        super().__init__("unreadable", message)


@dataclass(frozen=True)
class NpyHeader:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int
    file_size: int

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.count * self.dtype.itemsize


def _parse_header(text: str, path: Path | str) -> tuple[tuple[int, ...], np.dtype, bool]:
    body = text.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise NpyError(f"{path}: .npy header is not a dictionary")
    found = {}
    rest = body[1:-1]
    for key, pattern in (("descr", _DESCR), ("fortran_order", _FORTRAN), ("shape", _SHAPE)):
        matches = list(pattern.finditer(rest))
        if len(matches) != 1:
            raise NpyError(f"{path}: .npy header needs one plain '{key}' entry (structured or object arrays "
                           "are not accepted)")
        found[key] = matches[0]["v"]
        rest = rest[: matches[0].start()] + rest[matches[0].end():]
    if rest.replace(",", "").strip():
        raise NpyError(f"{path}: .npy header has unexpected entries")
    try:
        dtype = np.dtype(found["descr"])
    except (TypeError, ValueError):
        raise NpyError(f"{path}: .npy header names an unknown dtype {found['descr']!r}") from None
    if dtype.kind not in NUMERIC_KINDS:
        raise NpyError(f"{path}: holds {dtype} values; only numeric arrays are accepted")
    parts = [p.strip() for p in found["shape"].split(",")]
    if parts and parts[-1] == "":
        parts.pop()
    if any(not p.isdigit() for p in parts) or len(parts) > MAX_DIMS or any(len(p) > 18 for p in parts):
        raise NpyError(f"{path}: .npy header has an invalid shape ({found['shape'].strip()})")
    return tuple(int(p) for p in parts), dtype, found["fortran_order"] == "True"


def _read_header(handle: IO[bytes], path: Path | str, file_size: int) -> NpyHeader:
    lead = handle.read(8)
    if len(lead) < 8 or lead[:6] != MAGIC:
        raise NpyError(f"{path}: not a .npy file (no NUMPY magic)")
    major = lead[6]
    if major not in (1, 2, 3):
        raise NpyError(f"{path}: unsupported .npy format version {major}.{lead[7]}")
    size_bytes = 2 if major == 1 else 4
    raw_len = handle.read(size_bytes)
    if len(raw_len) < size_bytes:
        raise NpyError(f"{path}: .npy header is truncated")
    header_len = int.from_bytes(raw_len, "little")
    if header_len > MAX_HEADER_BYTES:
        raise NpyError(f"{path}: .npy header claims {header_len} bytes (at most {MAX_HEADER_BYTES})")
    raw = handle.read(header_len)
    if len(raw) < header_len:
        raise NpyError(f"{path}: .npy header is truncated")
    try:
        text = raw.decode("utf-8" if major == 3 else "latin-1")
    except UnicodeDecodeError:
        raise NpyError(f"{path}: .npy header is not valid UTF-8") from None
    shape, dtype, fortran = _parse_header(text, path)
    return _checked(NpyHeader(shape, dtype, fortran, 8 + size_bytes + header_len, file_size), path)


def _checked(header: NpyHeader, path: Path | str) -> NpyHeader:
    """``header`` once its array fits in its file: a truncated or corrupt file is named in one line."""
    shape, dtype, file_size = header.shape, header.dtype, header.file_size
    available = file_size - header.data_offset
    if header.nbytes > available:
        raise NpyError(f"{path}: header claims shape {list(shape)} {dtype} ({header.nbytes:,} bytes) but the file "
                       f"holds {max(0, available):,} data bytes (truncated or corrupt)")
    return header


def _indexed_header(head: ArrayHead, where: str, size: int) -> NpyHeader:
    """The header a shard index keeps for a packed member, held to the same rules as one read from the file."""
    try:
        dtype = np.dtype(head.descr)
    except (TypeError, ValueError):
        raise NpyError(f"{where}: the shard index names an unknown dtype {head.descr!r}") from None
    if dtype.kind not in NUMERIC_KINDS:
        raise NpyError(f"{where}: holds {dtype} values; only numeric arrays are accepted")
    if len(head.shape) > MAX_DIMS or head.data_offset > size:
        raise NpyError(f"{where}: the shard index gives an impossible header (shape {list(head.shape)})")
    return _checked(NpyHeader(head.shape, dtype, head.fortran_order, head.data_offset, size), where)


def read_npy_header(path: str | Path) -> NpyHeader:
    """Shape and dtype from the header, checked against the file size; nothing of the data is read (for a packed
    member whose shard index keeps its header, not even the header)."""
    indexed = packed_head(path)
    if indexed is not None:
        return _indexed_header(*indexed)
    packed = packed_bytes(path, head=HEAD_BYTES)
    if packed is not None and len(packed.data) < packed.size:
        try:
            return _read_header(io.BytesIO(packed.data), packed.where, packed.size)
        except NpyError:  # a header longer than HEAD_BYTES (or a bad one): judged on the whole member
            packed = packed_bytes(path)
    if packed is not None:
        return _read_header(io.BytesIO(packed.data), packed.where, packed.size)
    return read_file_header(path)


def read_file_header(path: str | Path) -> NpyHeader:
    """``read_npy_header`` of a file on disk, never looked up in shards (what the packer reads)."""
    path = Path(path)
    try:
        with open_regular(path) as handle:
            return _read_header(handle, path, os.fstat(handle.fileno()).st_size)
    except UnusableFile:
        raise
    except OSError as exc:  # an I/O error (a bad disk, a vanished network share): one line naming the file
        raise NpyError(f"cannot read {path}: {exc.strerror or exc}") from None


def read_npy(path: str | Path) -> np.ndarray:
    """The array of a plain numeric ``.npy`` (writable, C or Fortran order as stored); NpyError/UnusableFile."""
    packed = packed_bytes(path)
    path = Path(path) if packed is None else packed.where
    try:
        with io.BytesIO(packed.data) if packed is not None else open_regular(path) as handle:
            size = len(packed.data) if packed is not None else os.fstat(handle.fileno()).st_size
            header = _read_header(handle, path, size)
            data = bytearray(header.nbytes)  # the size was checked against the file: no surprise allocation
            got = handle.readinto(data) if header.nbytes else 0
    except UnusableFile:
        raise
    except OSError as exc:
        raise NpyError(f"cannot read {path}: {exc.strerror or exc}") from None
    if got != header.nbytes:
        raise NpyError(f"{path} is truncated: {got} of {header.nbytes} data bytes")
    array = np.frombuffer(data, dtype=header.dtype, count=header.count)
    if header.fortran_order:
        return array.reshape(header.shape[::-1]).T
    return array.reshape(header.shape)
