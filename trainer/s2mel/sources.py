"""What a generation gives an S2Mel run (``S2MelSources``: its synthesizer, its semantic input, the GPT latent
where its S2Mel reads one), and the audio of a prepared folder. Each generation makes its sources in its package
(``generations.<name>.s2mel``; its registry entry's ``s2mel.sources``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from data_tools.audio import load_audio
from trainer.s2mel.dataset import LatentFn, SemanticFn


@dataclass(frozen=True)
class S2MelSources:
    """What one generation gives an S2Mel run, loaded from its download folder."""

    synthesizer: Any  # speaks the samples at saves (its nets: config, codec, gpt, s2mel)
    semantic: SemanticFn
    latent_for: Callable[[Path], LatentFn] | None  # prepared folder -> the GPT latent (IndexTTS2), else None
    model_kwargs: dict[str, Any]  # load_s2mel's arguments beyond the config section
    text_rows: int | None = None  # text rows of the latent's GPT (IndexTTS2): the clips' text ids must fit

    @property
    def config(self) -> dict[str, Any]:
        return self.synthesizer.nets.config


def w2v_bert_of(opts: dict[str, Any]) -> tuple[str | None, bool]:
    """(the run's --w2v-bert or None, whether the folder's own w2v-BERT loads offline)."""
    return (opts.get("w2v_bert") or None), not opts.get("w2v_bert")


def audio_loader(folder: Path, sample_rate: int, suffix: str = ".wav"):
    """``stem -> (1, N)`` float32 audio of ``folder/<stem><suffix>`` at ``sample_rate`` (the S2Mel rate)."""

    def load(stem: str) -> Tensor:
        return torch.from_numpy(np.asarray(load_audio(folder / f"{stem}{suffix}", sample_rate)))[None]

    return load
