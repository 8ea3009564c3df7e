"""Choosing what to resume from: ``--resume auto`` with fallback, or an explicit path."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.checkpoints.digest import (
    ABSENT,
    ABSENT_NOTE,
    check_file_digest,
    integrity_problem,
)
from trainer.checkpoints.format import CheckpointError, community_message
from trainer.checkpoints.loading import load_checkpoint
from trainer.checkpoints.nonfinite import nonfinite_reason, nonfinite_tensors
from trainer.checkpoints.store import BEST, LATEST, step_checkpoints
from trainer.checkpoints.validate import Expectation, ValidationReport, validate_checkpoint
from trainer.checkpoints.verify import is_community_latest


@dataclass
class ResumeChoice:
    path: Path
    checkpoint: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # fallbacks taken and validation warnings, to print
    report: ValidationReport = field(default_factory=ValidationReport)


def checkpoint_files_exist(output_dir: str | Path) -> bool:
    """Any checkpoint file at all (latest, best or model_step) in ``output_dir``."""
    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return False
    return (output_dir / LATEST).exists() or (output_dir / BEST).exists() or bool(step_checkpoints(output_dir))


def _try(path: Path, expectation: Expectation | None,
         mmap: bool = False) -> tuple[dict[str, Any] | None, ValidationReport | str]:
    """Load, prove and validate; the checkpoint and its report, or (None, reason) when it cannot be used.

    Proof first: the file's content digest must match (a mismatch is never loaded at all), and a file
    whose pickle says it was saved with a digest must still carry it. Then no NaN/Inf in weights or
    optimizer moments, then :func:`validate_checkpoint`.
    """
    try:
        digest = check_file_digest(path) if path.is_file() else None
    except OSError as exc:
        return None, f"cannot read it ({exc.strerror or exc})"
    if digest is not None and not digest.trusted and digest.status != ABSENT:
        return None, digest.reason()
    try:
        ckpt = load_checkpoint(path, mmap=mmap)
    except CheckpointError as exc:
        reason = str(exc).split(" is not a loadable checkpoint: ", 1)[-1]
        if "could run code" in reason and is_community_latest(path):
            return None, community_message(path)
        return None, reason
    if digest is not None:
        problem = integrity_problem(digest, ckpt)
        if problem:
            return None, problem
    nonfinite = nonfinite_tensors(ckpt)
    if nonfinite:
        return None, nonfinite_reason(nonfinite)
    report = validate_checkpoint(ckpt, expectation, path)
    if not report.ok:
        return None, report.message()
    if digest is not None and digest.status == ABSENT:
        report.warnings.append(f"{path.name}: {ABSENT_NOTE}")
    return ckpt, report


def _choice(path: Path, ckpt: dict[str, Any], report: ValidationReport, notes: list[str]) -> ResumeChoice:
    return ResumeChoice(path=path, checkpoint=ckpt, notes=[*notes, *report.warnings], report=report)


def select_resume(output_dir: str | Path, resume: str | Path | None,
                  expectation: Expectation | None = None, *, mmap: bool = False) -> ResumeChoice | None:
    """What to resume from, or None for a fresh start; raises CheckpointError (one line) to refuse.

    - empty/None: fresh start.
    - "auto": ``latest.pth``; if it is missing, unreadable, torn (content digest mismatch or lost), holds
      NaN/Inf weights or moments, or fails validation, the newest valid ``model_step<N>.pth`` (the notes
      say which and why). With nothing usable: None when no checkpoint
      file exists at all, otherwise a refusal (an existing run is never silently discarded).
    - a path: that file, which must load and validate.

    ``mmap=True`` maps tensors instead of reading them (pre-flight only inspects the choice).
    """
    if resume is None or str(resume).strip() == "":
        return None
    output_dir = Path(output_dir)
    if str(resume).strip() != "auto":
        path = Path(resume)
        ckpt, outcome = _try(path, expectation, mmap)
        if ckpt is None:
            raise CheckpointError(f"cannot resume from {path}: {outcome}")
        assert isinstance(outcome, ValidationReport)
        return _choice(path, ckpt, outcome, [])

    if not checkpoint_files_exist(output_dir):
        return None
    candidates: list[Path] = [output_dir / LATEST]
    candidates += [path for _, path in reversed(step_checkpoints(output_dir))]
    notes: list[str] = []
    failures: list[tuple[Path, str]] = []
    for path in candidates:
        if not path.exists():
            if path.name == LATEST:
                notes.append(f"{path} is missing")
            continue
        ckpt, outcome = _try(path, expectation, mmap)
        if ckpt is None:
            assert isinstance(outcome, str)
            failures.append((path, outcome))
            continue
        assert isinstance(outcome, ValidationReport)
        if failures or notes:
            why = "; ".join(f"{p.name}: {reason}" for p, reason in failures) or "; ".join(notes)
            notes = [f"resuming from {path.name} instead of latest.pth ({why})"]
        return _choice(path, ckpt, outcome, notes)

    if not failures:
        raise CheckpointError(f"cannot resume in {output_dir}: only best.pth exists; pass --resume "
                              f"{output_dir / BEST} to continue from it, or use a new --output-dir")
    first_path, first_reason = failures[0]
    others = len(failures) - 1
    also = ""
    if others:
        def generic(path: Path, reason: str) -> str:
            return reason.replace(str(path), "<file>")

        same = all(generic(p, r) == generic(first_path, first_reason) for p, r in failures[1:])
        also = (f"; the {others} other checkpoint(s) fail the same way" if same
                else f"; {others} other checkpoint(s) unusable too (newest: {failures[1][0].name}: {failures[1][1]})")
    raise CheckpointError(
        f"cannot resume in {output_dir}: {first_path.name}: {first_reason}{also}; not starting fresh over an "
        f"existing run (pass --resume PATH, or use a new --output-dir)")
