"""Process helpers for the run supervisor: liveness with pid-reuse guard, a run's processes, signals.

A supervised run lives in its own session, and its wrapper is a child subreaper: a process of the run
whose parent dies is re-parented to the wrapper instead of init. "Every process of the run" is
therefore the wrapper's process tree, plus the session's members, plus the descendants the wrapper
recorded (pid + create time) in case the wrapper itself was killed. A grandchild that calls setsid to
leave the session is still found: it stays in the wrapper's tree.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable

import psutil

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h

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


def matching_process(pid: int | None, create_time: float | None = None) -> psutil.Process | None:
    """The live process ``pid`` if it is the one that started at ``create_time`` (when given), else None."""
    if not pid or pid <= 0 or not is_process_alive(pid, create_time):
        return None
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def process_tree(root: psutil.Process) -> list[psutil.Process]:
    """``root`` and all its live descendants (zombies left out)."""
    try:
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return []
    alive: list[psutil.Process] = []
    for proc in members:
        with contextlib.suppress(psutil.Error):
            if proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(proc)
    return alive


def run_processes(roots: Iterable[tuple[int | None, float | None]], sid: int | None = None) -> list[psutil.Process]:
    """Every live process of a run: the trees under ``roots`` ((pid, create_time) pairs) and the session ``sid``."""
    found: dict[int, psutil.Process] = {}
    for pid, create_time in roots:
        root = matching_process(pid, create_time)
        if root is not None:
            for proc in process_tree(root):
                found.setdefault(proc.pid, proc)
    for proc in session_members(sid):
        found.setdefault(proc.pid, proc)
    return list(found.values())


def set_child_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (Linux prctl); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


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


def signal_processes(processes: Iterable[psutil.Process], sig: int) -> int:
    """Send ``sig`` to each process (psutil refuses a pid that was reused meanwhile); returns how many got it."""
    count = 0
    for proc in processes:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)
            count += 1
    return count


def signal_own_groups(processes: Iterable[psutil.Process], sig: int) -> int:
    """Send ``sig`` to the process group each process leads (what Ctrl-C in its terminal would reach), or to
    the process alone where it leads none; returns how many got it."""
    count = 0
    for proc in processes:
        with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
            if proc.is_running() and os.getpgid(proc.pid) == proc.pid:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
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
