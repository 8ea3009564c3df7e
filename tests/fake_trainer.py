"""A stand-in for ``python -m trainer.train`` in supervisor, UI and benchmark tests (no torch, starts fast).

It prints log lines like the trainer's, a carriage-return progress bar, appends train events to
``<output-dir>/metrics.jsonl``, and on SIGINT/SIGTERM "saves" and exits 130 with the trainer's stop
message. Options make it ignore signals, fail with a chosen exit code and message, or spawn a grandchild.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

EXIT_STOPPED = 130


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fake_trainer")
    parser.add_argument("--output-dir", type=Path)
    parser.add_argument("--steps", type=int, default=0, help="steps before finishing; 0 = run until stopped")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds per step")
    parser.add_argument("--progress", action="store_true", help="draw a \\r progress bar before the steps")
    parser.add_argument("--ignore-signals", action="store_true", help="ignore SIGINT and SIGTERM")
    parser.add_argument("--fail", type=int, default=0, help="exit with this code after --steps (with --error)")
    parser.add_argument("--error", default="", help="line printed to stderr before failing")
    parser.add_argument("--grandchild", action="store_true", help="spawn a long-lived grandchild process")
    parser.add_argument("--resume-from", type=int, default=None, help="print the trainer's resume line")
    parser.add_argument("--timestamps", action="store_true", help="print 'tick N <epoch seconds>' lines")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    stop_signal: list[int] = []

    def on_stop(signum: int, _frame: FrameType | None) -> None:
        stop_signal.append(signum)

    if args.ignore_signals:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGINT, on_stop)
        signal.signal(signal.SIGTERM, on_stop)

    if args.grandchild:
        grandchild = subprocess.Popen(
            [sys.executable, "-c", "import time\nwhile True: time.sleep(0.05)"], stdin=subprocess.DEVNULL
        )
        print(f"grandchild pid {grandchild.pid}", flush=True)

    print(f"fake trainer pid {os.getpid()} started", flush=True)
    metrics = args.output_dir / "metrics.jsonl" if args.output_dir else None
    if metrics is not None:
        metrics.parent.mkdir(parents=True, exist_ok=True)
    start_step = args.resume_from or 0
    if args.resume_from is not None:
        print(f"resumed from {args.output_dir}/latest.pth at step {start_step}, epoch 0, position 0", flush=True)

    if args.progress:
        for done in range(1, 6):
            sys.stdout.write(f"\rloading {done}/5")
            sys.stdout.flush()
        sys.stdout.write("\n")
        sys.stdout.flush()

    step = start_step
    total = start_step + args.steps if args.steps else 0
    started = time.time()
    while not stop_signal and (not total or step < total):
        time.sleep(args.interval)
        step += 1
        loss = 5.0 / (1.0 + 0.1 * step)
        if args.timestamps:
            print(f"tick {step} {time.time():.6f}", flush=True)
        else:
            print(f"step {step} loss {loss:.4f}", flush=True)
        if metrics is not None:
            event = {"event": "train", "step": step, "epoch": 0, "time": time.time(), "text_loss": loss / 5,
                     "mel_loss": loss, "mel_top1": min(1.0, 0.01 * step), "lr": 1e-3,
                     "tokens_per_s": 100.0, "eta_s": (total - step) * args.interval if total else None,
                     "total_steps": total or None, "elapsed_s": time.time() - started}
            with open(metrics, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(event) + "\n")

    if stop_signal:
        print(f"stopped by signal at step {step}; saved {args.output_dir}/latest.pth", flush=True)
        return EXIT_STOPPED
    if args.fail:
        print(args.error or "error: failing as asked", file=sys.stderr, flush=True)
        return args.fail
    print(f"saved checkpoint step {step} -> {args.output_dir}/latest.pth", flush=True)
    print("training finished", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
