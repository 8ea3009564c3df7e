"""How far a fine-tune's weights moved from its base model: the "sounds like the base" guard of export.

Users report "the fine-tune sounds like the base" when the wrong weights were loaded or nothing was trained.
Export compares the weights with the base checkpoint the run started from: weights that are bitwise the base's
are refused, and the model card reports the relative change per part of the GPT. A grown text table is
compared on the base's rows only (rows ``0..base_n-1`` and the extra last row, where vocabulary growth moved it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from trainer.vocab import bitwise_equal

# (part of the model, key prefixes); the first match names a tensor's part, "other" takes the rest.
PARTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("text rows", ("text_embedding.", "text_head.", "text_pos_embedding.")),
    ("mel rows", ("mel_embedding.", "mel_head.", "mel_pos_embedding.")),
    ("GPT blocks", ("gpt.", "final_norm.")),
    ("conditioning", ("conditioning_encoder.", "perceiver_encoder.", "emo_", "emovec_layer.", "speed_emb.")),
)


@dataclass
class BaseMovement:
    """Relative L2 change ||W - B|| / ||B|| per part, over the base's share of every tensor both hold."""

    base: Path
    compared: int = 0
    changed: int = 0
    relative: dict[str, float] = field(default_factory=dict)
    only_in_weights: int = 0

    @property
    def unchanged(self) -> bool:
        return self.compared > 0 and self.changed == 0

    def lines(self) -> list[str]:
        out = [f"- compared with {self.base}: {self.changed:,} of {self.compared:,} tensors changed"]
        out += [f"- {part}: relative change {value:.3g}" for part, value in self.relative.items()]
        if self.only_in_weights:
            out.append(f"- {self.only_in_weights} tensor(s) have no counterpart in the base")
        return out


def _part(name: str) -> str:
    return next((part for part, prefixes in PARTS if name.startswith(prefixes)), "other")


def _base_share(weight: Tensor, base: Tensor) -> tuple[Tensor, Tensor] | None:
    """The parts of ``weight`` and ``base`` that hold the same rows, or None where the shapes cannot match."""
    if weight.shape == base.shape:
        return weight, base
    if weight.dim() == base.dim() and weight.shape[1:] == base.shape[1:] and weight.shape[0] > base.shape[0] >= 1:
        rows = base.shape[0] - 1  # the base's extra last row moved to the grown table's end
        return torch.cat((weight[:rows], weight[-1:])), base
    return None


def base_movement(weights: Mapping[str, Tensor], base_state: Mapping[str, Tensor], base: Path) -> BaseMovement:
    """Compare ``weights`` with ``base_state`` key by key (see :class:`BaseMovement`)."""
    movement = BaseMovement(base=base)
    squared_diff: dict[str, float] = {}
    squared_base: dict[str, float] = {}
    for name, weight in weights.items():
        reference = base_state.get(name)
        shared = _base_share(weight, reference) if isinstance(reference, Tensor) else None
        if shared is None:
            movement.only_in_weights += 1
            continue
        ours, theirs = (t.detach().cpu() for t in shared)
        movement.compared += 1
        if bitwise_equal(ours, theirs):
            continue
        movement.changed += 1
        if ours.is_floating_point() and theirs.is_floating_point():
            part = _part(name)
            diff = (ours.double() - theirs.double()).pow(2).sum().item()
            squared_diff[part] = squared_diff.get(part, 0.0) + diff
            squared_base[part] = squared_base.get(part, 0.0) + theirs.double().pow(2).sum().item()
    for part, _prefixes in (*PARTS, ("other", ())):
        if part in squared_diff:
            movement.relative[part] = (squared_diff[part] / max(squared_base[part], 1e-30)) ** 0.5
    return movement


def recorded_base(ckpt: Mapping[str, Any]) -> Path | None:
    """The base checkpoint the run recorded (``--base-checkpoint``), or None."""
    hparams = ckpt.get("hparams") if isinstance(ckpt.get("hparams"), Mapping) else {}
    value = hparams.get("base_checkpoint")
    return Path(str(value)).expanduser() if value else None


def movement_for_export(ckpt: Mapping[str, Any], weights: Mapping[str, Tensor], base: str | Path | None,
                        notes: list[str]) -> BaseMovement | None:
    """The movement of ``weights`` from ``base`` (or the recorded base); None, with a note, where none is at hand.

    Raises CheckpointError when an explicit ``base`` is missing or not an IndexTTS GPT, and when the weights are
    bitwise the base's: an export of them would only "sound like the base".
    """
    from networks.unified_voice import INFERENCE_ONLY_PREFIXES
    from trainer.checkpoints.format import CheckpointError, model_state_of
    from trainer.checkpoints.loading import load_checkpoint

    path = Path(base).expanduser() if base is not None else recorded_base(ckpt)
    if path is None:
        notes.append("the checkpoint records no base model: movement from the base not measured (pass --base)")
        return None
    if not path.is_file():
        if base is not None:
            raise CheckpointError(f"--base {path} not found")
        notes.append(f"base model {path} not found: movement from the base not measured (pass --base)")
        return None
    state = model_state_of(load_checkpoint(path))
    if state is None:
        raise CheckpointError(f"base {path} holds no IndexTTS GPT weights")
    kept = {k: v for k, v in state.items() if not k.startswith(INFERENCE_ONLY_PREFIXES)}
    movement = base_movement(weights, kept, path)
    if movement.unchanged:
        raise CheckpointError(f"the weights are bitwise the base model's ({path}): nothing was trained, so the "
                              "export would sound exactly like the base; export a checkpoint of a run that trained")
    return movement
