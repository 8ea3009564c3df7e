"""One device check for a rented GPU, within one call of a few minutes: prints one table.

    python bench/gpu_check.py [--budget-s 450] [--batch-size 8] [--text 120] [--codes 400] [--prompt 300]
                              [--synthesis-codes 200] [--skip-tests] [--estimates-only]

1. The GPU-marked tests (``pytest -m gpu``), with their pass / fail counts.
2. Per generation (IndexTTS-1.5, 2, 2.5), at the real size (random weights): a bf16-autocast training step
   through the trainer's own ``micro_step`` / ``optimizer_step`` (fused AdamW), full fine-tune and LoRA:
   tokens/s, model FLOPs utilisation (FLOPs counted by torch's FlopCounterMode on one step; the card's dense
   bf16 peak from ``bench/gpu_mfu.py``'s table or ``--peak-tflops``), ``torch.cuda.max_memory_allocated``
   beside the memory estimate (``trainer.memory_estimate``) and their ratio.
3. Synthesis real-time factor at the real size for IndexTTS2 and 2.5 (every network, ``bench/real_size_synthesis``).

Without CUDA it prints the estimates it would check (``--estimates-only`` does that on purpose) and exits 2
with one line. Each part stops being started once ``--budget-s`` is spent, and says so in the table.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.gpu_mfu import peak_tflops  # noqa: E402
from bench.real_size import GPT_TABLES, real_gpt_config, training_batch  # noqa: E402
from trainer.memory_estimate import RunShape, estimate_run_memory, gb  # noqa: E402
from trainer.memory_facts import model_facts  # noqa: E402

GENERATIONS = tuple(GPT_TABLES)
TESTS_TIMEOUT_S = 150


class Budget:
    def __init__(self, seconds: float) -> None:
        self.ends = time.monotonic() + seconds

    def left(self) -> float:
        return self.ends - time.monotonic()


def run_gpu_tests(budget: Budget) -> str:
    timeout = max(10.0, min(TESTS_TIMEOUT_S, budget.left() - 60))
    argv = [sys.executable, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider", str(REPO / "tests")]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=REPO, check=False)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:.0f} s"
    summary = next((line for line in reversed(done.stdout.splitlines()) if re.search(r"passed|failed|error|no tests",
                                                                                        line)), "no summary")
    return f"exit {done.returncode}: {summary.strip('= ')}"


@functools.cache
def facts_of(generation: str) -> Any:
    return model_facts(real_gpt_config(generation)[0])


def shape_of(args: argparse.Namespace, lora: bool, device_type: str) -> RunShape:
    return RunShape(batch_size=args.batch_size, text_tokens=args.text, codes=args.codes, prompt_frames=args.prompt,
                    amp="bf16", lora=lora, device_type=device_type)


def train_row(generation: str, lora: bool, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    from torch.utils.flop_counter import FlopCounterMode

    from generations.registry import build_gpt
    from trainer import steps
    from trainer.lora_setup import adapt_model

    gpt, _ = real_gpt_config(generation)
    facts = facts_of(generation)
    estimate = estimate_run_memory(facts, shape_of(args, lora, "cuda"))
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    with device:  # weights (and adapters) made on the GPU
        model = build_gpt(gpt).train()
        if lora:
            adapt_model(model, {"lora": True})
    optimizer = steps.build_optimizer(model, 1e-5, 0.01, device)
    batch = training_batch(model, args.batch_size, args.text, args.codes, args.prompt)
    weights = steps.LossWeights(text=0.2, mel=0.8)

    def step() -> None:
        losses = steps.micro_step(model, batch, device, "bf16", "masked", weights, 1.0, None, contextlib.nullcontext())
        steps.optimizer_step(model, optimizer, None, 1.0, losses.loss)

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    step()
    torch.cuda.synchronize(device)
    times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()
        torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    peak = torch.cuda.max_memory_allocated(device)  # the model and optimizer go with this frame
    name = torch.cuda.get_device_name(device)
    rate = peak_tflops(name, args.peak_tflops)
    tflops = counter.get_total_flops() / seconds / 1e12
    return {"tokens_s": args.batch_size * (args.text + args.codes) / seconds, "step_ms": seconds * 1000,
            "mfu": 100 * tflops / rate if rate else None, "peak": peak, "estimate": estimate.peak,
            "ratio": peak / estimate.peak}


def print_estimates(args: argparse.Namespace) -> None:
    print(f"memory estimates (bf16, batch {args.batch_size}, text {args.text}, codes {args.codes}):")
    for generation in GENERATIONS:
        facts = facts_of(generation)
        for lora in (False, True):
            estimate = estimate_run_memory(facts, shape_of(args, lora, "cuda"))
            print(f"  IndexTTS-{generation:3s} {'LoRA' if lora else 'full':4s}: peak {gb(estimate.peak)} "
                  f"({estimate.breakdown()}); a card needs {gb(estimate.device_bytes)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=450, help="stop starting parts after this many seconds")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--text", type=int, default=120)
    parser.add_argument("--codes", type=int, default=400)
    parser.add_argument("--prompt", type=int, default=300)
    parser.add_argument("--steps", type=int, default=5, help="timed training steps per row")
    parser.add_argument("--synthesis-codes", type=int, default=200)
    parser.add_argument("--synthesis-steps", type=int, default=25, help="S2Mel flow-matching steps")
    parser.add_argument("--peak-tflops", type=float, help="the card's dense bf16 peak, when not in the table")
    parser.add_argument("--skip-tests", action="store_true")
    parser.add_argument("--estimates-only", action="store_true")
    args = parser.parse_args()
    budget = Budget(args.budget_s)
    if args.estimates_only or not torch.cuda.is_available():
        print_estimates(args)
        if args.estimates_only:
            return 0
        print("error: no CUDA device here: the device check measures a GPU (the estimates above are what it "
              "would check)", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = True
    name = torch.cuda.get_device_name(device)
    total = torch.cuda.get_device_properties(device).total_memory
    lines = [f"device check: {name}, {gb(total)}; torch {torch.__version__}; bf16 autocast, batch {args.batch_size} "
             f"x (text {args.text} + codes {args.codes}), prompt {args.prompt} frames (1.5)"]
    lines.append(f"GPU-marked tests: {'skipped' if args.skip_tests else run_gpu_tests(budget)}")
    lines.append(f"{'training step':22s} {'tokens/s':>10s} {'step ms':>8s} {'MFU %':>6s} {'peak':>8s} "
                 f"{'estimate':>9s} {'ratio':>6s}")
    for generation in GENERATIONS:
        for lora in (False, True):
            label = f"IndexTTS-{generation} {'LoRA' if lora else 'full'}"
            if budget.left() < 60:
                lines.append(f"{label:22s} not run: budget spent")
                continue
            try:
                row = train_row(generation, lora, args, device)
            except torch.OutOfMemoryError:
                row = None
            gc.collect()
            torch.cuda.empty_cache()
            if row is None:
                lines.append(f"{label:22s} out of memory")
                continue
            mfu = f"{row['mfu']:.1f}" if row["mfu"] is not None else "?"
            lines.append(f"{label:22s} {row['tokens_s']:>10,.0f} {row['step_ms']:>8.0f} {mfu:>6s} {gb(row['peak']):>8s} "
                         f"{gb(row['estimate']):>9s} {row['ratio']:>6.2f}")
            print(lines[-1], flush=True)
    from bench.real_size_synthesis import synthesize_once

    for generation in ("2", "2.5"):
        if budget.left() < 90:
            lines.append(f"synthesis IndexTTS-{generation}: not run: budget spent")
            continue
        torch.cuda.reset_peak_memory_stats(device)
        synthesize_once(generation, 20, 2, "cuda")  # warm-up: kernels, cuDNN plans
        result = synthesize_once(generation, args.synthesis_codes, args.synthesis_steps, "cuda")
        lines.append(f"synthesis IndexTTS-{generation}: RTF {result['rtf']:.3f} ({result['audio_seconds']:.2f} s of audio "
                     f"in {result['seconds']:.2f} s, {result['codes']} codes, {args.synthesis_steps} CFM steps); "
                     f"peak {gb(torch.cuda.max_memory_allocated(device))}")
        print(lines[-1], flush=True)
        gc.collect()
        torch.cuda.empty_cache()
    print("\n" + "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
