"""How long one epoch takes on N GPUs: the slower of the model's steps and the data loader's reading, per GPU.

``bench/shards_200h.py`` measures the reading (clips/s per loader worker, from shards and from per-file features at
200 hours' size) and takes the model's rate as given; the pre-flight shows the same estimate for a large data set
(``add_epoch_estimate``), naming the rates it assumed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from data_tools.shape_rules import seconds_of_codes

LARGE_DATA_HOURS = 20.0  # from this much training audio on, the pre-flight shows the estimate
# The model's rate when nothing measured is given: an A100-class GPU at about 30 % of its 312 bf16 TFLOP/s on a
# 0.9 B-parameter GPT, a 5 s clip being about 320 tokens (text, codes, prompt): 6 x 0.9e9 x 320 FLOPs a clip.
ASSUMED_GPU_CLIPS_PER_S = 60.0
# One loader worker reading shards, page-cached, on the 2-core CI machine shared with other jobs
# (python bench/shards_200h.py: 717 a worker at --scale 0.02 under load, 1,894 at --scale 0.1): the lower one.
MEASURED_READ_CLIPS_PER_S = 700.0
GPU_COUNTS = (1, 8, 64)


@dataclass(frozen=True)
class EpochEstimate:
    clips: int
    gpus: int
    compute_hours: float  # the model's steps alone
    reading_hours: float  # the loader workers alone

    @property
    def hours(self) -> float:
        return max(self.compute_hours, self.reading_hours)

    @property
    def bound(self) -> str:
        return "data reading" if self.reading_hours > self.compute_hours else "the model's steps"


def estimate_epoch(clips: int, gpus: int, gpu_clips_per_s: float, read_clips_per_s: float,
                   workers_per_gpu: int) -> EpochEstimate:
    """An epoch of ``clips`` on ``gpus`` GPUs, each training ``gpu_clips_per_s`` and fed by ``workers_per_gpu``
    loader workers reading ``read_clips_per_s`` each (0 workers: the training process reads, in turn)."""
    if gpus < 1 or gpu_clips_per_s <= 0 or read_clips_per_s <= 0:
        raise ValueError("gpus must be >= 1 and the rates > 0")
    per_gpu = math.ceil(clips / gpus)
    compute = per_gpu / gpu_clips_per_s
    reading = per_gpu / (read_clips_per_s * max(1, workers_per_gpu))
    if workers_per_gpu == 0:  # reading and training take turns
        compute, reading = compute + reading, 0.0
    return EpochEstimate(clips, gpus, compute / 3600, reading / 3600)


def estimate_line(clips: int, audio_hours: float, workers_per_gpu: int, gpu_counts: tuple[int, ...] = GPU_COUNTS,
                  gpu_clips_per_s: float = ASSUMED_GPU_CLIPS_PER_S,
                  read_clips_per_s: float = MEASURED_READ_CLIPS_PER_S) -> str:
    """The pre-flight's sentence: hours per epoch on each of ``gpu_counts`` GPUs, with the rates assumed."""
    parts = []
    for gpus in gpu_counts:
        estimate = estimate_epoch(clips, gpus, gpu_clips_per_s, read_clips_per_s, workers_per_gpu)
        parts.append(f"{gpus} GPU{'s' if gpus > 1 else ''} {estimate.hours:.2g} h")
    return (f"estimated hours per epoch of {clips:,} clips ({audio_hours:,.0f} h of audio): " + ", ".join(parts)
            + f" (assuming {gpu_clips_per_s:g} clips/s per GPU and {read_clips_per_s:g} per loader worker x "
            f"{workers_per_gpu}; measure yours: python bench/shards_200h.py --gpu-clips-per-s R)")


def add_epoch_estimate(plan: Any) -> None:
    """The pre-flight's "estimated hours" line, for a large training set only (nothing otherwise)."""
    if plan.train is None or plan.generation is None:
        return
    seconds = sum(seconds_of_codes(item.num_codes, plan.generation.codes_per_second) for item in plan.train.items)
    if seconds / 3600 < LARGE_DATA_HOURS:
        return
    plan.add("epoch time", True, estimate_line(len(plan.train.items), seconds / 3600, int(plan.opts.num_workers)))
