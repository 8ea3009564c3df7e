"""Saving checkpoints crash-safely into an output directory, with latest/best links and rotation.

Order of a save (a crash at any point leaves a usable directory):

1. ``model_step<N>.pth`` is written to a temp file in the same folder, flushed, fsynced, renamed, and
   the folder fsynced (``data_tools.fileio.atomic_open``);
2. ``latest.pth`` is replaced atomically by a hard link to it (a link made under a temp name and
   renamed over ``latest.pth``: no second write; a copy where links are not supported);
3. ``best.pth`` likewise on a new best validation loss;
4. only then are ``model_step`` files beyond ``keep`` deleted (never ``latest.pth`` or ``best.pth``).

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from data_tools.fileio import atomic_open, fsync_dir
from trainer.checkpoints.format import CheckpointError, unsafe_values

LATEST = "latest.pth"
BEST = "best.pth"
STEP_PATTERN = re.compile(r"^model_step(\d+)\.pth$")


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


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError):
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return f"disk full ({exc.strerror})"
        return exc.strerror or str(exc)
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def write_checkpoint_file(ckpt: dict[str, Any], path: str | Path) -> None:
    """Write one checkpoint atomically (temp + fsync + rename + folder fsync).

    Raises CheckpointSaveError when a value would not load with weights_only=True (nothing written) or
    when the write fails (the temp file is removed, an existing file at ``path`` is untouched).
    """
    path = Path(path)
    bad = unsafe_values(ckpt)
    if bad:
        raise CheckpointSaveError(f"refusing to save {path}: not plain data: {', '.join(bad)}")
    try:
        with atomic_open(path, "wb") as handle:
            torch.save(ckpt, handle)
    except (OSError, RuntimeError) as exc:  # torch's zip writer reports a failed write as RuntimeError
        raise CheckpointSaveError(f"could not write {path}: {_reason(exc)}") from exc


def _replace_with_link(source: Path, target: Path) -> None:
    """Atomically make ``target`` the same file as ``source`` (hard link; a copy where links fail)."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        try:
            os.link(source, tmp)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            with atomic_open(tmp, "wb") as out, open(source, "rb") as src:  # filesystems without hard links
                shutil.copyfileobj(src, out, 1 << 20)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(target.parent)


@dataclass(frozen=True)
class SaveResult:
    path: Path
    removed: tuple[Path, ...]


class CheckpointManager:
    """Owns the checkpoint files of one output directory.

    ``keep`` is the number of model_step files kept (0 or less: keep all).
    """

    def __init__(self, output_dir: str | Path, keep: int) -> None:
        self.output_dir = Path(output_dir)
        self.keep = int(keep)
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
        for step, old in self.step_checkpoints():
            if old.name not in kept and step < newest_kept:
                with contextlib.suppress(FileNotFoundError):
                    old.unlink()
                    removed.append(old)
        if removed:
            fsync_dir(self.output_dir)
        return tuple(removed)


def clean_stale_temp_files(output_dir: str | Path) -> list[Path]:
    """Remove checkpoint temp files left by a write that never finished (call with the output-dir lock held)."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    stale = [path for path in output_dir.glob(".*.pth.*.tmp") if path.is_file()]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale
