"""Model step time and peak memory: conformer attention through SDPA vs the hand-written (eager) softmax.

    python bench/model_attention.py [--prompt-frames 64 1600] [--batch-size 8] [--repeats 5] [--steps 2]
                                    [--device auto] [--amp off]

One model (the demo's v1.5 config, one set of weights) and one batch per prompt length; the only thing
switched between the two columns is the conformer attention (`use_eager_attention`). A step is forward
plus backward of the training loss (no optimizer: it is the same on both sides). The first prompt length
is the demo's (its prompts are 48..87 mel frames); the others show where attention's O(T^2) starts to
matter: the prompt is the only thing that grows, text and codes stay at the demo's size.

Time: ``--repeats`` rounds of ``--steps`` steps each, eager and SDPA alternating (who goes first
alternates too), after one warm-up step each; the median round is reported. Peak memory: what one step
allocates on top of what was allocated before it (weights, batch), with the gradients set to None before
the step so both sides count them: ``torch.cuda.max_memory_allocated`` on CUDA, and on CPU the allocator's
running total as the torch profiler records it (a separate step, so the profiler does not slow the timed
ones). Ratios are SDPA / eager: below 1 means SDPA is faster or smaller.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from generations.indextts15.demo.build import demo_config  # noqa: E402
from networks.conformer import use_eager_attention  # noqa: E402
from networks.unified_voice import UnifiedVoice, build_model  # noqa: E402
from trainer import steps  # noqa: E402

SEED = 1234
DEMO_PROMPT_FRAMES = 64  # the demo's prompts are 48..87 frames
TEXT_VOCAB = 256
TEXT_TOKENS, CODES = 40, 100  # the longest item of a batch; the others are shorter
VARIANTS = ("eager", "sdpa")


def make_batch(batch_size: int, prompt_frames: int, device: torch.device) -> dict[str, torch.Tensor]:
    """Random ids and features with lengths spread over 60..100% of each width, so every part sees padding."""
    gen = torch.Generator().manual_seed(SEED + prompt_frames)

    def lengths(width: int) -> torch.Tensor:
        spread = torch.linspace(1.0, 0.6, batch_size)
        return (spread * width).long().clamp(min=3)

    batch = {
        "text_ids": torch.randint(2, TEXT_VOCAB, (batch_size, TEXT_TOKENS), generator=gen),
        "text_lengths": lengths(TEXT_TOKENS),
        "codes": torch.randint(0, 8192, (batch_size, CODES), generator=gen),
        "code_lengths": lengths(CODES),
        "cond_mels": torch.randn(batch_size, 100, prompt_frames, generator=gen),
        "cond_mel_lengths": lengths(prompt_frames),
    }
    return {name: tensor.to(device) for name, tensor in batch.items()}


def step_fn(model: UnifiedVoice, batch: dict[str, torch.Tensor], device: torch.device, amp: str) -> Callable[[], None]:
    """Forward and backward of the training loss; the caller sets the gradients to None before each."""
    def step() -> None:
        with steps.autocast(device, amp):
            out = model(**batch)
        (0.2 * out.loss_text + 0.8 * out.loss_mel).backward()

    return step


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed_round(model: UnifiedVoice, step: Callable[[], None], steps: int, device: torch.device) -> float:
    """Seconds per step over ``steps`` steps."""
    sync(device)
    started = time.perf_counter()
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        step()
    sync(device)
    return (time.perf_counter() - started) / steps


def peak_step_bytes(model: UnifiedVoice, step: Callable[[], None], device: torch.device) -> int:
    """Bytes one step allocates at its peak beyond what was allocated when it began."""
    model.zero_grad(set_to_none=True)  # before, not inside: the profiler cannot count frees of older blocks
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        step()
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(device) - before
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    with tempfile.TemporaryDirectory(prefix="bench-attention-") as tmp:
        trace = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(trace))
        events = [event["args"] for event in json.loads(trace.read_text())["traceEvents"]
                  if event.get("name") == "[memory]" and event["args"].get("Device Type") == 0]
    if not events:
        raise SystemExit("the torch profiler recorded no CPU memory events; cannot measure peak memory")
    # "Total Allocated" counts from the profiler's start; "Bytes" is the event's own (negative when freed).
    start = events[0]["Total Allocated"] - events[0]["Bytes"]
    return max(event["Total Allocated"] for event in events) - start


def measure(model: UnifiedVoice, batch: dict[str, torch.Tensor], args: argparse.Namespace,
            device: torch.device) -> dict[str, tuple[float, int]]:
    """{variant: (median seconds per step, peak bytes of a step)} for one batch."""
    step = step_fn(model, batch, device, args.amp)
    for variant in VARIANTS:  # warm-up: kernels picked, allocator caches filled
        use_eager_attention(model, variant == "eager")
        model.zero_grad(set_to_none=True)
        step()
    rounds: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
    for index in range(args.repeats):
        for variant in VARIANTS if index % 2 == 0 else reversed(VARIANTS):
            use_eager_attention(model, variant == "eager")
            rounds[variant].append(timed_round(model, step, args.steps, device))
    peaks = {}
    for variant in VARIANTS:
        use_eager_attention(model, variant == "eager")
        peaks[variant] = peak_step_bytes(model, step, device)
    use_eager_attention(model, False)
    return {variant: (statistics.median(rounds[variant]), peaks[variant]) for variant in VARIANTS}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt-frames", type=int, nargs="+", default=[DEMO_PROMPT_FRAMES, 1600],
                        help="prompt lengths in mel frames (the conformer sees about half as many)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2, help="steps per timed round")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--amp", default="off", choices=("off", "bf16", "fp16"))
    args = parser.parse_args()
    if min(args.prompt_frames) < 3 or args.batch_size < 1 or args.repeats < 1 or args.steps < 1:
        parser.error("--prompt-frames must be >= 3; --batch-size, --repeats and --steps >= 1")
    device = steps.resolve_device(args.device)
    torch.manual_seed(SEED)
    model = build_model(demo_config(TEXT_VOCAB)["gpt"]).to(device).train()
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu, {torch.get_num_threads()} threads"
    print(f"demo v1.5 model, batch {args.batch_size}, text {TEXT_TOKENS}, codes {CODES}, amp {args.amp}, {where}")
    print(f"{'prompt frames':>13} {'eager ms':>9} {'sdpa ms':>9} {'time ratio':>10} "
          f"{'eager MiB':>10} {'sdpa MiB':>9} {'memory ratio':>12}")
    for frames in args.prompt_frames:
        results = measure(model, make_batch(args.batch_size, frames, device), args, device)
        (eager_s, eager_bytes), (sdpa_s, sdpa_bytes) = results["eager"], results["sdpa"]
        label = f"{frames}{' (demo)' if frames == DEMO_PROMPT_FRAMES else ''}"
        print(f"{label:>13} {eager_s * 1e3:9.1f} {sdpa_s * 1e3:9.1f} {sdpa_s / eager_s:10.3f} "
              f"{eager_bytes / 2**20:10.1f} {sdpa_bytes / 2**20:9.1f} {sdpa_bytes / eager_bytes:12.3f}", flush=True)
        headline("model_attention", f"step time sdpa / eager, prompt {frames} frames", sdpa_s / eager_s, "x", "", None,
                 f"peak memory ratio {sdpa_bytes / eager_bytes:.2f}")
    print("ratios are sdpa / eager (time: median of rounds; memory: peak of one step beyond weights and batch)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
