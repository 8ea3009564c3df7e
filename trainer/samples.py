"""Samples while training: after a checkpoint is committed, rank 0 speaks a few texts with the live model.

What is spoken: ``--sample-texts`` (one text per line) or, by default, the first ``DEFAULT_SAMPLE_COUNT``
validation transcripts (in the training language); with whose voice: the first validation item's prompt.
Decoding is deterministic (``DecodeSettings`` defaults, seeded), so two saves differ only by the weights.

Each sample is ``<output-dir>/samples/step_<N>/<NN>_<id>.wav`` (24 kHz), TensorBoard audio under
``samples/<NN>`` and one ``sample`` event in ``metrics.jsonl``. Checkpoint rotation never touches
``samples/``. Synthesis runs under ``no_grad`` on a private generator and restores the model's train mode,
so the training RNG streams, the data position and the weights are exactly as without samples (a resumed
run stays bitwise exact). A failure is reported as a warning and a ``sample`` event with ``error``:
training goes on.

``sample_plan(...)`` decides whether samples will be made and why not; the run plan shows it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

DEFAULT_SAMPLE_COUNT = 3
SAMPLE_SEED = 1234


@dataclass
class SamplePlan:
    enabled: bool
    message: str  # what the pre-flight shows: what will be spoken, or why there are no samples
    refusal: str | None = None  # the user asked for samples that cannot work: the run is refused
    texts: list[tuple[str, list[int] | str]] = field(default_factory=list)  # (name, text ids or raw text)
    reference: Path | None = None  # a prompt mel .npy or audio file from the validation set
    vocoder: Any = None  # the loaded BigVGAN (cpu)


def _read_texts(path: Path) -> list[str]:
    from data_tools.fileio import open_regular

    with open_regular(path) as handle:
        raw = handle.read()
    return [line.strip() for line in raw.decode("utf-8", errors="replace").splitlines() if line.strip()]


def sample_plan(opts: dict[str, Any], config: dict[str, Any], version: str, val_items: list[Any]) -> SamplePlan:
    """Whether this run makes samples at its saves, what it speaks, and with which voice."""
    vocoder_path = str(opts.get("vocoder") or "").strip()
    if not vocoder_path:
        return SamplePlan(False, "no samples: give --vocoder (bigvgan_generator.pth) to hear the model at every save")
    if version != "1.5":
        return SamplePlan(False, "no samples: IndexTTS2 / IndexTTS-2.5 synthesis (S2Mel and its vocoder) is not "
                                 "in this studio's training samples yet; --vocoder is ignored for these runs")
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
    texts: list[tuple[str, list[int] | str]]
    if str(opts.get("sample_texts") or "").strip():
        path = Path(opts["sample_texts"])
        try:
            lines = _read_texts(path)
        except (OSError, ValueError) as exc:
            return SamplePlan(False, "", refusal=f"--sample-texts {path}: {' '.join(str(exc).split())}")
        if not lines:
            return SamplePlan(False, "", refusal=f"--sample-texts {path}: no text in the file")
        texts = [(f"text{index + 1}", line) for index, line in enumerate(lines)]
        source = f"{len(texts)} text(s) of {path}"
    else:
        texts = [(item.id, [int(i) for i in item.text_ids]) for item in val_items[:DEFAULT_SAMPLE_COUNT]]
        source = f"the first {len(texts)} validation transcript(s)"
    every = int(opts.get("sample_every") or 0)
    when = "every save" if every == 0 else f"saves at multiples of {every} steps"
    return SamplePlan(True, f"samples at {when}: {source}, voice of {references[0].id}, vocoder {vocoder_path}",
                      texts=texts, reference=Path(reference), vocoder=vocoder)


def _reference_input(path: Path) -> Any:
    if path.suffix == ".npy":
        from data_tools.npy import read_npy

        mel = read_npy(path)
        return torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32))
    return path


def make_samples(plan: SamplePlan, model: torch.nn.Module, tokenizer: Any, step: int, epoch: int, out_dir: Path,
                 metrics: Any, say: Any) -> None:
    """Speak the plan's texts with ``model`` as it is now; never raises (a failure is reported)."""
    from trainer.synthesis.errors import SynthesisError
    from trainer.synthesis.generation import DecodeSettings
    from trainer.synthesis.pipeline import Synthesizer
    from trainer.synthesis.wav import write_wav

    started = time.perf_counter()
    folder = out_dir / "samples" / f"step_{step}"
    try:
        synth = Synthesizer(model, plan.vocoder.to(next(model.parameters()).device), tokenizer)
        settings = DecodeSettings(seed=SAMPLE_SEED)
        reference = synth.prepare_reference(_reference_input(plan.reference))
        files: list[dict[str, Any]] = []
        folder.mkdir(parents=True, exist_ok=True)
        for index, (name, text) in enumerate(plan.texts):
            if isinstance(text, str):
                result = synth.synthesize([text], reference, settings)[0]
            else:
                result = synth.synthesize_ids(text, reference, settings)
            path = write_wav(folder / f"{index + 1:02d}_{_safe(name)}.wav", result.waveform, result.sample_rate)
            metrics.audio(f"samples/{index + 1:02d}", result.waveform, step, result.sample_rate)
            files.append({"path": str(path), "name": name, "audio_seconds": round(result.audio_seconds, 3),
                          "hit_stop": result.hit_stop})
    except (SynthesisError, OSError, RuntimeError, ValueError) as exc:
        seconds = round(time.perf_counter() - started, 2)
        message = " ".join(str(exc).split())
        say(f"warning: samples at step {step} failed ({message}); training goes on")
        metrics.event("sample", step, epoch, error=message, seconds=seconds)
        return
    seconds = round(time.perf_counter() - started, 2)
    say(f"samples at step {step}: {len(files)} wav(s) in {folder} ({seconds:.1f} s)")
    metrics.event("sample", step, epoch, dir=str(folder), files=files, seconds=seconds)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:60] or "text"
