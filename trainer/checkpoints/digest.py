"""Integrity you can prove: a content digest of every byte a checkpoint's writer produced.

What is hashed: the whole file exactly as ``torch.save`` wrote it, i.e. every tensor (model weights,
optimizer moments, RNG states, ...), the pickled metadata and the zip structure around them. A
digest of the tensors alone would miss damage to the zip headers or the pickle that still loads
(timestamps, padding, a changed counter), so the digest covers the file, not a re-serialisation.

Where it is kept: in the zip archive comment at the very end of the file (zip readers, ``torch.load``
included, ignore it), written in the same pass as the file, so saving reads nothing back. The pickle
also records ``"integrity": {...}`` so a file whose trailer was lost (torn) is not taken for a
checkpoint written before digests existed.

The hash: SHA-256 over 1 MiB chunks, then SHA-256 over the chunk digests (a hash tree of one level).
Chunks hash in parallel threads (hashlib releases the GIL), so checking a 7 GB file is bound by the
disk, not one core. Checking a file never unpickles it: it reads bytes and compares.

Statuses of :func:`check_file_digest`: ``ok`` (the recorded digest matches), ``mismatch`` (torn or
corrupt: never trust it), ``damaged`` (the digest record itself is broken: never trust it), ``absent``
(no digest record: a file from before this change, a foreign file, or a torn one; the caller decides
from the pickle's ``integrity`` record).
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ALGORITHM = "sha256-1MiB-tree"
CHUNK_BYTES = 1 << 20
DIGEST_MAGIC = b"indextts-studio-digest/v1 " + ALGORITHM.encode("ascii") + b" "
TRAILER_BYTES = len(DIGEST_MAGIC) + 64  # the archive comment: magic + 64 hex digits
EOCD_SIGNATURE = b"PK\x05\x06"
EOCD_BYTES = 22  # end-of-central-directory record; its last 2 bytes are the comment length
_MARKER = b"indextts-studio-digest"

# Recorded in the checkpoint itself by the saver (see the module docstring).
INTEGRITY_RECORD: dict[str, Any] = {"algorithm": ALGORITHM, "scope": "file", "where": "zip archive comment"}

OK, MISMATCH, DAMAGED, ABSENT = "ok", "mismatch", "damaged", "absent"


def _workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(_workers(), thread_name_prefix="ckpt-digest")
        return _POOL


def _chunk_digest(data: bytes | bytearray | memoryview) -> bytes:
    return hashlib.sha256(data).digest()


def _combine(chunk_digests: list[bytes], length: int) -> str:
    root = hashlib.sha256(DIGEST_MAGIC)
    root.update(int(length).to_bytes(8, "little"))
    for digest in chunk_digests:
        root.update(digest)
    return root.hexdigest()


def short(digest: str | None) -> str:
    return f"{digest[:12]}…" if digest else "none"


class _ChunkedHasher:
    """SHA-256 of each CHUNK_BYTES piece of a byte stream fed in arbitrary slices; whole chunks in parallel.

    :meth:`update` hashes partial chunks at once and hands whole ones to the thread pool, returning their
    futures: the caller must wait for them before it reuses the buffer (no copies are made).
    """

    def __init__(self) -> None:
        self.length = 0
        self._digests: list[bytes | concurrent.futures.Future[bytes]] = []
        self._partial = hashlib.sha256()
        self._partial_bytes = 0

    def update(self, view: memoryview) -> list[concurrent.futures.Future[bytes]]:
        at, size = 0, len(view)
        if self._partial_bytes:
            take = min(CHUNK_BYTES - self._partial_bytes, size)
            self._partial.update(view[:take])
            self._partial_bytes += take
            at = take
            if self._partial_bytes == CHUNK_BYTES:
                self._close_partial()
        futures = []
        while size - at >= CHUNK_BYTES:
            futures.append(_pool().submit(_chunk_digest, view[at:at + CHUNK_BYTES]))
            at += CHUNK_BYTES
        self._digests += futures
        if at < size:
            self._partial.update(view[at:])
            self._partial_bytes += size - at
        self.length += size
        return futures

    def _close_partial(self) -> None:
        self._digests.append(self._partial.digest())
        self._partial = hashlib.sha256()
        self._partial_bytes = 0

    def hexdigest(self) -> str:
        if self._partial_bytes:
            self._close_partial()
        digests = [d.result() if isinstance(d, concurrent.futures.Future) else d for d in self._digests]
        return _combine(digests, self.length)


class DigestWriter:
    """A write-only file object for ``torch.save`` that hashes what passes through and ends it with the digest.

    Bytes go straight through to ``handle`` except the last 22 (the zip's end record), held back until
    :meth:`finish`, which writes that record with its comment length set and the digest as the comment.
    The digest is of the stream exactly as torch wrote it (comment length 0). ``error`` keeps the first
    OSError a write raised: ``torch.save`` turns it into an unhelpful RuntimeError ("unexpected pos ..."),
    and the saver reports this one instead ("disk full").
    """

    def __init__(self, handle: IO[bytes]) -> None:
        self.handle = handle
        self.error: OSError | None = None
        self._hasher = _ChunkedHasher()
        self._tail = b""  # the last EOCD_BYTES bytes of the stream so far, not yet written

    @property
    def length(self) -> int:
        """Bytes torch has written so far."""
        return self._hasher.length

    def write(self, data: Any) -> int:
        view = memoryview(data).cast("B")
        hashing = self._hasher.update(view)  # whole chunks hash in threads while the bytes are written
        try:
            if len(view) >= EOCD_BYTES:
                if self._tail:
                    self.handle.write(self._tail)
                self.handle.write(view[:-EOCD_BYTES])
                self._tail = bytes(view[-EOCD_BYTES:])
            else:
                combined = self._tail + bytes(view)
                if len(combined) > EOCD_BYTES:
                    self.handle.write(combined[:-EOCD_BYTES])
                self._tail = combined[-EOCD_BYTES:]
        except OSError as exc:
            self.error = self.error or exc
            raise
        finally:
            concurrent.futures.wait(hashing)  # torch may reuse its buffer once write() returns
        return len(view)

    def flush(self) -> None:
        try:
            self.handle.flush()
        except OSError as exc:
            self.error = self.error or exc
            raise

    def finish(self) -> str:
        """Write the end record with the digest as its comment; returns the hex digest."""
        tail = self._tail
        if len(tail) < EOCD_BYTES or tail[:4] != EOCD_SIGNATURE or tail[-2:] != b"\0\0":
            raise ValueError("torch.save did not end with a plain zip end record: cannot attach the digest")
        digest = self._hasher.hexdigest()
        comment = DIGEST_MAGIC + digest.encode("ascii")
        try:
            self.handle.write(tail[:-2] + len(comment).to_bytes(2, "little") + comment)
            self.handle.flush()
        except OSError as exc:
            self.error = self.error or exc
            raise
        self._tail = b""
        return digest


@dataclass(frozen=True)
class Trailer:
    digest: str
    content_length: int  # bytes covered (the file without the comment)


def read_trailer(path: str | Path) -> Trailer | str | None:
    """The digest record at the end of ``path``: a Trailer, None (none there) or a reason it is damaged."""
    path = Path(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        span = min(size, 512)
        handle.seek(size - span)
        tail = handle.read(span)
    expected = EOCD_BYTES + TRAILER_BYTES
    if len(tail) >= expected:
        record = tail[-expected:]
        comment = record[EOCD_BYTES:]
        if (record[:4] == EOCD_SIGNATURE and int.from_bytes(record[20:22], "little") == TRAILER_BYTES
                and comment.startswith(DIGEST_MAGIC)):
            hex_digest = comment[len(DIGEST_MAGIC):].decode("ascii", "replace")
            if re.fullmatch(r"[0-9a-f]{64}", hex_digest):
                return Trailer(hex_digest, size - TRAILER_BYTES)
            return "its digest record is damaged (not a hex digest)"
    if _MARKER in tail:
        return "its digest record is damaged (the zip end record does not frame it)"
    if len(tail) >= expected and int.from_bytes(tail[-TRAILER_BYTES - 2:-TRAILER_BYTES], "little") == TRAILER_BYTES:
        return "its digest record is damaged (the archive comment is not a digest)"
    return None


def _ranges(length: int) -> Iterator[tuple[int, int]]:
    for start in range(0, length, CHUNK_BYTES):
        yield start, min(CHUNK_BYTES, length - start)


_BUFFERS = threading.local()


def _hash_range(fd: int, start: int, count: int, patch_from: int) -> bytes:
    buffer = getattr(_BUFFERS, "buffer", None)
    if buffer is None:  # one reusable buffer per thread: no fresh pages per chunk
        buffer = _BUFFERS.buffer = bytearray(CHUNK_BYTES)
    view = memoryview(buffer)[:count]
    got = 0
    while got < count:
        read = os.preadv(fd, [view[got:]], start + got)
        if read <= 0:
            raise OSError(f"short read at byte {start + got}")
        got += read
    if start + count > patch_from:  # the comment length field: hashed as torch wrote it (0)
        cut = max(0, patch_from - start)
        view[cut:] = bytes(count - cut)
    return _chunk_digest(view)


def compute_file_digest(path: str | Path, content_length: int) -> str:
    """The digest of the first ``content_length`` bytes of ``path`` (the file as torch wrote it)."""
    patch_from = content_length - 2
    if not hasattr(os, "preadv"):  # Windows: no positional reads to share one file between threads
        return _compute_sequentially(path, content_length, patch_from)
    with open(path, "rb") as handle:
        fd = handle.fileno()
        pool = _pool()
        futures: deque[concurrent.futures.Future[bytes]] = deque()
        digests: list[bytes] = []
        for start, count in _ranges(content_length):
            futures.append(pool.submit(_hash_range, fd, start, count, patch_from))
            while len(futures) > 2 * _workers():
                digests.append(futures.popleft().result())
        while futures:
            digests.append(futures.popleft().result())
    return _combine(digests, content_length)


def _compute_sequentially(path: str | Path, content_length: int, patch_from: int) -> str:
    buffer = bytearray(CHUNK_BYTES)
    digests: list[bytes] = []
    with open(path, "rb") as handle:
        for start, count in _ranges(content_length):
            view = memoryview(buffer)[:count]
            if handle.readinto(view) != count:
                raise OSError(f"short read at byte {start}")
            if start + count > patch_from:
                cut = max(0, patch_from - start)
                view[cut:] = bytes(count - cut)
            digests.append(_chunk_digest(view))
    return _combine(digests, content_length)


@dataclass(frozen=True)
class DigestCheck:
    status: str  # ok | mismatch | damaged | absent
    recorded: str | None = None
    actual: str | None = None
    bytes_hashed: int = 0
    seconds: float = 0.0
    detail: str = ""

    @property
    def trusted(self) -> bool:
        return self.status == OK

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes_hashed / 1e6 / self.seconds if self.seconds > 0 and self.bytes_hashed else None

    def reason(self) -> str:
        """One line for a file that must not be trusted (empty for ok/absent)."""
        if self.status == MISMATCH:
            return (f"content digest mismatch ({ALGORITHM}: the file hashes to {short(self.actual)}, its recorded "
                    f"digest is {short(self.recorded)}): torn or corrupted after it was written")
        if self.status == DAMAGED:
            return f"content digest unverifiable: {self.detail}; torn or corrupted after it was written"
        return ""


def check_file_digest(path: str | Path) -> DigestCheck:
    """Hash ``path`` and compare with the digest recorded at its end (see the statuses above).

    Raises OSError when the file cannot be read.
    """
    trailer = read_trailer(path)
    if trailer is None:
        return DigestCheck(ABSENT, detail="no content digest recorded")
    if isinstance(trailer, str):
        return DigestCheck(DAMAGED, detail=trailer)
    started = time.perf_counter()
    actual = compute_file_digest(path, trailer.content_length)
    seconds = time.perf_counter() - started
    status = OK if actual == trailer.digest else MISMATCH
    return DigestCheck(status, trailer.digest, actual, trailer.content_length, seconds)


def declares_digest(ckpt: Mapping[str, Any]) -> bool:
    """The checkpoint says its saver recorded a digest (so a missing one means the file is torn)."""
    record = ckpt.get("integrity")
    return isinstance(record, Mapping) and record.get("scope") == "file"


ABSENT_NOTE = "no content digest (written before digests existed): its integrity cannot be proven, only its structure"
LOST_NOTE = ("it records that its saver wrote a content digest, but none is at the end of the file: torn or "
             "corrupted after it was written")


def integrity_problem(check: DigestCheck, ckpt: Mapping[str, Any]) -> str | None:
    """Why a loaded checkpoint must not be trusted, from its digest check (None: trusted or legacy)."""
    if check.status in (MISMATCH, DAMAGED):
        return check.reason()
    if check.status == ABSENT and declares_digest(ckpt):
        return LOST_NOTE
    return None


# ----- a cache for callers that ask again and again (the UI's resume dropdown) --------------------------------

_CACHE: OrderedDict[tuple[str, int, int, int, int], DigestCheck] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_MAX = 256


def check_file_digest_cached(path: str | Path) -> DigestCheck:
    """:func:`check_file_digest`, computed once per file version: (path, device, inode, size, mtime).

    A rewritten or replaced file has a new key, so a stale answer is never returned for changed bytes.
    """
    path = Path(path)
    stat = path.stat()
    key = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    with _CACHE_LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
    result = check_file_digest(path)
    with _CACHE_LOCK:
        _CACHE[key] = result
        while len(_CACHE) > _CACHE_MAX:
            _CACHE.popitem(last=False)
    return result
