"""What every format's dataset shares (``generations/<gen>/dataset.py``): padding a list of loaded items into
batch tensors, the item dataset's length list, the errors that make an item an ``error`` entry."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from data_tools.shape_rules import RuleError


def lengths(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def padded_sequences(items: list[dict[str, Any]], text_pad: int, code_pad: int) -> dict[str, Any]:
    """Text ids and codes padded to the batch's longest (int64), their lengths as tensors and as host lists.

    Padded in numpy: torch.zeros fills a large tensor with all intra-op threads, which costs milliseconds in
    a training process whose threads are busy (num_workers 0).
    """
    text_len = [len(item["text_ids"]) for item in items]
    code_len = [len(item["codes"]) for item in items]
    text = np.full((len(items), max(text_len)), text_pad, dtype=np.int64)
    codes = np.full((len(items), max(code_len)), code_pad, dtype=np.int64)
    for row, item in enumerate(items):
        text[row, : text_len[row]] = np.asarray(item["text_ids"])
        codes[row, : code_len[row]] = np.asarray(item["codes"])
    return {"ids": [item["id"] for item in items], "text_ids": torch.from_numpy(text),
            "text_lengths": lengths(text_len), "codes": torch.from_numpy(codes), "code_lengths": lengths(code_len),
            "num_tokens": sum(text_len) + sum(code_len), "text_lengths_host": text_len, "code_lengths_host": code_len}


ITEM_ERRORS = (RuleError, OSError, ValueError, EOFError, MemoryError)  # a bad item file: an ``error`` entry


class ItemDataset(Dataset):
    """Items of one format; ``lengths()`` feeds the sampler, ``collate`` pads a list of loaded items."""

    items: list[Any]

    def __len__(self) -> int:
        return len(self.items)

    def lengths(self) -> list[int]:
        return [item.length for item in self.items]


def load_audio_mel(path: Path) -> torch.Tensor:
    from data_tools.audio import load_audio
    from data_tools.features import mel_spectrogram

    return mel_spectrogram(torch.from_numpy(np.ascontiguousarray(load_audio(path), dtype=np.float32)))
