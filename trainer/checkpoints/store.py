"""Saving checkpoints crash-safely into an output directory, with latest/best links and rotation.

Order of a save (a crash at any point leaves a usable directory):

1. ``model_step<N>.pth`` is written to a temp file in the same folder, flushed, fsynced, renamed, and
   the folder fsynced (``data_tools.fileio.atomic_open``);
2. ``latest.pth`` is replaced atomically by a hard link to it (a link made under a temp name and
   renamed over ``latest.pth``: no second write; a copy where links are not supported);
3. ``best.pth`` likewise on a new best validation loss;
4. only then are ``model_step`` files beyond ``keep`` deleted (never ``latest.pth`` or ``best.pth``).

Every file ends with a content digest of all its bytes (see :mod:`trainer.checkpoints.digest`), written
in the same pass, and records ``"integrity"`` so a lost digest is noticed. Model weights or optimizer
moments holding NaN/Inf are refused by name before anything is written (a diverged run never replaces
``latest.pth`` or rotates good files away). A SIGKILL mid-save leaves a temp file
(``.model_step<N>.pth.<random>.tmp``); :func:`clean_stale_temp_files` removes those at the next start.

Because ``latest.pth`` (and ``best.pth``) are hard links, writing INTO one in place (``cp x latest.pth``,
opening it for writing) also changes the model_step file it links to; replace files with a rename instead
(tests simulating a torn ``latest.pth`` do so with ``os.replace``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from data_tools.fileio import atomic_open, fsync_dir, replacing
from trainer.checkpoints.digest import INTEGRITY_RECORD, DigestWriter
from trainer.checkpoints.format import CheckpointError, unsafe_values
from trainer.checkpoints.lock import OutputDirLock, lock_holder
from trainer.checkpoints.nonfinite import nonfinite_reason, nonfinite_tensors

LATEST = "latest.pth"
BEST = "best.pth"
STEP_PATTERN = re.compile(r"^model_step(\d+)\.pth$")
# Temp files of this module's writes: atomic_open's ".<name>.<random>.tmp", the link temps, and the copy
# fallback's atomic_open of a link temp ("..<name>.<random>.tmp.<random>.tmp").
TEMP_PATTERN = re.compile(r"^\.\.?(model_step\d+\.pth|latest\.pth|best\.pth)\.[^/]+\.tmp$")


class CheckpointSaveError(CheckpointError):
    """A save failed; every earlier checkpoint is intact. The trainer stops (exit 2)."""


def step_file_name(step: int) -> str:
    return f"model_step{int(step)}.pth"


def step_of(path: str | Path) -> int | None:
    match = STEP_PATTERN.match(Path(path).name)
    return int(match.group(1)) if match else None


def step_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """``(step, path)`` of every model_step file in ``output_dir``, oldest first."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    found = [(step, p) for p in output_dir.iterdir() if (step := step_of(p)) is not None and p.is_file()]
    return sorted(found)


def _reason(exc: BaseException, directory: Path | None = None) -> str:
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return f"disk full ({exc.strerror})"
        return exc.strerror or str(exc)
    text = str(exc).strip().splitlines()
    first = text[0] if text else type(exc).__name__
    if "unexpected pos" in first or "inline_container" in first:
        # torch's zip writer reports any failed write this way; say what it most likely was.
        free = _free_bytes(directory) if directory is not None else None
        if free is not None and free < (64 << 20):
            return f"disk full ({free >> 20} MiB free on the disk of {directory})"
        return "the write failed part-way (torch's zip writer stopped: a full disk or an I/O error)"
    return first


def _free_bytes(directory: Path) -> int | None:
    try:
        return shutil.disk_usage(directory).free
    except OSError:
        return None


def write_checkpoint_file(ckpt: dict[str, Any], path: str | Path) -> None:
    """Write one checkpoint atomically (temp + fsync + rename + folder fsync), ending with its content digest.

    Raises CheckpointSaveError when a value would not load with weights_only=True or a model weight or
    optimizer moment is NaN/Inf (nothing written), or when the write fails (the temp file is removed, an
    existing file at ``path`` is untouched; a full disk says "disk full").
    """
    path = Path(path)
    bad = unsafe_values(ckpt)
    if bad:
        raise CheckpointSaveError(f"refusing to save {path}: not plain data: {', '.join(bad)}")
    nonfinite = nonfinite_tensors(ckpt)
    if nonfinite:
        raise CheckpointSaveError(f"refusing to save {path}: {nonfinite_reason(nonfinite)}")
    ckpt = {**ckpt, "integrity": dict(INTEGRITY_RECORD)}
    writer: DigestWriter | None = None
    try:
        with atomic_open(path, "wb") as handle:
            writer = DigestWriter(handle)
            torch.save(ckpt, writer)
            writer.finish()
    except (OSError, RuntimeError, ValueError) as exc:  # torch's zip writer reports a failed write as RuntimeError
        cause: BaseException = writer.error if writer is not None and writer.error is not None else exc
        raise CheckpointSaveError(f"could not write {path}: {_reason(cause, path.parent)}") from exc


