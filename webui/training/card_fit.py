"""What one GPU can train: each released GPT the form has GPU presets for, full fine-tune and LoRA.

The answer is the training form's own memory estimate (``trainer.memory_estimate.preset_for``, what the GPU
presets and the pre-flight use): the fastest settings that fit the card, or "does not fit". The notebook and the
rented-box launcher print it for the card they find, and for the free notebook cards before anything is installed.

    python -m webui.training.card_fit              # the GPU torch sees, else the free notebook cards
    python -m webui.training.card_fit --gpu-gb 15  # a card of 15 GB
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

from generations.registry import GENERATIONS
from trainer.gpu_preset import LORA_SETTINGS, GpuPreset
from trainer.memory_estimate import GIB, Preset, gb

# The GPUs free notebooks lend (Colab and Kaggle: a T4 with 15 GB; Kaggle also a P100 with 16 GB).
FREE_CARDS: tuple[tuple[str, int], ...] = (("T4 (Colab, Kaggle)", 15), ("P100 (Kaggle)", 16))


def released_models() -> list[tuple[str, dict]]:
    """(name, gpt: section) of each released GPT a generation's GPU presets are sized for, newest first."""
    return [(entry.name, entry.presets.released_gpt()) for entry in GENERATIONS if entry.presets is not None]


@dataclass(frozen=True)
class CardFit:
    model: str
    full: Preset  # the full fine-tune's settings (estimate None: does not fit)
    lora: Preset  # LoRA on every block, the new text rows and the heads trained


def card_fits(gpu_gb: int) -> list[CardFit]:
    fits = []
    for name, gpt in released_models():
        full = GpuPreset(gpt, gpu_gb, {}, lora=False).computed()
        lora = GpuPreset(gpt, gpu_gb, {}, lora=True, lora_settings=LORA_SETTINGS).computed()
        fits.append(CardFit(name, full, lora))
    return fits


def settings_text(preset: Preset) -> str:
    """'batch 4 x 8 accumulated, checkpointing, ~13.1 GB' or 'does not fit'."""
    if preset.estimate is None:
        return "does not fit"
    options = preset.options
    parts = [f"batch {options['batch_size']} x {options['grad_accumulation']} accumulated"]
    if options.get("grad_checkpointing"):
        parts.append("gradient checkpointing")
    return ", ".join([*parts, f"~{gb(preset.estimate.device_bytes)}"])


def fit_table(card: str, gpu_gb: int) -> str:
    """A Markdown table: one row per released GPT, its full fine-tune and its LoRA on this card."""
    lines = [f"**{card}, {gpu_gb} GB** (items up to 600 text tokens and 1,815 speech codes; mixed precision: "
             "`--amp fp16` on a card without bf16, such as the T4 and P100)", "",
             "| model | full fine-tune | LoRA |", "| --- | --- | --- |"]
    lines += [f"| {fit.model} | {settings_text(fit.full)} | {settings_text(fit.lora)} |"
              for fit in card_fits(gpu_gb)]
    return "\n".join(lines)


def detected_card() -> tuple[str, int] | None:
    """(name, memory in GB) of the first GPU torch sees, None without one."""
    import torch

    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    return props.name, max(round(props.total_memory / GIB), 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webui.training.card_fit", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu-gb", type=int, default=None, help="a card of this many GB instead of the one found")
    args = parser.parse_args(argv)
    if args.gpu_gb is not None:
        if args.gpu_gb < 1:
            parser.error("--gpu-gb must be at least 1")
        cards = [(f"a {args.gpu_gb} GB card", args.gpu_gb)]
    else:
        found = detected_card()
        cards = [found] if found is not None else list(FREE_CARDS)
        if found is None:
            print("No GPU found here: what the free notebook cards can train.\n")
    print("\n\n".join(fit_table(name, size) for name, size in cards))
    return 0


if __name__ == "__main__":
    sys.exit(main())
