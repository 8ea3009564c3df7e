"""How a run ended, from what the trainer recorded: its metrics.jsonl events and the exit in run.json.

The trainer writes ``start`` or ``resume`` when it begins, ``save`` after each committed checkpoint and
``end`` with a ``status`` (completed, stopped, failed, save_failed, nonfinite, ...) and, on failure, an
``error`` line. The saved step, the outcome and the kind of failure come from those events and the
exit code, never from the wording of console lines. The console is only quoted: the last ``error:``
line is shown as the detail of a run that ended before it could record anything (e.g. a refused flag).
"""

from __future__ import annotations

import json
import os
import re
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webui.jobs.process_tools import signal_name
from webui.jobs.run_record import EXIT_REFUSED, EXIT_STOPPED

METRICS_FILE = "metrics.jsonl"

OUT_OF_MEMORY = "out of memory"
MISSING_FILE = "missing file"
INVALID_CHECKPOINT = "invalid checkpoint"
SAVE_FAILED = "checkpoint save failed"
NONFINITE = "non-finite loss"
REFUSED = "refused"
KILLED_BY_SIGNAL = "killed by signal"
UNKNOWN = "unknown"

# The trainer's ``end`` statuses that name their own kind of failure.
_STATUS_KINDS = {"save_failed": SAVE_FAILED, "nonfinite": NONFINITE}
# Kinds named by the exception type the trainer records in its end event (``error_type``).
_TYPE_KINDS = {
    "OutOfMemoryError": OUT_OF_MEMORY, "MemoryError": OUT_OF_MEMORY,
    "CheckpointError": INVALID_CHECKPOINT, "StateDictMismatchError": INVALID_CHECKPOINT,
    "SaveFailed": SAVE_FAILED, "CheckpointSaveError": SAVE_FAILED, "NonFiniteLoss": NONFINITE,
    "FileNotFoundError": MISSING_FILE,
}
# Generic types (RuntimeError, OSError, ...) and runs written before ``error_type`` existed are told apart by
# the recorded message instead (the exception's one line), in this order.
_ERROR_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (OUT_OF_MEMORY, re.compile(
        r"out of memory|OutOfMemoryError|\bMemoryError\b|Cannot allocate memory|CUBLAS_STATUS_ALLOC_FAILED",
        re.IGNORECASE)),
    (INVALID_CHECKPOINT, re.compile(
        r"not a loadable checkpoint|CheckpointError|StateDictMismatch|invalid checkpoint|"
        r"incompatible checkpoint|checkpoint .*(?:corrupt|truncated|mismatch)", re.IGNORECASE)),
    (MISSING_FILE, re.compile(r"FileNotFoundError|No such file or directory|does not exist|not found",
                              re.IGNORECASE)),
)
_READ_CHUNK = 64 * 1024
_CLOCK_SLACK_S = 1.0  # event times are rounded; the record's start is taken just before the launch


@dataclass(frozen=True)
class RunEvents:
    """The events of one run (not of earlier runs in the same metrics.jsonl)."""

    begin: dict[str, Any] | None = None  # its start or resume event
    last_save: dict[str, Any] | None = None
    end: dict[str, Any] | None = None

    @property
    def saved_step(self) -> int | None:
        return _step(self.last_save)

    @property
    def resumed_step(self) -> int | None:
        return _step(self.begin) if self.begin is not None and self.begin.get("event") == "resume" else None

    @property
    def end_status(self) -> str | None:
        status = (self.end or {}).get("status")
        return str(status) if status is not None else None


def _step(event: dict[str, Any] | None) -> int | None:
    step = (event or {}).get("step")
    return step if isinstance(step, int) and not isinstance(step, bool) else None


def _reversed_lines(path: Path) -> Iterator[bytes]:
    """The file's complete lines, last first, read backwards in bounded chunks (an unfinished last line is
    left out: the trainer may be writing it)."""
    with open(path, "rb") as handle:
        position = handle.seek(0, os.SEEK_END)
        pending = b""  # the start of a line whose beginning lies in an earlier chunk
        seen_newline = False
        while position > 0:
            size = min(_READ_CHUNK, position)
            position -= size
            handle.seek(position)
            data = handle.read(size) + pending
            if not seen_newline:
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = b""
                    continue
                data, seen_newline = data[:cut], True
            lines = data.split(b"\n")
            pending = lines[0]
            yield from reversed(lines[1:])
        if seen_newline and pending:
            yield pending


