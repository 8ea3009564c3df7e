"""Atomic file writes (a reader never sees a half-written file, a crash leaves the old one) and safe reads."""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (no-op where directories cannot be opened)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems refuse fsync on directories; the rename itself is still atomic
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: Path, mode: str = "wb", encoding: str | None = None) -> Iterator[IO]:
    """Open a temp file next to ``path``; on clean exit flush, fsync and rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with replacing(Path(tmp_name), path):
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; the result should look like any new file
        with os.fdopen(fd, mode, encoding=encoding) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())


@contextlib.contextmanager
def replacing(tmp: Path, path: Path) -> Iterator[None]:
    """What the body leaves at ``tmp`` is renamed over ``path`` (durably); on any failure ``tmp`` is removed."""
    try:
        yield
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_open(path, "wb") as handle:
        handle.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def atomic_write_with(path: Path, writer: Callable[[IO[bytes]], None]) -> None:
    """Atomically write ``path`` with ``writer(handle)`` (e.g. ``lambda f: torch.save(obj, f)``)."""
    with atomic_open(path, "wb") as handle:
        writer(handle)


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


# ----- reading input files safely ----------------------------------------------------------------------
# Manifests name files; a name may point at a FIFO (open() blocks forever), a device (endless data) or a
# directory. Every input file is stat()ed first and only regular files are opened.

MAX_PATH_CHARS = 4096


class UnusableFile(ValueError):
    """An input file that cannot be used: ``kind`` is "missing", "not-regular" or "unreadable"."""

    def __init__(self, kind: str, message: str) -> None:
        self.kind = kind
        super().__init__(message)


def _kind_of(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def expand_path(value: str, base: Path | None = None) -> Path:
    """A manifest's path string -> a Path: ``~`` / ``~user`` expanded, relative paths under ``base``.

    Raises UnusableFile("missing") for what cannot name a file at all: ``~nosuchuser/x``, a NUL byte,
    an empty or absurdly long string.
    """
    if not value or not value.strip():
        raise UnusableFile("missing", "empty path")
    if len(value) > MAX_PATH_CHARS:
        raise UnusableFile("missing", f"path longer than {MAX_PATH_CHARS} characters ({value[:40]}...)")
    if "\x00" in value:
        raise UnusableFile("missing", f"path contains a NUL character ({value!r})")
    if value.startswith("~"):
        expanded = os.path.expanduser(value)
        if expanded.startswith("~"):
            user = value[1:].split("/", 1)[0]
            raise UnusableFile("missing", f"cannot expand {value!r}: no home folder for user {user!r}"
                               if user else f"cannot expand {value!r}: no home folder")
        value = expanded
    path = Path(value)
    if base is not None and not path.is_absolute():
        path = base / path
    return path


def regular_file_size(path: str | Path) -> int:
    """The size of a regular file; UnusableFile (by name) for anything else, without opening it."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise UnusableFile("missing", f"not found: {path}") from None
    except NotADirectoryError:
        raise UnusableFile("missing", f"not found: {path} (a parent is not a folder)") from None
    except (OSError, ValueError) as exc:
        raise UnusableFile("unreadable", f"cannot stat {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UnusableFile("not-regular", f"{path} is {_kind_of(info.st_mode)}, not a regular file")
    return int(info.st_size)


def open_regular(path: str | Path) -> IO[bytes]:
    """Open a regular file for binary reading; refuses FIFOs, devices, sockets and directories by name.

    The stat comes first, so a FIFO is never opened; O_NONBLOCK covers a file swapped for a FIFO between
    the stat and the open (the open then returns at once and the fstat refuses it).
    """
    regular_file_size(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UnusableFile("missing", f"not found: {path}") from None
    except OSError as exc:
        raise UnusableFile("unreadable", f"cannot open {path}: {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise UnusableFile("not-regular", f"{path} is {_kind_of(mode)}, not a regular file")
    if hasattr(os, "set_blocking"):
        os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
