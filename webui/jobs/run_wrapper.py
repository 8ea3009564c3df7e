"""Launcher that sits between the UI and a supervised child, keeps track of its processes, records the end.

    python -m webui.jobs.run_wrapper --output-dir DIR --run-id ID -- argv...

The UI starts this wrapper in a new session; the wrapper starts the child in its own process group
inside that session, forwards SIGINT/SIGTERM/SIGHUP to the child's group (so a stop reaches the
child exactly once), waits, and writes the exit code into DIR/run.json. A UI that was restarted
meanwhile is not the child's parent and could not learn the exit code otherwise.

The wrapper is a child subreaper: a descendant whose parent dies (also one that left the session with
setsid) is re-parented to the wrapper, so it stays findable. While the child runs, the wrapper records
its descendants (pid + create time) in run.json, for a supervisor that has to clean up after a killed
wrapper. When the child has exited, whatever it left behind is terminated (SIGTERM, a grace period,
then SIGKILL) before the outcome is recorded: a run that is over has no processes left.
The wrapper exits with the child's exit code (128+N when the child died from signal N). A torchrun
launcher exits 1 when its ranks stopped after saving (130 each); the trainer's ``end`` event tells, and
the run is recorded as stopped with exit 130 (torchrun's own code kept as ``launcher_exit_code``).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import FrameType

import psutil

from webui.jobs import launcher, outcome
from webui.jobs.process_tools import process_create_time, process_tree, set_child_subreaper, signal_name
from webui.jobs.run_record import FAILED, now_iso, read_record, status_from_exit, update_record

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_CANNOT_RUN = 127
WATCH_INTERVAL_S = 0.5  # how often new descendants are looked for (and orphans reaped): ~1 ms per 70 processes
LEFTOVER_GRACE_S = 3.0  # leftovers get this long after SIGTERM before SIGKILL
_CLEANUP_ROUNDS = 5  # a leftover may fork while being stopped: look again, a bounded number of times


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        print("error: run_wrapper needs '--' followed by the command to run", file=sys.stderr)
        raise SystemExit(2)
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m webui.jobs.run_wrapper")
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--run-id", required=True)
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("no command after '--'")
    return args, command


class DescendantWatch:
    """The wrapper's descendants as they appear, recorded in run.json; reaps adopted orphans that exited."""

    def __init__(self, output_dir: Path, run_id: str, child_pid: int) -> None:
        self.output_dir, self.run_id, self.child_pid = output_dir, run_id, child_pid
        self.me = psutil.Process()
        self.known: dict[int, float] = {}

    def _reap_orphans(self) -> None:
        """Adopted orphans are our children once they exit: collect them (never the main child: Popen does)."""
        with contextlib.suppress(psutil.Error):
            for proc in self.me.children():
                if proc.pid == self.child_pid:
                    continue
                with contextlib.suppress(psutil.Error, ChildProcessError, OSError):
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        os.waitpid(proc.pid, os.WNOHANG)

    def scan(self) -> None:
        self._reap_orphans()
        current: dict[int, float] = {}
        for proc in process_tree(self.me)[1:]:
            with contextlib.suppress(psutil.Error):
                current[proc.pid] = proc.create_time()
        if any(self.known.get(pid) != created for pid, created in current.items()):
            self.known = current  # the dead are dropped, so the record stays as small as the run
            update_record(self.output_dir, self.run_id,
                          descendants=[[pid, created] for pid, created in sorted(current.items())])

    def stop_leftovers(self) -> int:
        """Terminate what the child left behind (SIGTERM, grace, SIGKILL); returns how many there were."""
        seen: set[int] = set()
        for _ in range(_CLEANUP_ROUNDS):
            self._reap_orphans()
            leftovers = process_tree(self.me)[1:]
            if not leftovers:
                break
            seen.update(proc.pid for proc in leftovers)
            for sig, wait_s in ((signal.SIGTERM, LEFTOVER_GRACE_S), (signal.SIGKILL, LEFTOVER_GRACE_S)):
                for proc in leftovers:
                    with contextlib.suppress(psutil.Error):
                        proc.send_signal(sig)
                _gone, leftovers = psutil.wait_procs(leftovers, timeout=wait_s)  # reaps our own children
                if not leftovers:
                    break
        self._reap_orphans()
        return len(seen)


def main(argv: list[str] | None = None) -> int:
    args, command = _parse(sys.argv[1:] if argv is None else argv)
    pending: list[int] = []
    child: subprocess.Popen | None = None

    def forward(signum: int, _frame: FrameType | None) -> None:
        if child is None:
            pending.append(signum)
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signum)

    for sig in _FORWARDED:
        signal.signal(sig, forward)
    set_child_subreaper()

    try:
        # process_group=0: the child leads its own group, so a signal to the wrapper's group reaches
        # the child only through forward(), once.
        child = subprocess.Popen(command, stdin=subprocess.DEVNULL, process_group=0)
    except OSError as exc:
        print(f"error: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        update_record(args.output_dir, args.run_id, status=FAILED, exit_code=EXIT_CANNOT_RUN,
                      signal=None, ended_at=now_iso())
        return EXIT_CANNOT_RUN

    update_record(args.output_dir, args.run_id, child_pid=child.pid, child_pgid=child.pid,
                  child_create_time=process_create_time(child.pid))
    for signum in pending:
        forward(signum, None)

    watch = DescendantWatch(args.output_dir, args.run_id, child.pid)
    while True:  # the trainer decides how long saving takes; the UI escalates if needed
        try:
            returncode = child.wait(timeout=WATCH_INTERVAL_S)
            break
        except subprocess.TimeoutExpired:
            watch.scan()
    leftovers = watch.stop_leftovers()
    if leftovers:
        print(f"[supervisor] stopped {leftovers} process(es) the run left behind", file=sys.stderr, flush=True)
    signal_num = -returncode if returncode < 0 else None
    exit_code = 128 + signal_num if signal_num else returncode
    extra: dict[str, int] = {}
    if signal_num:
        print(f"[supervisor] process ended by {signal_name(signal_num)}", file=sys.stderr, flush=True)
    elif launcher.is_launch_command(command):
        started = (read_record(args.output_dir) or {}).get("started_at_epoch")
        ranks_exit = outcome.launcher_exit(exit_code, outcome.read_run_events(args.output_dir, started))
        if ranks_exit != exit_code:
            print(f"[supervisor] torchrun exited {exit_code}: its ranks stopped after rank 0 saved",
                  file=sys.stderr, flush=True)
            extra["launcher_exit_code"] = exit_code
            exit_code = ranks_exit
    update_record(args.output_dir, args.run_id, status=status_from_exit(exit_code, signal_num),
                  exit_code=exit_code, signal=signal_num, ended_at=now_iso(), descendants=[], **extra)
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