def read_run_events(output_dir: Path, since_epoch: float | None) -> RunEvents:
    """The begin, last save and end events written since ``since_epoch`` (the run's start, run.json)."""
    path = Path(output_dir) / METRICS_FILE
    begin = last_save = end = None
    try:
        for line in _reversed_lines(path):
            try:
                event = json.loads(line)
            except ValueError:
                continue  # a line torn by a kill
            if not isinstance(event, dict):
                continue
            moment = event.get("time")
            if since_epoch is not None and isinstance(moment, (int, float)) and moment < since_epoch - _CLOCK_SLACK_S:
                break  # an earlier run's event (a resumed run keeps them)
            kind = event.get("event")
            if kind == "end" and end is None and last_save is None:
                end = event
            elif kind == "save" and last_save is None:
                last_save = event
            elif kind in ("start", "resume"):
                begin = event
                break
    except OSError:
        pass
    return RunEvents(begin=begin, last_save=last_save, end=end)


@dataclass(frozen=True)
class Failure:
    kind: str  # one of the constants above
    detail: str  # the recorded error, or a sentence

    def describe(self) -> str:
        return f"{self.kind}: {self.detail}" if self.detail else self.kind


_RANK_PREFIX = re.compile(r"^\[[A-Za-z_]*\d+\]:")  # torchrun's --tee prefix, e.g. "[default1]:"


def last_error_line(tail: str) -> str:
    """The console's last ``error: ...`` line (quoted as the detail of a run that recorded no error); under
    torchrun, with the rank's prefix kept so the reader knows which rank said it."""
    lines = [line.strip() for line in tail.splitlines()
             if _RANK_PREFIX.sub("", line.strip()).lower().startswith("error")]
    return lines[-1] if lines else ""


def _kind_of_error(error: str) -> str | None:
    for kind, pattern in _ERROR_KINDS:
        if pattern.search(error):
            return kind
    return None


def classify_failure(exit_code: int | None, signal_num: int | None, events: RunEvents, tail: str = "",
                     stop_requested: bool = False) -> Failure:
    """Name what went wrong from the exit (run.json) and the trainer's end event."""
    if signal_num:
        detail = f"{signal_name(signal_num)} ({signal_num})"
        if signal_num == signal.SIGKILL and stop_requested:
            detail += ", force-stopped; progress since the last checkpoint is lost"
        elif signal_num == signal.SIGKILL:
            detail += ", not by the studio: often the system's out-of-memory killer"
        return Failure(KILLED_BY_SIGNAL, detail)
    status = events.end_status
    error = str((events.end or {}).get("error") or "")
    if status in _STATUS_KINDS:
        return Failure(_STATUS_KINDS[status], error)
    if status is not None and error:
        kind = _TYPE_KINDS.get(str((events.end or {}).get("error_type") or "")) or _kind_of_error(error)
        if kind is not None:
            return Failure(kind, error)
        return Failure(REFUSED if exit_code == EXIT_REFUSED else UNKNOWN, error)
    # Nothing recorded: the run ended before the trainer could (a refused flag, a crash at import).
    quoted = last_error_line(tail)
    if exit_code == EXIT_REFUSED:
        return Failure(REFUSED, quoted or "the trainer refused to start (exit 2)")
    if exit_code is None:
        return Failure(UNKNOWN, "the run ended without recording an exit code")
    return Failure(UNKNOWN, quoted or "it ended without recording why; see the log")


STOPPED_STATUS = "stopped"  # the trainer's end status after a stop that saved


def launcher_exit(exit_code: int, events: RunEvents) -> int:
    """The exit code a torchrun run stands for. torchrun exits 1 when any rank exits non-zero, also when every
    rank stopped on a signal after rank 0 saved (130 each); the trainer's ``end`` event tells that case apart."""
    if exit_code not in (0, EXIT_STOPPED) and events.end_status == STOPPED_STATUS:
        return EXIT_STOPPED
    return exit_code


def stop_summary(events: RunEvents) -> str | None:
    """What a stopped run kept: the step of its last checkpoint, or that it saved none (None: a run that
    records no events, e.g. TensorBoard)."""
    if events.saved_step is not None:
        return f"saved at step {events.saved_step}"
    if events.resumed_step is not None:
        return (f"no new checkpoint: stopped at step {events.resumed_step}, where it resumed "
                "(that checkpoint is unchanged)")
    if events.begin is not None:
        return "before the first checkpoint: nothing saved"
    return None
