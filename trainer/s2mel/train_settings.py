"""What an S2Mel training run is set to (``S2MelTrainSettings``, checked when made) and how it refuses a setting or
checkpoint it cannot use (``S2MelRunError``, one line); ``trainer.s2mel.loop`` runs it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from trainer.s2mel.cross_prompt import PROMPT_MODES
from trainer.s2mel.forward import DEFAULT_CLASS_DROPOUT, LOSS_TYPES
from trainer.s2mel.lora import MODES, S2MelLoRASettings

REGULATIONS = ("split", "per_item", "batched")


class S2MelRunError(ValueError):
    """A setting or a checkpoint the S2Mel run cannot use (one line)."""


@dataclass(frozen=True)
class S2MelTrainSettings:
    mode: str = "lora"
    lora: S2MelLoRASettings = field(default_factory=S2MelLoRASettings)
    learning_rate: float = 1e-4
    weight_decay: float = 0.01
    batch_size: int = 4
    max_steps: int = 1000
    save_interval: int = 200
    keep_checkpoints: int = 3
    grad_clip: float = 1.0
    seed: int = 1234
    loss_type: str = "l1"
    class_dropout_prob: float = DEFAULT_CLASS_DROPOUT
    prompt_fraction: tuple[float, float] = (0.2, 0.5)
    regulation: str = (
        "split"  # "split" (as inference), "per_item" or "batched" (upstream's module on a batch)
    )
    prompt: str = "own"  # "own", "cross" or "auto" (--s2mel-prompt; trainer.s2mel.cross_prompt)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise S2MelRunError(f"S2Mel training mode must be one of {MODES}, got {self.mode!r}")
        if self.loss_type not in LOSS_TYPES:
            raise S2MelRunError(f"S2Mel loss type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        lo, hi = self.prompt_fraction
        if not 0.0 < lo <= hi < 1.0:
            raise S2MelRunError(
                f"prompt fraction must satisfy 0 < low <= high < 1, got {self.prompt_fraction}"
            )
        if self.regulation not in REGULATIONS:
            raise S2MelRunError(f"S2Mel regulation must be one of {REGULATIONS}, got {self.regulation!r}")
        if self.prompt not in PROMPT_MODES:
            raise S2MelRunError(f"S2Mel prompt must be one of {PROMPT_MODES}, got {self.prompt!r}")
        if self.batch_size < 1 or self.max_steps < 1 or self.save_interval < 1:
            raise S2MelRunError("batch size, max steps and save interval must be at least 1")

    def record(self) -> dict[str, Any]:
        record = asdict(self)
        record["prompt_fraction"] = list(self.prompt_fraction)
        record["lora"]["targets"] = list(self.lora.targets)
        return record
