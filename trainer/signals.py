"""Graceful stop: SIGINT/SIGTERM ask the loop to stop at the next optimizer-step boundary.

The handlers only set a flag, so a signal can never interrupt a step or a checkpoint write halfway: the
loop finishes the current optimizer step, saves ``latest.pth`` and exits 130. A second signal while
that happens is reported and ignored (the save is committed first).

Test hooks (environment variables, for the fault-injection tests; unset in normal use). They act only
when ``STUDIO_TEST_HOOKS=1`` is set as well, so one stray variable cannot kill a user's run, and an
active hook is announced in the log at start:

- ``STUDIO_TEST_STOP_AFTER_STEP=N``: after optimizer step N the trainer sends itself SIGINT
  (a deterministic Ctrl-C); ``STUDIO_TEST_STOP_SIGNAL=TERM`` sends SIGTERM instead.
- ``STUDIO_TEST_KILL_AFTER_STEP=N``: after optimizer step N (and any save at that step) the trainer
  SIGKILLs itself, like a pre-empted machine.
  Under torchrun every rank does; with ``STUDIO_TEST_KILL_RANK=R`` only rank R (a dead rank).
- ``STUDIO_TEST_HANG_AFTER_STEP=N``: after optimizer step N the trainer stops working without exiting, like a
  machine that is gone but not yet noticed, so a test can kill a node at a known step; it SIGKILLs itself after
  ``HANG_LIMIT_S`` in case nobody does. Set for one node's processes only, it must not wait for the step's save
  (that is a collective): rank 0's background write still commits ``latest.pth`` while the main thread sleeps.
- ``STUDIO_TEST_FAIL_SAVE_AT_STEP=N``: the checkpoint write at step N fails as if the disk were full.
- ``STUDIO_TEST_KILL_DURING_SAVE_AT_STEP=N``: the background write of step N's checkpoint SIGKILLs the process
  after writing the first bytes of its temp file (a crash in the middle of a save).
- ``STUDIO_TEST_RECORD_SAMPLES=1``: every ``train`` event in metrics.jsonl lists the item ids each rank trained
  on since the previous one (``sample_ids``, one list per rank), so a test can check how the epoch was shared.
"""

from __future__ import annotations

import errno
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from types import FrameType
from typing import Any

STOP_AFTER_ENV = "STUDIO_TEST_STOP_AFTER_STEP"
STOP_SIGNAL_ENV = "STUDIO_TEST_STOP_SIGNAL"
KILL_AFTER_ENV = "STUDIO_TEST_KILL_AFTER_STEP"
KILL_RANK_ENV = "STUDIO_TEST_KILL_RANK"
HANG_AFTER_ENV = "STUDIO_TEST_HANG_AFTER_STEP"
HANG_LIMIT_S = 300
FAIL_SAVE_ENV = "STUDIO_TEST_FAIL_SAVE_AT_STEP"
KILL_DURING_SAVE_ENV = "STUDIO_TEST_KILL_DURING_SAVE_AT_STEP"
RECORD_SAMPLES_ENV = "STUDIO_TEST_RECORD_SAMPLES"
HOOKS_GUARD_ENV = "STUDIO_TEST_HOOKS"


class StopDuringSamples(BaseException):
    """Raised in the main thread by a stop signal that arrives while samples are spoken (``interruptible``):
    synthesis is abandoned at once instead of finishing the text, so Stop never waits for it. A BaseException,
    so no ``except Exception`` on the way swallows it; the context managers on the way (no_grad, eval mode,
    forked RNG) give the training state back as they unwind."""


