"""Replay: several training manifests, each with a language and a sampling weight (issue 23 item 6).

``--train-manifest PATH::lang@W`` gives a manifest the weight ``W`` (a positive number). When any training
manifest has a weight, every epoch draws its items by weight: manifest ``m`` fills ``W_m / sum(W)`` of the
epoch's samples (largest-remainder rounding; manifests without ``@W`` weigh 1). The epoch keeps its size, the
number of training items, so the schedule and the epoch count mean what they did. Within a manifest, items are
drawn in shuffled passes without replacement (an oversampled manifest repeats each item before any item a third
time; an undersampled one shows a different share each epoch). The draw is a pure function of
``(seed, epoch)`` (``BucketBatchSampler`` calls ``weighted_epoch_order`` with its epoch generator), so resuming
mid-epoch still slices the epoch's batch list: O(1), bitwise exact. Without any ``@W`` nothing changes.

Validation per language: the items of ``--val-manifest PATH::lang`` are grouped by that language
(``items_by_language``); the trainer validates each group and logs its loss (``trainer.forgetting`` watches them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.manifest import ManifestSpec, parse_manifest_spec

DEFAULT_WEIGHT = 1.0
UNLABELLED = "unlabelled"  # the group of validation items whose manifest names no language


@dataclass(frozen=True)
class SamplingGroup:
    """The item indices of one training manifest and its sampling weight."""

    indices: np.ndarray
    weight: float
    label: str  # for the log: path::lang@weight


def weight_refusal(manifests: Sequence[str]) -> str | None:
    """The sentence that refuses a ``::lang@W`` whose ``W`` is not a positive number (None: all fine)."""
    for text in manifests:
        spec = parse_manifest_spec(text)
        if spec.weight_text is not None and spec.weight is None:
            return (f"--train-manifest {text}: the sampling weight {spec.weight_text!r} is not a positive number "
                    "(PATH::lang@W, e.g. en.jsonl::en@0.3)")
    return None


def _manifest_of(item: Any) -> str:
    return str(item.where).rsplit(":", 1)[0]


def _index_by_manifest(items: Sequence[Any], specs: Sequence[ManifestSpec]) -> list[list[int]]:
    """Item indices per spec, matched by the manifest path each item was read from (``item.where``)."""
    position = {}
    for i, spec in enumerate(specs):
        position.setdefault(str(spec.path), i)
        position.setdefault(str(Path(spec.path).resolve()), i)
    groups: list[list[int]] = [[] for _ in specs]
    for index, item in enumerate(items):
        where = _manifest_of(item)
        spec = position.get(where, position.get(str(Path(where).resolve())))
        if spec is None:
            raise ValueError(f"item {item.where} comes from no --train-manifest")
        groups[spec].append(index)
    return groups


def sampling_groups(items: Sequence[Any], manifests: Sequence[str]) -> list[SamplingGroup] | None:
    """The weighted groups of a run's training items; None when no manifest has a weight (plain epochs)."""
    specs = [parse_manifest_spec(text) for text in manifests]
    if not any(spec.weight is not None for spec in specs):
        return None
    out = []
    for spec, indices in zip(specs, _index_by_manifest(items, specs)):
        weight = spec.weight if spec.weight is not None else DEFAULT_WEIGHT
        label = f"{spec.path}" + (f"::{spec.language}" if spec.language else "") + f"@{weight:g}"
        if indices:
            out.append(SamplingGroup(np.asarray(indices, dtype=np.int64), float(weight), label))
    return out


def epoch_quotas(sizes: Sequence[int], weights: Sequence[float], total: int) -> list[int]:
    """Samples per group in an epoch of ``total``: proportional to ``weights``, largest remainders rounded up."""
    w = np.asarray(weights, dtype=np.float64)
    exact = total * w / w.sum()
    quotas = np.floor(exact).astype(np.int64)
    short = total - int(quotas.sum())
    order = np.argsort(-(exact - quotas), kind="stable")  # ties: the earlier manifest first
    quotas[order[:short]] += 1
    return [int(q) for q in quotas]


def weighted_epoch_order(groups: Sequence[SamplingGroup], rng: np.random.Generator) -> np.ndarray:
    """One epoch's items (indices may repeat) in shuffled order; a pure function of the generator's state."""
    sizes = [len(g.indices) for g in groups]
    total = sum(sizes)
    drawn = []
    for group, quota in zip(groups, epoch_quotas(sizes, [g.weight for g in groups], total)):
        passes = -(-quota // len(group.indices)) if quota else 0
        cycle = np.concatenate([rng.permutation(group.indices) for _ in range(passes)]) if passes else group.indices[:0]
        drawn.append(cycle[:quota])
    order = np.concatenate(drawn) if drawn else np.zeros(0, dtype=np.int64)
    return order[rng.permutation(len(order))]


def fingerprint_text(groups: Sequence[SamplingGroup] | None) -> str:
    """What the sampler hashes: the groups' sizes and weights (a change of weights changes the epoch order)."""
    if not groups:
        return ""
    return "/weighted:" + ";".join(f"{len(g.indices)}@{g.weight!r}:{int(g.indices.sum())}" for g in groups)


def describe(groups: Sequence[SamplingGroup] | None) -> list[str]:
    """Log lines: each manifest's share of an epoch."""
    if not groups:
        return []
    sizes = [len(g.indices) for g in groups]
    quotas = epoch_quotas(sizes, [g.weight for g in groups], sum(sizes))
    return [f"replay: {g.label}: {q:,} of {sum(sizes):,} samples per epoch ({len(g.indices):,} items, "
            f"x{q / len(g.indices):.2f})" for g, q in zip(groups, quotas)]


def items_by_language(items: Sequence[Any], manifests: Sequence[str]) -> dict[str, list[Any]]:
    """Validation items grouped by their manifest's ``::lang`` ({} when no manifest names a language)."""
    specs = [parse_manifest_spec(text) for text in manifests]
    if not any(spec.language for spec in specs):
        return {}
    out: dict[str, list[Any]] = {}
    for spec, indices in zip(specs, _index_by_manifest(items, specs)):
        language = (spec.language or UNLABELLED).lower()
        out.setdefault(language, []).extend(items[i] for i in indices)
    return {language: group for language, group in out.items() if group}
