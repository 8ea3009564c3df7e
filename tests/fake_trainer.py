"""A stand-in for ``python -m trainer.train`` in supervisor, UI and benchmark tests (no torch, starts fast).

It prints log lines like the trainer's, a carriage-return progress bar, and writes ``<output-dir>/metrics.jsonl``
events shaped like the trainer's (trainer/train.py, trainer/metrics.py): ``start`` or ``resume``, ``train``
(written before its console line, as the UI relies on), ``save`` after each "checkpoint", and ``end`` with
``status`` completed / stopped / failed / save_failed / nonfinite. On SIGINT/SIGTERM it finishes the step,
"saves" if the step is new and exits 130. Options make it ignore signals, fail with a chosen exit code and
message, refuse before writing anything, or leave helper processes behind (also in a session of their own).
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
from typing import Any

EXIT_STOPPED = 130
SLEEPER = "import time\nwhile True: time.sleep(0.05)"
SETSID_SLEEPER = "import os, time\nos.setsid()\nprint(f'setsid child pid {os.getpid()}', flush=True)\n" \
                 "while True: time.sleep(0.05)"


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="fake_trainer")
    parser.add_argument("--output-dir", type=Path)
    parser.add_argument("--steps", type=int, default=0, help="steps before finishing; 0 = run until stopped")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds per step")
    parser.add_argument("--first-step-delay", type=float, default=0.0, help="seconds before the first step")
    parser.add_argument("--save-interval", type=int, default=0, help="save every N steps (0: at the end only)")
    parser.add_argument("--progress", action="store_true", help="draw a \\r progress bar before the steps")
    parser.add_argument("--ignore-signals", action="store_true", help="ignore SIGINT and SIGTERM")
    parser.add_argument("--fail", type=int, default=0, help="exit with this code after --steps (with --error)")
    parser.add_argument("--fail-status", default="failed", help="the end event's status when failing")
    parser.add_argument("--refuse", default="", help="print 'error: REFUSE' and exit 2 before any event")
    parser.add_argument("--error", default="", help="line printed to stderr before failing")
    parser.add_argument("--grandchild", action="store_true", help="spawn a long-lived grandchild process")
    parser.add_argument("--setsid-child", action="store_true",
                        help="spawn a long-lived child that leaves the session (os.setsid) and is never stopped")
    parser.add_argument("--resume-from", type=int, default=None, help="resume at this step (a resume event)")
    parser.add_argument("--timestamps", action="store_true", help="print 'tick N <epoch seconds>' lines")
    parser.add_argument("--seconds-per-step", default="", help="comma-separated values cycled in train events")
    return parser.parse_args(argv)


class Events:
    """metrics.jsonl like the trainer writes it (nothing when there is no output dir)."""

    def __init__(self, output_dir: Path | None, resume: bool) -> None:
        self.path = output_dir / "metrics.jsonl" if output_dir else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not resume:
                self.path.unlink(missing_ok=True)  # a fresh start begins a new file, as the trainer does

    def write(self, kind: str, step: int, **fields: Any) -> None:
        if self.path is None:
            return
        event = {"event": kind, "step": step, "epoch": 0, "time": round(time.time(), 3), **fields}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(event) + "\n")


def wait(seconds: float, stop_signal: list[int]) -> None:
    """Sleep, but wake up for a stop (the real trainer finishes its step; a step here is a sleep)."""
    deadline = time.monotonic() + seconds
    while not stop_signal and time.monotonic() < deadline:
        time.sleep(min(0.01, max(0.0, deadline - time.monotonic())))


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

    if args.refuse:
        print(f"error: {args.refuse}", file=sys.stderr, flush=True)
        return 2
    if args.grandchild:
        grandchild = subprocess.Popen([sys.executable, "-c", SLEEPER], stdin=subprocess.DEVNULL)
        print(f"grandchild pid {grandchild.pid}", flush=True)
    if args.setsid_child:
        subprocess.Popen([sys.executable, "-c", SETSID_SLEEPER], stdin=subprocess.DEVNULL)

    print(f"fake trainer pid {os.getpid()} started", flush=True)
    start_step = args.resume_from or 0
    total = start_step + args.steps if args.steps else 0
    events = Events(args.output_dir, resume=args.resume_from is not None)
    if args.resume_from is not None:
        print(f"resumed from {args.output_dir}/latest.pth at step {start_step}, epoch 0, position 0", flush=True)
    else:
        print("starting fresh at step 0", flush=True)
    events.write("resume" if args.resume_from is not None else "start", start_step, position=0,
                 total_steps=total or None, steps_per_epoch=total or None, source="fake", tensorboard=None)

    if args.progress:
        for done in range(1, 6):
            sys.stdout.write(f"\rloading {done}/5")
            sys.stdout.flush()
        sys.stdout.write("\n")
        sys.stdout.flush()

    step = saved = start_step
    per_step = [float(x) for x in args.seconds_per_step.split(",") if x] or [args.interval]

    def save() -> None:
        nonlocal saved
        print(f"saved checkpoint step {step} -> {args.output_dir}/latest.pth", flush=True)
        events.write("save", step, path=f"{args.output_dir}/model_step{step}.pth", best=False)
        saved = step

    wait(args.first_step_delay, stop_signal)
    while not stop_signal and (not total or step < total):
        wait(args.interval, stop_signal)
        step += 1
        loss = 5.0 / (1.0 + 0.1 * step)
        seconds_per_step = per_step[(step - 1) % len(per_step)]
        events.write("train", step, text_loss=loss / 5, mel_loss=loss, mel_top1=min(1.0, 0.01 * step), lr=1e-3,
                     loss=loss, tokens_per_s=100.0, seconds_per_step=seconds_per_step,
                     eta_s=round((total - step) * seconds_per_step, 1) if total else None,
                     total_steps=total or None)
        if args.timestamps:
            print(f"tick {step} {time.time():.6f}", flush=True)
        else:
            print(f"step {step} loss {loss:.4f}", flush=True)
        if args.save_interval and step % args.save_interval == 0:
            save()

    if stop_signal:
        if step != saved and step > 0:
            save()
        kept = f"saved {args.output_dir}/latest.pth" if step > 0 else "no step was taken, nothing new to save"
        print(f"stopped by signal at step {step}; {kept}", flush=True)
        events.write("end", step, status="stopped", signal=signal.Signals(stop_signal[0]).name)
        return EXIT_STOPPED
    if args.fail:
        print(args.error or "error: failing as asked", file=sys.stderr, flush=True)
        events.write("end", step, status=args.fail_status, error=args.error.removeprefix("error: "))
        return args.fail
    if step != saved:
        save()
    print("training finished", flush=True)
    events.write("end", step, status="completed", best_val_loss=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
