"""200 hours of prepared data on the CPU: per-file features vs WebDataset shards, side by side.

    python bench/shards_200h.py [--scale 1.0] [--workers 2] [--gpus 1 8 64] [--gpu-clips-per-s R] [--dir D]

Writes synthetic IndexTTS2-shaped features (text ids, codes, condition [32, 1280], emotion vector: four files a
clip, about 170 KB) for ``--scale`` x 150,000 clips (200 hours of 4.8 s clips) as preparation writes them, times
packing them into 1 GB shards (``data_tools.shards``), then reads one epoch in the sampler's shuffled order
through the trainer's reader (``data_tools.npy``) with ``--workers`` loader workers, once per layout, each in a
fresh process. Per layout it prints clips/s, the files opened, the reading process's peak memory and the time to
the first batch after a resume mid-epoch (start, index and every item's header as the trainer's plan reads them,
then one batch). From the shards' rate and ``--gpu-clips-per-s`` (the model's rate on one GPU; measured on yours
with the trainer's tok/s) it estimates hours per epoch on ``--gpus`` GPUs (``trainer.epoch_estimate``).
Scale 1 needs about 50 GB of disk (both layouts): run smaller here, e.g. ``--scale 0.02``. Both layouts are read
right after they are written, so both are page-cached: the ratio is the reader's cost, not the disk's.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from bench.report import headline  # noqa: E402

CLIPS_200H = 150_000
FILES = {"text_ids": ("<i4", (40,)), "codes": ("<i4", (240,)), "condition": ("<f4", (32, 1280)),
         "emo_vec": ("<f4", (1280,))}
BATCH = 8


def write_features(folder: Path, clips: int) -> float:
    """``folder/<kind>/<id>.npy`` for ``clips`` clips; returns the seconds it took."""
    rng = np.random.default_rng(0)
    started = time.perf_counter()
    for kind in FILES:
        (folder / kind).mkdir(parents=True, exist_ok=True)
    for k in range(clips):
        for kind, (dtype, shape) in FILES.items():
            np.save(folder / kind / f"c{k:07d}.npy", rng.standard_normal(shape).astype(dtype) if dtype == "<f4"
                    else rng.integers(0, 8000, shape, dtype=dtype))
    return time.perf_counter() - started


def link_copy(source: Path, target: Path) -> None:
    """``target`` with hard links to ``source``'s features: packing it removes the links, not the originals."""
    for kind in FILES:
        (target / kind).mkdir(parents=True)
        for path in (source / kind).iterdir():
            os.link(path, target / kind / path.name)


# ----- the reading child: one layout, one fresh process ----------------------------------------------------


class _Clips:
    def __init__(self, folder: Path, clips: int) -> None:
        self.folder, self.clips = folder, clips

    def __len__(self) -> int:
        return self.clips

    def __getitem__(self, index: int) -> tuple[int, int, int]:
        from data_tools import npy, shard_reader

        nbytes = sum(npy.read_npy(self.folder / kind / f"c{index:07d}.npy").nbytes for kind in FILES)
        return nbytes, _OPENS["count"] + shard_reader.files_opened(), os.getpid()


_OPENS = {"count": 0}


def _reset_opens(_worker: int) -> None:
    _OPENS["count"] = 0  # a forked worker counts its own opens


@contextlib.contextmanager
def _counting_opens() -> Iterator[None]:
    """Count the files the trainer's reader opens (per-file reads) while the body runs."""
    from data_tools import npy

    opener = npy.open_regular

    def counted(path):  # type: ignore[no-untyped-def]
        _OPENS["count"] += 1
        return opener(path)

    _OPENS["count"] = 0
    npy.open_regular = counted
    try:
        yield
    finally:
        npy.open_regular = opener


def read_child(folder: Path, clips: int, workers: int, started: float) -> dict[str, float]:
    with _counting_opens():
        return _read_epoch(folder, clips, workers, started)


