"""Preprocessing one item, in a worker process: audio -> 24 kHz mono -> log-mel -> DVAE codes, both written
atomically; every failure becomes the item's reason, never an exception. ``run_items`` runs a list of items in
this process or in a spawned pool (``data_tools.preprocess`` runs the whole job).
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.fileio import atomic_write_with
from data_tools.preprocess_inputs import SourceItem
from data_tools.shape_rules import V1_SAMPLE_RATE as SAMPLE_RATE
from data_tools.workers import pool_results

SILENCE_DBFS = -60.0  # RMS below this is taken as silence
ITEM_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class WorkerSettings:
    out_dir: str
    dvae: str
    vqvae: dict
    device: str
    min_duration: float
    max_duration: float
    max_codes: int | None
    threads: int | None  # torch threads per worker (1 in worker processes)


@dataclass
class Outcome:
    id: str
    stem: str
    ok: bool
    reason: str = ""
    duration: float = 0.0
    frames: int = 0
    codes: int = 0


_worker_state: dict[str, Any] = {}


def _init_worker(settings: WorkerSettings) -> None:
    import torch

    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    from networks import indextts15

    _worker_state["dvae"] = indextts15.load_dvae(settings.dvae, settings.vqvae, device=settings.device)
    _worker_state["settings"] = settings


def _process(item: SourceItem) -> Outcome:
    """Audio -> mel -> codes, files written atomically; every failure becomes a reason, not an exception."""
    settings: WorkerSettings = _worker_state["settings"]
    try:
        return _process_item(item, settings, _worker_state["dvae"])
    except Exception as exc:  # a worker must answer for every item, whatever goes wrong
        return Outcome(item.id, item.stem, False, f"failed: {type(exc).__name__}: {exc}")


def _process_item(item: SourceItem, settings: WorkerSettings, dvae) -> Outcome:
    import torch

    from data_tools.audio import AudioError, load_audio
    from data_tools.features import mel_spectrogram

    try:
        samples = load_audio(item.audio, SAMPLE_RATE)
    except AudioError as exc:
        detail = str(exc).removeprefix(f"{item.audio}: ")
        reason = "missing audio" if "not found" in detail else "unreadable audio"
        return Outcome(item.id, item.stem, False, f"{reason}: {detail}")
    duration = samples.size / SAMPLE_RATE
    if duration < settings.min_duration:
        return Outcome(item.id, item.stem, False,
                       f"too short: {duration:.2f} s < --min-duration {settings.min_duration:g} s")
    if duration > settings.max_duration:
        return Outcome(item.id, item.stem, False,
                       f"too long: {duration:.2f} s > {settings.max_duration:.2f} s")
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64))))
    if rms <= 10 ** (SILENCE_DBFS / 20):
        level = 20 * math.log10(rms) if rms > 0 else -math.inf
        return Outcome(item.id, item.stem, False, f"silent audio: RMS {level:.0f} dBFS")
    with torch.no_grad():
        mel = mel_spectrogram(torch.from_numpy(samples).to(settings.device))
        codes = dvae.get_codebook_indices(mel.unsqueeze(0))[0].cpu().numpy()
    if settings.max_codes is not None and codes.size > settings.max_codes:
        return Outcome(item.id, item.stem, False,
                       f"too long: {codes.size} codes > gpt.max_mel_tokens {settings.max_codes}")
    dtype = np.int16 if dvae.num_tokens <= np.iinfo(np.int16).max + 1 else np.int32
    out = Path(settings.out_dir)
    mel_np = np.ascontiguousarray(mel.cpu().numpy(), dtype=np.float32)
    atomic_write_with(out / "cond_mels" / f"{item.stem}.npy", lambda handle: np.save(handle, mel_np))
    atomic_write_with(out / "codes" / f"{item.stem}.npy", lambda handle: np.save(handle, codes.astype(dtype)))
    return Outcome(item.id, item.stem, True, duration=round(duration, 4), frames=int(mel_np.shape[1]),
                   codes=int(codes.size))


def run_items(todo: list[SourceItem], settings: WorkerSettings, workers: int) -> Iterator[Outcome]:
    """Each item's outcome: here when one worker (or item) is enough, else in ``workers`` spawned processes."""
    if workers <= 1 or len(todo) <= 1:
        _init_worker(settings)
        try:
            for item in todo:
                yield _process(item)
        finally:
            _worker_state.clear()
        return
    worker_settings = WorkerSettings(**{**asdict(settings), "threads": 1})
    context = multiprocessing.get_context("spawn")  # never fork a process that has torch threads
    yield from pool_results(context, workers, _process, todo, timeout_s=ITEM_TIMEOUT_S, what="preprocessing",
                            ordered=False, initializer=_init_worker, initargs=(worker_settings,))
