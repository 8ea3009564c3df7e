"""Samples while training: after a checkpoint is committed, rank 0 speaks a few texts with the live model.

What is spoken: ``--sample-texts`` (one text per line) or, by default, the first ``DEFAULT_SAMPLE_COUNT``
validation transcripts (in the training language); with whose voice: the first validation item's prompt.
Decoding is deterministic (``DecodeSettings`` defaults, seeded), so two saves differ only by the weights.

Each generation plans and speaks its own samples (its registry entry's ``speech.sample_plan`` and ``.sample_speaker``,
in ``generations.<name>.samples``); this module decides through the entry and writes what they speak.

- IndexTTS-1.5 (``--vocoder bigvgan_generator.pth``): GPT + BigVGAN, 24 kHz; the voice is the first
  validation prompt (its cond_mel or cond_audio).
- IndexTTS2 (``--sample-model-dir``, a download folder): the live GPT with the folder's w2v-BERT, semantic
  codec, CAMPPlus, S2Mel (``--sample-steps`` flow-matching steps, default 10 against inference's 25: a save's
  samples take a fraction of the time and still show what the GPT learned) and BigVGAN v2, 22.05 kHz; the voice
  (and emotion) is the audio of the first validation pair's prompt (``prompt_audio_path``); the CFM noise is
  seeded. The folder's networks are loaded once, at the first sample, on the training device (its own
  ``gpt.pth`` is not read: the live GPT speaks).
- IndexTTS-2.5 (``--sample-model-dir``, a 2.5 download folder): the live 2.5 GPT with the folder's codec, S2Mel (no gpt_layer) and BigVGAN v2, 22.05 kHz, duration factor 1, each text in the voice's
  language; the voice as for IndexTTS2.

Each sample is ``<output-dir>/samples/step_<N>/<NN>_<id>.wav``, TensorBoard audio under ``samples/<NN>`` and one
``sample`` event in ``metrics.jsonl``. Checkpoint rotation never touches ``samples/``. Synthesis runs under
``no_grad`` on private generators (networks are built with the global RNG forked) and restores the model's
train mode, so the training RNG streams, the data position and the weights are exactly as without samples (a
resumed run stays bitwise exact). A failure is reported as a warning and a ``sample`` event with ``error``:
training goes on.

``sample_plan(...)`` decides whether samples will be made and why not; the run plan shows it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainer.sample_plan import (
    DEFAULT_SAMPLE_COUNT,
    SAMPLE_SEED,
    W2V_BERT_HUB_ID,
    SamplePlan,
)
from trainer.signals import StopDuringSamples

__all__ = ["DEFAULT_SAMPLE_COUNT", "SAMPLE_SEED", "W2V_BERT_HUB_ID", "SamplePlan", "make_samples", "sample_plan"]


def sample_plan(opts: dict[str, Any], config: dict[str, Any], generation: Any, val_items: list[Any]) -> SamplePlan:
    """Whether this run makes samples at its saves, what it speaks, and with which voice (``generation``: the
    run's registry entry, which plans them; one that cannot make samples says why)."""
    from generations.spec import Capability

    refusal = generation.refusal(Capability.SAMPLES)
    if refusal is not None or generation.speech.sample_plan is None:
        asked = any(str(opts.get(name) or "").strip() for name in ("vocoder", "sample_model_dir"))
        message = refusal or f"{generation.name} makes no samples at saves"
        return SamplePlan(False, "", refusal=message) if asked else SamplePlan(False, f"no samples: {message}")
    plan = generation.speech.sample_plan(opts, config, val_items)
    plan.version = generation.id
    return plan


def make_samples(plan: SamplePlan, model: torch.nn.Module, tokenizer: Any, step: int, epoch: int, out_dir: Path,
                 metrics: Any, say: Any, stop_requested: Callable[[], bool] | None = None,
                 interruptible: contextlib.AbstractContextManager | None = None) -> bool:
    """Speak the plan's texts with ``model`` as it is now; never raises (a failure is reported).

    A stop abandons the samples of this save (the wavs spoken so far removed, no ``sample`` event) and False is
    returned, so a stop never waits for synthesis: ``stop_requested`` is asked before each text, and inside
    ``interruptible`` (``GracefulStop.interruptible()``) a stop signal cuts the text being spoken short. True
    otherwise (made, or failed and reported)."""
    from trainer.synthesis.errors import SynthesisError
    from trainer.synthesis.wav import write_wav

    started = time.perf_counter()
    folder = out_dir / "samples" / f"step_{step}"
    files: list[dict[str, Any]] = []
    try:
        with interruptible if interruptible is not None else contextlib.nullcontext():
            if stop_requested is not None and stop_requested():
                return False
            speak = _speaker(plan)(plan, model, tokenizer)
            folder.mkdir(parents=True, exist_ok=True)
            for index, (name, text) in enumerate(plan.texts):
                if stop_requested is not None and stop_requested():
                    _abandon(folder)
                    return False
                result = speak(text)
                path = write_wav(folder / f"{index + 1:02d}_{_safe(name)}.wav", result.waveform, result.sample_rate)
                metrics.audio(f"samples/{index + 1:02d}", result.waveform, step, result.sample_rate)
                files.append({"path": str(path), "name": name, "audio_seconds": round(result.audio_seconds, 3),
                              "hit_stop": result.hit_stop})
    except StopDuringSamples:
        _abandon(folder)
        return False
    except (SynthesisError, OSError, RuntimeError, ValueError) as exc:
        seconds = round(time.perf_counter() - started, 2)
        message = " ".join(str(exc).split())
        say(f"warning: samples at step {step} failed ({message}); training goes on")
        metrics.event("sample", step, epoch, error=message, seconds=seconds)
        return True
    seconds = round(time.perf_counter() - started, 2)
    say(f"samples at step {step}: {len(files)} wav(s) in {folder} ({seconds:.1f} s)")
    metrics.event("sample", step, epoch, dir=str(folder), files=files, seconds=seconds)
    return True


def _abandon(folder: Path) -> None:
    """Remove the wavs of samples left half-made by a stop (a step's folder is all of its samples or none)."""
    if folder.is_dir():
        for path in folder.iterdir():
            path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder.rmdir()


def _speaker(plan: SamplePlan) -> Any:
    """The function that makes ``speak(text)`` for the plan's generation (its registry entry's)."""
    from generations.registry import by_id

    speaker = by_id(plan.version).speech.sample_speaker
    assert speaker is not None, "a generation without a sample speaker never plans samples"
    return speaker


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in name)[:60] or "text"
