"""The batch loader: a run's worker processes feeding it collated batches of exactly the batches it asks for.

``make_loader`` gives a ``BatchLoader`` over a dataset (``trainer.data.make_dataset``) and a list of batches
(the sampler's, ``trainer.sampler``); the workers die with the trainer, leave stopping to it, and small tensors
travel to it pickled by value rather than through shared memory.
"""

from __future__ import annotations

import functools
import os
import signal
import sys
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


def _die_with_parent(trainer_pid: int) -> None:
    """Linux: the kernel SIGKILLs this worker when the trainer process dies (even by SIGKILL).

    Forked workers inherit the trainer's open files, including the output-dir lock; an orphaned worker
    would keep the directory locked after a crash. Elsewhere workers are spawned and inherit nothing.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != trainer_pid:  # the trainer died before prctl took effect
        os._exit(1)


def _worker_init(trainer_pid: int, _worker_id: int) -> None:
    _die_with_parent(trainer_pid)
    # Ctrl-C and the UI's stop signal the whole process group; the trainer process decides when to
    # stop (after the current optimizer step), so its workers must not die first.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


# A worker hands each tensor of a batch to the training process through shared memory, which costs a
# socket handshake per tensor in the training process (about 0.5 ms each, several tensors per batch).
# Small arrays are much cheaper pickled by value; large ones (long prompt mels) still use shared memory.
# With pin_memory (CUDA) a DataLoader thread receives and pins the batches, off the training thread, and
# every tensor stays pinned so its copy to the GPU stays asynchronous: there batches travel as they are.
BY_VALUE_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class _ByValue:
    array: np.ndarray


@dataclass(frozen=True)
class _PackForTransfer:
    """The collate function as run in a worker: small tensors travel as pickled arrays."""

    collate: Callable[[list[dict]], dict]

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        return {key: _ByValue(value.numpy()) if isinstance(value, torch.Tensor) and value.nbytes <= BY_VALUE_MAX_BYTES
                else value for key, value in self.collate(items).items()}


def _unpack(batch: dict[str, Any]) -> dict[str, Any]:
    return {key: torch.from_numpy(value.array) if isinstance(value, _ByValue) else value for key, value in batch.items()}


class _BatchList:
    """The DataLoader's batch sampler: whatever list of batches the ``BatchLoader`` holds now."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class BatchLoader:
    """Collated batches of exactly ``batches``, in order; assign ``batches`` again for the next pass.

    With ``persistent`` the worker processes outlive a pass, so the trainer starts them once per run rather
    than once per epoch. The DataLoader gets its own generator, so creating or iterating it never draws from
    the global torch RNG (which drives dropout): a resumed run's random stream stays identical to an
    uninterrupted one's.
    """

    def __init__(self, dataset: Dataset, batches: Sequence[list[int]], collate: Callable[[list[dict]], dict],
                 num_workers: int, pin_memory: bool, seed: int, persistent: bool = False) -> None:
        self._sampler = _BatchList(list(batches))
        self._packed = num_workers > 0 and not pin_memory
        self._pass: Generator[dict[str, Any], None, None] | None = None
        self._loader: DataLoader | None = DataLoader(
            dataset,
            batch_sampler=self._sampler,
            collate_fn=_PackForTransfer(collate) if self._packed else collate,
            num_workers=num_workers,
            pin_memory=pin_memory,
            generator=torch.Generator().manual_seed(seed),
            worker_init_fn=functools.partial(_worker_init, os.getpid()) if num_workers else None,
            persistent_workers=persistent and num_workers > 0,
            prefetch_factor=4 if num_workers else None,
        )

    @property
    def batches(self) -> list[list[int]]:
        return self._sampler.batches

    @batches.setter
    def batches(self, batches: Sequence[list[int]]) -> None:
        self._sampler.batches = list(batches)

    def __len__(self) -> int:
        return len(self._sampler)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if self._loader is None:
            raise RuntimeError("this BatchLoader is closed")
        self._pass = self._batches_of(self._loader)
        return self._pass

    def _batches_of(self, loader: DataLoader) -> Iterator[dict[str, Any]]:
        for batch in loader:
            yield _unpack(batch) if self._packed else batch

    def __enter__(self) -> BatchLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """End the worker processes now.

        They ignore SIGTERM (see ``_worker_init``), so the interpreter's exit, which terminates and then
        joins them, would wait for them forever while a loader is still referenced (e.g. by a traceback).
        """
        if self._pass is not None:
            self._pass.close()
            self._pass = None
        self._loader = None  # the last reference: the DataLoader's iterator shuts its workers down


def make_loader(dataset: Dataset, batches: Sequence[list[int]], collate: Callable[[list[dict]], dict],
                num_workers: int, pin_memory: bool, seed: int, persistent: bool = False) -> BatchLoader:
    """A loader over exactly ``batches``, in order (see ``BatchLoader``)."""
    return BatchLoader(dataset, batches, collate, num_workers, pin_memory, seed, persistent)

