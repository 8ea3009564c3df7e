"""The training form's presets: each generation's (its registry entry names them), and the S2Mel decoder's.

A generation brings its demo preset (the entry's ``form.demo_preset``) and, through its ``presets`` facet
(``generations.preset_facts``), the GPU presets of its GPT, whose settings its folder's ``presets.py`` sizes with
the memory estimate (``trainer.gpu_preset``). The form offers them oldest generation first, each generation's demo
preset before its GPU presets, then the S2Mel presets shared by the generations that have an S2Mel decoder. A demo
preset sets the shared tiny CPU run (``trainer.gpu_preset.DEMO_SETTINGS``) unless its generation's facet says
otherwise.
"""

from __future__ import annotations

from typing import Any

from generations.registry import oldest_first
from trainer.gpu_preset import DEMO_SETTINGS, GpuPreset

S2MEL_LORA12_PRESET = "S2Mel LoRA (12 GB GPU)"
S2MEL_FULL24_PRESET = "S2Mel full fine-tune (24 GB GPU)"

# The S2Mel decoder of the generations that have one (after a GPT run, or alone): its trainer takes neither --amp
# nor gradient accumulation, so these presets say fp32 and one step per batch rather than show settings it would
# not use. At real size, batch 2 x 4 s, one CPU step peaked at 2.1 GB (full) and 1.8 GB (LoRA)
# (bench/s2mel_train.py): batch 8 leaves room on the named cards. Not yet measured on a GPU (the memory estimate
# covers the GPT only).
_S2MEL_SETTINGS: dict[str, Any] = {
    "train": "s2mel", "epochs": 10, "max_steps": 0, "batch_size": 8, "grad_accumulation": 1, "num_workers": 4,
    "log_interval": 20, "save_interval": 500, "keep_checkpoints": 3, "device": "cuda", "amp": "off",
    "grad_checkpointing": False,
}
S2MEL_SETTINGS: dict[str, dict[str, Any]] = {
    # LoRA on the DiT's attention and feed-forward layers; the decoder is frozen, so a 12 GB card holds batch 8.
    S2MEL_LORA12_PRESET: {**_S2MEL_SETTINGS, "learning_rate": 1e-4, "lora": True, "lora_rank": 16,
                          "lora_alpha": 32.0, "lora_dropout": 0.05, "lora_targets": "all", "lora_dora": False},
    S2MEL_FULL24_PRESET: {**_S2MEL_SETTINGS, "learning_rate": 2e-5, "weight_decay": 0.01, "lora": False},
}


def demo_presets() -> tuple[str, ...]:
    """Each generation's demo preset, oldest first: these reset the whole form to a demo's files."""
    return tuple(dict.fromkeys(entry.form.demo_preset for entry in oldest_first() if entry.form.demo_preset))


def workspace_demo_preset() -> str:
    """The demo preset of the demo at the workspace's root (the form's first preset without a project)."""
    return next(entry.form.demo_preset for entry in oldest_first() if entry.demo_folder == "")


def preset_names() -> tuple[str, ...]:
    """Every preset, in the order the form offers them."""
    names: list[str] = []
    for entry in oldest_first():
        names += [entry.form.demo_preset] if entry.form.demo_preset else []
        names += list(entry.presets.names) if entry.presets is not None else []
    return tuple(dict.fromkeys([*names, *S2MEL_SETTINGS]))


def gpu_presets() -> dict[str, GpuPreset]:
    """Every generation's GPU presets, by name, in the form's order."""
    found: dict[str, GpuPreset] = {}
    for entry in oldest_first():
        if entry.presets is not None:
            found.update(entry.presets.gpu_presets())
    return found


def preset_settings(name: str) -> dict[str, Any]:
    """The option values preset ``name`` sets (KeyError: no such preset)."""
    if name in S2MEL_SETTINGS:
        return dict(S2MEL_SETTINGS[name])
    for entry in oldest_first():
        facet = entry.presets
        if name == entry.form.demo_preset:
            own = facet.demo_settings if facet is not None else None
            return dict(own() if own is not None else DEMO_SETTINGS)
        if facet is not None and name in facet.names:
            return facet.gpu_presets()[name].settings()
    raise KeyError(f"no preset named {name!r}")


DEMO_PRESET = workspace_demo_preset()
