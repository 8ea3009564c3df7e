"""The semantic input of each generation for S2Mel training, from loaded networks and a prepared folder.

- IndexTTS2: ``vq2emb(codes)`` of the semantic codec, and the GPT's latent for the same codes, teacher-forced
  on the clip's text (``text_ids/<stem>.npy``) with its conditioning (``condition/<stem>.npy`` +
  ``emo_vec/<stem>.npy``): the inputs of inference's latent pass. Pass the GPT the run's samples use.
- IndexTTS-2.5: ``codec.decode(codes)``; no GPT term.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from data_tools.audio import load_audio
from data_tools.npy import read_npy
from trainer.s2mel.dataset import LatentFn, SemanticFn, gpt_latent_teacher_forced


def v2_semantic_fn(codec: nn.Module) -> SemanticFn:
    @torch.no_grad()
    def semantic(codes: Tensor) -> Tensor:
        return codec.vq2emb(codes[None])[0].T  # type: ignore[operator]

    return semantic


def v2_latent_fn(gpt: nn.Module, folder: Path) -> LatentFn:
    def latent(stem: str, codes: Tensor) -> Tensor:
        def array(name: str) -> Tensor:
            return torch.from_numpy(read_npy(folder / name / f"{stem}.npy"))

        with torch.no_grad():
            conds = gpt.conds_of(  # type: ignore[operator]
                None, None, condition=array("condition").float()[None], emo_vec=array("emo_vec").float()[None]
            )
        return gpt_latent_teacher_forced(gpt, conds, array("text_ids").long(), codes)

    return latent


def v25_semantic_fn(codec: nn.Module) -> SemanticFn:
    @torch.no_grad()
    def semantic(codes: Tensor) -> Tensor:
        return codec.decode(codes[None])[0]  # type: ignore[operator]

    return semantic


def audio_loader(folder: Path, sample_rate: int, suffix: str = ".wav"):
    """``stem -> (1, N)`` float32 audio of ``folder/<stem><suffix>`` at ``sample_rate`` (the S2Mel rate)."""

    def load(stem: str) -> Tensor:
        return torch.from_numpy(np.asarray(load_audio(folder / f"{stem}{suffix}", sample_rate)))[None]

    return load
