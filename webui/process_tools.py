"""Process helpers for the run supervisor: liveness with pid-reuse guard, session members, signals.

A supervised run lives in its own session (the launcher calls setsid), so "every process of the run"
is "every process whose session id is the launcher's pid". That survives grandchildren that start
their own process group; only a process that calls setsid again escapes, and training code does not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable

import psutil

# create_time is reported with a resolution of 1/CLK_TCK (10 ms); allow a little slack when comparing.
_CREATE_TIME_TOLERANCE_S = 0.05


def process_create_time(pid: int) -> float | None:
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def is_process_alive(pid: int | None, create_time: float | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if given, started at ``create_time`` (guards pid reuse)."""
    if not pid or pid <= 0:
        return False
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(proc.create_time() - create_time) <= _CREATE_TIME_TOLERANCE_S
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    except psutil.AccessDenied:
        return True  # exists but belongs to someone else; only possible after pid reuse without create_time


def session_members(sid: int | None) -> list[psutil.Process]:
    """Live (non-zombie) processes whose session id is ``sid``."""
    if not sid or sid <= 0:
        return []
    members: list[psutil.Process] = []
    for proc in psutil.process_iter(["status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if os.getsid(proc.pid) == sid:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def signal_group(pgid: int | None, sig: int) -> bool:
    """Send ``sig`` to a process group; False when the group no longer exists."""
    if not pgid or pgid <= 1:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_session(sid: int | None, extra_groups: tuple[int | None, ...] = ()) -> int:
    """SIGKILL every process of the session (and the given groups); returns how many were signalled."""
    count = 0
    for pgid in extra_groups:
        signal_group(pgid, signal.SIGKILL)
    for proc in session_members(sid):
        with contextlib.suppress(psutil.Error):
            proc.send_signal(signal.SIGKILL)
            count += 1
    return count


def wait_until(condition: Callable[[], bool], timeout_s: float, interval_s: float = 0.05) -> bool:
    """Poll ``condition`` until it holds or ``timeout_s`` passes; returns its last value."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while True:
        if condition():
            return True
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return condition()
        time.sleep(min(interval_s, remaining))


def signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"
