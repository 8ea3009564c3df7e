"""IndexTTS-2.5 training items: the 2.5 paired manifest (``generations.indextts25.data.manifest``) -> batches.

An item is the target's text ids (tokenised here with the run's ``TextTable``, i.e. its
``--text-scheme``, ``"<|lang|> "`` prefix included, or the manifest's precomputed ids when their recorded
scheme is the run's), its 25 Hz codes, the prompt's CAM++ vector and emotion vector, and the language's
``lang_embedding`` row. A batch adds ``spk_vec`` (B, 192), ``emo_vec`` (B, D) and ``langs`` (B,) int64 to
the padded sequences (zero-padded as IndexTTS2's: the model rewrites positions past each length to stop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data_tools import item_files
from data_tools.shape_rules import DataLimits, RuleError
from generations.indextts25.data.manifest import PairEntry, pair_facts, pair_vectors
from trainer.batching import padded_sequences


@dataclass(frozen=True)
class PairItemV25:
    id: str
    where: str
    text_ids: np.ndarray  # int32, prefix included, no start/stop
    codes: Path
    num_codes: int
    spk_vec: Path
    emo_vec: Path
    lang: int  # lang_embedding row
    language: str = ""
    text: str = ""  # the raw text ("" for precomputed ids): for the tokens-per-character report
    prompt_audio: Path | None = None  # the prompt's audio, when the manifest names it: the voice of samples

    @property
    def length(self) -> int:
        return int(self.text_ids.size) + self.num_codes


def text_ids_of(entry: PairEntry, tokenizer: Any, limits: DataLimits) -> np.ndarray:
    """The entry's ids under the run's scheme: its precomputed ids (same scheme only) or its text, tokenised."""
    if entry.text_ids is not None:
        if entry.text_scheme != tokenizer.scheme:
            raise RuleError("text-scheme", f"text ids {entry.text_ids} were made with the '{entry.text_scheme}' "
                                           f"text scheme, this run uses '{tokenizer.scheme}' (--text-scheme): "
                                           "re-make them, or give the raw target_text instead")
        return item_files.read_text_ids(entry.text_ids, entry.text_len, limits.text_vocab)
    return np.asarray(tokenizer.encode(entry.target_text or "", entry.language or ""), dtype=np.int32)


def load_pair_v25(entry: PairEntry, tokenizer: Any, limits: DataLimits) -> tuple[PairItemV25, int]:
    ids = text_ids_of(entry, tokenizer, limits)
    facts = pair_facts(entry, limits)
    return PairItemV25(id=entry.id, where=entry.where, text_ids=ids, codes=entry.codes, num_codes=facts.num_codes,
                       spk_vec=entry.spk_vec, emo_vec=entry.emo_vec,
                       lang=tokenizer.language_index(entry.language or ""), language=entry.language or "",
                       text="" if entry.text_ids is not None else entry.target_text or "",
                       prompt_audio=entry.prompt_audio), 0


_ITEM_ERRORS = (RuleError, OSError, ValueError, EOFError, MemoryError)


@dataclass(frozen=True)
class PairCollatorV25:
    """Text ids and codes zero-padded to int64, spk vec (B, 192), emo vec (B, D) float32, langs (B,) int64."""

    pad: int = 0

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        errors = [item["error"] for item in items if "error" in item]
        if errors:
            return {"error": errors[0]}
        return {**padded_sequences(items, self.pad, self.pad),
                "spk_vec": torch.from_numpy(np.stack([item["spk_vec"] for item in items])),
                "emo_vec": torch.from_numpy(np.stack([item["emo_vec"] for item in items])),
                "langs": torch.tensor([item["lang"] for item in items], dtype=torch.long)}


class PairDatasetV25(torch.utils.data.Dataset):
    def __init__(self, items: Sequence[PairItemV25], limits: DataLimits,
                 collate: Callable[[list[dict]], dict] | None = None) -> None:
        self.items = list(items)
        self.limits = limits
        self.collate = collate or PairCollatorV25()

    def __len__(self) -> int:
        return len(self.items)

    def lengths(self) -> list[int]:
        return [item.length for item in self.items]

    def __getitem__(self, index: int) -> dict[str, Any]:
        item = self.items[index]
        try:
            codes = item_files.load_codes(item.codes, self.limits, item.num_codes)
            spk_vec, emo_vec = pair_vectors(item.spk_vec, item.emo_vec, self.limits)
        except _ITEM_ERRORS as exc:
            return {"error": f"{item.where} (id {item.id}): {exc}"}
        return {"id": item.id, "text_ids": item.text_ids, "codes": codes, "spk_vec": spk_vec, "emo_vec": emo_vec,
                "lang": item.lang}


def dataset(items: Sequence[PairItemV25], limits: DataLimits, _gpt: dict[str, Any]) -> PairDatasetV25:
    return PairDatasetV25(items, limits, PairCollatorV25())
