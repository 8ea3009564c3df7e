"""Evaluation at saves, the trainer's side: one supervised child process fed through a pipe.

``--eval-at-saves`` starts ``python -m trainer.evaluate OUTPUT_DIR --follow`` once (rank 0, after
``train_config.yaml`` is written: the child reads its options there). After each committed save the
trainer writes the step number into the child's stdin (a few bytes into a pipe: it never waits for the
evaluation), and the child measures the checkpoints one after another, at a lower CPU priority and on
``--eval-threads`` threads (or on ``--eval-device``), in its own process. So the training step never waits
for it and its RNG streams, data position and weights are exactly as without evaluation.

At the end of training the pipe is closed and the trainer waits (at most ``DRAIN_TIMEOUT_S``) for the
saves already announced to be measured; on a stop or an error the child is ended (SIGTERM, then SIGKILL)
without waiting, and ``python -m trainer.evaluate OUTPUT_DIR`` measures what was left. A child that dies
is reported once; training goes on.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

DRAIN_TIMEOUT_S = 1800.0
END_TIMEOUT_S = 10.0
NICENESS = 10


class EvalProcess:
    def __init__(self, output_dir: Path, threads: int, say: Callable[[str], None]) -> None:
        self.output_dir, self.threads, self.say = Path(output_dir), max(1, int(threads)), say
        self.child: subprocess.Popen | None = None
        self.announced: list[int] = []
        self._reported_dead = False

    def start(self) -> None:
        # The trainer's working directory (relative paths of train_config.yaml mean the same), and this
        # project's packages importable from there.
        project = str(Path(__file__).resolve().parents[2])
        python_path = os.pathsep.join(p for p in (project, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "OMP_NUM_THREADS": str(self.threads), "MKL_NUM_THREADS": str(self.threads),
               "PYTHONUNBUFFERED": "1", "PYTHONPATH": python_path}
        argv = [sys.executable, "-m", "trainer.evaluate", str(self.output_dir.resolve()), "--follow"]
        self.child = subprocess.Popen(argv, stdin=subprocess.PIPE, env=env, close_fds=True)
        with contextlib.suppress(OSError, AttributeError):
            os.setpriority(os.PRIO_PROCESS, self.child.pid, NICENESS)  # it gets the cores training leaves idle
        self.say(f"evaluation at saves: process {self.child.pid} measures each committed save "
                 f"({self.threads} thread(s), lower priority)")

    @property
    def alive(self) -> bool:
        return self.child is not None and self.child.poll() is None

    def announce(self, step: int) -> None:
        """Tell the child that ``model_step<step>.pth`` is committed (never blocks on the evaluation)."""
        if self.child is None or self.child.stdin is None:
            return
        if not self.alive:
            self._report_dead()
            return
        try:
            self.child.stdin.write(f"{int(step)}\n".encode())
            self.child.stdin.flush()
            self.announced.append(int(step))
        except (BrokenPipeError, OSError):
            self._report_dead()

    def _report_dead(self) -> None:
        if not self._reported_dead:
            self._reported_dead = True
            code = self.child.poll() if self.child is not None else None
            self.say(f"warning: the evaluation process ended (exit code {code}); training goes on without it "
                     f"(measure the checkpoints later: python -m trainer.evaluate {self.output_dir})")

    def finish(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """End of training: no more saves; wait for the announced ones to be measured."""
        if self.child is None:
            return
        if self.alive and self.announced:
            self.say(f"waiting for the evaluation to measure the saves announced to it ({len(self.announced)} in all; "
                     f"at most {timeout_s:.0f} s)")
        self._close_stdin()
        try:
            code = self.child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.say(f"warning: evaluation still running after {timeout_s:.0f} s: ended; measure the rest with "
                     f"python -m trainer.evaluate {self.output_dir}")
            self.end()
            return
        if code != 0:
            self._report_dead()

    def end(self) -> None:
        """A stop or an error: end the child now (SIGTERM, then SIGKILL)."""
        if self.child is None:
            return
        self._close_stdin()
        if self.child.poll() is None:
            self.child.terminate()
            try:
                self.child.wait(timeout=END_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.child.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.child.wait(timeout=END_TIMEOUT_S)

    def _close_stdin(self) -> None:
        if self.child is not None and self.child.stdin is not None and not self.child.stdin.closed:
            with contextlib.suppress(OSError):
                self.child.stdin.close()
