"""The training form's presets: the demos', the S2Mel decoder's, and the GPU presets of the GPT.

A GPU preset's memory settings (amp, LoRA, gradient checkpointing, batch size, gradient accumulation) are not
written here: they are what ``trainer.memory_estimate.preset_for`` computes for the released GPT it names on its
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

DEMO_PRESET = "Demo (CPU, tiny)"
DEMO_V2_PRESET = "Demo (IndexTTS2)"
DEMO_V25_PRESET = "IndexTTS-2.5 demo (CPU)"
GPU80_V25_PRESET = "IndexTTS-2.5 full fine-tune (80 GB)"
LORA24_V25_PRESET = "IndexTTS-2.5 LoRA (24 GB)"
GPU24_PRESET = "Amharic on one 24 GB GPU"
GPU80_PRESET = "Amharic on 80 GB GPU"
S2MEL_LORA12_PRESET = "S2Mel LoRA (12 GB GPU)"
S2MEL_FULL24_PRESET = "S2Mel full fine-tune (24 GB GPU)"

# The released GPTs' gpt: sections (IndexTeam/IndexTTS-2 and IndexTTS-2.5 config.yaml; tests compare them with
# the reference state-dict tables): what a GPU preset's memory is estimated for.
RELEASED_V2_GPT: dict[str, Any] = {
    "model_dim": 1280, "max_mel_tokens": 1815, "max_text_tokens": 600, "heads": 20, "use_mel_codes_as_input": True,
    "mel_length_compression": 1024, "layers": 24, "number_text_tokens": 12000, "number_mel_codes": 8194,
    "start_mel_token": 8192, "stop_mel_token": 8193, "start_text_token": 0, "stop_text_token": 1,
    "train_solo_embeddings": False, "condition_type": "conformer_perceiver",
    "condition_module": {"output_size": 512, "linear_units": 2048, "attention_heads": 8, "num_blocks": 6,
                         "input_layer": "conv2d2", "perceiver_mult": 2},
    "emo_condition_module": {"output_size": 512, "linear_units": 1024, "attention_heads": 4, "num_blocks": 4,
                             "input_layer": "conv2d2", "perceiver_mult": 2},
}
RELEASED_V25_GPT: dict[str, Any] = {**RELEASED_V2_GPT, "number_text_tokens": 60509, "spk_cond_mode": "campplus"}

_RUN_SETTINGS: dict[str, Any] = {
    "epochs": 10, "max_steps": 0, "warmup_steps": 1000, "log_interval": 20, "val_interval": 1000,
    "save_interval": 1000, "max_val_batches": 100, "keep_checkpoints": 3, "device": "cuda", "train": "gpt",
}
_LORA_SETTINGS: dict[str, Any] = {  # LoRA on every GPT-2 block with the new text rows and the heads trained
    "lora_rank": 16, "lora_alpha": 32.0, "lora_dropout": 0.05, "lora_targets": "all", "lora_layers": "",
    "lora_train_heads": True, "lora_train_embeddings": True, "lora_train_lang_row": True, "lora_dora": False,
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


GPU_PRESETS: dict[str, GpuPreset] = {
    GPU24_PRESET: GpuPreset(RELEASED_V2_GPT, 24, {**_RUN_SETTINGS, "num_workers": 4, "learning_rate": 2e-5}),
    GPU80_PRESET: GpuPreset(RELEASED_V2_GPT, 80, {**_RUN_SETTINGS, "num_workers": 8, "learning_rate": 3e-5}),
    # IndexTTS-2.5: the merges scheme (Amharic at ~0.34 tokens per character, new rows trained, base rows frozen).
    GPU80_V25_PRESET: GpuPreset(RELEASED_V25_GPT, 80, {**_RUN_SETTINGS, "num_workers": 8, "learning_rate": 2e-5,
                                                       "text_scheme": "merges"}),
    # The base GPT frozen, AdamW holds moments for the adapters and the trained tables only; LoRA takes a larger lr.
    LORA24_V25_PRESET: GpuPreset(RELEASED_V25_GPT, 24, {**_RUN_SETTINGS, "num_workers": 4, "learning_rate": 2e-4,
                                                        "warmup_steps": 500, "text_scheme": "merges"},
                                 lora=True, lora_settings=_LORA_SETTINGS),
}

_DEMO_SETTINGS: dict[str, Any] = {
    "epochs": 10, "max_steps": 200, "batch_size": 8, "grad_accumulation": 1, "num_workers": 0,
    "learning_rate": 3e-3, "warmup_steps": 10, "log_interval": 5, "val_interval": 20, "save_interval": 20,
    "max_val_batches": 50, "keep_checkpoints": 3, "device": "cpu", "amp": "off", "grad_checkpointing": False,
    "train": "gpt",
}
# The S2Mel decoder of IndexTTS2 / 2.5 (after a GPT run, or alone): its trainer takes neither --amp nor gradient
# accumulation, so these presets say fp32 and one step per batch rather than show settings it would not use.
# At real size, batch 2 x 4 s, one CPU step peaked at 2.1 GB (full) and 1.8 GB (LoRA) (bench/s2mel_train.py):
# batch 8 leaves room on the named cards. Not yet measured on a GPU (the memory estimate covers the GPT only).
_S2MEL_SETTINGS: dict[str, Any] = {
    "train": "s2mel", "epochs": 10, "max_steps": 0, "batch_size": 8, "grad_accumulation": 1, "num_workers": 4,
    "log_interval": 20, "save_interval": 500, "keep_checkpoints": 3, "device": "cuda", "amp": "off",
    "grad_checkpointing": False,
}
_FIXED_SETTINGS: dict[str, dict[str, Any]] = {
    DEMO_PRESET: _DEMO_SETTINGS,
    DEMO_V2_PRESET: _DEMO_SETTINGS,
    DEMO_V25_PRESET: {**_DEMO_SETTINGS, "text_scheme": "merges", "text_merges": ""},
    # LoRA on the DiT's attention and feed-forward layers; the decoder is frozen, so a 12 GB card holds batch 8.
    S2MEL_LORA12_PRESET: {**_S2MEL_SETTINGS, "learning_rate": 1e-4, "lora": True, "lora_rank": 16,
                          "lora_alpha": 32.0, "lora_dropout": 0.05, "lora_targets": "all", "lora_dora": False},
    S2MEL_FULL24_PRESET: {**_S2MEL_SETTINGS, "learning_rate": 2e-5, "weight_decay": 0.01, "lora": False},
}
# The order the form offers them in.
PRESETS: tuple[str, ...] = (DEMO_PRESET, DEMO_V2_PRESET, GPU24_PRESET, GPU80_PRESET, DEMO_V25_PRESET,
                            GPU80_V25_PRESET, LORA24_V25_PRESET, S2MEL_LORA12_PRESET, S2MEL_FULL24_PRESET)
DEMO_PRESETS = (DEMO_PRESET, DEMO_V2_PRESET, DEMO_V25_PRESET)  # these reset the whole form to a demo's files


def preset_settings(name: str) -> dict[str, Any]:
    """The option values preset ``name`` sets (KeyError: no such preset)."""
    if name in GPU_PRESETS:
        return GPU_PRESETS[name].settings()
    if name in _FIXED_SETTINGS:
        return dict(_FIXED_SETTINGS[name])
    raise KeyError(f"no preset named {name!r}")
