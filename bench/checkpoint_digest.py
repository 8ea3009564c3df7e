"""What proving a checkpoint's integrity costs: digest check and digest-carrying save, side by side.

    python bench/checkpoint_digest.py [--mb 512] [--repeats 3] [--dir DIR]

Writes a checkpoint of ``--mb`` MB of float32 tensors (many tensors, like a model + AdamW moments),
then, alternating and repeated, times on the same (warm, page-cached) file:

- read: a plain sequential read of the file (the floor for any check that looks at every byte);
- digest: ``check_file_digest`` (the parallel SHA-256 tree the toolkit uses);
- sha256: a single-thread SHA-256 of the file (what a naive whole-file hash costs);
- load: ``torch.load(weights_only=True)`` (what resume does anyway);
- save: ``torch.save`` into an atomic temp file (fsync + rename, as the saver does) vs
  ``write_checkpoint_file`` (the same, hashing in the same pass).

Prints medians in MB/s and the ratios digest/read, digest/load and save-with-digest/save.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from data_tools.fileio import atomic_write_with  # noqa: E402
from trainer.checkpoints.digest import check_file_digest  # noqa: E402
from trainer.checkpoints.store import write_checkpoint_file  # noqa: E402


def make_checkpoint(megabytes: int) -> dict:
    per_tensor = 4 << 20  # 4 MiB tensors: a few hundred, like a large model's layers
    count = max(1, (megabytes << 20) // per_tensor)
    torch.manual_seed(0)
    model = {f"layer{i}.weight": torch.randn(per_tensor // 4) for i in range(count // 2)}
    moments = {i: {"exp_avg": torch.randn(per_tensor // 8), "exp_avg_sq": torch.rand(per_tensor // 8),
                   "step": torch.tensor(3.0)} for i in range(count - count // 2)}
    return {"model": model, "optimizer": {"state": moments, "param_groups": []}, "step": 3}


def plain_read(path: Path) -> None:
    with open(path, "rb") as handle:
        while handle.read(8 << 20):
            pass


def sha256_single(path: Path) -> None:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(8 << 20):
            digest.update(chunk)


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to write (default: a temp folder)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-digest-", dir=args.dir) as tmp:
        root = Path(tmp)
        ckpt = make_checkpoint(args.mb)
        path = root / "ckpt.pth"
        write_checkpoint_file(ckpt, path)
        size_mb = path.stat().st_size / 1e6
        plain_read(path)  # warm the page cache: every measurement below reads a cached file
        cases = {
            "read": lambda: plain_read(path),
            "digest": lambda: check_file_digest(path),
            "sha256 1-thread": lambda: sha256_single(path),
            "load": lambda: torch.load(path, weights_only=True),
            "save (torch.save)": lambda: atomic_write_with(root / "plain.pth", lambda h: torch.save(ckpt, h)),
            "save (with digest)": lambda: write_checkpoint_file(ckpt, root / "digest.pth"),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for repeat in range(args.repeats):
            order = list(cases) if repeat % 2 == 0 else list(reversed(cases))
            for name in order:
                times[name].append(timed(cases[name]))
        assert check_file_digest(path).trusted
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"checkpoint: {size_mb:,.0f} MB, {args.repeats} repeats, medians (page-cached file)")
    for name, seconds in median.items():
        print(f"  {name:<20} {seconds:8.3f} s  {size_mb / seconds:9,.0f} MB/s")
    print(f"digest / plain read:        {median['digest'] / median['read']:.2f}x the time")
    headline("checkpoint_digest", "digest check / plain read of a checkpoint", median["digest"] / median["read"], "x",
             "", None, f"{size_mb:,.0f} MB, page-cached")
    print(f"digest / torch.load:        {median['digest'] / median['load']:.2f}x the time")
    print(f"digest / 1-thread sha256:   {median['digest'] / median['sha256 1-thread']:.2f}x the time")
    print(f"save with digest / without: {median['save (with digest)'] / median['save (torch.save)']:.2f}x the time")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
