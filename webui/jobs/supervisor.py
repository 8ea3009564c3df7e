"""The run supervisor: starts, watches, stops and re-finds long runs (training, TensorBoard, preprocessing).

One RunSupervisor owns one output directory. The run is started through ``webui.jobs.run_wrapper`` in a
new session, so it outlives the browser and the UI process; ``run.json`` records it, ``console.log``
collects its stdout and stderr. After a UI restart, ``RunSupervisor.attach(output_dir)`` finds the run
again and, through the wrapper's record, its true exit code. No Gradio in here, no threads.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psutil

from data_tools.paths import expand_path
from webui.jobs import launcher, outcome
from webui.jobs.logtail import read_complete_lines, tail_text
from webui.jobs.process_tools import (
    is_process_alive,
    matching_process,
    process_create_time,
    run_processes,
    signal_group,
    signal_own_groups,
    signal_processes,
    wait_until,
)
from webui.jobs.run_record import (
    CONSOLE_LOG,
    FAILED,
    FINAL_STATES,
    KILLED,
    RUNNING,
    now_iso,
    read_record,
    record_lock,
    status_from_exit,
    update_record,
    write_record,
)
from webui.jobs.run_status import IDLE, RunAlreadyActive, RunStatus

REPO_ROOT = Path(__file__).resolve().parents[2]
_TAIL_BYTES = 8192
_EXIT_GRACE_S = 2.0
_LAUNCH_GRACE_S = 30.0
_LAUNCHER_EXIT_S = 10.0  # torchrun notices its workers are gone within its monitor interval (0.1 s)


TEST_HOOK_PREFIX = "STUDIO_TEST_"  # the trainer's fault-injection switches (trainer/signals.py)


def child_env(env: dict[str, str] | None, allow_test_hooks: bool = False) -> dict[str, str]:
    """The environment of a supervised run: ``env`` (default: ours), unbuffered, importing this checkout.

    Fault-injection variables (``STUDIO_TEST_*``) are removed unless a test asks for them: one left over in
    a user's shell would otherwise kill or stop their real training run.
    """
    merged = dict(os.environ if env is None else env)
    if not allow_test_hooks:
        merged = {key: value for key, value in merged.items() if not key.startswith(TEST_HOOK_PREFIX)}
    merged["PYTHONUNBUFFERED"] = "1"
    # The wrapper and `python -m trainer...` must import from this checkout whatever the cwd.
    paths = [str(REPO_ROOT), *[p for p in merged.get("PYTHONPATH", "").split(os.pathsep) if p]]
    merged["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    return merged


def _roots(record: dict[str, Any]) -> list[tuple[int | None, float | None]]:
    """(pid, create_time) of the run's wrapper, its child and the descendants the wrapper recorded."""
    roots: list[tuple[int | None, float | None]] = [
        (record.get("pid"), record.get("create_time")),
        (record.get("child_pid"), record.get("child_create_time")),
    ]
    for entry in record.get("descendants") or []:
        if isinstance(entry, (list, tuple)) and len(entry) == 2:
            roots.append((int(entry[0]), float(entry[1])))
    return roots


