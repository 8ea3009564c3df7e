"""A byte range of a manifest as decoded lines, in bounded memory where a line is over-long.

The checker's workers each read one chunk (a run of whole lines) this way: one item per line, ``None``
for a line that is not UTF-8 and ``TOO_LONG`` for one over ``MAX_LINE_BYTES``, whose bytes are skipped
without ever being held whole; a chunk an I/O error cut short is one ``IO_ERROR`` item. What the lines mean is the caller's business.
"""

from __future__ import annotations

from typing import Protocol

from data_tools.fileio import open_regular
from data_tools.manifest import MAX_LINE_BYTES


class ByteRange(Protocol):
    """Where the lines are: ``manifest``'s bytes ``[start, end)`` (``check_records.ChunkTask`` is one)."""

    @property
    def manifest(self) -> str: ...

    @property
    def start(self) -> int: ...

    @property
    def end(self) -> int: ...


TOO_LONG = "\x00too long"  # stands for a line over MAX_LINE_BYTES (never a real line: JSON has no raw NUL)
IO_ERROR = "\x00cannot read"  # stands for the rest of a chunk an I/O error kept from being read
MARKERS = (TOO_LONG, IO_ERROR)


# A chunk up to this size is read in one go and split in C, not line by line. The checker's chunks are at most
# 4 MB plus the rest of a line; a larger one holds a line far over MAX_LINE_BYTES, and the bounded reader
# skips that without holding it in memory.
WHOLE_READ_BYTES = 16 << 20


def read_lines(task: ByteRange) -> tuple[list[str | None], int]:
    """The chunk's lines (None where a line is not UTF-8, TOO_LONG where it is too long) and the bytes read."""
    try:
        if task.end - task.start <= WHOLE_READ_BYTES:
            with open_regular(task.manifest) as handle:
                handle.seek(task.start)
                data = handle.read(task.end - task.start)
            lines = _split_lines(data)
            if lines is not None:
                return lines, len(data)
        return read_lines_bounded(task)
    except OSError:  # an I/O error (a bad disk, a vanished share): reported at the chunk's first line
        return [IO_ERROR], task.end - task.start


def _split_lines(data: bytes) -> list[str | None] | None:
    """``data``'s lines as ``read_lines_bounded`` gives them, or None when a line may be too long (let it decide).

    One decode and one split for the whole chunk: UTF-8 never has a newline byte inside a character, so
    this is the same as decoding line by line (which is done only when the chunk is not all UTF-8).
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None:
        lines: list[str | None] = text.split("\n")  # type: ignore[assignment]
        if len(data) >= MAX_LINE_BYTES and max(map(len, lines)) * 4 >= MAX_LINE_BYTES:  # type: ignore[arg-type]
            return None  # a line of that many characters may be too many bytes
    else:
        parts = data.split(b"\n")
        if len(data) >= MAX_LINE_BYTES and max(map(len, parts)) >= MAX_LINE_BYTES:
            return None
        lines = []
        for part in parts:
            try:
                lines.append(part.decode("utf-8"))
            except UnicodeDecodeError:
                lines.append(None)
    if lines and lines[-1] == "" and (not data or data.endswith(b"\n")):
        lines.pop()  # the empty piece after the last newline is no line
    return lines


def read_lines_bounded(task: ByteRange) -> tuple[list[str | None], int]:
    """``read_lines`` a line at a time, never holding more than MAX_LINE_BYTES of one line in memory."""
    lines: list[str | None] = []
    done = 0
    with open_regular(task.manifest) as handle:
        handle.seek(task.start)
        size = task.end - task.start
        while done < size:
            raw = handle.readline(min(MAX_LINE_BYTES + 1, size - done))
            if not raw:
                break
            done += len(raw)
            if len(raw) > MAX_LINE_BYTES:
                while done < size and not raw.endswith(b"\n"):
                    raw = handle.readline(min(MAX_LINE_BYTES, size - done))
                    if not raw:
                        break
                    done += len(raw)
                lines.append(TOO_LONG)
                continue
            try:
                lines.append(raw.decode("utf-8").rstrip("\n"))
            except UnicodeDecodeError:
                lines.append(None)
    return lines, done
