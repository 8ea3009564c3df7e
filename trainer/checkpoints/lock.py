"""One trainer per output directory: an OS file lock that frees itself when its holder dies.

The lock is ``<output-dir>/.trainer.lock``, held with ``flock`` (POSIX) or ``msvcrt.locking`` (Windows)
for the life of the trainer; the file holds the holder's PID for the error message. The kernel drops
the lock when the process exits, however it exits (SIGKILL included), so a stale file never blocks.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from types import TracebackType

from trainer.errors import UsageError

LOCK_NAME = ".trainer.lock"

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]
    import msvcrt


class LockHeld(UsageError, RuntimeError):
    """Another live process holds the output directory."""

    def __init__(self, output_dir: Path, pid: int | None) -> None:
        self.output_dir = Path(output_dir)
        self.pid = pid
        who = f"PID {pid}" if pid is not None else "another process"
        super().__init__(f"output dir {self.output_dir} is in use by {who} (another trainer is running there)")


def _try_lock(fd: int) -> bool:
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    except OSError:
        return False
    return True


def _unlock(fd: int) -> None:
    with contextlib.suppress(OSError):
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
        else:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)


def _read_pid(path: Path, timeout_s: float = 1.0) -> int | None:
    """The PID written by the holder (it writes it right after locking; wait briefly for it)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            text = path.read_text(encoding="ascii", errors="replace").strip()
        except OSError:
            text = ""
        if text.isdigit():
            return int(text)
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


class OutputDirLock:
    """``with OutputDirLock(output_dir): ...`` holds the directory; raises LockHeld(pid) if taken."""

    def __init__(self, output_dir: str | Path) -> None:
        self.output_dir = Path(output_dir)
        self.path = self.output_dir / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> OutputDirLock:
        if self._fd is not None:
            return self
        self.output_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            os.close(fd)
            raise LockHeld(self.output_dir, _read_pid(self.path))
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, str(os.getpid()).encode("ascii"))
        os.fsync(fd)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        _unlock(fd)
        os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> OutputDirLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def lock_holder(output_dir: str | Path) -> int | None:
    """PID of the process holding ``output_dir`` (0 when held but the PID is unknown), None when free.

    Never creates the directory; probing does not disturb a holder.
    """
    path = Path(output_dir) / LOCK_NAME
    if not path.is_file():
        return None
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return None
    try:
        if _try_lock(fd):
            _unlock(fd)
            return None
    finally:
        os.close(fd)
    pid = _read_pid(path)
    return pid if pid is not None else 0