class RunSupervisor:
    """Start, watch and stop the run of one output directory."""

    def __init__(self, output_dir: Path | str) -> None:
        self.output_dir = expand_path(output_dir, "output dir").resolve()
        self._proc: subprocess.Popen | None = None  # the wrapper, when this process started it
        self._proc_run_id: str | None = None
        self._lock = threading.Lock()  # Gradio calls handlers from worker threads
        self._cache_key: tuple | None = None
        self._cache: tuple[outcome.Failure | None, outcome.RunEvents, str] = (None, outcome.RunEvents(), "")

    # -- paths and records ------------------------------------------------------------------

    @property
    def console_log(self) -> Path:
        return self.output_dir / CONSOLE_LOG

    @classmethod
    def attach(cls, output_dir: Path) -> RunSupervisor:
        """A supervisor for a run started by another (possibly dead) UI process, found from run.json."""
        supervisor = cls(output_dir)
        supervisor.poll()
        return supervisor

    def record(self) -> dict[str, Any] | None:
        return read_record(self.output_dir)

    def _wrapper_alive(self, record: dict[str, Any]) -> bool:
        if self._proc is not None and self._proc_run_id == record.get("run_id"):
            return self._proc.poll() is None
        return is_process_alive(record.get("pid"), record.get("create_time"))

    def _is_alive(self, record: dict[str, Any]) -> bool:
        if record.get("pid") is None:
            # Recorded but not launched yet (another UI process is between the record and Popen).
            return time.time() - float(record.get("started_at_epoch") or 0.0) < _LAUNCH_GRACE_S
        if self._wrapper_alive(record):
            return True
        # The wrapper is gone (killed alone): an orphaned child or descendant still counts as the run.
        return any(is_process_alive(pid, created) for pid, created in _roots(record)[1:])

    # -- start ---------------------------------------------------------------------------------
    def start(self, argv: list[str], cwd: Path | None = None, env: dict[str, str] | None = None,
              label: str = "", allow_test_hooks: bool = False) -> RunStatus:
        """Launch ``argv`` as this output dir's run; raises RunAlreadyActive if one is going on.

        ``allow_test_hooks`` keeps ``STUDIO_TEST_*`` variables in the run's environment (tests only).
        """
        if not argv:
            raise ValueError("empty command")
        with self._lock:
            self.output_dir.mkdir(parents=True, exist_ok=True)
            run_id = uuid.uuid4().hex
            with record_lock(self.output_dir):
                previous = read_record(self.output_dir)
                if previous and previous.get("status") == RUNNING:
                    if self._is_alive(previous):
                        raise RunAlreadyActive(self.output_dir, previous.get("pid"))
                    self._finalize_lost(previous, locked=True)
                log_offset = self.console_log.stat().st_size if self.console_log.exists() else 0
                record: dict[str, Any] = {
                    "run_id": run_id,
                    "label": label,
                    "argv": list(argv),
                    "cwd": str(Path(cwd or REPO_ROOT).resolve()),
                    "status": RUNNING,
                    "started_at": now_iso(),
                    "started_at_epoch": time.time(),
                    "ended_at": None,
                    "exit_code": None,
                    "signal": None,
                    "stop_requested": False,
                    "log_offset": log_offset,
                    "pid": None,
                    "pgid": None,
                    "sid": None,
                    "create_time": None,
                    "child_pid": None,
                }
                write_record(self.output_dir, record)

            launcher = [sys.executable, "-m", "webui.jobs.run_wrapper", "--output-dir", str(self.output_dir),
                        "--run-id", run_id, "--", *argv]
            with open(self.console_log, "ab", buffering=0) as log:
                log.write(f"\n=== {record['started_at']} run {run_id[:8]}: {shlex.join(argv)}\n".encode())
                try:
                    proc = subprocess.Popen(
                        launcher, cwd=record["cwd"], env=child_env(env, allow_test_hooks), stdin=subprocess.DEVNULL,
                        stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                    )
                except OSError as exc:
                    update_record(self.output_dir, run_id, status=FAILED, exit_code=127, ended_at=now_iso())
                    raise RuntimeError(f"cannot start {argv[0]}: {exc}") from exc
            self._proc, self._proc_run_id = proc, run_id
            update_record(self.output_dir, run_id, pid=proc.pid, pgid=proc.pid, sid=proc.pid,
                          create_time=process_create_time(proc.pid), launcher_argv=launcher)
        return self.poll()

    # -- status --------------------------------------------------------------------------------
    def _finalize_lost(self, record: dict[str, Any], locked: bool = False) -> dict[str, Any]:
        """Record the end of a run whose wrapper could not (it was killed); returns the new record."""
        exit_code: int | None = None
        signal_num: int | None = None
        if self._proc is not None and self._proc_run_id == record.get("run_id"):
            returncode = self._proc.poll()
            if returncode is not None and returncode < 0:
                signal_num = -returncode
                exit_code = 128 + signal_num
            elif returncode is not None:
                exit_code = returncode
        state = status_from_exit(exit_code, signal_num) if exit_code is not None else KILLED
        changes = {"status": state, "exit_code": exit_code, "signal": signal_num, "ended_at": now_iso(),
                   "ended_without_record": True}
        if locked:
            record.update(changes)
            write_record(self.output_dir, record)
            return record
        return update_record(self.output_dir, record.get("run_id"), **changes) or record

    def poll(self) -> RunStatus:
        """Refresh and return the run's status (reaps our own wrapper; finalizes runs that vanished)."""
        with self._lock:
            record = read_record(self.output_dir)
            if record is None:
                return RunStatus(state=IDLE, output_dir=self.output_dir)
            if record.get("status") == RUNNING and not self._is_alive(record):
                # The wrapper writes the outcome just before it exits; read again before concluding.
                record = read_record(self.output_dir) or record
                if record.get("status") == RUNNING:
                    record = self._finalize_lost(record)
            elif record.get("status") in FINAL_STATES:
                # The wrapper records the outcome a moment before it exits: let it finish exiting, so that
                # a final state also means the run's processes are gone.
                wait_until(lambda: not self._wrapper_alive(record), _EXIT_GRACE_S)
            if self._proc is not None and self._proc.poll() is not None:
                self._proc = None  # reaped
            return self._status_from(record)

    def _status_from(self, record: dict[str, Any]) -> RunStatus:
        state = str(record.get("status") or IDLE)
        failure, events, tail = None, outcome.RunEvents(), ""
        if state in FINAL_STATES:
            key = (record.get("run_id"), state, record.get("exit_code"))
            if self._cache_key != key:
                tail = tail_text(self.console_log, _TAIL_BYTES, int(record.get("log_offset") or 0))
                events = outcome.read_run_events(self.output_dir, record.get("started_at_epoch"))
                if state in (FAILED, KILLED):
                    failure = outcome.classify_failure(record.get("exit_code"), record.get("signal"), events, tail,
                                                       bool(record.get("stop_requested")))
                self._cache_key, self._cache = key, (failure, events, tail)
            failure, events, tail = self._cache
        return RunStatus(
            state=state,
            output_dir=self.output_dir,
            label=str(record.get("label") or ""),
            run_id=record.get("run_id"),
            pid=record.get("pid"),
            argv=tuple(record.get("argv") or ()),
            started_at=record.get("started_at"),
            ended_at=record.get("ended_at"),
            exit_code=record.get("exit_code"),
            signal=record.get("signal"),
            stop_requested=bool(record.get("stop_requested")),
            log_offset=int(record.get("log_offset") or 0),
            failure=failure,
            events=events,
            tail=tail,
            record=record,
        )

    def read_log(self, offset: int, max_bytes: int = 64 * 1024) -> tuple[str, int]:
        """Complete log lines from byte ``offset`` (progress lines collapsed) and the next offset."""
        return read_complete_lines(self.console_log, offset, max_bytes)

    def log_tail(self, max_bytes: int = _TAIL_BYTES) -> str:
        record = read_record(self.output_dir) or {}
        return tail_text(self.console_log, max_bytes, int(record.get("log_offset") or 0))

    # -- stop ----------------------------------------------------------------------------------
    def run_processes(self, record: dict[str, Any] | None = None) -> list[psutil.Process]:
        """Every live process of the current run: the wrapper's tree (which adopts orphans), its session,
        and the descendants it recorded (also those that left the session with setsid)."""
        record = record if record is not None else (read_record(self.output_dir) or {})
        if not record.get("run_id"):
            return []
        latest = read_record(self.output_dir) or record
        if latest.get("run_id") == record.get("run_id"):
            record = latest  # the wrapper keeps adding descendants while the run goes
        return run_processes(_roots(record), record.get("sid"))

    def processes(self) -> list[int]:
        """PIDs of every live process of the current run."""
        return [proc.pid for proc in self.run_processes()]

    def _signal_run(self, record: dict[str, Any], sig: int) -> None:
        """Deliver ``sig`` once: to the wrapper's group (it forwards), or, when the wrapper is gone, to the
        child's group and every other process of the run (nobody else would stop them)."""
        wrapper_alive = is_process_alive(record.get("pid"), record.get("create_time"))
        if wrapper_alive and signal_group(record.get("pgid"), sig):
            return
        signal_group(record.get("child_pgid"), sig)
        if sig != signal.SIGINT:
            signal_processes(self.run_processes(record), sig)

    def _wait_gone(self, record: dict[str, Any], timeout_s: float) -> bool:
        def gone() -> bool:
            if self._proc is not None:
                self._proc.poll()  # reap our wrapper so it does not linger as a zombie
            return not self._is_alive(record) and not self.run_processes(record)

        return wait_until(gone, timeout_s)

    def launcher_workers(self, record: dict[str, Any]) -> list[psutil.Process]:
        """The trainer processes a torchrun run's launcher started (its children); [] for any other run."""
        if not launcher.is_launch_command(record.get("argv") or ()):
            return []
        agent = matching_process(record.get("child_pid"), record.get("child_create_time"))
        if agent is None:
            return []
        with contextlib.suppress(psutil.Error):
            return [proc for proc in agent.children() if proc.status() != psutil.STATUS_ZOMBIE]
        return []

    def stop(self, grace_s: float = 60.0, term_s: float = 15.0, kill_s: float = 10.0) -> RunStatus:
        """Graceful stop: SIGINT (the trainer saves, exits 130), then SIGTERM, then SIGKILL to the session.

        Under torchrun the SIGINT goes to the trainer processes themselves, not to the launcher: signalled,
        torchrun would forward it and then SIGKILL the ranks after its own shutdown timeout, whatever a
        save still needs. The launcher exits by itself once its workers have (or gets SIGTERM). Returns
        once no process of the run is left (or raises RuntimeError naming the survivors).
        """
        status = self.poll()
        if not status.running:
            return status
        record = update_record(self.output_dir, status.run_id, stop_requested=True,
                               stop_requested_at=now_iso()) or status.record
        steps: tuple[tuple[int, float], ...] = ((signal.SIGINT, grace_s), (signal.SIGTERM, term_s))
        workers = self.launcher_workers(record)
        if workers:
            identities = [(proc.pid, _created(proc)) for proc in workers]
            signal_own_groups(workers, signal.SIGINT)
            ended = wait_until(lambda: not any(is_process_alive(*identity) for identity in identities), grace_s)
            if ended and self._wait_gone(record, _LAUNCHER_EXIT_S):
                return self.poll()
            steps = ((signal.SIGTERM, term_s),)
        for sig, wait_s in steps:
            self._signal_run(record, sig)
            if self._wait_gone(record, wait_s):
                return self.poll()
        return self._kill(record, kill_s)

    def force_stop(self, kill_s: float = 10.0) -> RunStatus:
        """SIGKILL every process of the run at once (no checkpoint is saved)."""
        status = self.poll()
        if not status.running:
            return status
        record = update_record(self.output_dir, status.run_id, stop_requested=True, force_stopped=True,
                               stop_requested_at=now_iso()) or status.record
        return self._kill(record, kill_s)

    def _kill(self, record: dict[str, Any], kill_s: float) -> RunStatus:
        update_record(self.output_dir, record.get("run_id"), force_stopped=True)
        deadline = time.monotonic() + kill_s
        while True:
            # The whole tree is listed before anything dies, so nothing is re-parented out of sight.
            signal_processes(self.run_processes(record), signal.SIGKILL)
            for pgid in (record.get("pgid"), record.get("child_pgid")):
                signal_group(pgid, signal.SIGKILL)
            if self._wait_gone(record, min(0.5, max(0.0, deadline - time.monotonic()))):
                break
            if time.monotonic() >= deadline:
                survivors = [proc.pid for proc in self.run_processes(record)]
                raise RuntimeError(f"processes of the run survived SIGKILL: {survivors}")
        if self._proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._proc.wait(timeout=1.0)
        return self.poll()


def _created(proc: psutil.Process) -> float | None:
    with contextlib.suppress(psutil.Error):
        return proc.create_time()
    return None
