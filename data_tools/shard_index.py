"""The index beside a prepared folder's shards: which tar holds a feature file, and at which bytes.

A sharded prepared folder keeps its manifests as they are (``codes/<id>.npy`` ...); its feature files live in
WebDataset tar shards under ``<prepared>/shards/`` and ``shards/index.json`` maps each file's path relative to
the folder to ``(shard, data offset, size)`` and, for a ``.npy`` member, its array header (dtype, shape, order,
data offset), so a reader learns every item's length without a read per file (over ``--shard-url``, a request
per file). The index is built from the tars' own headers (stdlib ``tarfile``), written atomically after the
tars, so a folder is sharded exactly when its index exists. Version 1 indexes (no array headers) still read.
"""

from __future__ import annotations

import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path

from data_tools.fileio import UnusableFile, atomic_write_text, regular_file_size

SHARDS_DIR = "shards"
INDEX_NAME = "index.json"
FORMAT = "webdataset-tar"
VERSION = 2
READABLE_VERSIONS = (1, 2)  # 1: no array headers (a header read then takes a member's first bytes)
MAX_INDEX_BYTES = 1 << 30


class ShardError(UnusableFile):
    """A shard or shard index that cannot be used: one line naming the shard (and member)."""

    def __init__(self, message: str) -> None:
        super().__init__("unreadable", message)


@dataclass(frozen=True, slots=True)
class ArrayHead:
    """A packed ``.npy`` member's header as the packer read it (``data_tools.npy`` checks it again on use)."""

    descr: str  # numpy's dtype string, e.g. "<i2"
    shape: tuple[int, ...]
    fortran_order: bool
    data_offset: int  # where the array's bytes start inside the member


@dataclass(frozen=True, slots=True)
class Member:
    shard: int  # position in ShardIndex.shards
    offset: int  # first data byte in the tar
    size: int
    head: ArrayHead | None = None  # None: not an array, or an index of version 1


@dataclass(frozen=True)
class ShardIndex:
    folder: Path  # the prepared folder the member paths are relative to
    shards: tuple[str, ...]  # tar file names under folder/shards
    sizes: tuple[int, ...]  # each tar's size in bytes when packed
    members: dict[str, Member]

    def shard_path(self, number: int) -> Path:
        return self.folder / SHARDS_DIR / self.shards[number]


def index_path(prepared: Path) -> Path:
    return Path(prepared) / SHARDS_DIR / INDEX_NAME


def scan_shard(tar_path: Path, names: dict[str, str]) -> dict[str, tuple[int, int]]:
    """``{relative path: (offset, size)}`` of ``tar_path``'s members; ``names`` maps member name -> path.

    A truncated tar, a member that is not a plain file or one the packer did not write: ShardError."""
    found: dict[str, tuple[int, int]] = {}
    try:
        with tarfile.open(tar_path, "r:") as tar:
            for info in tar:
                if not info.isreg() or info.name not in names:
                    raise ShardError(f"shard {tar_path.name} is damaged: unexpected member {info.name!r}")
                found[names[info.name]] = (info.offset_data, info.size)
    except tarfile.TarError as exc:
        raise ShardError(f"shard {tar_path.name} is damaged: {exc}") from None
    size = tar_path.stat().st_size
    for rel, (offset, length) in found.items():
        if offset + length > size:
            raise ShardError(f"shard {tar_path.name} is truncated: member {rel} ends past its end")
    return found


def write_index(prepared: Path, shards: list[Path], names: dict[str, str],
                heads: dict[str, ArrayHead] | None = None) -> ShardIndex:
    """Scan ``shards`` (in order) and write ``shards/index.json`` atomically; every name must be found once.
    ``heads``: relative path -> the array header of each ``.npy`` member (kept in the index)."""
    heads = heads or {}
    members: dict[str, Member] = {}
    for number, shard in enumerate(shards):
        for rel, (offset, size) in scan_shard(shard, names).items():
            if rel in members:
                raise ShardError(f"shard {shard.name} repeats member {rel}")
            members[rel] = Member(number, offset, size, heads.get(rel))
    missing = sorted(set(names.values()) - set(members))
    if missing:
        raise ShardError(f"shards lack {len(missing)} packed files (first: {missing[0]})")
    index = ShardIndex(Path(prepared), tuple(s.name for s in shards), tuple(s.stat().st_size for s in shards),
                       members)
    body = {"format": FORMAT, "version": VERSION,
            "shards": [{"name": n, "size": s} for n, s in zip(index.shards, index.sizes, strict=True)],
            "members": {rel: _member_row(m) for rel, m in sorted(members.items())}}
    atomic_write_text(index_path(prepared), json.dumps(body, separators=(",", ":")))
    return index


def _member_row(member: Member) -> list:
    row: list = [member.shard, member.offset, member.size]
    if member.head is not None:
        head = member.head
        row += [head.descr, list(head.shape), int(head.fortran_order), head.data_offset]
    return row


def _head_of(row: list) -> ArrayHead | None:
    """The array header of an index row's tail (``[descr, shape, fortran 0/1, data offset]``); None if malformed."""
    descr, shape, fortran, data_offset = row
    if not (isinstance(descr, str) and len(descr) <= 8 and isinstance(shape, list) and len(shape) <= 32
            and all(type(n) is int and n >= 0 for n in shape) and fortran in (0, 1)
            and type(data_offset) is int and data_offset > 0):
        return None
    return ArrayHead(descr, tuple(shape), bool(fortran), data_offset)


def _bad(path: Path, what: str) -> ShardError:
    return ShardError(f"{path}: shard index unusable: {what}")


def read_index(path: Path) -> ShardIndex:
    """The index at ``path`` (``<prepared>/shards/index.json``), checked; ShardError in one line otherwise."""
    if regular_file_size(path) > MAX_INDEX_BYTES:
        raise _bad(path, f"larger than {MAX_INDEX_BYTES} bytes")
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise _bad(path, str(exc).splitlines()[0]) from None
    if not isinstance(body, dict) or body.get("format") != FORMAT or body.get("version") not in READABLE_VERSIONS:
        raise _bad(path, f"not a {FORMAT} index of version {' or '.join(map(str, READABLE_VERSIONS))}")
    shards, members = body.get("shards"), body.get("members")
    if not isinstance(shards, list) or not isinstance(members, dict):
        raise _bad(path, "needs a 'shards' list and a 'members' table")
    names, sizes = [], []
    for entry in shards:
        name = entry.get("name") if isinstance(entry, dict) else None
        size = entry.get("size") if isinstance(entry, dict) else None
        if not isinstance(name, str) or os.path.basename(name) != name or name in ("", ".", "..") \
                or not isinstance(size, int) or size < 0:
            raise _bad(path, f"bad shard entry {str(entry)[:80]}")
        names.append(name)
        sizes.append(size)
    table: dict[str, Member] = {}
    for rel, value in members.items():
        place = value[:3] if isinstance(value, list) and len(value) in (3, 7) else None
        if not (place and all(type(v) is int and v >= 0 for v in place)
                and place[0] < len(names) and place[1] + place[2] <= sizes[place[0]]):
            raise _bad(path, f"bad member entry {rel!r}")
        head = _head_of(value[3:]) if len(value) == 7 else None
        if len(value) == 7 and head is None:
            raise _bad(path, f"bad array header of member {rel!r}")
        table[rel] = Member(*place, head)
    return ShardIndex(path.parent.parent, tuple(names), tuple(sizes), table)
