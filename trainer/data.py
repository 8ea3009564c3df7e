"""Training data: manifests -> checked items -> datasets -> padded batches.

Three formats, told apart by their fields (``data_tools.manifest.manifest_format``); one run trains one:

- the v1.5 codes manifest (text tokenized here with the run's tokenizer, DVAE codes, a prompt mel or audio);
- the IndexTTS2 community paired manifest (precomputed text ids, semantic codes, condition and emo vec),
  read as it is: lengths from its ``*_len`` fields, paths relative to its folder;
- the IndexTTS-2.5 paired manifest (``generations.indextts25.dataset``: text tokenised with the run's text scheme, 25 Hz
  codes, the prompt's CAM++ and emotion vectors, the language row).

- ``load_items`` reads the manifests (``file:line`` errors; a ``path::lang`` argument sets that manifest's
  language), checks every item with the shared rules of ``data_tools.shape_rules`` (through
  ``data_tools.item_files``, as the data checker does), and drops items longer than the model's limits,
  counting every drop (``DropReport``) so nothing is discarded silently.
- The epoch order (``BucketBatchSampler``) lives in ``trainer.sampler``.
- ``make_dataset`` gives the format's dataset; each loads one item's arrays, and a bad file becomes an
  ``error`` entry in the batch rather than an exception (worker processes would wrap it in a traceback),
  and the trainer refuses with it. ``dataset.collate`` pads a list of items into a batch dict.
- The worker processes that load and collate the batches (``make_loader``) live in ``trainer.batch_loader``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from data_tools import item_files
from data_tools.manifest import (
    FORMAT_NAMES,
    FORMAT_V2,
    FORMAT_V15,
    FORMAT_V25,
    ManifestEntry,
    ManifestError,
    ManifestSpec,
    iter_lines,
    manifest_format,
    parse_manifest_line,
    parse_manifest_spec,
)
from data_tools.npy import read_npy  # noqa: F401 (the trainer's readers are data_tools'; re-exported for callers)
from data_tools.pairs_manifest import PairEntry, parse_pair_line
from data_tools.shape_rules import (
    DROP_REASONS,
    MAX_COND_FRAMES,  # noqa: F401 (re-exported)
    MEL_BANDS,
    DataLimits,
    RuleError,
    drop_reason,
)
from data_tools.text_tokenizer import TextTokenizer
from generations.indextts25.data import manifest as indextts25_manifest
from generations.indextts25.dataset import PairCollatorV25, PairDatasetV25, PairItemV25, load_pair_v25
from trainer.batching import lengths as _lengths
from trainer.batching import padded_sequences as _sequences
from trainer.replay import SamplingGroup
from trainer.sampler import BucketBatchSampler


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


@dataclass
class ManifestRecord:
    """One manifest of a split, as the checkpoint records it."""

    path: str
    count: int
    languages: list[str]


@dataclass
class DropReport:
    """Why items were left out; ``lines()`` is what the trainer logs."""

    kept: int = 0
    format: str = FORMAT_V15
    manifests: list[ManifestRecord] = field(default_factory=list)
    too_many_text_tokens: list[str] = field(default_factory=list)
    too_many_codes: list[str] = field(default_factory=list)
    cond_too_long: list[str] = field(default_factory=list)
    empty_text: list[str] = field(default_factory=list)
    empty_codes: list[str] = field(default_factory=list)
    with_unknown_tokens: list[str] = field(default_factory=list)  # kept, but worth knowing

    @property
    def dropped(self) -> int:
        return sum(len(getattr(self, reason)) for reason in DROP_REASONS)

    def lines(self, name: str, max_text_tokens: int, max_codes: int) -> list[str]:
        out = [f"{name}: {self.kept} items kept, {self.dropped} dropped ({FORMAT_NAMES[self.format]})"]
        why = dict(DROP_REASONS, too_many_text_tokens=f"more than max_text_tokens={max_text_tokens} text tokens",
                   too_many_codes=f"more than max_mel_tokens={max_codes} codes")
        for reason, text in why.items():
            items = getattr(self, reason)
            if items:
                out.append(f"  dropped {len(items)} with {text} (e.g. {', '.join(items[:3])})")
        if self.with_unknown_tokens:
            out.append(f"  warning: {len(self.with_unknown_tokens)} kept items contain unknown tokens "
                       f"(e.g. {', '.join(self.with_unknown_tokens[:3])}); is --tokenizer the right one?")
        return out


def _progress(iterable: Sequence[Any], desc: str) -> Any:
    if len(iterable) < 2000:
        return iterable
    from tqdm import tqdm

    return tqdm(iterable, desc=desc, unit="item", file=sys.stderr, mininterval=1.0)


def split_format(specs: Sequence[ManifestSpec]) -> str:
    """The one format of a split's manifests; ManifestError naming both files when they differ."""
    formats = [(spec, manifest_format(spec.path)) for spec in specs]
    first_spec, first = formats[0]
    for spec, fmt in formats[1:]:
        if fmt != first:
            raise ManifestError(spec.path, None, f"is {FORMAT_NAMES[fmt]} but {first_spec.path} is "
                                                 f"{FORMAT_NAMES[first]}: one run trains one format")
    return first


