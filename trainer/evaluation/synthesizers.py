"""Speech from a checkpoint for evaluation, chosen by model version: the one place a generation plugs in.

    backend = synthesis_backend(version, config_path, tokenizer_path, vocoder_path, device, language)
    speaker = backend.for_checkpoint(checkpoint_path)       # loads that checkpoint's GPT
    clips = speaker.speak(texts, prompt_path, settings, language)  # float32 waveforms at backend.sample_rate

IndexTTS-1.5 speaks through ``trainer.synthesis`` (GPT + BigVGAN; the vocoder and tokenizer are loaded once
per backend, each checkpoint's GPT per call; the base model with its own tokenizer). IndexTTS2 has no synthesis in this studio yet: asking for it
raises EvaluationError with that sentence. When it lands, add a backend class with the same two methods and
one entry in ``BACKENDS``; nothing else in evaluation knows the generation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from trainer.evaluation.errors import EvaluationError

V2_NOT_AVAILABLE = ("IndexTTS2 synthesis is not available yet: its checkpoints cannot be evaluated (CER, WER, "
                    "speaker similarity) until the studio can speak with them")


class CheckpointSpeaker(Protocol):
    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]: ...


class SynthesisBackend(Protocol):
    sample_rate: int

    def for_checkpoint(self, checkpoint: Path, base: bool = False) -> CheckpointSpeaker: ...


class _V15Speaker:
    def __init__(self, synth: Any) -> None:
        self.synth = synth

    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]:
        """``language``: the text front-end's language of ``texts`` (None: by script)."""
        from trainer.synthesis.errors import SynthesisError

        self.synth.language = language
        try:
            reference = self.synth.prepare_reference(_prompt_input(prompt))
            return [self.synth.synthesize([text], reference, settings)[0].waveform for text in texts]
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


class V15Backend:
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

    def for_checkpoint(self, checkpoint: Path, base: bool = False) -> CheckpointSpeaker:
        """``base``: the base model speaks through its own tokenizer (the config's dataset.bpe_model), since a
        grown vocabulary's pieces are rows it does not have."""
        from trainer.model_source import base_tokenizer_for
        from trainer.synthesis.errors import SynthesisError
        from trainer.synthesis.gpt_loading import load_gpt
        from trainer.synthesis.pipeline import Synthesizer

        tokenizer = (base_tokenizer_for(self.config, self.config_path) or self.tokenizer) if base else self.tokenizer
        try:
            model = load_gpt(checkpoint, self.config, self.config_path, self.device)
            return _V15Speaker(Synthesizer(model, self.vocoder, tokenizer, language=self.language))
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


def _v2_backend(*_args: Any, **_kwargs: Any) -> SynthesisBackend:
    raise EvaluationError(V2_NOT_AVAILABLE)


BACKENDS: dict[str, Callable[..., SynthesisBackend]] = {"1.5": V15Backend, "2": _v2_backend}


def synthesis_backend(version: str, config_path: Path, tokenizer_path: Path, vocoder_path: Path | None,
                      device: str = "cpu", language: str | None = None) -> SynthesisBackend:
    """The synthesis of model ``version`` ("1.5", "2"); EvaluationError (one line) where there is none."""
    factory = BACKENDS.get(str(version))
    if factory is None:
        raise EvaluationError(f"no synthesis for IndexTTS version {version!r}")
    if factory is V15Backend and vocoder_path is None:
        raise EvaluationError("evaluation speaks with the IndexTTS-1.5 BigVGAN: give --vocoder (bigvgan_generator.pth)")
    return factory(config_path, tokenizer_path, vocoder_path, device, language)


def _prompt_input(path: Path) -> Any:
    """A prompt mel ``.npy`` is used as features (as in training); anything else is read as audio."""
    if Path(path).suffix.lower() != ".npy":
        return Path(path)
    import torch

    from data_tools.npy import read_npy

    try:
        mel = read_npy(path)
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"reference voice {path}: {' '.join(str(exc).split())}") from None
    return torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32))
