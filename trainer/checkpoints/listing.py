"""``list``: every checkpoint of an output directory, newest first, with its verdict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.checkpoints.store import BEST, LATEST, step_of

KIND_ORDER = {"latest": 0, "step": 1, "best": 2, "other": 3}


@dataclass
class CheckpointSummary:
    path: Path
    kind: str  # latest | best | step | other
    step: int | None
    epoch: int | None
    val_loss: float | None
    verdict: str  # COMPLETE | PARTIAL | INVALID (or "" when not verified)
    size_bytes: int
    mtime: float
    reason: str = ""
    has_digest: bool | None = None  # a content digest record is at the file's end (None: not looked at)

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "kind": self.kind, "step": self.step, "epoch": self.epoch,
                "val_loss": self.val_loss, "verdict": self.verdict, "size_bytes": self.size_bytes,
                "mtime": self.mtime, "reason": self.reason, "has_digest": self.has_digest}


def _kind(path: Path) -> str:
    if path.name == LATEST:
        return "latest"
    if path.name == BEST:
        return "best"
    return "step" if step_of(path) is not None else "other"


def list_checkpoints(output_dir: str | Path, verify: bool = True) -> list[CheckpointSummary]:
    """Every ``*.pth`` in ``output_dir``: latest, best, model_step files (and others), newest step first.

    ``verify=False`` reads only each file's metadata (no tensor data: milliseconds per file, however
    large; see :mod:`trainer.checkpoints.metadata`), so verdicts stay empty; a file whose metadata cannot
    be read gets its reason. ``verify=True`` runs :func:`verify_checkpoint` (loads and hashes each file).
    Hard-linked files (latest.pth is the newest model_step file) are read once.
    """
    from trainer.checkpoints.format import CheckpointError
    from trainer.checkpoints.metadata import read_metadata
    from trainer.checkpoints.verify import verify_checkpoint

    output_dir = Path(output_dir)
    if not output_dir.is_dir():
        return []
    summaries: list[CheckpointSummary] = []
    seen: dict[tuple[int, int, int], Any] = {}
    for path in sorted(output_dir.glob("*.pth")):
        try:
            stat = path.stat()
        except OSError:
            continue  # rotated away meanwhile
        if not path.is_file():
            continue
        step, epoch, val_loss, verdict, reason, has_digest = step_of(path), None, None, "", "", None
        key = (stat.st_dev, stat.st_ino, stat.st_mtime_ns)
        if verify:
            report = seen.get(key)
            if report is None:
                report = seen[key] = verify_checkpoint(path)
            verdict, reason = report.verdict, report.reason
            details = report.details
            if isinstance(details.get("step"), int):
                step = details["step"]
            epoch = details.get("epoch") if isinstance(details.get("epoch"), int) else None
            val_loss = details.get("val_loss")
            digest = next((c for c in report.components if c.name == "content digest"), None)
            has_digest = None if digest is None else digest.status != "missing"
        else:
            meta = seen.get(key)
            if meta is None:
                try:
                    meta = seen[key] = read_metadata(path)
                except CheckpointError as exc:
                    if not path.exists():
                        continue  # rotated away while it was read (a run saving meanwhile)
                    meta = seen[key] = str(exc).split(" is not a loadable checkpoint: ", 1)[-1]
            if isinstance(meta, str):
                reason = meta
            else:
                step = meta.step if meta.step is not None else step
                epoch, val_loss, has_digest = meta.epoch, meta.last_val_loss, meta.has_digest
                reason = meta.digest_note
        summaries.append(CheckpointSummary(path, _kind(path), step, epoch, val_loss, verdict, stat.st_size,
                                           stat.st_mtime, reason, has_digest))
    summaries.sort(key=lambda s: (-(s.step if s.step is not None else -1), KIND_ORDER[s.kind], -s.mtime,
                                  s.path.name))
    return summaries


def _size(count: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def listing_lines(summaries: list[CheckpointSummary]) -> list[str]:
    header = f"{'file':<24} {'kind':<7} {'step':>8} {'val loss':>9}  {'verdict':<9} {'size':>10}  digest"
    lines = [header]
    for s in summaries:
        loss = f"{s.val_loss:.4f}" if s.val_loss is not None else "-"
        step = str(s.step) if s.step is not None else "-"
        digest = "-" if s.has_digest is None else ("yes" if s.has_digest else "no")
        lines.append(f"{s.path.name:<24} {s.kind:<7} {step:>8} {loss:>9}  {s.verdict or '-':<9} "
                     f"{_size(s.size_bytes):>10}  {digest}")
    return lines
