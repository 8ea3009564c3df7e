"""Content digests of the files a project's steps read and write, so a later change is seen.

A file's digest is the SHA-256 of its bytes (cached in this process by path, size, mtime and inode, so a
checkpoint is read once per change); a folder's is the SHA-256 of its listing (every file's relative path, size
and mtime), cheap for folders of thousands of clips. A path that does not exist has the digest ``MISSING``. Only regular files are read: a FIFO or a device is never opened.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from data_tools.fileio import open_regular

MISSING = "missing"
OUTSIDE = "outside"  # recorded for a path the project may not read (outside the workspace and the model folder)
CHUNK = 1 << 20
_CACHE: dict[tuple[str, int, int, int], str] = {}


def file_digest(path: Path) -> str:
    info = path.stat()
    key = (str(path.resolve()), info.st_size, info.st_mtime_ns, info.st_ino)
    cached = _CACHE.get(key)
    if cached is not None:
        return cached
    hasher = hashlib.sha256()
    with open_regular(path) as handle:
        while block := handle.read(CHUNK):
            hasher.update(block)
    digest = "sha256:" + hasher.hexdigest()
    _CACHE[key] = digest
    return digest


def folder_digest(folder: Path) -> str:
    """The digest of a folder's listing (hidden files and folders left out: resume state, temp files)."""
    hasher = hashlib.sha256()
    for root, dirs, files in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(f for f in files if not f.startswith(".")):
            path = Path(root) / name
            try:
                info = path.stat()
            except OSError:
                continue
            hasher.update(f"{path.relative_to(folder).as_posix()}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return "listing:" + hasher.hexdigest()


def digest_of(path: Path) -> str:
    """The digest of a file or a folder as it is now (``MISSING`` when there is neither)."""
    path = Path(path)
    try:
        if path.is_dir():
            return folder_digest(path)
        if path.is_file():  # a regular file (a FIFO or a device is neither: never opened)
            return file_digest(path)
    except (OSError, ValueError):  # ValueError: UnusableFile (swapped for a FIFO meanwhile), a NUL in the path
        pass
    return MISSING


def count_files(folder: Path) -> int:
    """How many (not hidden) files a folder holds, at any depth."""
    total = 0
    for _root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        total += sum(1 for name in files if not name.startswith("."))
    return total
