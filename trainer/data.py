"""Training data: manifests -> checked items -> datasets -> padded batches.

Each generation trains on its own manifest format, told apart by their fields (``data_tools.manifest.manifest_format``;
one run trains one); the format (``generations.registry.format_of``) reads its lines, loads its items and gives its
dataset (``generations/<gen>/dataset.py``: IndexTTS-1.5's codes items, IndexTTS2's and IndexTTS-2.5's pairs).

- ``load_items`` reads the manifests (``file:line`` errors; a ``path::lang`` argument sets that manifest's
  language), checks every item with the shared rules of ``data_tools.shape_rules`` (through
  ``data_tools.item_files``, as the data checker does), and drops items longer than the model's limits,
  counting every drop (``DropReport``) so nothing is discarded silently.
- The epoch order (``BucketBatchSampler``) lives in ``trainer.sampler``.
- ``make_dataset`` gives the format's dataset (``generations/<gen>/dataset.py``); each loads one item's arrays, and a bad file becomes an
  ``error`` entry in the batch rather than an exception (worker processes would wrap it in a traceback),
  and the trainer refuses with it. ``dataset.collate`` pads a list of items into a batch dict.
- The worker processes that load and collate the batches (``make_loader``) live in ``trainer.batch_loader``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_tools.manifest import (
    ManifestError,
    ManifestLine,
    ManifestSpec,
    iter_lines,
    line_parser,
    manifest_format,
    parse_manifest_spec,
)
from data_tools.npy import read_npy  # noqa: F401 (the trainer's readers are data_tools'; re-exported for callers)
from data_tools.shape_rules import (
    DROP_REASONS,
    MAX_COND_FRAMES,  # noqa: F401 (re-exported)
    DataLimits,
    RuleError,
    drop_reason,
)
from data_tools.text_tokenizer import TextTokenizer
from generations.registry import default_format, format_of, formats
from trainer.replay import SamplingGroup
from trainer.sampler import BucketBatchSampler

_ITEM_FORMATS: dict[type, str] = {}  # item class -> the format id its items were last loaded from (``item_format``)
Item = Any  # one format's training item (``generations/<gen>/dataset.py``): ``text_ids``, ``num_codes``, ``length``


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
    format: str = field(default_factory=lambda: default_format().id)  # the manifests' format (its id)
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
        out = [f"{name}: {self.kept} items kept, {self.dropped} dropped ({format_of(self.format).name})"]
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
            raise ManifestError(spec.path, None, f"is {format_of(fmt).name} but {first_spec.path} is "
                                                 f"{format_of(first).name}: one run trains one format")
    return first


def _read_entries(spec: ManifestSpec, fmt: str) -> list[ManifestLine]:
    parse = line_parser(format_of(fmt))
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


def _refuse(entry: Any, exc: RuleError) -> ManifestError:
    return ManifestError(entry.manifest, entry.line, f"{exc} (id {entry.id})")


def load_items(
    manifests: Sequence[str | Path | ManifestSpec],
    tokenizer: TextTokenizer,
    max_text_tokens: int,
    max_codes: int,
    name: str = "train",
    *,
    gpt: dict[str, Any] | None = None,
) -> tuple[list[Item], DropReport]:
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
    entries: list[Any] = []
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
    load = format_of(fmt).items.load_item
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
    if items:
        _ITEM_FORMATS[type(items[0])] = fmt
    report.kept = len(items)
    return items, report


def train_sampler(items: Sequence[Item], batch_size: int, seed: int, *, rank: int = 0,
                  world_size: int = 1, groups: Sequence[SamplingGroup] | None = None) -> BucketBatchSampler:
    """The training epoch order: bucketed by text and codes length (each padded on its own), and by prompt length
    where prompts differ; ``groups``: replay's weighted manifests (``trainer.replay.sampling_groups``)."""
    return BucketBatchSampler([(int(item.text_ids.size), item.num_codes) for item in items], batch_size, seed,
                              rank=rank, world_size=world_size,
                              prompt_lengths=[getattr(item, "prompt_frames", 0) for item in items], groups=groups)


def make_dataset(items: Sequence[Item], gpt: dict[str, Any], text_vocab: int | None = None,
                 fmt: str | None = None) -> Any:
    """The dataset for ``items`` of format ``fmt`` (default: the format their loader recorded, ``item_format``),
    checking against the run's gpt config; ``.collate`` pads."""
    limits = DataLimits.from_gpt(gpt, text_vocab)
    return format_of(fmt or item_format(items)).items.dataset(items, limits, gpt)


def item_format(items: Sequence[Item]) -> str:
    """The format items of this class were last loaded from (``load_items`` records it per item class), while it is
    registered; else the default format. The trainer passes its split's format to ``make_dataset`` instead."""
    found = _ITEM_FORMATS.get(type(items[0])) if items else None
    if found is not None and any(known.id == found for known in formats()):
        return found
    return default_format().id
