"""IndexTTS2's GPU presets of the training form: the released GPT they are sized for, and their recipes."""

from __future__ import annotations

from typing import Any

from generations.indextts2 import GPU_PRESET_NAMES
from trainer.gpu_preset import RUN_SETTINGS, GpuPreset

# The released GPT's gpt: section (IndexTeam/IndexTTS-2 config.yaml; tests compare it with the reference
# state-dict table): what its GPU presets' memory is estimated for.
RELEASED_GPT: dict[str, Any] = {
    "model_dim": 1280, "max_mel_tokens": 1815, "max_text_tokens": 600, "heads": 20, "use_mel_codes_as_input": True,
    "mel_length_compression": 1024, "layers": 24, "number_text_tokens": 12000, "number_mel_codes": 8194,
    "start_mel_token": 8192, "stop_mel_token": 8193, "start_text_token": 0, "stop_text_token": 1,
    "train_solo_embeddings": False, "condition_type": "conformer_perceiver",
    "condition_module": {"output_size": 512, "linear_units": 2048, "attention_heads": 8, "num_blocks": 6,
                         "input_layer": "conv2d2", "perceiver_mult": 2},
    "emo_condition_module": {"output_size": 512, "linear_units": 1024, "attention_heads": 4, "num_blocks": 4,
                             "input_layer": "conv2d2", "perceiver_mult": 2},
}

GPU24, GPU80 = GPU_PRESET_NAMES  # the entry names them, in the form's order

GPU_PRESETS: dict[str, GpuPreset] = {
    GPU24: GpuPreset(RELEASED_GPT, 24, {**RUN_SETTINGS, "num_workers": 4, "learning_rate": 2e-5}),
    GPU80: GpuPreset(RELEASED_GPT, 80, {**RUN_SETTINGS, "num_workers": 8, "learning_rate": 3e-5}),
}


def gpu_presets() -> dict[str, GpuPreset]:
    return GPU_PRESETS


def released_gpt() -> dict[str, Any]:
    return RELEASED_GPT
