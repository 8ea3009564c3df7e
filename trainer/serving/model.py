"""The model a server speaks with: an export folder (or a base model folder) of any generation, loaded once.

The generation is recognised from the folder as everywhere else (the registry); the speech is its registry
entry's synthesis backend, the one evaluation speaks with: the folder's networks loaded once, its ``gpt.pth`` on
top, each reference voice prepared once and kept. Decoding is deterministic (upstream's beam search, sampling
off), so the same text in the same voice sounds the same every time.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class ModelError(ValueError):
    """A folder this server cannot speak with: one line."""


def _beside(config: Path, name: object) -> Path | None:
    text = str(name or "").strip()
    return (config.parent / text) if text else None


class ServedModel:
    """``speak(sentence, voice clip) -> float32 waveform at sample_rate``; one call at a time per instance."""

    def __init__(self, folder: Path, device: str = "cpu", language: str | None = None,
                 decode: Any = None) -> None:
        """``decode``: trainer.synthesis.generation.DecodeSettings (default: upstream's beam search, sampling off)."""
        from data_tools.config import ConfigError, load_config
        from generations.registry import generation_of_config, generation_of_folder
        from trainer.evaluation.backend_choice import synthesis_backend
        from trainer.evaluation.errors import EvaluationError

        folder = Path(folder).expanduser().resolve()
        config_path, gpt = folder / "config.yaml", folder / "gpt.pth"
        for needed in (config_path, gpt):
            if not needed.is_file():
                raise ModelError(f"{folder} is not a model folder: {needed.name} is missing (give an export folder)")
        try:
            config = load_config(config_path)
        except ConfigError as exc:
            raise ModelError(" ".join(str(exc).split())) from None
        generation = generation_of_folder(folder) or generation_of_config(config)
        self.name, self.generation, self.language = folder.name, generation.name, language
        dataset = config.get("dataset") if isinstance(config.get("dataset"), Mapping) else {}
        table = generation.test.folder_table
        tokenizer = folder / table if table else (folder / "bpe.model" if (folder / "bpe.model").is_file()
                                                    else _beside(config_path, dataset.get("bpe_model")))
        if tokenizer is None or not tokenizer.is_file():
            raise ModelError(f"{folder}: no tokenizer (bpe.model or the config's dataset.bpe_model)")
        through_folder = generation.test.speaks_through_folder
        vocoder = None if through_folder else _beside(config_path, config.get("bigvgan_checkpoint"))
        try:
            backend = synthesis_backend(generation.id, config_path, tokenizer, vocoder, device, language,
                                        model_dir=folder if through_folder else None)
            self._speaker = backend.for_checkpoint(gpt)
        except EvaluationError as exc:
            raise ModelError(str(exc)) from None
        from trainer.synthesis.generation import DecodeSettings

        self.decode = decode if decode is not None else DecodeSettings()
        self.sample_rate = int(backend.sample_rate)
        self._lock = threading.Lock()

    def speak(self, sentence: str, voice: Path) -> np.ndarray:
        with self._lock:  # a speaker keeps per-call state (its prepared voices, the language)
            wave = self._speaker.speak([sentence], voice, self.decode, self.language)[0]
        return np.asarray(wave, dtype=np.float32).reshape(-1)
