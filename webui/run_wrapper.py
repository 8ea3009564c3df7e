"""Launcher that sits between the UI and a supervised child and records how the child ended.

    python -m webui.run_wrapper --output-dir DIR --run-id ID -- argv...

The UI starts this wrapper in a new session; the wrapper starts the child in its own process group
inside that session, forwards SIGINT/SIGTERM/SIGHUP to the child's group (so a stop reaches the
child exactly once), waits, and writes the exit code into DIR/run.json. A UI that was restarted
meanwhile is not the child's parent and could not learn the exit code otherwise.
The wrapper exits with the child's exit code (128+N when the child died from signal N).
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

from webui.process_tools import process_create_time, signal_name
from webui.run_record import FAILED, now_iso, status_from_exit, update_record

_FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
EXIT_CANNOT_RUN = 127


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    if "--" not in argv:
        print("error: run_wrapper needs '--' followed by the command to run", file=sys.stderr)
        raise SystemExit(2)
    split = argv.index("--")
    parser = argparse.ArgumentParser(prog="python -m webui.run_wrapper")
    parser.add_argument("--output-dir", required=True, type=Path)
    parser.add_argument("--run-id", required=True)
    args = parser.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not command:
        parser.error("no command after '--'")
    return args, command


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

    returncode = child.wait()  # the trainer decides how long saving takes; the UI escalates if needed
    signal_num = -returncode if returncode < 0 else None
    exit_code = 128 + signal_num if signal_num else returncode
    if signal_num:
        print(f"[supervisor] process ended by {signal_name(signal_num)}", file=sys.stderr, flush=True)
    update_record(args.output_dir, args.run_id, status=status_from_exit(exit_code, signal_num),
                  exit_code=exit_code, signal=signal_num, ended_at=now_iso())
    return exit_code


if __name__ == "__main__":
    raise SystemExit(main())
