"""What one S2Mel training step reads: clips, their order over epochs, and padded batches.

A clip is one utterance: its S2Mel log-mel (the target x1), its CAM++ style vector and the semantic input the
decoder is conditioned on (``code_embedding``: v2's ``vq2emb(codes)``, 2.5's ``codec.decode(codes)``; plus, for
v2, the GPT's latent for the same codes, which the trainable ``gpt_layer`` adds as inference does). The first
``prompt_len`` frames of each clip act as the in-context prompt; the prompt length is drawn per item from the
run's own generator, a fraction of the clip in ``prompt_fraction``.

The order is a permutation per epoch drawn from (seed, epoch), so a run resumes at (epoch, index) in O(1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

MEL_FLOOR = math.log(1e-5)  # x1's pad value: the mel floor, as the fixtures pad (README 10.3)


@dataclass(frozen=True)
class S2MelClip:
    mel: Tensor  # (80, T) S2Mel log-mel at 22.05 kHz
    style: Tensor  # (S,) CAM++ style
    code_embedding: Tensor  # (S_len, W) semantic input from the ground-truth codes
    gpt_latent: Tensor | None = None  # (S_len, gpt_dim) v2 only: the GPT's latent for the same codes
    prompt_semantic: Tensor | None = None  # (>= S_len - 1, W) 2.5: continuous features for the prompt region
    name: str = ""

    @property
    def frames(self) -> int:
        return int(self.mel.shape[-1])


@dataclass(frozen=True)
class S2MelBatch:
    x1: Tensor  # (B, 80, T) padded with the mel floor
    x_lens: Tensor  # (B,)
    prompt_lens: Tensor  # (B,)
    style: Tensor  # (B, S)
    code_embedding: Tensor  # (B, S_max, W) zero-padded
    semantic_lens: Tensor  # (B,)
    gpt_latent: Tensor | None  # (B, S_max, gpt_dim) zero-padded, or None
    prompt_semantic: Tensor | None  # (B, S_max, W) zero-padded, or None
    # (B,) semantic frames under each prompt where the items were joined from two clips (cross-clip prompts);
    # None: derived from the lengths (``forward.prompt_semantic_frames``)
    prompt_semantic_lens: Tensor | None = None

    def to(self, device: torch.device | str) -> S2MelBatch:
        move = lambda t: None if t is None else t.to(device)  # noqa: E731
        return S2MelBatch(*(move(getattr(self, f)) for f in self.__dataclass_fields__))


def epoch_order(count: int, seed: int, epoch: int) -> list[int]:
    """The clip order of one epoch: a permutation that depends on (seed, epoch) only."""
    generator = torch.Generator().manual_seed(int(seed) * 1_000_003 + int(epoch))
    return torch.randperm(count, generator=generator).tolist()


def draw_prompt_lens(x_lens: Tensor, fraction: tuple[float, float], generator: torch.Generator) -> Tensor:
    """Per item, floor(u * len) frames with u ~ U[lo, hi), at least 1 frame and leaving at least 1 target frame."""
    lo, hi = fraction
    u = lo + (hi - lo) * torch.rand(x_lens.shape, generator=generator, dtype=torch.float64)
    lens = torch.floor(u * x_lens.double()).long()
    return torch.minimum(torch.clamp(lens, min=1), x_lens - 1)


def collate(
    clips: Sequence[S2MelClip], prompt_lens: Tensor, prompt_semantic_lens: Tensor | None = None
) -> S2MelBatch:
    frames = max(c.frames for c in clips)
    sem = max(int(c.code_embedding.shape[0]) for c in clips)
    x1 = torch.stack([F.pad(c.mel, (0, frames - c.frames), value=MEL_FLOOR) for c in clips])
    code_embedding = torch.stack(
        [F.pad(c.code_embedding, (0, 0, 0, sem - c.code_embedding.shape[0])) for c in clips]
    )
    latents = None
    if clips[0].gpt_latent is not None:
        if any(c.gpt_latent is None for c in clips):
            raise ValueError("some clips have a GPT latent and some do not; prepare them all the same way")
        latents = torch.stack([F.pad(c.gpt_latent, (0, 0, 0, sem - c.gpt_latent.shape[0])) for c in clips])  # type: ignore[union-attr]
    prompt_semantic = None
    if clips[0].prompt_semantic is not None:
        if any(c.prompt_semantic is None for c in clips):
            raise ValueError("some clips have prompt features and some do not; prepare them all the same way")
        prompt_semantic = torch.stack(
            [_fit(c.prompt_semantic, sem) for c in clips]  # type: ignore[arg-type]
        )
    return S2MelBatch(
        x1=x1,
        x_lens=torch.tensor([c.frames for c in clips]),
        prompt_lens=prompt_lens,
        style=torch.stack([c.style for c in clips]),
        code_embedding=code_embedding,
        semantic_lens=torch.tensor([int(c.code_embedding.shape[0]) for c in clips]),
        gpt_latent=latents,
        prompt_semantic=prompt_semantic,
        prompt_semantic_lens=prompt_semantic_lens,
    )


def _fit(frames: Tensor, length: int) -> Tensor:
    """Cut or zero-pad (T, W) to ``length`` frames (2.5's w2v features can be one frame shorter than decode)."""
    return F.pad(frames[:length], (0, 0, 0, max(0, length - frames.shape[0])))
