"""What a finished run's exit code and log tail say: the kind of failure and the step it saved at."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from webui.process_tools import signal_name
from webui.run_record import EXIT_REFUSED

OUT_OF_MEMORY = "out of memory"
MISSING_FILE = "missing file"
INVALID_CHECKPOINT = "invalid checkpoint"
REFUSED = "refused"
KILLED_BY_SIGNAL = "killed by signal"
UNKNOWN = "unknown"

# Checked in this order; the first kind with a match wins.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (OUT_OF_MEMORY, re.compile(
        r"out of memory|OutOfMemoryError|\bMemoryError\b|Cannot allocate memory|CUBLAS_STATUS_ALLOC_FAILED",
        re.IGNORECASE)),
    (INVALID_CHECKPOINT, re.compile(
        r"not a loadable checkpoint|CheckpointError|StateDictMismatch|invalid checkpoint|"
        r"incompatible checkpoint|checkpoint .*(?:corrupt|truncated|mismatch)", re.IGNORECASE)),
    (MISSING_FILE, re.compile(
        r"FileNotFoundError|No such file or directory|does not exist|not found", re.IGNORECASE)),
)
_ERROR_LINE = re.compile(r"^\s*(?:error|\w*Error|\w*Exception)\b.*", re.MULTILINE)
_SAVED_STEP = (
    re.compile(r"stopped by signal at step (\d+)"),
    re.compile(r"saved checkpoint step (\d+)"),
)
_RESUMED_STEP = re.compile(r"resumed from .* at step (\d+)")


@dataclass(frozen=True)
class Failure:
    kind: str  # one of the constants above
    detail: str  # the most telling line of the log, or a sentence

    def describe(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


def _last_error_line(tail: str) -> str:
    matches = _ERROR_LINE.findall(tail)
    return matches[-1].strip() if matches else ""


def classify_failure(exit_code: int | None, signal_num: int | None, tail: str,
                     stop_requested: bool = False) -> Failure:
    """Name what went wrong from the exit code and the last lines of the log."""
    if signal_num:
        detail = f"{signal_name(signal_num)} ({signal_num})"
        if signal_num == signal.SIGKILL and stop_requested:
            detail += ", force-stopped; progress since the last checkpoint is lost"
        elif signal_num == signal.SIGKILL:
            detail += ", not by the studio: often the system's out-of-memory killer"
        return Failure(KILLED_BY_SIGNAL, detail)
    error_line = _last_error_line(tail)
    for kind, pattern in _PATTERNS:
        found = [line for line in tail.splitlines() if pattern.search(line)]
        if found:
            return Failure(kind, error_line or found[-1].strip())
    if exit_code == EXIT_REFUSED:
        return Failure(REFUSED, error_line or "the trainer refused to start (exit 2)")
    if exit_code is None:
        return Failure(UNKNOWN, "the run ended without recording an exit code")
    return Failure(UNKNOWN, error_line)


def saved_step(tail: str) -> int | None:
    """The step of the last checkpoint the log reports saving (the stop message first)."""
    for pattern in _SAVED_STEP:
        found = pattern.findall(tail)
        if found:
            return int(found[-1])
    return None


def resumed_step(text: str) -> int | None:
    found = _RESUMED_STEP.findall(text)
    return int(found[-1]) if found else None
