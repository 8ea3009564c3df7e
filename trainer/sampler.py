"""The epoch order: length-bucketed batches as a pure function of ``(seed, epoch)``, and where a run stands in it.

``BucketBatchSampler`` shuffles, cuts the epoch into chunks of about ``BUCKET_BATCHES`` batches, groups each
chunk into *global* batches of ``batch_size x world_size`` items with little padding and shuffles the batches.
An item has one length per part of it that is padded on its own (v1.5: text, codes and prompt mel); a chunk is
halved again and again, each time sorted by the part whose split leaves the fewest padded positions, and cut
at a multiple of the batch size drawn near the middle (so the batches differ from epoch to epoch even when the
whole epoch is one chunk), until each group is one batch. Under DDP every rank builds the same global list and
takes its own contiguous slice of each global batch: rank r's micro-batch is the r-th slice of the batch a
single process with ``batch_size x world_size`` would train on (same seed, same epoch). No item of an epoch
is left out: a short global batch is split as evenly as possible (the first ``n % world_size`` ranks get one
item more), and a tail of fewer items than ranks joins the global batch before it, so every rank has an item
in every global batch (DDP never waits on a rank with nothing to do). Only an epoch of fewer items than ranks
gives no batch at all (the run is refused; a validation set is skipped).

The position inside an epoch is "global batches consumed" (the same on every rank), so resuming mid-epoch
slices the list: O(1), no replay.

``resume_position`` maps a saved position onto the sampler of *this* run. With the same data and batching
it is the saved position (bitwise-exact resume). When the batch size, the number of processes or the
manifests changed, it continues at the same number of samples seen in the epoch, never past the epoch's
end, and says in one line what changed. A position or step that cannot belong to the data is refused.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import numpy as np

from trainer.replay import SamplingGroup, fingerprint_text, weighted_epoch_order

BUCKET_BATCHES = 32  # batches per chunk: larger -> less padding, less randomness
# A group is cut at a multiple of the batch size drawn within +-20 % of its batches around the middle: the
# batches vary from epoch to epoch at no cost in padding (the demo data, batch 8, seeds 0-9: 8.3 % padded positions
# with it, 8.4 % cut at the middle; batches shared by epochs 1 and 2: 4 % with it, 30 % cut at the middle).
SPLIT_JITTER = 0.2
# Hashed into the fingerprint: a checkpoint saved under an earlier ordering (target-sorted chunks re-sorted by
# prompt in runs of 4 batches) resumes at the same sample count, saying once that exactness is lost.
ORDER = "split-all-parts"


class BucketBatchSampler:
    """Length-bucketed batches per epoch, a pure function of (seed, epoch); this rank's share only."""

    def __init__(self, lengths: Sequence[int] | Sequence[Sequence[int]], batch_size: int, seed: int, *,
                 rank: int = 0, world_size: int = 1, bucket_batches: int = BUCKET_BATCHES,
                 prompt_lengths: Sequence[int] | None = None,
                 groups: Sequence[SamplingGroup] | None = None) -> None:
        """``lengths``: one length per item, or one row per item of the lengths of its parts padded on their own
        (text, codes); ``prompt_lengths`` is one more such part (ignored when every prompt is as long);
        ``groups``: replay's weighted manifests (``trainer.replay``): each epoch draws its items by weight."""
        if batch_size < 1:
            raise ValueError("batch_size must be >= 1")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        if self.lengths.ndim != 1 and not (self.lengths.ndim == 2 and self.lengths.shape[1] >= 1):
            raise ValueError("lengths must be one length per item or one row of part lengths per item")
        prompts = None if prompt_lengths is None else np.asarray(prompt_lengths, dtype=np.int64)
        if prompts is not None and prompts.shape != self.lengths.shape[:1]:
            raise ValueError("prompt_lengths must have one entry per item")
        # Prompts of one length (IndexTTS2's fixed latents) would change nothing: the order stays by target only.
        self.prompt_lengths = prompts if prompts is not None and prompts.size and np.ptp(prompts) > 0 else None
        parts = self.lengths.reshape(len(self.lengths), -1)
        self._parts = parts if self.prompt_lengths is None else np.column_stack([parts, self.prompt_lengths])
        self.groups = list(groups) if groups else None
        self.batch_size = batch_size
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.bucket_batches = bucket_batches
        self._cache: tuple[int, list[list[int]]] | None = None
        self._global: tuple[int, list[list[int]]] | None = None  # built once per epoch for batches and rounds
        self._rounds: tuple[int, np.ndarray] | None = None

    def fingerprint(self) -> str:
        """Changes when the data (lengths, order), the batching or the ordering algorithm would differ."""
        digest = hashlib.sha256(self.lengths.tobytes())
        digest.update(f"{self.batch_size}/{self.world_size}/{self.bucket_batches}".encode())
        if self.prompt_lengths is not None:
            digest.update(b"/prompt" + self.prompt_lengths.tobytes())
        if self.world_size > 1:  # global batches split by rank (older multi-process runs interleaved batches)
            digest.update(b"/sliced")
        digest.update(f"/{ORDER}/{self.lengths.shape}".encode())
        digest.update(fingerprint_text(self.groups).encode())  # "" without replay: older fingerprints hold
        return digest.hexdigest()[:16]

    def _global_batches(self, epoch: int) -> list[list[int]]:
        """Every global batch of ``epoch`` in order (``batch_size x world_size`` items, the same on every rank)."""
        if self._global is None or self._global[0] != epoch:
            self._global = (epoch, self._build(epoch))
        return self._global[1]

    def _build(self, epoch: int) -> list[list[int]]:
        size = self.batch_size * self.world_size
        rng = np.random.default_rng([self.seed, epoch])
        order = rng.permutation(len(self.lengths)) if self.groups is None else weighted_epoch_order(self.groups, rng)
        total = self._batch_count(len(order))
        # Chunks of about bucket_batches batches, as even as possible (no small leftover chunk padded badly);
        # each is a whole number of batches but the last, which holds the epoch's short batch if there is one.
        chunks = max(1, round(total / self.bucket_batches))
        bounds = [min(len(order), total * k // chunks * size) for k in range(chunks)] + [len(order)]
        batches: list[list[int]] = []
        for start, end in pairwise(bounds):
            batches += self._split(order[start:end], rng)
        return [batches[i] for i in rng.permutation(len(batches))]

    def _batch_count(self, items: int) -> int:
        """Batches of ``items`` items: a tail too short for one item per rank joins the batch before it."""
        size = self.batch_size * self.world_size
        full, tail = divmod(items, size)
        return full + (1 if tail >= self.world_size else 0)

    def _split(self, part: np.ndarray, rng: np.random.Generator) -> list[list[int]]:
        """``part`` grouped into batches: halved by the part length whose cut pads least, down to one batch each.

        Every left half is a whole number of batches, so the short batch (or the tail joined to a full one) ends
        up in the group of the largest items. Within a batch the items go from short to long overall, so each
        rank's contiguous slice of it holds similar lengths."""
        count = self._batch_count(len(part))
        if count <= 1:
            if count == 0:
                return []
            lengths = self._parts[part]
            return [part[np.argsort(lengths.sum(axis=1), kind="stable")].tolist()]
        size = self.batch_size * self.world_size
        half, spread = count // 2, int(SPLIT_JITTER * count)
        cut = size * (int(rng.integers(max(1, half - spread), min(count - 1, half + spread) + 1)) if spread else half)
        lengths = self._parts[part]
        by = np.argsort(lengths, axis=0, kind="stable")  # one order per part length
        ranked = lengths[by.T]  # [sorted by part k, item, part]
        # Positions of both halves (each padded to its longest): the sum of the lengths is the same for every
        # split, so the fewest positions are the fewest padded ones. Ties go to the first part (text before codes).
        low, high = ranked[:, :cut].max(axis=1).sum(axis=1), ranked[:, cut:].max(axis=1).sum(axis=1)
        positions = cut * low + (len(part) - cut) * high
        ordered = part[by[:, int(np.argmin(positions))]]
        return self._split(ordered[:cut], rng) + self._split(ordered[cut:], rng)

    def rank_slice(self, batch: list[int], rank: int) -> list[int]:
        """Rank ``rank``'s contiguous share of a global batch (sizes differ by at most one, larger first)."""
        base, extra = divmod(len(batch), self.world_size)
        start = rank * base + min(rank, extra)
        return batch[start:start + base + (1 if rank < extra else 0)]

    def batches(self, epoch: int) -> list[list[int]]:
        """This rank's batches of ``epoch`` in order (cached for the current epoch)."""
        if self._cache is None or self._cache[0] != epoch:
            global_batches = self._global_batches(epoch)
            mine = global_batches if self.world_size == 1 else [self.rank_slice(b, self.rank) for b in global_batches]
            self._cache = (epoch, mine)
        return self._cache[1]

    def __len__(self) -> int:
        """Batches per epoch for this rank, which is the number of global batches (the same every epoch)."""
        return len(self.batches(0))

    def samples_after(self, epoch: int) -> np.ndarray:
        """Samples seen by all ranks together after 0, 1, ... global batches of ``epoch``."""
        if self._rounds is None or self._rounds[0] != epoch:
            sizes = np.asarray([len(batch) for batch in self._global_batches(epoch)], dtype=np.int64)
            self._rounds = (epoch, np.concatenate(([0], np.cumsum(sizes))))
        return self._rounds[1]

    def samples_per_epoch(self) -> int:
        return int(self.samples_after(0)[-1])

    def state_dict(self, epoch: int, position: int, samples_seen: int | None = None) -> dict[str, Any]:
        state = {"epoch": int(epoch), "position": int(position), "seed": int(self.seed),
                 "batch_size": int(self.batch_size), "world_size": int(self.world_size),
                 "num_items": len(self.lengths), "fingerprint": self.fingerprint(),
                 "samples_in_epoch": int(self.samples_after(epoch)[min(position, len(self))])}
        if samples_seen is not None:
            state["samples_seen"] = int(samples_seen)
        return state

    def describe_change(self, state: dict[str, Any] | None) -> str | None:
        """Why a saved sampler state would give a different order now (None: the same order)."""
        if not state:
            return "the checkpoint has no sampler state"
        now = self.state_dict(0, 0)
        diffs = [f"{key} {state.get(key)!r} -> {now[key]!r}" for key in
                 ("seed", "batch_size", "world_size", "num_items", "fingerprint") if state.get(key) != now[key]]
        return ", ".join(diffs) or None


class PositionError(ValueError):
    """A saved position that cannot belong to this run's data."""


@dataclass(frozen=True)
class ResumePoint:
    epoch: int
    position: int  # global batches of ``epoch`` already consumed (one micro-batch per rank each)
    samples_seen: int  # all ranks, since step 0
    change: str | None  # one line when the data or batching changed (bitwise exactness is lost)


def saved_samples_in_epoch(state: dict[str, Any] | None, position: int) -> int:
    """Samples of the current epoch a checkpoint had consumed (older checkpoints: from batch size x ranks)."""
    state = state or {}
    if isinstance(state.get("samples_in_epoch"), int):
        return int(state["samples_in_epoch"])
    return position * int(state.get("batch_size") or 1) * int(state.get("world_size") or 1)


def resume_position(sampler: BucketBatchSampler, epoch: int, position: int, step: int,
                    saved: dict[str, Any] | None, where: str) -> ResumePoint:
    """Where this run continues, given the checkpoint's epoch / position / step and sampler state."""
    if epoch < 0 or position < 0 or step < 0:
        raise PositionError(f"{where}: negative step {step}, epoch {epoch} or position {position}")
    saved = saved or {}
    in_epoch = saved_samples_in_epoch(saved, position)
    seen = saved.get("samples_seen")
    change = sampler.describe_change(saved) if saved else None
    if change is None:
        if position > len(sampler):
            raise PositionError(f"{where}: position {position} is beyond the {len(sampler)} batches of an epoch of "
                                "this data: the checkpoint does not belong to these manifests and settings")
        samples_seen = int(seen) if isinstance(seen, int) else epoch * sampler.samples_per_epoch() + in_epoch
        return ResumePoint(epoch, position, samples_seen, None)
    # Different data or batching: continue at the same number of samples of this epoch.
    old_per_epoch = None
    if isinstance(saved.get("num_items"), int) and saved.get("num_items", 0) > 0:
        old_per_epoch = int(saved["num_items"])
    if old_per_epoch is not None and in_epoch > old_per_epoch:
        raise PositionError(f"{where}: {in_epoch} samples into an epoch of {old_per_epoch} items: the checkpoint's "
                            "position cannot belong to its own data")
    samples_seen = int(seen) if isinstance(seen, int) else epoch * (old_per_epoch or 0) + in_epoch
    rounds = sampler.samples_after(epoch)
    if in_epoch >= int(rounds[-1]):
        new_epoch, new_position = epoch + 1, 0
        where_now = f"the new epoch is {int(rounds[-1])} samples, so epoch {epoch + 1} starts"
    else:
        new_epoch = epoch
        rounds_done = int(np.searchsorted(rounds, in_epoch, side="right")) - 1
        new_position = rounds_done
        where_now = f"continuing at sample {int(rounds[rounds_done])} of {int(rounds[-1])} of epoch {epoch + 1}"
    line = (f"the data or batching changed since the checkpoint ({change}); it had seen {in_epoch} samples of "
            f"epoch {epoch + 1}: {where_now}; bitwise exactness with an uninterrupted run is lost")
    return ResumePoint(new_epoch, new_position, samples_seen, line)
