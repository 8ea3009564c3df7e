"""IndexTTS-2.5's presets of the training form: its demo's settings, its GPU presets, and the released GPT they are
sized for."""

from __future__ import annotations

from typing import Any

from generations.indextts2.presets import RELEASED_GPT as INDEXTTS2_GPT
from generations.indextts25 import GPU_PRESET_NAMES
from trainer.gpu_preset import DEMO_SETTINGS, LORA_SETTINGS, RUN_SETTINGS, GpuPreset

# The released GPT's gpt: section (IndexTeam/IndexTTS-2.5 config.yaml; tests compare it with the reference
# state-dict table): IndexTTS2's with its own text table and the CAM++ speaker vector.
RELEASED_GPT: dict[str, Any] = {**INDEXTTS2_GPT, "number_text_tokens": 60509, "spk_cond_mode": "campplus"}

GPU80, LORA24 = GPU_PRESET_NAMES  # the entry names them, in the form's order

GPU_PRESETS: dict[str, GpuPreset] = {
    # The merges scheme (Amharic at ~0.34 tokens per character, new rows trained, base rows frozen).
    GPU80: GpuPreset(RELEASED_GPT, 80, {**RUN_SETTINGS, "num_workers": 8, "learning_rate": 2e-5,
                                        "text_scheme": "merges"}),
    # The base GPT frozen, AdamW holds moments for the adapters and the trained tables only; LoRA takes a larger lr.
    LORA24: GpuPreset(RELEASED_GPT, 24, {**RUN_SETTINGS, "num_workers": 4, "learning_rate": 2e-4,
                                         "warmup_steps": 500, "text_scheme": "merges"},
                      lora=True, lora_settings=LORA_SETTINGS),
}


def gpu_presets() -> dict[str, GpuPreset]:
    return GPU_PRESETS


def released_gpt() -> dict[str, Any]:
    return RELEASED_GPT


def demo_settings() -> dict[str, Any]:
    """Its demo's tiny CPU run, on the merges scheme with the demo's own merges (none)."""
    return {**DEMO_SETTINGS, "text_scheme": "merges", "text_merges": ""}
