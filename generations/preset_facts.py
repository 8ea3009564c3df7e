"""A generation's presets facet (issue 37): the training form's GPT presets it brings besides its demo preset.

The demo preset's name is the entry's ``form.demo_preset``; this facet names the GPU presets the form offers after
it, in the form's order, and points lazily at its presets module (``generations/<name>/presets.py``, the trainer
layer: a GPU preset is sized by ``trainer.memory_estimate``), so reading the names imports no torch.
``webui.training.presets`` lists every entry's presets, oldest generation first.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class PresetFacts:
    """What the training form offers for one generation beyond its demo preset."""

    names: tuple[str, ...]  # its GPU presets, in the form's order (offered after its demo preset)
    gpu_presets: Callable[[], Mapping[str, Any]]  # () -> name -> its trainer.gpu_preset.GpuPreset, for each of names
    released_gpt: Callable[[], dict[str, Any]]  # () -> the released GPT's gpt: section its GPU presets are sized for
    # () -> its demo preset's settings; None: trainer.gpu_preset.DEMO_SETTINGS (the shared tiny CPU run)
    demo_settings: Callable[[], dict[str, Any]] | None = None
