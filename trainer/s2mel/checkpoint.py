"""S2Mel run checkpoints: what they hold, and choosing one to resume from.

A checkpoint is a plain dict (loads with ``weights_only=True``) written by the GPT trainer's own
``CheckpointManager`` (atomic model_step / latest / best files, content digest, rotation)::

    {"format": "indextts-studio-s2mel", "format_version": 1, "part": "s2mel", "mode": "full" | "lora",
     "net": {"cfm": sd, "length_regulator": sd[, "gpt_layer": sd]}    full mode: the stock s2mel.pth layout
     "adapter": {peft key: tensor}, "lora": {rank, alpha, ...},          lora mode: adapters ...
     "regulator": sd | None,                                             ... and the regulator if it trains
     "base": {"path": str, "sha256": str},                               the s2mel.pth the run started from
     "optimizer": sd, "step", "epoch", "position", "draw_rng": uint8 tensor, "rng": capture_rng_state(),
     "settings": {...}, "loss": float, "integrity": {...}}

Resume (``auto``): ``latest.pth``, else the newest ``model_step<N>.pth`` whose digest matches and that loads;
a run with checkpoints but none usable is refused, never silently restarted.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.checkpoints.digest import (
    ABSENT,
    check_file_digest,
    integrity_problem,
)
from trainer.checkpoints.format import S2MEL_FORMAT_NAME, S2MEL_PART, CheckpointError, is_s2mel_checkpoint
from trainer.checkpoints.loading import load_checkpoint
from trainer.checkpoints.nonfinite import nonfinite_reason, nonfinite_tensors
from trainer.checkpoints.store import LATEST, step_checkpoints

FORMAT_NAME, PART = S2MEL_FORMAT_NAME, S2MEL_PART
FORMAT_VERSION = 1


def _usable(path: Path) -> tuple[dict[str, Any] | None, str]:
    digest = check_file_digest(path)
    if not digest.trusted and digest.status != ABSENT:
        return None, digest.reason()
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        return None, str(exc)
    problem = integrity_problem(digest, ckpt)
    if problem:
        return None, problem
    if not is_s2mel_checkpoint(ckpt):
        return None, "not an S2Mel run checkpoint"
    bad = nonfinite_tensors(ckpt)
    if bad:
        return None, nonfinite_reason(bad)
    return ckpt, ""


def select_s2mel_resume(output_dir: str | Path) -> tuple[Path, dict[str, Any], list[str]] | None:
    """(path, checkpoint, notes) to resume from, None for a fresh start; CheckpointError when none is usable."""
    output_dir = Path(output_dir)
    candidates = [output_dir / LATEST, *(path for _, path in reversed(step_checkpoints(output_dir)))]
    failures: list[str] = []
    for path in candidates:
        if not path.exists():
            continue
        ckpt, reason = _usable(path)
        if ckpt is not None:
            notes = (
                [f"resuming from {path.name} instead of latest.pth ({'; '.join(failures)})"]
                if failures
                else []
            )
            return path, ckpt, notes
        failures.append(f"{path.name}: {reason}")
    if failures:
        raise CheckpointError(
            f"cannot resume in {output_dir}: {'; '.join(failures)}; not starting fresh over an "
            "existing run (use a new output folder)"
        )
    return None


def describe_s2mel_checkpoint(ckpt: dict[str, Any]) -> list[str]:
    """Lines for ``checkpoints inspect`` about an S2Mel run checkpoint (what it holds, where it came from)."""
    settings = ckpt.get("settings") or {}
    lines = [
        f"part: S2Mel decoder ({ckpt.get('mode')} fine-tune), step {ckpt.get('step')}, epoch {ckpt.get('epoch')}",
        f"last training loss: {ckpt.get('loss')}",
        f"loss {settings.get('loss_type')}, regulation {settings.get('regulation')}, "
        f"GPT latent fed: {bool(ckpt.get('uses_gpt_layer'))}",
    ]
    base = ckpt.get("base") or {}
    if base:
        lines.append(f"base s2mel.pth: {base.get('path')} (sha256 {str(base.get('sha256'))[:12]})")
    if ckpt.get("mode") == "lora":
        lora = ckpt.get("lora") or {}
        count = sum(int(t.numel()) for t in (ckpt.get("adapter") or {}).values())
        kind = "DoRA" if lora.get("dora") else "LoRA"
        lines.append(
            f"{kind} rank {lora.get('rank')}, alpha {lora.get('alpha')}, targets {lora.get('targets')}, "
            f"{count:,} adapter values" + (", length regulator trained" if ckpt.get("regulator") else "")
        )
    return lines
