"""Feature files read out of shards: the one resolver the trainer, the checker and split read through.

``packed_bytes(path)`` answers for a path a manifest names (``<prepared>/codes/<id>.npy``): when a shard
index (``<prepared>/shards/index.json``) lists it, its bytes come from the shard by random access, so the
trainer's global sample order (``trainer.sampler``) decides what is read and shards never do: no sample is
duplicated or dropped with any number of ranks and workers, and resume stays exact. Otherwise ``None``: the
file is read as it is (today's per-file layout).

- Local shards: one handle per shard per process, read with ``os.pread`` (no shared offset after a fork),
  so the files opened are the shards, not the clips.
- Object storage: with ``STUDIO_SHARD_URL`` set (the trainer's ``--shard-url``), shards are read from
  ``<url>/<shard name>`` by HTTP Range requests with a timeout; the index stays in the local folder.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from data_tools.fileio import UnusableFile, open_regular
from data_tools.shard_index import (
    INDEX_NAME,
    SHARDS_DIR,
    ArrayHead,
    Member,
    ShardError,
    ShardIndex,
    read_index,
)

SHARD_URL_ENV = "STUDIO_SHARD_URL"
URL_TIMEOUT_S = 60.0
ANCESTORS = 3  # <prepared>/<kind>/<id>.npy, and one folder deeper

RECHECK_S = 2.0
_indexes: dict[Path, tuple[tuple[int, int], ShardIndex]] = {}
_folders: dict[str, tuple[float, ShardIndex | None]] = {}
_handles: dict[str, IO[bytes]] = {}
_opened = {"count": 0, "pid": os.getpid()}


@dataclass(frozen=True)
class Packed:
    data: bytes  # the member's bytes, or its first ``head`` bytes when asked for fewer
    where: str  # "shards/shard-000001.tar:codes/a.npy under <prepared>", for one-line errors
    size: int  # the member's whole size


def set_shard_url(url: str) -> None:
    """Read every shard from ``url`` (``http(s)://.../folder``) in this process and the ones it starts."""
    if url:
        os.environ[SHARD_URL_ENV] = url
    else:
        os.environ.pop(SHARD_URL_ENV, None)


def files_opened() -> int:
    """Shard files this process opened (the bench's measure)."""
    return _opened["count"] if _opened["pid"] == os.getpid() else 0


def _index_of_folder(folder: str) -> ShardIndex | None:
    """The index in ``folder`` or up to ``ANCESTORS - 1`` folders above it; looked up again after
    ``RECHECK_S`` (a folder packed while a process runs is seen; a packed one costs no stat per read)."""
    now = time.monotonic()
    known = _folders.get(folder)
    if known is not None and now - known[0] < RECHECK_S:
        return known[1]
    found, here = None, folder
    for _ in range(ANCESTORS):
        candidate = Path(here) / SHARDS_DIR / INDEX_NAME
        try:
            info = os.stat(candidate)
        except (OSError, ValueError):  # no index here (or a path no file can have)
            here = os.path.dirname(here)
            continue
        stamp = (info.st_mtime_ns, info.st_size)
        cached = _indexes.get(candidate)
        if cached is None or cached[0] != stamp:
            _forget_handles(os.path.dirname(candidate))  # a repacked folder: its old tars' handles are stale
            _indexes[candidate] = cached = (stamp, read_index(candidate))
        found = cached[1]
        break
    _folders[folder] = (now, found)
    return found


def _forget_handles(shards_dir: str) -> None:
    for shard in [key for key in _handles if os.path.dirname(key) == shards_dir]:
        _handles.pop(shard).close()


def _listed(path: str | Path) -> tuple[ShardIndex, str, Member] | None:
    """(index, path relative to its folder, member) of a file its folder's shard index lists; None otherwise."""
    full = os.path.abspath(path)
    index = _index_of_folder(os.path.dirname(full))
    if index is None:
        return None
    root = str(index.folder)
    if not full.startswith(root + os.sep):
        return None
    rel = full[len(root) + 1:].replace(os.sep, "/")
    member = index.members.get(rel)
    return None if member is None else (index, rel, member)


def packed_head(path: str | Path) -> tuple[ArrayHead, str, int] | None:
    """(array header, where, member size) of a packed ``.npy`` whose index keeps its header: nothing is read
    from the shard (over a URL, no request). None: not packed, or an index without headers."""
    listed = _listed(path)
    if listed is None or listed[2].head is None:
        return None
    index, rel, member = listed
    return member.head, f"{SHARDS_DIR}/{index.shards[member.shard]}:{rel} under {index.folder}", member.size


def packed_bytes(path: str | Path, head: int | None = None) -> Packed | None:
    """The bytes of ``path`` from its folder's shards (its first ``head`` bytes at most: a header read over a URL
    fetches no array), or None when no shard index lists it."""
    listed = _listed(path)
    if listed is None:
        return None
    index, rel, member = listed
    root = str(index.folder)
    name = index.shards[member.shard]
    where = f"{SHARDS_DIR}/{name}:{rel} under {root}"
    url = os.environ.get(SHARD_URL_ENV, "")
    size = member.size if head is None else min(head, member.size)
    data = _read_url(url, name, member.offset, size, where) if url else \
        _read_local(f"{root}{os.sep}{SHARDS_DIR}{os.sep}{name}", member.offset, size, where)
    return Packed(data, where, member.size)


def _read_local(shard: str, offset: int, size: int, where: str) -> bytes:
    if _opened["pid"] != os.getpid():  # a forked worker opens its own (the parent's stay the parent's)
        _handles.clear()
        _opened.update(count=0, pid=os.getpid())
    handle = _handles.get(shard)
    if handle is None:
        try:
            handle = open_regular(shard)  # never a FIFO or a device: a read cannot block forever
        except UnusableFile as exc:
            raise ShardError(f"shard unusable: {where} ({exc})") from None
        _handles[shard] = handle
        _opened["count"] += 1
    try:
        data = os.pread(handle.fileno(), size, offset)
    except OSError as exc:
        raise ShardError(f"shard unreadable: {where} ({exc.strerror or exc})") from None
    if len(data) != size:
        raise ShardError(f"shard is truncated: {where} needs bytes {offset}-{offset + size} but the shard ends "
                         f"at {offset + len(data)}")
    return data


def _read_url(base: str, name: str, offset: int, size: int, where: str) -> bytes:
    if not base.startswith(("http://", "https://")):
        raise ShardError(f"--shard-url ({SHARD_URL_ENV}) must be an http(s) URL, not {base[:80]!r}")
    if size == 0:
        return b""
    url = f"{base.rstrip('/')}/{name}"
    request = urllib.request.Request(url, headers={"Range": f"bytes={offset}-{offset + size - 1}"})
    try:
        with urllib.request.urlopen(request, timeout=URL_TIMEOUT_S) as response:
            start = (response.headers.get("Content-Range") or "").removeprefix("bytes ").split("-")[0]
            if response.status != 206 or start != str(offset):
                raise ShardError(f"{url} did not answer the byte range {offset}- (HTTP {response.status}): {where}")
            data = response.read(size)
    except urllib.error.HTTPError as exc:
        raise ShardError(f"{url}: HTTP {exc.code} reading {where}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise ShardError(f"{url}: {getattr(exc, 'reason', exc)} reading {where}") from None
    if len(data) != size:
        raise ShardError(f"shard is truncated: {where} needs {size} bytes, {url} gave {len(data)}")
    return data
