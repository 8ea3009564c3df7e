"""Clips for an S2Mel run from a prepared folder: mel and style files, and the semantic input from the codes.

Conditioning (decided, measured by ``bench/s2mel_conditioning.py``; README "Training S2Mel"): training feeds the
decoder what inference feeds it.
- IndexTTS2: ``vq2emb(codes) + gpt_layer(latent)``, where the latent is the GPT's hidden states for the clip's
  ground-truth codes, teacher-forced on its text with its conditioning (inference's latent pass). The GPT is the
  one the run's samples use (the fine-tuned one after a GPT run); ``gpt_layer`` then trains too. Codes alone would
  train on an input that lacks the GPT term present at every inference.
- IndexTTS-2.5: ``codec.decode(codes)`` for every frame. Inference has no GPT term, so nothing is missing; only its
  prompt region is regulated from continuous w2v features; where preparation stored them
  (``s2mel_prompt/``), training regulates its prompt region from them too.
- Both: the prompt region and the rest are regulated in two calls, as inference does (``regulate_split``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import overload

import numpy as np
import torch
from torch import Tensor

from data_tools.npy import read_npy
from data_tools.s2mel_clip import prompt_feature_path, s2mel_paths
from trainer.s2mel.batches import S2MelClip

SemanticFn = Callable[[Tensor], Tensor]  # codes (M,) int64 -> (S_len, W) semantic input
LatentFn = Callable[[str, Tensor], Tensor]  # (stem, codes (M,)) -> (M, gpt_dim) GPT latent


@torch.no_grad()
def gpt_latent_teacher_forced(gpt: torch.nn.Module, conds: Tensor, text_ids: Tensor, codes: Tensor) -> Tensor:
    """IndexTTS2's latent for ground-truth codes: ``latent_with_conds`` on conds (1, n, D), text (L,), codes (M,)."""
    was_training = gpt.training
    gpt.eval()
    try:
        latent = gpt.latent_with_conds(  # type: ignore[operator]
            conds,
            text_ids[None],
            torch.tensor([text_ids.numel()]),
            codes[None],
            torch.tensor([codes.numel()]),
        )
    finally:
        gpt.train(was_training)
    return latent[0].float()


def load_clips(
    folder: Path,
    stems: Sequence[str],
    semantic_fn: SemanticFn,
    latent_fn: LatentFn | None = None,
    *,
    prompt_features: bool = False,
) -> list[S2MelClip]:
    """Read every clip's S2Mel files and codes (``codes/<stem>.npy``) and build its semantic input.

    ``prompt_features`` (2.5): also read ``s2mel_prompt/<stem>.npy``, the continuous features of the prompt region.
    """
    clips = []
    for stem in stems:
        mel_path, style_path = (folder / p for p in s2mel_paths(stem))
        codes = torch.from_numpy(read_npy(folder / "codes" / f"{stem}.npy").astype(np.int64))
        semantic = semantic_fn(codes)
        latent = latent_fn(stem, codes) if latent_fn is not None else None
        if latent is not None and latent.shape[0] != semantic.shape[0]:
            raise ValueError(
                f"{stem}: GPT latent has {latent.shape[0]} frames, semantic input {semantic.shape[0]}"
            )
        prompt = None
        if prompt_features:
            prompt = torch.from_numpy(read_npy(folder / prompt_feature_path(stem)).astype(np.float32))
        clips.append(
            S2MelClip(
                mel=torch.from_numpy(read_npy(mel_path)).float(),
                style=torch.from_numpy(read_npy(style_path)).float(),
                code_embedding=semantic.float(),
                gpt_latent=latent,
                prompt_semantic=prompt,
                name=stem,
            )
        )
    return clips


class PreparedClips(Sequence[S2MelClip]):
    """The clips of a prepared folder, each read and built when a batch asks for it (nothing held in memory).

    A real run's semantic inputs (1024 wide at 50 Hz, plus v2's GPT latents) would not fit in memory for hours
    of audio; building them per batch costs a codec call (and v2's GPT forward) per clip. The builders run in
    eval mode without randomness, so the run stays bit-exact on resume.
    """

    def __init__(
        self,
        folder: Path,
        stems: Sequence[str],
        semantic_fn: SemanticFn,
        latent_fn: LatentFn | None = None,
        *,
        prompt_features: bool = False,
    ) -> None:
        self.folder = Path(folder)
        self.stems = list(stems)
        self.semantic_fn = semantic_fn
        self.latent_fn = latent_fn
        self.prompt_features = prompt_features

    def __len__(self) -> int:
        return len(self.stems)

    @overload
    def __getitem__(self, index: int) -> S2MelClip: ...

    @overload
    def __getitem__(self, index: slice) -> list[S2MelClip]: ...

    def __getitem__(self, index: int | slice) -> S2MelClip | list[S2MelClip]:
        if isinstance(index, slice):
            return [self[i] for i in range(len(self))[index]]
        return load_clips(
            self.folder,
            [self.stems[index]],
            self.semantic_fn,
            self.latent_fn,
            prompt_features=self.prompt_features,
        )[0]


def manifest_stems(path: Path) -> tuple[Path, list[str]]:
    """(the prepared folder, the target stems in order) of a paired manifest; ValueError naming the line."""
    stems: list[str] = []
    folders: set[Path] = set()
    for lineno, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        try:
            codes = json.loads(raw)["target_codes_path"]
        except (json.JSONDecodeError, KeyError, TypeError):
            raise ValueError(f"{path}:{lineno}: not a paired manifest line with target_codes_path") from None
        codes_path = (path.parent / codes).resolve()
        folders.add(codes_path.parent.parent)
        if codes_path.stem not in stems:
            stems.append(codes_path.stem)
    if not stems:
        raise ValueError(f"{path}: no lines")
    if len(folders) != 1:
        raise ValueError(f"{path}: its targets lie in {len(folders)} prepared folders; an S2Mel run reads one")
    return folders.pop(), stems


def manifest_speakers(path: Path) -> dict[str, str | None]:
    """Each target stem's speaker (the first line naming the stem decides; None where a line has no string
    ``speaker``); read after :func:`manifest_stems` accepted the file."""
    speakers: dict[str, str | None] = {}
    for raw in path.read_text(encoding="utf-8").splitlines():
        if not raw.strip():
            continue
        line = json.loads(raw)
        stem = Path(line["target_codes_path"]).stem
        speaker = line.get("speaker")
        speakers.setdefault(stem, speaker if isinstance(speaker, str) and speaker.strip() else None)
    return speakers
