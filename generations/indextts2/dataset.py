"""IndexTTS2's training items: the community paired manifest (``generations.indextts2.data.manifest``) -> items -> batches,
read as it is: lengths from its ``*_len`` fields, paths relative to its folder. ``generations.indextts2.data.format``
names ``load_item`` and ``dataset`` for the trainer (``trainer.data``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data_tools import item_files
from data_tools.shape_rules import DataLimits
from data_tools.text_tokenizer import TextTokenizer
from generations.indextts2.data.manifest import PairEntry
from trainer.batching import ITEM_ERRORS, ItemDataset, padded_sequences


@dataclass(frozen=True)
class PairItem:
    """An IndexTTS2 pair: the target's text ids (cut to target_text_len) and codes, the prompt's features."""

    id: str
    where: str
    text_ids: np.ndarray  # int32
    codes: Path
    num_codes: int  # target_code_len: the codes file is cut to it
    condition: Path
    emo_vec: Path
    prompt_audio: Path | None = None  # the prompt's audio (prompt_audio_path), when the manifest names one

    @property
    def length(self) -> int:
        return int(self.text_ids.size) + self.num_codes


def load_item(entry: PairEntry, _tokenizer: TextTokenizer, limits: DataLimits) -> tuple[PairItem, int]:
    facts = item_files.inspect_pair(entry.text_ids, entry.text_len, entry.codes, entry.code_len, entry.condition,
                                    entry.emo_vec, limits)
    return PairItem(id=entry.id, where=entry.where, text_ids=facts.text_ids, codes=entry.codes,
                    num_codes=facts.num_codes, condition=entry.condition, emo_vec=entry.emo_vec,
                    prompt_audio=entry.prompt_audio), 0


class PairDataset(ItemDataset):
    """IndexTTS2 pairs: the target's codes (cut to target_code_len), the prompt's condition and emo vec."""

    def __init__(self, items: Sequence[PairItem], limits: DataLimits,
                 collate: Callable[[list[dict]], dict] | None = None) -> None:
        self.items = list(items)
        self.limits = limits
        self.collate = collate or PairCollator()

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.items[index]
        try:
            codes = item_files.load_codes(item.codes, self.limits, item.num_codes)
            condition = item_files.load_condition(item.condition, self.limits)
            emo_vec = item_files.load_emo_vec(item.emo_vec, self.limits)
        except ITEM_ERRORS as exc:
            return {"error": f"{item.where} (id {item.id}): {exc}"}
        return {"id": item.id, "text_ids": item.text_ids, "codes": codes, "condition": condition, "emo_vec": emo_vec}


def dataset(items: Sequence[PairItem], limits: DataLimits, _gpt: dict[str, Any]) -> PairDataset:
    return PairDataset(items, limits, PairCollator())


@dataclass(frozen=True)
class PairCollator:
    """IndexTTS2: text ids and codes zero-padded to int64 (as the community collate; the model rewrites
    positions past each length to stop), condition stacked to (B, 32, D), emo vec to (B, D), float32."""

    pad: int = 0

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        errors = [item["error"] for item in items if "error" in item]
        if errors:
            return {"error": errors[0]}
        return {**padded_sequences(items, self.pad, self.pad),
                "condition": torch.from_numpy(np.stack([item["condition"] for item in items])),
                "emo_vec": torch.from_numpy(np.stack([item["emo_vec"] for item in items]))}
