"""Data-checker throughput against a bare ``json.loads`` loop over the same manifest.

    .venv/bin/python bench/check_data_speed.py [--lines 200000] [--workers 0] [--repeats 3]

Builds a manifest of real Amharic-looking lines in a temp folder, then times, side by side in one run:
a bare loop that only parses each line with ``json.loads``, and ``check_manifests`` without file checks
(structure, scripts, speakers, durations, duplicates), with every core and in one process. Prints
lines/s and the ratio (goal: >= 0.5). The three are timed ``--repeats`` times in turn (bare, checker, single,
bare, ...) and each keeps its median, so a burst of load on a shared machine hits one sample, not one side.
The load average is printed too: on a busy machine the workers compete with other processes for the cores
and the ratio drops toward the single-process one.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.report import headline
from data_tools.check_data import check_manifests

WORDS = ("ሰላም", "ኢትዮጵያ", "አዲስ", "አበባ", "ቋንቋ", "መጽሐፍ", "ትምህርት", "ቤት", "ውሃ", "ዛሬ", "ነገ", "ጥሩ",
         "ሰዓት", "ከተማ", "ሀገር", "ፋይል", "አስቀምጥ", "ክፈት", "ዝጋ", "ገጽ")


def build_manifest(path: Path, lines: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    with open(path, "w", encoding="utf-8") as handle:
        for i in range(lines):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))) + "።"
            handle.write(json.dumps({
                "id": f"utt{i:07d}", "text": text, "codes": f"codes/utt{i:07d}.npy",
                "cond_mel": f"cond_mels/utt{i:07d}.npy", "speaker": f"spk{i % 97:03d}",
                "language": "am", "duration": round(rng.uniform(1.0, 12.0), 2),
            }, ensure_ascii=False) + "\n")


def bare_json_loop(path: Path) -> int:
    count = 0
    with open(path, encoding="utf-8") as handle:
        for raw in handle:
            json.loads(raw)
            count += 1
    return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=0, help="checker workers (0 = every core)")
    parser.add_argument("--repeats", type=int, default=3, help="timings of each, in turn (the median is kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="check-bench-") as tmp:
        manifest = Path(tmp) / "train.jsonl"
        build_manifest(manifest, args.lines)
        size_mb = manifest.stat().st_size / 1e6
        samples: dict[str, list[float]] = {"bare": [], "check": [], "single": []}
        for _ in range(max(1, args.repeats)):
            start = time.perf_counter()
            parsed = bare_json_loop(manifest)
            samples["bare"].append(time.perf_counter() - start)
            start = time.perf_counter()
            report = check_manifests([manifest], workers=args.workers, check_files=False)
            samples["check"].append(time.perf_counter() - start)
            start = time.perf_counter()
            check_manifests([manifest], workers=1, check_files=False)
            samples["single"].append(time.perf_counter() - start)
    bare_s, check_s, single_s = (statistics.median(samples[name]) for name in ("bare", "check", "single"))
    assert report.train.entries == parsed == args.lines, (report.train.entries, parsed)
    rate = {name: args.lines / seconds for name, seconds in (("bare", bare_s), ("check", check_s),
                                                              ("single", single_s))}
    print(f"manifest: {args.lines} lines, {size_mb:.1f} MB; load average before: {_load()}")
    print(f"bare json.loads loop           : {rate['bare']:10,.0f} lines/s ({bare_s:.2f} s)")
    print(f"check_manifests, {report.settings['workers']} worker(s)   : {rate['check']:10,.0f} lines/s "
          f"({check_s:.2f} s, no file checks)")
    print(f"check_manifests, 1 process     : {rate['single']:10,.0f} lines/s ({single_s:.2f} s)")
    print(f"ratio checker/bare             : {rate['check'] / rate['bare']:.2f} (goal >= 0.5); "
          f"single process {rate['single'] / rate['bare']:.2f}")
    ratio = rate["check"] / rate["bare"]
    headline("check_data_speed", "data checker / bare JSON parse, lines/s", ratio, "x", ">= 0.5", ratio >= 0.5,
             f"{args.lines:,} lines, {report.settings['workers']} worker(s), median of {max(1, args.repeats)}")
    return 0


def _load() -> str:
    try:
        return " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
