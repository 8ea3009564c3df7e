"""IndexTTS2's emotion-vector control: 8 emotion weights -> an emotion vector from the emotion matrix.

``feat1.pt`` (spk_matrix, rows x style width) and ``feat2.pt`` (emo_matrix, rows x GPT model_dim) hold the same
number of rows, split into consecutive groups of ``emo_num`` rows, one group per emotion in the order happy,
angry, sad, afraid, disgusted, melancholic, surprised, calm. For each emotion the row of its spk_matrix group
closest (cosine) to the speaker's CAMPPlus ``style`` is chosen, and the same row of its emo_matrix group is
weighted by that emotion's weight; the weighted rows are summed (``emovec_mat``). Inference then mixes
``emovec_mat + (1 - sum(weights)) * merged_emovec``. Pure tensor functions; no randomness (upstream's
``use_random`` row choice is the caller's business).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

EMOTIONS = ("happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm")
REAL_EMO_NUM = (3, 17, 2, 8, 4, 5, 10, 24)


def scale_emotion_weights(weights: Sequence[float], emo_alpha: float) -> list[float]:
    """Weights scaled by clamp(emo_alpha, 0, 1) and truncated to 4 decimals, as infer does when that scale
    is not 1 (emotion vectors cannot be alpha-blended later, so their strength is set here)."""
    scale = max(0.0, min(1.0, float(emo_alpha)))
    if scale == 1.0:
        return [float(weight) for weight in weights]
    return [int(weight * scale * 10000) / 10000 for weight in weights]


def _split_rows(matrix: Tensor, emo_num: Sequence[int], name: str) -> tuple[Tensor, ...]:
    if matrix.dim() != 2:
        raise ValueError(f"{name} must be a matrix (rows, width), got shape {list(matrix.shape)}")
    if sum(emo_num) != matrix.shape[0]:
        raise ValueError(
            f"{name} has {matrix.shape[0]} rows but emo_num {list(emo_num)} sums to {sum(emo_num)}"
        )
    return torch.split(matrix, list(emo_num))


def closest_rows(style: Tensor, spk_matrix: Tensor, emo_num: Sequence[int]) -> Tensor:
    """Per emotion group, the index (within the group) of the spk_matrix row with the highest cosine similarity
    to ``style`` [1, S] or [S]: int64 [len(emo_num)]."""
    style = style.reshape(1, -1)
    if style.shape[1] != spk_matrix.shape[-1]:
        raise ValueError(
            f"style width {style.shape[1]} does not match spk_matrix width {spk_matrix.shape[-1]}"
        )
    groups = _split_rows(spk_matrix, emo_num, "spk_matrix")
    picks = [F.cosine_similarity(style.to(group.dtype), group, dim=1).argmax() for group in groups]
    return torch.stack(picks)


def emotion_matrix_vector(
    weights: Sequence[float] | Tensor, row_index: Tensor, emo_matrix: Tensor, emo_num: Sequence[int]
) -> Tensor:
    """``emovec_mat`` [1, D] = sum over emotions of weight_i * (row ``row_index[i]`` of emo_matrix group i)."""
    groups = _split_rows(emo_matrix, emo_num, "emo_matrix")
    weight = torch.as_tensor(weights, dtype=emo_matrix.dtype, device=emo_matrix.device)
    if weight.shape != (len(groups),) or row_index.shape != (len(groups),):
        raise ValueError(
            f"need one weight and one row index per emotion group ({len(groups)}), "
            f"got {list(weight.shape)} weights and {list(row_index.shape)} indices"
        )
    rows = torch.stack([group[int(index)] for group, index in zip(groups, row_index, strict=True)])
    return (weight.unsqueeze(1) * rows).sum(dim=0, keepdim=True)


def select_emotion_vector(
    style: Tensor,
    weights: Sequence[float] | Tensor,
    spk_matrix: Tensor,
    emo_matrix: Tensor,
    emo_num: Sequence[int] = REAL_EMO_NUM,
) -> tuple[Tensor, Tensor]:
    """(row_index [len(emo_num)], emovec_mat [1, D]) for a speaker ``style`` and the 8 emotion weights."""
    row_index = closest_rows(style, spk_matrix, emo_num)
    return row_index, emotion_matrix_vector(weights, row_index, emo_matrix, emo_num)


def mix_with_emotion_matrix(emovec_mat: Tensor, weights: Sequence[float] | Tensor, emovec: Tensor) -> Tensor:
    """The emotion vector inference uses with ``emo_vector``: emovec_mat + (1 - sum(weights)) * emovec."""
    total = torch.as_tensor(weights, dtype=emovec.dtype, device=emovec.device).sum()
    return emovec_mat + (1 - total) * emovec
