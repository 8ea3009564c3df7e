"""IndexTTS-1.5's evaluation speech: GPT + BigVGAN from ``trainer.synthesis`` (the vocoder and tokenizer loaded
once per backend, each checkpoint's GPT per call; the base model with its own tokenizer)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.synthesizers import CheckpointSpeaker, SynthesisBackend, prompt_input


class _Speaker:
    def __init__(self, synth: Any) -> None:
        self.synth = synth
        self.generated: list[tuple[np.ndarray, bool]] = []  # the last speak's (codes, hit_stop) per text

    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]:
        """``language``: the text front-end's language of ``texts`` (None: by script)."""
        from trainer.synthesis.errors import SynthesisError

        self.synth.language = language
        try:
            reference = self.synth.prepare_reference(prompt_input(prompt))
            results = [self.synth.synthesize([text], reference, settings)[0] for text in texts]
            self.generated = [(r.codes, r.hit_stop) for r in results]
            return [r.waveform for r in results]
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


class Backend:
    """IndexTTS-1.5: GPT + BigVGAN from ``trainer.synthesis``."""

    def __init__(self, config_path: Path, tokenizer_path: Path, vocoder_path: Path, device: str,
                 language: str | None) -> None:
        from data_tools.config import load_config
        from data_tools.text_tokenizer import TextTokenizer
        from trainer.synthesis.errors import SynthesisError
        from trainer.synthesis.vocoder_loading import load_vocoder

        self.config_path, self.device = Path(config_path), device
        self.config = load_config(config_path)
        self.tokenizer = TextTokenizer(tokenizer_path, language or None)
        self.language = language or None
        try:
            self.vocoder = load_vocoder(vocoder_path, self.config, device, source=str(config_path))
        except (SynthesisError, ValueError, OSError) as exc:
            raise EvaluationError(f"vocoder {vocoder_path}: {' '.join(str(exc).split())}") from None
        self.sample_rate = int(self.vocoder.spec.sampling_rate)

    def for_checkpoint(self, checkpoint: Path, base: bool = False, adapter: bool = True) -> CheckpointSpeaker:
        """``base``: the base model speaks through its own tokenizer (the config's dataset.bpe_model), since a
        grown vocabulary's pieces are rows it does not have. ``adapter=False``: a LoRA checkpoint without its
        adapter (the health check's "adapter off")."""
        from trainer.model_source import base_tokenizer_for
        from trainer.synthesis.errors import SynthesisError
        from trainer.synthesis.gpt_loading import load_gpt
        from trainer.synthesis.pipeline import Synthesizer

        tokenizer = (base_tokenizer_for(self.config, self.config_path) or self.tokenizer) if base else self.tokenizer
        try:
            model = load_gpt(checkpoint, self.config, self.config_path, self.device, adapter=adapter)
            return _Speaker(Synthesizer(model, self.vocoder, tokenizer, language=self.language))
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


def speech(opts: dict[str, Any]) -> tuple[bool, str]:
    """(ok, note or refusal) of IndexTTS-1.5's speech for --eval-at-saves: its BigVGAN (--vocoder)."""
    if not str(opts.get("vocoder") or "").strip():
        return False, "--eval-at-saves speaks with the IndexTTS-1.5 BigVGAN: give --vocoder (bigvgan_generator.pth)"
    return True, ""


def backend(config_path: Path, tokenizer_path: Path, vocoder_path: Path | None, device: str,
            language: str | None, **_folder: Any) -> SynthesisBackend:
    if vocoder_path is None:
        raise EvaluationError("evaluation speaks with the IndexTTS-1.5 BigVGAN: give --vocoder (bigvgan_generator.pth)")
    return Backend(config_path, tokenizer_path, vocoder_path, device, language)
