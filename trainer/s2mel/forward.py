"""The S2Mel training forward (flow matching), equal to the one upstream's modules keep from Seed-VC.

Per batch (facts: shared/reference/README_indextts2_audio.md section 10):
1. mu = length_regulator(S, target = the true mel length) (B, T, C); per item (as inference does) or one
   batched call (as upstream's module would be called on a padded batch).
2. Draws, in upstream's order: t ~ U[0, 1) (B, 1, 1), z ~ N(0, 1) like x1, then one class-dropout draw.
3. y = (1 - (1 - sigma_min) t) z + t x1, target velocity u = x1 - (1 - sigma_min) z.
4. The first prompt_len frames of each item: the prompt input holds x1 there (zero elsewhere) and y is zeroed.
5. estimator(y, prompt, x_lens, t, style, mu), conditioning dropped when the class draw < class_dropout_prob.
6. Loss per item over its 80 x (len - prompt_len) non-prompt, non-padding values (L1, or MSE for "l2"), then
   the plain mean over items.

The estimator runs in train mode (WaveNet dropout on); upstream's eval-mode path silently drops every
condition, so validation calls :func:`flow_matching_loss` with ``dropout=False`` rather than ``model.eval()``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from networks.s2mel import S2Mel
from networks.s2mel.length_regulator import InterpolateRegulator

SIGMA_MIN = 1e-6  # hard-coded upstream
DEFAULT_CLASS_DROPOUT = 0.1  # s2mel.DiT.class_dropout_prob of the real config
LOSS_TYPES = ("l1", "l2")


class S2MelTrainingConfigError(ValueError):
    """The config asks the S2Mel trainer for something it does not do."""


@dataclass(frozen=True)
class FlowDraws:
    """The random part of one training forward: t (B, 1, 1), z like x1, and the class-dropout draw."""

    t: Tensor
    z: Tensor
    class_draw: float


@dataclass(frozen=True)
class FlowLoss:
    loss: Tensor  # the batch loss: mean over items
    loss_items: Tensor  # (B,) per-item mean over its non-prompt valid values
    estimator_out: Tensor  # (B, 80, T) the raw DiT output (velocity estimate)
    dropped_condition: bool


def loss_type_from_config(s2mel_section: dict) -> str:
    """``s2mel.reg_loss_type`` -> "l1" or "l2".

    Upstream trains MSE only for exactly "l2" and silently falls back to L1 for any other value ("mse", "L2");
    this trainer refuses those instead of guessing.
    """
    value = s2mel_section.get("reg_loss_type", "l1")
    if not isinstance(value, str) or value not in LOSS_TYPES:
        raise S2MelTrainingConfigError(
            f"s2mel.reg_loss_type is {value!r:.40}: use 'l1' or 'l2' (upstream would silently train L1 for it)"
        )
    return str(value)


def class_dropout_from_config(s2mel_section: dict) -> float:
    """``s2mel.DiT.class_dropout_prob`` (the CFG training's share of forwards without conditioning): a number in
    [0, 1], 0.1 when absent."""
    dit = s2mel_section.get("DiT") or {}
    value = dit.get("class_dropout_prob", DEFAULT_CLASS_DROPOUT) if isinstance(dit, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= float(value) <= 1.0:
        raise S2MelTrainingConfigError(
            f"s2mel.DiT.class_dropout_prob is {value!r:.40}: use a number from 0 to 1 (0.1 in upstream's config)"
        )
    return float(value)


def draw_flow_noise(x1: Tensor, generator: torch.Generator | None = None) -> FlowDraws:
    """t, z and the class draw in upstream's order, from ``generator`` (torch's global one when None).

    Seeding a generator with the fixture's seed reproduces upstream's draws after ``torch.manual_seed(seed)``.
    """
    batch = x1.shape[0]
    device = generator.device if generator is not None else x1.device
    t = torch.rand((batch, 1, 1), generator=generator, dtype=x1.dtype, device=device)
    z = torch.randn(x1.shape, generator=generator, dtype=x1.dtype, device=device)
    class_draw = float(torch.rand(1, generator=generator, device=device))
    return FlowDraws(t=t.to(x1.device), z=z.to(x1.device), class_draw=class_draw)


def regulate(
    regulator: InterpolateRegulator,
    semantic: Tensor,
    semantic_lens: Sequence[int] | Tensor,
    x_lens: Tensor,
    *,
    per_item: bool = True,
) -> Tensor:
    """mu (B, max(x_lens), C) from semantic inputs S (B, S_max, W) stretched to each item's mel length.

    ``per_item`` (the default): one regulator call per item on its unpadded S, as inference regulates, then
    zero-padded; otherwise one call on the padded batch, whose common stretch ratio and shared GroupNorm
    statistics are not per item (README 10.3).
    """
    if not per_item:
        return regulator(semantic, x_lens)
    total = int(x_lens.max())
    parts = []
    for b in range(semantic.shape[0]):
        length = int(semantic_lens[b])
        item = regulator(semantic[b : b + 1, :length], x_lens[b : b + 1])
        parts.append(F.pad(item, (0, 0, 0, total - item.shape[1])))
    return torch.cat(parts)


def prompt_semantic_frames(prompt_lens: Tensor, x_lens: Tensor, semantic_lens: Tensor) -> Tensor:
    """The semantic frames under each item's prompt: round(prompt mel frames x S_len / mel frames), kept inside
    [1, S_len - 1] so both regions have at least one frame."""
    ratio = prompt_lens.double() * semantic_lens.double() / x_lens.double()
    return torch.clamp(torch.round(ratio).long(), min=1).minimum(semantic_lens - 1)


def regulate_split(
    regulator: InterpolateRegulator,
    prompt_semantic: Tensor,
    target_semantic: Tensor,
    semantic_lens: Tensor,
    prompt_lens: Tensor,
    x_lens: Tensor,
    prompt_semantic_lens: Tensor | None = None,
) -> Tensor:
    """mu as inference builds it: two regulator calls per item, then concatenated along time.

    The prompt region (``prompt_lens`` mel frames) is regulated from ``prompt_semantic``'s first k frames and the
    rest from ``target_semantic``'s frames k.., each with its own GroupNorm statistics (the seam inference has);
    k = ``prompt_semantic_lens`` where given (items joined from two clips), else :func:`prompt_semantic_frames`. v2: prompt = vq2emb(codes), target = vq2emb(codes) + gpt_layer(latent);
    2.5: prompt = the continuous features (where stored), target = decode(codes).
    """
    total = int(x_lens.max())
    ks = (prompt_semantic_lens if prompt_semantic_lens is not None
          else prompt_semantic_frames(prompt_lens, x_lens, semantic_lens))
    parts = []
    for b in range(target_semantic.shape[0]):
        k, p, length = int(ks[b]), int(prompt_lens[b]), int(x_lens[b])
        prompt = regulator(prompt_semantic[b : b + 1, :k], prompt_lens[b : b + 1])
        target = regulator(target_semantic[b : b + 1, k : int(semantic_lens[b])], x_lens[b : b + 1] - p)
        item = torch.cat([prompt, target], dim=1)
        parts.append(F.pad(item, (0, 0, 0, total - length)))
    return torch.cat(parts)


def flow_matching_loss(
    model: S2Mel,
    x1: Tensor,
    x_lens: Tensor,
    prompt_lens: Tensor,
    mu: Tensor,
    style: Tensor,
    draws: FlowDraws,
    *,
    loss_type: str = "l1",
    class_dropout_prob: float = DEFAULT_CLASS_DROPOUT,
) -> FlowLoss:
    """The training loss of one batch (module docstring); x1 (B, 80, T) padded with the mel floor."""
    if loss_type not in LOSS_TYPES:
        raise S2MelTrainingConfigError(f"loss type must be one of {LOSS_TYPES}, got {loss_type!r}")
    t, z = draws.t, draws.z
    y = (1 - (1 - SIGMA_MIN) * t) * z + t * x1
    u = x1 - (1 - SIGMA_MIN) * z
    prompt = torch.zeros_like(x1)
    for b in range(x1.shape[0]):
        p = int(prompt_lens[b])
        prompt[b, :, :p] = x1[b, :, :p]
        y[b, :, :p] = 0
    dropped = draws.class_draw < class_dropout_prob
    out = model.cfm.estimator(y, prompt, x_lens, t.reshape(-1), style, mu, drop_condition=dropped)
    criterion = F.mse_loss if loss_type == "l2" else F.l1_loss
    items = [
        criterion(
            out[b, :, int(prompt_lens[b]) : int(x_lens[b])], u[b, :, int(prompt_lens[b]) : int(x_lens[b])]
        )
        for b in range(x1.shape[0])
    ]
    loss_items = torch.stack(items)
    return FlowLoss(
        loss=loss_items.mean(), loss_items=loss_items, estimator_out=out, dropped_condition=dropped
    )
