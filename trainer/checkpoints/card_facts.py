"""What an export's model card and licence notice say about a checkpoint: its base model, data and losses.

Shared by the IndexTTS-1.5/IndexTTS2 export (``trainer.checkpoints.export``) and the IndexTTS-2.5 one
(``generations.indextts25.export``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainer.checkpoints.base_movement import BaseMovement

LICENSE_NOTICE = """\
These model weights are derived from IndexTTS ({model_name}), the text-to-speech model by bilibili.

They were produced by fine-tuning the IndexTTS base model ({base}) and are therefore subject to the
bilibili IndexTTS model licence terms that apply to that base model. Anyone who uses, copies or
redistributes these weights must comply with those terms and must distribute these weights together
with that licence.

The licence is the one distributed with the base model you started from (its licence file, e.g. the
LICENSE / model licence file published beside the IndexTTS checkpoints). It is not reproduced here:
read it there. This notice adds no terms of its own.
"""


def _base_model(ckpt: Mapping[str, Any]) -> str:
    hparams = ckpt.get("hparams") if isinstance(ckpt.get("hparams"), Mapping) else {}
    for key, how in (("base_checkpoint", "fine-tuned from"), ("init_from", "continued from the weights of")):
        if hparams.get(key):
            return f"{how} {hparams[key]}"
    repaired = ckpt.get("repaired_from")
    if isinstance(repaired, Mapping):
        return f"a community IndexTTS trainer's run (converted from {repaired.get('path')})"
    return "not recorded in the checkpoint"


def _data_lines(ckpt: Mapping[str, Any]) -> list[str]:
    manifests = ckpt.get("manifests") if isinstance(ckpt.get("manifests"), Mapping) else {}
    lines = []
    for split in ("train", "val"):
        records = [r for r in manifests.get(split) or [] if isinstance(r, Mapping)]
        if not records:
            lines.append(f"- {split}: not recorded")
            continue
        items = [r.get("lines") for r in records]
        count = f"{sum(items):,} items" if all(isinstance(n, int) for n in items) else "items not recorded"
        hours = [r.get("hours") for r in records]
        duration = (f", {_fmt_hours(sum(hours))}" if all(isinstance(h, (int, float)) for h in hours)
                    else ", hours not recorded")
        names = ", ".join(Path(str(r.get("path"))).name for r in records)
        lines.append(f"- {split}: {count}{duration} ({names})")
    return lines


def _fmt_hours(hours: float) -> str:
    """Hours of audio trained on; minutes where a demo-sized set would read "0.00 hours"."""
    return f"{hours:,.2f} hours" if hours >= 1 else f"{hours:.2f} hours ({hours * 60:.1f} minutes)"


def _fmt_loss(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, (int, float)) and not isinstance(value, bool) else "not recorded"


def training_lines(ckpt: Mapping[str, Any], dtype: str, source: Path, movement: BaseMovement | None,
                   *, with_top1: bool = True) -> list[str]:
    """The card lines every generation's export shares, from the weights line to the movement section: how the
    weights were written, the training step, the data, the final losses (``with_top1``: the mel top-1 accuracy
    when the checkpoint logged one) and the movement from the base model."""
    from trainer.checkpoints.format import now_iso

    losses = ckpt.get("last_losses") if isinstance(ckpt.get("last_losses"), Mapping) else {}
    top1 = with_top1 and "mel_top1" in losses
    return [
        f"- Weights: gpt.pth as {dtype}, exported from {source.name} on {now_iso()}",
        f"- Training: step {ckpt.get('step', 'not recorded')}, epoch {ckpt.get('epoch', 'not recorded')}",
        "",
        "## Data",
        "",
        *_data_lines(ckpt),
        "",
        "## Final losses",
        "",
        f"- train (last logged): text {_fmt_loss(losses.get('text_loss'))}, mel {_fmt_loss(losses.get('mel_loss'))}"
        + (f", mel top-1 {_fmt_loss(losses.get('mel_top1'))}" if top1 else ""),
        f"- validation: last {_fmt_loss(ckpt.get('last_val_loss'))}, best {_fmt_loss(ckpt.get('best_val_loss'))}",
        "",
        "## Movement from the base model",
        "",
        *(movement.lines() if movement is not None else ["- not measured (no base model at hand)"]),
    ]
