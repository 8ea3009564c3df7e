"""IndexTTS-1.5 samples at saves (``trainer.samples`` holds what every generation shares): the live GPT's codes
through its BigVGAN (``--vocoder``), 24 kHz, in the voice of the first validation prompt (its cond_mel or
cond_audio)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainer.sample_plan import SAMPLE_SEED, SamplePlan, sample_texts, samples_when


def sample_plan(opts: dict[str, Any], config: dict[str, Any], val_items: list[Any]) -> SamplePlan:
    """IndexTTS-1.5: the GPT's codes through its BigVGAN (``--vocoder``)."""
    vocoder_path = str(opts.get("vocoder") or "").strip()
    if not vocoder_path:
        return SamplePlan(False, "no samples: give --vocoder (bigvgan_generator.pth) to hear the model at every save")
    from trainer.synthesis.errors import SynthesisError
    from trainer.synthesis.vocoder_loading import load_vocoder

    try:
        with torch.random.fork_rng(devices=[]):
            vocoder = load_vocoder(vocoder_path, config, "cpu", source=str(opts.get("config")))
    except (SynthesisError, ValueError, OSError) as exc:
        return SamplePlan(False, "", refusal=f"--vocoder {vocoder_path}: " + " ".join(str(exc).split()))
    references = [item for item in val_items if getattr(item, "cond_mel", None) or getattr(item, "cond_audio", None)]
    if not references:
        return SamplePlan(False, "no samples: they need a validation manifest (its first prompt is the voice)")
    reference = references[0].cond_mel or references[0].cond_audio
    texts = sample_texts(opts, val_items)
    if isinstance(texts, SamplePlan):
        return texts
    source, chosen = texts
    return SamplePlan(True, f"samples at {samples_when(opts)}: {source}, voice of {references[0].id}, vocoder {vocoder_path}",
                      texts=chosen, reference=Path(reference), vocoder=vocoder)


def _reference_input(path: Path) -> Any:
    if path.suffix == ".npy":
        from data_tools.npy import read_npy

        mel = read_npy(path)
        return torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32))
    return path


def speaker(plan: SamplePlan, model: torch.nn.Module, tokenizer: Any) -> Any:
    """text (raw or ids) -> SynthResult with IndexTTS-1.5's GPT + BigVGAN."""
    from trainer.synthesis.generation import DecodeSettings
    from trainer.synthesis.pipeline import Synthesizer

    synth = Synthesizer(model, plan.vocoder.to(next(model.parameters()).device), tokenizer)
    settings = DecodeSettings(seed=SAMPLE_SEED)
    assert plan.reference is not None
    reference = synth.prepare_reference(_reference_input(plan.reference))

    def speak(text: list[int] | str) -> Any:
        if isinstance(text, str):
            return synth.synthesize([text], reference, settings)[0]
        return synth.synthesize_ids(text, reference, settings)

    return speak