class GracefulStop:
    """Owns the SIGINT/SIGTERM handlers for the life of a run (``install`` / ``restore``)."""

    def __init__(self, announce: Callable[[str], None] = print) -> None:
        self.requested: str | None = None  # the signal name once a stop was asked for
        self.requested_at: float | None = None  # time.time() of that signal
        self.saving = False
        self._interruptible = False  # inside ``interruptible()``: a stop raises StopDuringSamples
        self._announce = announce
        self._previous: dict[int, Any] = {}

    def install(self) -> GracefulStop:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def restore(self) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested is None:
            self.requested, self.requested_at = name, round(time.time(), 3)
            self._announce(f"{name} received: finishing the current optimizer step, then saving latest.pth "
                           "(a second signal is ignored until the checkpoint is committed)")
        elif self.saving:
            self._announce(f"{name} received again: still saving the checkpoint, please wait")
        else:
            self._announce(f"{name} received again: already stopping after this step")
        sys.stdout.flush()
        if self._interruptible and not self.saving:
            self._interruptible = False
            raise StopDuringSamples(name)

    @contextmanager
    def interruptible(self):
        """Work a stop may cut short (samples at a save): a stop signal inside raises StopDuringSamples."""
        self._interruptible = self.requested is None
        try:
            yield
        finally:
            self._interruptible = False

    @contextmanager
    def saving_checkpoint(self):
        self.saving = True
        try:
            yield
        finally:
            self.saving = False


def _env_step(name: str) -> int | None:
    if os.environ.get(HOOKS_GUARD_ENV, "").strip() != "1":
        return None
    value = os.environ.get(name, "").strip()
    return int(value) if value.isdigit() else None


def active_test_hooks() -> list[str]:
    """One line per fault-injection hook that will act in this run (the trainer prints them at start)."""
    return [f"warning: test hook {name}={os.environ[name]} is active (fault injection, {HOOKS_GUARD_ENV}=1)"
            for name in (STOP_AFTER_ENV, KILL_AFTER_ENV, HANG_AFTER_ENV, FAIL_SAVE_ENV, KILL_DURING_SAVE_ENV,
                         RECORD_SAMPLES_ENV)
            if _env_step(name) is not None]


def record_samples_hook() -> bool:
    """``STUDIO_TEST_RECORD_SAMPLES=1`` (with the guard): train events list each rank's item ids."""
    return _env_step(RECORD_SAMPLES_ENV) == 1


def test_hook_due(step: int) -> bool:
    """Whether a stop, kill or failed-save hook acts at ``step`` (the run then waits for that step's write)."""
    return step in {_env_step(name) for name in (STOP_AFTER_ENV, KILL_AFTER_ENV, FAIL_SAVE_ENV)}


def after_step_test_hooks(step: int) -> None:
    """Apply the STOP/KILL test hooks after optimizer step ``step`` (see the module docstring)."""
    only_rank = _env_step(KILL_RANK_ENV)
    if _env_step(KILL_AFTER_ENV) == step and only_rank in (None, int(os.environ.get("RANK", "0"))):
        _killed()
    if _env_step(HANG_AFTER_ENV) == step:
        print(f"test hook: not working after step {step} (rank {os.environ.get('RANK', '0')})", flush=True)
        time.sleep(HANG_LIMIT_S)  # the test kills this process long before; nothing waits forever
        _killed()
    if _env_step(STOP_AFTER_ENV) == step:
        signame = os.environ.get(STOP_SIGNAL_ENV, "INT").upper().removeprefix("SIG")
        os.kill(os.getpid(), signal.SIGTERM if signame == "TERM" else signal.SIGINT)


def _disk_full() -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def _killed() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def _broken_torch_save(env: str, step: int, then: Callable[[], None]):
    """At hook ``env``'s step: ``torch.save`` writes the first bytes of a checkpoint, then ``then()`` happens."""
    if _env_step(env) != step:
        yield
        return
    import torch

    real_save = torch.save

    def broken_save(obj: Any, f: Any, *args: Any, **kwargs: Any) -> None:
        if hasattr(f, "write"):
            f.write(b"PK\x03\x04partial")
            f.flush()
        then()

    torch.save = broken_save
    try:
        yield
    finally:
        torch.save = real_save


def simulated_disk_full(step: int):
    """At ``STUDIO_TEST_FAIL_SAVE_AT_STEP``: ``torch.save`` writes a few bytes, then fails with ENOSPC."""
    return _broken_torch_save(FAIL_SAVE_ENV, step, _disk_full)


def killed_during_save(step: int):
    """At ``STUDIO_TEST_KILL_DURING_SAVE_AT_STEP``: ``torch.save`` writes a few bytes, then the process is killed."""
    return _broken_torch_save(KILL_DURING_SAVE_ENV, step, _killed)