def _replace_with_link(source: Path, target: Path) -> None:
    """Atomically make ``target`` the same file as ``source`` (hard link; a copy where links fail)."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    with replacing(tmp, target):
        try:
            os.link(source, tmp)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            with atomic_open(tmp, "wb") as out, open(source, "rb") as src:  # filesystems without hard links
                shutil.copyfileobj(src, out, 1 << 20)


def stale_temp_files(output_dir: str | Path) -> list[Path]:
    """Temp files this module's writes leave behind when killed mid-save (SIGKILL, power loss)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    return sorted(p for p in output_dir.iterdir() if TEMP_PATTERN.match(p.name) and p.is_file())


def clean_stale_temp_files(output_dir: str | Path) -> list[Path]:
    """Delete the temp files a killed save left in ``output_dir``; returns what was removed.

    A temp file belongs to a live writer only while that writer's trainer holds the output-dir lock
    (:class:`OutputDirLock`), and only one trainer can hold it. So this runs only under the lock: when
    this process holds it (the trainer calls this right after taking it) or, otherwise, while holding it
    briefly itself. When another live process holds it, nothing is touched and LockHeld is raised.
    """
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    if lock_holder(output_dir) == os.getpid():
        return _remove(stale_temp_files(output_dir))
    with OutputDirLock(output_dir):  # raises LockHeld when a live process holds it
        return _remove(stale_temp_files(output_dir))


def _remove(paths: list[Path]) -> list[Path]:
    removed: list[Path] = []
    for path in paths:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
            removed.append(path)
    if removed:
        fsync_dir(removed[0].parent)
    return removed


class CheckpointManager:
    """Owns the checkpoint files of one output directory.

    ``keep`` is the number of model_step files kept (0 or less: keep all). ``protect``, when given, is
    called for each rotation: a context manager, held while rotating, that yields file names rotation must
    not delete (the checkpoints pinned by ``--best-by cer|sim``, see :mod:`trainer.evaluation.best`).
    """

    def __init__(self, output_dir: str | Path, keep: int,
                 protect: Callable[[], contextlib.AbstractContextManager[set[str]]] | None = None) -> None:
        self.output_dir = Path(output_dir)
        self.keep = int(keep)
        self.protect = protect
        self.last_removed: tuple[Path, ...] = ()

    @property
    def latest_path(self) -> Path:
        return self.output_dir / LATEST

    @property
    def best_path(self) -> Path:
        return self.output_dir / BEST

    def step_path(self, step: int) -> Path:
        return self.output_dir / step_file_name(step)

    def step_checkpoints(self) -> list[tuple[int, Path]]:
        return step_checkpoints(self.output_dir)

    def clean_stale_temp_files(self) -> list[Path]:
        """Remove temp files of saves killed mid-write (call at start, holding the output-dir lock)."""
        return clean_stale_temp_files(self.output_dir)

    def _kept_after(self, step: int) -> list[str]:
        """The model_step names kept once ``step`` is saved: it and the newest ``keep - 1`` older ones.

        Files with a higher step (left by an abandoned timeline, e.g. after a fallback resume) are
        neither counted nor deleted.
        """
        older = sorted(s for s, _ in self.step_checkpoints() if s < step)
        if self.keep > 0:
            older = older[-(self.keep - 1):] if self.keep > 1 else []
        return [step_file_name(s) for s in [*older, int(step)]]

    def save(self, ckpt: dict[str, Any], step: int, is_best: bool = False) -> Path:
        """Commit ``ckpt`` as model_step<step>.pth, then latest.pth (and best.pth); rotate old steps.

        Returns the model_step path. Raises CheckpointSaveError with earlier files intact on failure.
        ``ckpt['recent_checkpoints']`` is set to the model_step names kept after this save.
        """
        self.output_dir.mkdir(parents=True, exist_ok=True)
        kept = self._kept_after(step)
        ckpt = dict(ckpt)
        ckpt["recent_checkpoints"] = kept
        path = self.step_path(step)
        safety = self._safety_note()
        try:
            write_checkpoint_file(ckpt, path)
        except CheckpointSaveError as exc:
            raise CheckpointSaveError(f"checkpoint for step {step} not saved: {exc}; {safety}") from exc
        try:
            _replace_with_link(path, self.latest_path)
            if is_best:
                _replace_with_link(path, self.best_path)
        except OSError as exc:
            raise CheckpointSaveError(
                f"checkpoint for step {step} saved as {path}, but updating "
                f"{'latest.pth/best.pth' if is_best else 'latest.pth'} failed: {_reason(exc)}; "
                f"{path.name} is complete and --resume {path} uses it") from exc
        self.last_removed = self._rotate(kept)
        return path

    def _safety_note(self) -> str:
        latest = self.latest_path
        if latest.is_file():
            return f"earlier checkpoints are intact ({latest} unchanged)"
        steps = self.step_checkpoints()
        if steps:
            return f"earlier checkpoints are intact (newest: {steps[-1][1].name})"
        return "no earlier checkpoint exists in this run"

    def _rotate(self, kept: list[str]) -> tuple[Path, ...]:
        if self.keep <= 0:
            return ()
        removed: list[Path] = []
        newest_kept = step_of(kept[-1])
        with self.protect() if self.protect is not None else contextlib.nullcontext(set()) as pinned:
            for step, old in self.step_checkpoints():
                if old.name not in kept and old.name not in pinned and step < newest_kept:
                    with contextlib.suppress(FileNotFoundError):
                        old.unlink()
                        removed.append(old)
        if removed:
            fsync_dir(self.output_dir)
        return tuple(removed)

