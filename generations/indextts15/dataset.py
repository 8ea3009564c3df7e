"""IndexTTS-1.5's training items: the codes manifest (``generations.indextts15.data.manifest``) -> items -> padded batches.

An item is the text tokenised with the run's tokenizer, the DVAE codes file and the prompt (a mel file, or audio
whose mel is computed when the item loads). ``generations.indextts15.data.format`` names ``load_item`` and
``dataset`` for the trainer (``trainer.data``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data_tools import item_files
from data_tools.shape_rules import MEL_BANDS, DataLimits
from data_tools.text_tokenizer import TextTokenizer
from generations.indextts15.data.manifest import ManifestEntry
from trainer.batching import ITEM_ERRORS, ItemDataset, lengths, load_audio_mel, padded_sequences


@dataclass(frozen=True)
class DataItem:
    """A v1.5 item: tokenized text, the codes file and the prompt (mel file or audio)."""

    id: str
    where: str  # manifest:line
    text_ids: np.ndarray  # int32 token ids (no start/stop)
    codes: Path
    num_codes: int
    cond_mel: Path | None
    cond_audio: Path | None
    prompt_frames: int = 0  # mel frames of the prompt (bucketing key beside the target length)

    @property
    def length(self) -> int:
        return int(self.text_ids.size) + self.num_codes


def load_item(entry: ManifestEntry, tokenizer: TextTokenizer, limits: DataLimits) -> tuple[DataItem, int]:
    ids = np.asarray(tokenizer.encode(entry.text, entry.language), dtype=np.int32)
    num_codes = item_files.codes_count(entry.codes)
    if entry.cond_mel is not None:
        frames = item_files.cond_mel_header_frames(entry.cond_mel)
    else:
        assert entry.cond_audio is not None
        frames = item_files.cond_audio_frames(entry.cond_audio)
    return DataItem(id=entry.id, where=entry.where, text_ids=ids, codes=entry.codes, num_codes=num_codes,
                    cond_mel=entry.cond_mel, cond_audio=entry.cond_audio, prompt_frames=frames), frames


class CodesDataset(ItemDataset):
    """v1.5 items: codes, prompt mel (from its file or computed from the prompt audio)."""

    def __init__(self, items: Sequence[DataItem], num_codes_valid: int = 8192, limits: DataLimits | None = None,
                 collate: Callable[[list[dict]], dict] | None = None) -> None:
        self.items = list(items)
        self.limits = limits or DataLimits(code_limit=num_codes_valid)
        self.num_codes_valid = self.limits.code_limit  # codes must lie in 0..num_codes_valid-1 (below start_mel)
        self.collate = collate or Collator()

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.items[index]
        try:
            codes = item_files.load_codes(item.codes, self.limits)
            if item.cond_mel is not None:
                cond = torch.from_numpy(item_files.load_cond_mel(item.cond_mel))
            else:
                assert item.cond_audio is not None
                cond = load_audio_mel(item.cond_audio)
        except ITEM_ERRORS as exc:
            return {"error": f"{item.where} (id {item.id}): {exc}"}
        return {
            "id": item.id,
            "text_ids": torch.from_numpy(item.text_ids.astype(np.int64)),
            "codes": torch.from_numpy(codes.astype(np.int64)),
            "cond_mel": cond,
        }


def dataset(items: Sequence[DataItem], limits: DataLimits, gpt: dict[str, Any]) -> CodesDataset:
    """The dataset of codes items, padding text with the config's stop_text token and codes with stop_mel."""
    return CodesDataset(items, limits.code_limit, limits,
                        Collator(text_pad=int(gpt.get("stop_text_token", 1)), code_pad=limits.stop_mel_token))


@dataclass(frozen=True)
class Collator:
    """v1.5: pad a list of items into one batch (text with stop_text, codes with stop_mel, mels with 0).

    ``*_lengths_host`` are the same lengths as plain lists: the trainer reads them without a device sync.
    """

    text_pad: int = 1
    code_pad: int = 8193

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        errors = [item["error"] for item in items if "error" in item]
        if errors:
            return {"error": errors[0]}
        mel_len = [item["cond_mel"].shape[-1] for item in items]
        mels = np.zeros((len(items), MEL_BANDS, max(mel_len)), dtype=np.float32)
        for row, item in enumerate(items):
            mels[row, :, : mel_len[row]] = np.asarray(item["cond_mel"])
        return {**padded_sequences(items, self.text_pad, self.code_pad), "cond_mels": torch.from_numpy(mels),
                "cond_mel_lengths": lengths(mel_len), "cond_mel_lengths_host": mel_len}