def _read_entries(spec: ManifestSpec, fmt: str) -> list[ManifestEntry | PairEntry]:
    parse = {FORMAT_V2: parse_pair_line, FORMAT_V25: indextts25_manifest.parse_pair_line}.get(fmt, parse_manifest_line)
    entries = []
    for lineno, raw in iter_lines(spec.path):
        if isinstance(raw, ManifestError):
            raise raw
        entry = parse(raw, spec.path, lineno, spec.language)
        if entry is not None:
            entries.append(entry)
    if not entries:
        raise ManifestError(spec.path, None, "manifest has no entries")
    return entries


def _refuse(entry: ManifestEntry | PairEntry, exc: RuleError) -> ManifestError:
    return ManifestError(entry.manifest, entry.line, f"{exc} (id {entry.id})")


def load_items(
    manifests: Sequence[str | Path | ManifestSpec],
    tokenizer: TextTokenizer,
    max_text_tokens: int,
    max_codes: int,
    name: str = "train",
    *,
    gpt: dict[str, Any] | None = None,
) -> tuple[list[DataItem] | list[PairItem], DropReport]:
    """Read and check every entry of one split; raises ManifestError (``file:line: what``).

    ``gpt`` (the run's gpt config) adds its feature width (v2 condition [32, model_dim], emo vec
    [model_dim]) and code range to the checks; v2 text ids must lie below ``tokenizer.vocab_size``.
    """
    specs = [parse_manifest_spec(m) for m in manifests]
    if not specs:
        raise ManifestError(Path(name), None, "no manifest given")
    fmt = split_format(specs)
    base = DataLimits.from_gpt(gpt) if gpt is not None else DataLimits()
    limits = DataLimits(**{**base.__dict__, "max_text_tokens": max_text_tokens, "max_codes": max_codes,
                           "text_vocab": int(tokenizer.vocab_size)})
    entries: list[ManifestEntry | PairEntry] = []
    report = DropReport(format=fmt)
    seen: dict[str, str] = {}
    for spec in specs:
        mine = _read_entries(spec, fmt)
        for entry in mine:
            if entry.id in seen:
                raise ManifestError(entry.manifest, entry.line, f"duplicate id '{entry.id}' (also at {seen[entry.id]})")
            seen[entry.id] = entry.where
        languages = sorted({e.language for e in mine if e.language})
        report.manifests.append(ManifestRecord(str(spec.path), len(mine), languages))
        entries += mine
    load = {FORMAT_V2: _load_pair, FORMAT_V25: load_pair_v25}.get(fmt, _load_codes_item)
    items = []
    unk = getattr(tokenizer, "unk_id", -1)  # the IndexTTS-2.5 tokenizer is byte-level: it has none
    for entry in _progress(entries, f"reading {name} data"):
        try:
            item, frames = load(entry, tokenizer, limits)
        except RuleError as exc:
            raise _refuse(entry, exc) from None
        reason = drop_reason(int(item.text_ids.size), item.num_codes, frames, limits)
        if reason is not None:
            getattr(report, reason).append(entry.where)
            continue
        if unk >= 0 and bool((item.text_ids == unk).any()):
            report.with_unknown_tokens.append(entry.where)
        items.append(item)
    report.kept = len(items)
    return items, report


def train_sampler(items: Sequence[DataItem] | Sequence[PairItem], batch_size: int, seed: int, *, rank: int = 0,
                  world_size: int = 1, groups: Sequence[SamplingGroup] | None = None) -> BucketBatchSampler:
    """The training epoch order: bucketed by text and codes length (each padded on its own), and by prompt length
    where prompts differ; ``groups``: replay's weighted manifests (``trainer.replay.sampling_groups``)."""
    return BucketBatchSampler([(int(item.text_ids.size), item.num_codes) for item in items], batch_size, seed,
                              rank=rank, world_size=world_size,
                              prompt_lengths=[getattr(item, "prompt_frames", 0) for item in items], groups=groups)