def _read_epoch(folder: Path, clips: int, workers: int, started: float) -> dict[str, float]:
    import torch
    from torch.utils.data import DataLoader

    from data_tools import item_files, shard_reader
    from trainer.sampler import BucketBatchSampler

    shards_before = shard_reader.files_opened()  # an earlier epoch in this process (a test) opened some
    # Resume: every item's header (the trainer's plan reads them), then the batches from mid-epoch on.
    lengths = [item_files.codes_count(folder / "codes" / f"c{k:07d}.npy") for k in range(clips)]
    header_opens = _OPENS["count"] + shard_reader.files_opened() - shards_before
    sampler = BucketBatchSampler(lengths, BATCH, seed=0)
    batches = sampler.batches(0)
    middle = len(batches) // 2
    loader = DataLoader(_Clips(folder, clips), batch_sampler=batches[middle:] + batches[:middle],
                        num_workers=workers, collate_fn=list, generator=torch.Generator().manual_seed(0),
                        worker_init_fn=_reset_opens,
                        prefetch_factor=4 if workers else None)
    opens: dict[int, int] = {}
    read_started, first, seen = None, 0.0, 0
    for batch in loader:
        if read_started is None:
            first = time.time() - started
            read_started = time.perf_counter()
        for _nbytes, count, pid in batch:
            opens[pid] = max(opens.get(pid, 0), count)
        seen += len(batch)
    seconds = time.perf_counter() - (read_started or time.perf_counter())
    assert seen == clips, (seen, clips)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    workers_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    before_reading = {os.getpid(): header_opens + shards_before}  # this process's opens before the epoch
    reading_opens = sum(count - before_reading.get(pid, 0) for pid, count in opens.items())
    return {"clips_per_s": (clips - BATCH) / max(seconds, 1e-9), "files_opened": reading_opens,
            "header_opens": header_opens, "first_batch_s": first, "peak_rss_mb": max(rss_mb, workers_mb)}


def run_child(folder: Path, clips: int, workers: int) -> dict[str, float]:
    started = time.time()
    done = subprocess.run([sys.executable, __file__, "--child", str(folder), "--clips", str(clips),
                           "--workers", str(workers), "--started", str(started)], cwd=REPO, capture_output=True,
                          text=True, timeout=6 * 3600)
    if done.returncode != 0:
        raise SystemExit(f"reading child failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None, reader: Callable[[Path, int, int], dict[str, float]] = run_child) -> int:
    """``reader`` reads one layout's epoch (tests pass one that stays in their process)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of 200 hours (150,000 clips)")
    parser.add_argument("--workers", type=int, default=2, help="loader workers reading")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--gpu-clips-per-s", type=float, default=None, help="the model's clips/s on one GPU")
    parser.add_argument("--dir", type=Path, help="where to write (default: a temporary folder)")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--clips", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--started", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(read_child(args.child, args.clips, args.workers, args.started)))
        return 0
    import webdataset  # noqa: F401 (imported before the packing is timed: it imports torch)

    from data_tools.shards import pack
    from trainer.epoch_estimate import ASSUMED_GPU_CLIPS_PER_S, estimate_epoch

    clips = max(2 * BATCH, round(CLIPS_200H * args.scale))
    with tempfile.TemporaryDirectory(prefix="bench-shards-", dir=args.dir) as tmp:
        files, sharded = Path(tmp) / "files", Path(tmp) / "sharded"
        write_s = write_features(files, clips)
        link_copy(files, sharded)
        started = time.perf_counter()
        index = pack(sharded)
        pack_s = time.perf_counter() - started
        per_file = reader(files, clips, args.workers)
        shards = reader(sharded, clips, args.workers)
    gb = clips * sum(np.dtype(d).itemsize * int(np.prod(s)) for d, s in FILES.values()) / 1e9
    print(f"{clips:,} clips ({clips / CLIPS_200H:.3g} x 200 h), {gb:.2f} GB of features, {len(FILES)} files a clip; "
          f"{args.workers} loader worker(s)")
    print(f"preparation: writing {clips / write_s:,.0f} clips/s; packing into {len(index.shards)} shard(s) "
          f"{clips / pack_s:,.0f} clips/s")
    for name, row in (("per-file", per_file), ("shards", shards)):
        print(f"{name:9}: {row['clips_per_s']:8,.0f} clips/s, {row['files_opened']:,} files opened reading "
              f"(+{row['header_opens']:,} for the headers), peak {row['peak_rss_mb']:,.0f} MB, first batch after a "
              f"resume {row['first_batch_s']:.2f} s")
    ratio = shards["clips_per_s"] / per_file["clips_per_s"]
    rate = args.gpu_clips_per_s or ASSUMED_GPU_CLIPS_PER_S
    per_worker = shards["clips_per_s"] / max(1, args.workers)
    for gpus in args.gpus:
        full = estimate_epoch(CLIPS_200H, gpus, rate, per_worker, args.workers)
        print(f"200 h on {gpus:3} GPU(s): {full.hours:6.2f} h per epoch (bound by {full.bound}; {rate:g} clips/s per "
              f"GPU{'' if args.gpu_clips_per_s else ', assumed'}, {per_worker:,.0f} per worker)")
    opened = (per_file["files_opened"] + per_file["header_opens"], shards["files_opened"] + shards["header_opens"])
    headline("shards_200h", "shards / per-file reading, clips/s", ratio, "x", "", None,
             f"{clips:,} clips, {args.workers} workers; files opened {opened[0]:,} vs {opened[1]:,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
