"""Checkpoint saves that don't stall training: snapshot to host memory now, write in a background thread.

``snapshot`` copies every tensor of a checkpoint dict to host memory (so later optimizer steps cannot change
what is written; on CUDA through pinned buffers and one synchronisation). ``BackgroundWriter`` then runs the
ordinary atomic ``CheckpointManager.save`` (temp file, fsync, rename, links, rotation after the commit) on one
thread. One write is in flight at a time: a second ``submit`` first waits for the first, so at most one
snapshot (about one checkpoint's size) is held in host memory besides the model. Every wait has a timeout.

The trainer learns a write's outcome from ``poll`` (non-blocking) or ``wait`` and reports it from its own
thread: the ``save`` event, the "saved checkpoint" line and ``saved_step`` mean *committed*, never queued.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoints.store import CheckpointManager, CheckpointSaveError

# A single write of a multi-GB checkpoint to a slow disk takes minutes; one that takes this long is stuck.
WRITE_TIMEOUT_S = 3600.0


def snapshot(obj: Any) -> Any:
    """A deep copy of ``obj`` whose tensors live in host memory and share nothing with the originals."""
    on_cuda = False

    def copy(value: Any) -> Any:
        nonlocal on_cuda
        if isinstance(value, torch.Tensor):
            value = value.detach()
            if value.device.type == "cuda":
                on_cuda = True
                host = torch.empty(value.shape, dtype=value.dtype, pin_memory=True)
                return host.copy_(value, non_blocking=True)
            return value.to("cpu", copy=True)
        if isinstance(value, dict):
            return {key: copy(item) for key, item in value.items()}
        if isinstance(value, list):
            return [copy(item) for item in value]
        if isinstance(value, tuple):
            return tuple(copy(item) for item in value)
        return value

    copied = copy(obj)
    if on_cuda:
        torch.cuda.synchronize()  # the non-blocking copies have landed before anyone reads them
    return copied


@dataclass(frozen=True)
class WriteResult:
    step: int
    is_best: bool
    path: Path | None  # the committed model_step file (None when the write failed)
    error: str | None  # one line when it failed
    seconds: float


class BackgroundWriter:
    """Runs ``manager.save`` for one checkpoint at a time on a background thread."""

    def __init__(self, manager: CheckpointManager, *, timeout_s: float = WRITE_TIMEOUT_S,
                 write_context: Callable[[int], AbstractContextManager[Any]] | None = None) -> None:
        self.manager = manager
        self.timeout_s = timeout_s
        self._write_context = write_context or (lambda _step: nullcontext())
        self._thread: threading.Thread | None = None
        self._result: WriteResult | None = None
        self.pending_step: int | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None

    def submit(self, ckpt: dict[str, Any], step: int, is_best: bool) -> WriteResult | None:
        """Start writing ``ckpt`` (already a snapshot). Returns the previous write's result if one was pending."""
        previous = self.wait()
        self.pending_step = step
        self._thread = threading.Thread(target=self._write, args=(ckpt, step, is_best), daemon=False,
                                        name=f"checkpoint-writer-step{step}")
        self._thread.start()
        return previous

    def _write(self, ckpt: dict[str, Any], step: int, is_best: bool) -> None:
        started = time.perf_counter()
        path, error = None, None
        try:
            with self._write_context(step):
                path = self.manager.save(ckpt, step, is_best=is_best)
        except CheckpointSaveError as exc:
            error = str(exc)
        except Exception as exc:  # a bug or an unexpected OS error: still reported, never lost in the thread
            error = f"checkpoint for step {step} not saved: {type(exc).__name__}: {exc}"
        self._result = WriteResult(step, is_best, path, error, time.perf_counter() - started)

    def poll(self) -> WriteResult | None:
        """The finished write's result (once), or None while it runs or when nothing was submitted."""
        if self._thread is None or self._thread.is_alive():
            return None
        return self._collect()

    def wait(self, timeout_s: float | None = None) -> WriteResult | None:
        """Block until the pending write ends (None when nothing was pending); raises if it outlives the timeout."""
        if self._thread is None:
            return None
        limit = self.timeout_s if timeout_s is None else timeout_s
        self._thread.join(limit)
        if self._thread.is_alive():
            raise CheckpointSaveError(f"the checkpoint write of step {self.pending_step} is still running after "
                                      f"{limit:.0f} s (a stuck or very slow disk?)")
        return self._collect()

    def _collect(self) -> WriteResult | None:
        result, self._result, self._thread, self.pending_step = self._result, None, None, None
        return result