def _load_codes_item(entry: ManifestEntry, tokenizer: TextTokenizer, limits: DataLimits) -> tuple[DataItem, int]:
    ids = np.asarray(tokenizer.encode(entry.text, entry.language), dtype=np.int32)
    num_codes = item_files.codes_count(entry.codes)
    if entry.cond_mel is not None:
        frames = item_files.cond_mel_header_frames(entry.cond_mel)
    else:
        assert entry.cond_audio is not None
        frames = item_files.cond_audio_frames(entry.cond_audio)
    return DataItem(id=entry.id, where=entry.where, text_ids=ids, codes=entry.codes, num_codes=num_codes,
                    cond_mel=entry.cond_mel, cond_audio=entry.cond_audio, prompt_frames=frames), frames


def _load_pair(entry: PairEntry, _tokenizer: TextTokenizer, limits: DataLimits) -> tuple[PairItem, int]:
    facts = item_files.inspect_pair(entry.text_ids, entry.text_len, entry.codes, entry.code_len, entry.condition,
                                    entry.emo_vec, limits)
    return PairItem(id=entry.id, where=entry.where, text_ids=facts.text_ids, codes=entry.codes,
                    num_codes=facts.num_codes, condition=entry.condition, emo_vec=entry.emo_vec,
                    prompt_audio=entry.prompt_audio), 0


# ----- loading items --------------------------------------------------------------------------------


def _load_audio_mel(path: Path) -> torch.Tensor:
    from data_tools.audio import load_audio
    from data_tools.features import mel_spectrogram

    return mel_spectrogram(torch.from_numpy(np.ascontiguousarray(load_audio(path), dtype=np.float32)))


_ITEM_ERRORS = (RuleError, OSError, ValueError, EOFError, MemoryError)


class _ItemDataset(Dataset):
    """Items of one format; ``lengths()`` feeds the sampler, ``collate`` pads a list of loaded items."""

    items: list[Any]

    def __len__(self) -> int:
        return len(self.items)

    def lengths(self) -> list[int]:
        return [item.length for item in self.items]


class CodesDataset(_ItemDataset):
    """v1.5 items: codes, prompt mel (from its file or computed from the prompt audio)."""

    format = FORMAT_V15

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
                cond = _load_audio_mel(item.cond_audio)
        except _ITEM_ERRORS as exc:
            return {"error": f"{item.where} (id {item.id}): {exc}"}
        return {
            "id": item.id,
            "text_ids": torch.from_numpy(item.text_ids.astype(np.int64)),
            "codes": torch.from_numpy(codes.astype(np.int64)),
            "cond_mel": cond,
        }


class PairDataset(_ItemDataset):
    """IndexTTS2 pairs: the target's codes (cut to target_code_len), the prompt's condition and emo vec."""

    format = FORMAT_V2

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
        except _ITEM_ERRORS as exc:
            return {"error": f"{item.where} (id {item.id}): {exc}"}
        return {"id": item.id, "text_ids": item.text_ids, "codes": codes, "condition": condition, "emo_vec": emo_vec}


def make_dataset(items: Sequence[DataItem] | Sequence[PairItem], gpt: dict[str, Any],
                 text_vocab: int | None = None) -> CodesDataset | PairDataset:
    """The dataset for ``items`` (either format), checking against the run's gpt config; ``.collate`` pads."""
    limits = DataLimits.from_gpt(gpt, text_vocab)
    if items and isinstance(items[0], PairItemV25):
        return PairDatasetV25(items, limits, PairCollatorV25())
    if items and isinstance(items[0], PairItem):
        return PairDataset(items, limits, PairCollator())
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
        return {**_sequences(items, self.text_pad, self.code_pad), "cond_mels": torch.from_numpy(mels),
                "cond_mel_lengths": _lengths(mel_len), "cond_mel_lengths_host": mel_len}


@dataclass(frozen=True)
class PairCollator:
    """IndexTTS2: text ids and codes zero-padded to int64 (as the community collate; the model rewrites
    positions past each length to stop), condition stacked to (B, 32, D), emo vec to (B, D), float32."""

    pad: int = 0

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        errors = [item["error"] for item in items if "error" in item]
        if errors:
            return {"error": errors[0]}
        return {**_sequences(items, self.pad, self.pad),
                "condition": torch.from_numpy(np.stack([item["condition"] for item in items])),
                "emo_vec": torch.from_numpy(np.stack([item["emo_vec"] for item in items]))}
