"""Time from process start to the first optimizer step: a fresh run vs a resumed one.

    python bench/resume_overhead.py [--repeats 3] [--device cpu] [--workspace DIR]

On the demo workspace: one fresh run of ``--steps`` steps saves latest.pth; then, alternating, fresh
runs and runs resuming from a copy of that checkpoint are started as real processes. For each, the
time from just before the process is spawned to the wall-clock time of its first ``train`` event
(logged after optimizer step 1 of the run) is taken. Prints the medians and their ratio (goal:
resumed <= 1.2 x fresh). Resuming slices the epoch order (O(1)); it never replays batches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from demo.workspace import build_demo  # noqa: E402


def first_step_seconds(argv: list[str], out: Path) -> float:
    started = time.time()
    proc = subprocess.run([sys.executable, "-m", "trainer.train", *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=900, env={**os.environ})
    if proc.returncode != 0:
        raise SystemExit(f"trainer exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    first_train = next(row for row in rows if row["event"] == "train" and row["time"] >= started)
    return first_train["time"] - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="steps of the run that is resumed (mid-epoch)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workspace", type=Path)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-resume-") as tmp:
        root = Path(tmp)
        ws = build_demo(args.workspace or root / "demo")

        def argv(out: Path, steps: int) -> list[str]:
            flags = ws.train_argv(max_steps=steps)
            flags[flags.index("--output-dir") + 1] = str(out)
            return [*flags, "--device", args.device, "--log-interval", "1", "--val-interval", "100000",
                    "--save-interval", "100000", "--resume", "auto"]

        base_run = root / "base"
        first_step_seconds(argv(base_run, args.steps), base_run)
        fresh, resumed = [], []
        for index in range(args.repeats):
            out = root / f"fresh{index}"
            fresh.append(first_step_seconds(argv(out, args.steps + 1), out))
            out = root / f"resumed{index}"
            shutil.copytree(base_run, out)
            resumed.append(first_step_seconds(argv(out, args.steps + 1), out))
    fresh_s, resumed_s = statistics.median(fresh), statistics.median(resumed)
    print(f"fresh    start -> first step {fresh_s:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in fresh)})")
    print(f"resumed  start -> first step {resumed_s:7.2f} s  (runs: {', '.join(f'{t:.2f}' for t in resumed)})")
    print(f"ratio    {resumed_s / fresh_s:.3f}  (goal <= 1.2)")
    headline("resume_overhead", "resumed / fresh start-to-first-step", resumed_s / fresh_s, "x", "<= 1.2",
             resumed_s / fresh_s <= 1.2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
