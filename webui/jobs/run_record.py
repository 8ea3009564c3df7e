"""run.json: the record of a supervised run, shared by the UI and the run wrapper.

Both processes read-modify-write the record (the UI at start and stop, the wrapper when the child
exits), so every update holds an advisory lock on a sibling lock file and replaces the JSON
atomically. Taking the lock gives up after a few seconds and writes anyway: the atomic rename still
keeps the file readable, and nothing here may wait forever.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text

RUN_JSON = "run.json"
CONSOLE_LOG = "console.log"
_LOCK_NAME = ".run.json.lock"
_LOCK_TIMEOUT_S = 5.0

RUNNING = "running"
FINISHED = "finished"
FAILED = "failed"
STOPPED = "stopped"
KILLED = "killed"
FINAL_STATES = (FINISHED, FAILED, STOPPED, KILLED)

EXIT_STOPPED = 130
EXIT_REFUSED = 2


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def status_from_exit(exit_code: int | None, signal_num: int | None) -> str:
    """The final state implied by how the child ended."""
    if signal_num:
        return KILLED
    if exit_code == 0:
        return FINISHED
    if exit_code == EXIT_STOPPED:
        return STOPPED
    return FAILED


def read_record(output_dir: Path) -> dict[str, Any] | None:
    """The run record, or None when there is none (or it is unreadable, which only a crash mid-copy causes)."""
    path = Path(output_dir) / RUN_JSON
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


@contextlib.contextmanager
def record_lock(output_dir: Path, timeout_s: float = _LOCK_TIMEOUT_S) -> Iterator[bool]:
    """Hold the record's lock (yields False if it could not be had within ``timeout_s``)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(output_dir / _LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
    locked = False
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    break
                time.sleep(0.02)
        yield locked
    finally:
        if locked:
            fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_record(output_dir: Path, record: dict[str, Any]) -> None:
    atomic_write_text(Path(output_dir) / RUN_JSON, json.dumps(record, indent=2, sort_keys=True) + "\n")


def update_record(output_dir: Path, run_id: str | None = None, **changes: Any) -> dict[str, Any] | None:
    """Merge ``changes`` into run.json under the lock.

    With ``run_id``, the update applies only while the record still belongs to that run (a stale
    wrapper must never overwrite a newer run's record); returns the new record, or None if skipped.
    """
    with record_lock(output_dir):
        record = read_record(output_dir) or {}
        if run_id is not None and record.get("run_id") != run_id:
            return None
        record.update(changes)
        write_record(output_dir, record)
        return record
