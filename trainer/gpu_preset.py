"""The engine of the training form's GPT presets: a GPU preset sized by the memory estimate, and the recipe pieces
every generation's presets share (each generation's own presets sit in its folder, ``generations/<name>/presets.py``).

A GPU preset's memory settings (amp, LoRA, gradient checkpointing, batch size, gradient accumulation) are not
written by hand: they are what ``trainer.memory_estimate.preset_for`` computes for the released GPT it names on its
card, the same estimate the pre-flight checks a run against, so a preset's batch fits its card by that estimate.
What a preset writes by hand is the recipe around it (learning rate, warm-up, intervals, workers, text scheme).
The GPT is counted once per process on the meta device (seconds), when a GPU preset is first applied.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from trainer.memory_estimate import ModelFacts, Preset, model_facts, preset_for

RUN_SETTINGS: dict[str, Any] = {
    "epochs": 10, "max_steps": 0, "warmup_steps": 1000, "log_interval": 20, "val_interval": 1000,
    "save_interval": 1000, "max_val_batches": 100, "keep_checkpoints": 3, "device": "cuda", "train": "gpt",
}
LORA_SETTINGS: dict[str, Any] = {  # LoRA on every GPT-2 block with the new text rows and the heads trained
    "lora_rank": 16, "lora_alpha": 32.0, "lora_dropout": 0.05, "lora_targets": "all", "lora_layers": "",
    "lora_train_heads": True, "lora_train_embeddings": True, "lora_train_lang_row": True, "lora_dora": False,
}
# A demo's tiny CPU run: what a generation's demo preset sets unless its presets say otherwise.
DEMO_SETTINGS: dict[str, Any] = {
    "epochs": 10, "max_steps": 200, "batch_size": 8, "grad_accumulation": 1, "num_workers": 0,
    "learning_rate": 3e-3, "warmup_steps": 10, "log_interval": 5, "val_interval": 20, "save_interval": 20,
    "max_val_batches": 50, "keep_checkpoints": 3, "device": "cpu", "amp": "off", "grad_checkpointing": False,
    "train": "gpt",
}


@dataclass(frozen=True)
class GpuPreset:
    """A GPT preset for one card: the released GPT it is sized for, the card, and its recipe."""

    gpt: dict[str, Any]
    gpu_gb: int
    recipe: dict[str, Any]  # everything but the memory settings
    lora: bool | None = None  # None: the fastest that fits (full before LoRA); True/False: only that
    lora_settings: dict[str, Any] = field(default_factory=dict)  # counted by the estimate (what LoRA trains)

    def facts(self) -> ModelFacts:
        return _facts(json.dumps(self.gpt, sort_keys=True), json.dumps(self.lora_settings, sort_keys=True))

    def computed(self) -> Preset:
        """What the memory estimate gives this card (``trainer.memory_estimate.preset_for``)."""
        return preset_for(self.facts(), self.gpu_gb, lora=self.lora)

    def settings(self) -> dict[str, Any]:
        computed = self.computed()
        if computed.estimate is None:
            raise ValueError(f"no setting of the released GPT fits a {self.gpu_gb} GB card")
        return {**self.recipe, **self.lora_settings, **computed.options}


@functools.cache
def _facts(gpt_json: str, lora_json: str) -> ModelFacts:
    return model_facts(json.loads(gpt_json), {"lora": True, **json.loads(lora_json)})
