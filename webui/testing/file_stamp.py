"""A file as it is now, as a cache key: the Test tab's coverage caches what it read per version of each file."""

from __future__ import annotations

from pathlib import Path

Stamp = tuple[str, int, int]  # (path, mtime_ns, size)


def stamp_of(path: Path) -> Stamp | None:
    """The file's stamp; None where it cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return None
    return str(path), info.st_mtime_ns, info.st_size
