"""Samples at every save of an S2Mel run: the run's GPT speaking through the S2Mel under training.

:func:`sample_hook` gives ``S2MelTrainer.run(on_save=...)`` a function that swaps a merged, eval-mode copy of the
training S2Mel into a loaded synthesizer (``trainer.synthesis`` for IndexTTS2 / 2.5; anything with ``nets.s2mel``
and ``synthesize(text, voice, noise=...)``), voices each text with seeded noise, writes
``samples/s2mel_step<N>_<i>.wav`` and puts the synthesizer's own S2Mel back. Every global RNG is saved before and
restored after, so a run with samples continues exactly as one without them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainer.checkpoints.rng import capture_rng_state, restore_rng_state
from trainer.s2mel.lora import merged_copy
from trainer.synthesis.wav import write_wav


def sample_hook(
    synthesizer: Any,
    texts: Sequence[str],
    voice: str | Path,
    out_dir: str | Path,
    *,
    noise_for: Callable[[int], Any] | None = None,
) -> Callable[[Any], list[Path]]:
    """``on_save`` for :class:`trainer.s2mel.loop.S2MelTrainer`; returns the written files when called."""

    def speak(trainer: Any) -> list[Path]:
        rng = capture_rng_state()
        original = synthesizer.nets.s2mel
        synthesizer.nets.s2mel = merged_copy(trainer.model).eval()
        written = []
        try:
            for index, text in enumerate(texts):
                kwargs = {"noise": noise_for(index)} if noise_for is not None else {}
                result = synthesizer.synthesize(text, voice, **kwargs)
                path = Path(out_dir) / "samples" / f"s2mel_step{trainer.step_count}_{index}.wav"
                written.append(write_wav(path, result.waveform, result.sample_rate))
        finally:
            synthesizer.nets.s2mel = original
            restore_rng_state(rng)
        return written

    return speak
