"""Incremental reading of a growing console log, with carriage-return progress lines collapsed.

A progress bar (tqdm) rewrites one line with ``\\r`` many times before its ``\\n``; only the last
segment is what a terminal shows, so only that is kept. Reads start from a byte offset and are
bounded (``max_bytes``), and the overwritten part of a long ``\\r`` line is skipped rather than
buffered, so memory stays bounded however long the run.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CHUNK_BYTES = 256 * 1024


def collapse_progress(line: str) -> str:
    """What a terminal shows for ``line``: the text after its last carriage return."""
    line = line.rstrip("\r")
    return line.rsplit("\r", 1)[-1]


@dataclass
class LogChunk:
    lines: list[str] = field(default_factory=list)  # complete lines, collapsed, without newline
    partial: str = ""  # the unfinished last line (e.g. a live progress bar), collapsed
    offset: int = 0  # where the next read starts
    reset: bool = False  # the file shrank (truncated or replaced): reading restarted at 0


def file_size(path: Path) -> int:
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


def read_log_chunk(path: Path, offset: int, max_bytes: int = DEFAULT_CHUNK_BYTES) -> LogChunk:
    """Read at most ``max_bytes`` from ``offset``; consume complete lines and overwritten progress."""
    size = file_size(path)
    offset = max(0, offset)
    reset = offset > size
    if reset:
        offset = 0
    if size == offset:
        return LogChunk(offset=offset, reset=reset)
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read(max_bytes)

    newline = data.rfind(b"\n")
    complete, rest = (data[: newline + 1], data[newline + 1 :]) if newline >= 0 else (b"", data)
    consumed = len(complete)
    # Everything up to the last \r that has text after it has been overwritten on screen: skip it.
    # (A \r as the last byte may be the first half of \r\n, so it stays.)
    carriage = rest.rfind(b"\r", 0, max(0, len(rest) - 1))
    if carriage >= 0:
        consumed += carriage + 1
        rest = rest[carriage + 1 :]

    lines = [collapse_progress(line) for line in complete.decode("utf-8", errors="replace").split("\n")[:-1]]
    partial = collapse_progress(rest.decode("utf-8", errors="replace"))
    if len(data) == max_bytes and consumed == 0:
        # One line longer than the whole chunk: emit it cut rather than never moving on.
        lines.append(partial)
        partial = ""
        consumed = len(data)
    return LogChunk(lines=lines, partial=partial, offset=offset + consumed, reset=reset)


def read_complete_lines(path: Path, offset: int, max_bytes: int = DEFAULT_CHUNK_BYTES) -> tuple[str, int]:
    """Complete lines from ``offset`` as text (each ending in a newline) and the offset after them."""
    chunk = read_log_chunk(path, offset, max_bytes)
    text = "".join(line + "\n" for line in chunk.lines)
    return text, chunk.offset


def tail_text(path: Path, max_bytes: int = 8192, start_offset: int = 0) -> str:
    """The last lines of the log (at most ``max_bytes`` of it, never before ``start_offset``), collapsed."""
    size = file_size(path)
    begin = max(start_offset, size - max_bytes)
    if begin >= size:
        return ""
    with open(path, "rb") as handle:
        handle.seek(begin)
        data = handle.read(size - begin)
    text = data.decode("utf-8", errors="replace")
    lines = text.split("\n")
    if begin > start_offset and len(lines) > 1:
        lines = lines[1:]  # the first line was cut by the window
    return "\n".join(collapse_progress(line) for line in lines).strip("\n")


class LogTail:
    """A bounded view of a growing log for one viewer (e.g. one browser session).

    Keeps at most ``max_lines`` lines of at most ``max_line_chars`` characters. When the log grew by
    more than ``skip_threshold`` bytes since the last poll, the gap is skipped (with a marker line)
    instead of read, so a viewer that comes back after hours does not replay gigabytes.
    """

    def __init__(
        self,
        path: Path,
        start_offset: int = 0,
        max_lines: int = 500,
        max_line_chars: int = 2000,
        skip_threshold: int = 4 * 1024 * 1024,
        tail_bytes: int = 64 * 1024,
    ) -> None:
        self.path = Path(path)
        self.start_offset = start_offset
        self.offset = start_offset
        self.max_line_chars = max_line_chars
        self.skip_threshold = skip_threshold
        self.tail_bytes = tail_bytes
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.partial = ""
        self.total_lines = 0

    @classmethod
    def for_run(cls, path: Path, run_offset: int, tail_bytes: int = 64 * 1024, **kwargs: int) -> LogTail:
        """A view of one run's log (which starts at ``run_offset``): its last ``tail_bytes``, from a line start."""
        size = file_size(path)
        begin = max(run_offset, size - tail_bytes)
        if begin > run_offset:
            with open(path, "rb") as handle:
                handle.seek(begin - 1)
                window = handle.read(min(tail_bytes, size - begin + 1))
            newline = window.find(b"\n")
            begin = begin + newline if newline >= 0 else size
        return cls(path, start_offset=begin, tail_bytes=tail_bytes, **kwargs)

    def _append(self, line: str) -> None:
        if len(line) > self.max_line_chars:
            line = line[: self.max_line_chars] + " …"
        self.lines.append(line)
        self.total_lines += 1

    def _jump_to_tail(self) -> None:
        size = file_size(self.path)
        begin = max(self.offset, size - self.tail_bytes)
        if begin <= self.offset:
            return
        with open(self.path, "rb") as handle:
            handle.seek(begin)
            window = handle.read(min(self.tail_bytes, size - begin))
        newline = window.find(b"\n")
        if newline < 0:
            return
        skipped = begin + newline + 1 - self.offset
        self._append(f"[… {skipped} bytes of log skipped …]")
        self.partial = ""
        self.offset = begin + newline + 1

    def poll(self, max_bytes: int = DEFAULT_CHUNK_BYTES, max_reads: int = 4) -> bool:
        """Read what was appended since the last poll; True when the visible text changed."""
        if file_size(self.path) - self.offset > self.skip_threshold:
            self._jump_to_tail()
        changed = False
        for _ in range(max_reads):
            chunk = read_log_chunk(self.path, self.offset, max_bytes)
            if chunk.reset:
                self.lines.clear()
                self.partial = ""
                changed = True
            for line in chunk.lines:
                self._append(line)
                changed = True
            if chunk.partial != self.partial:
                self.partial = chunk.partial[: self.max_line_chars]
                changed = True
            advanced = chunk.offset != self.offset
            self.offset = chunk.offset
            if not advanced or not chunk.lines:
                break
        return changed

    def text(self) -> str:
        if self.partial:
            return "\n".join([*self.lines, self.partial])
        return "\n".join(self.lines)
