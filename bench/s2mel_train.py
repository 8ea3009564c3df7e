"""S2Mel training speed and memory, full fine-tune vs LoRA, side by side.

    python bench/s2mel_train.py [--sizes demo,real] [--demo-steps 8] [--real-steps 1] [--device cpu]

Each (size, mode) runs in its own process (so peak memory is its own): the S2Mel trainer's real step
(split regulation, flow-matching loss, backward, AdamW) on synthetic clips of ``--seconds`` seconds, batch
``--batch-size``. "demo" is the demo download's S2Mel (``demo.s2mel_kit.s2mel_section``); "real" is
IndexTTS2's released size (DiT 512 x 13, WaveNet 8 layers, regulator 1024 -> 512). Printed per run: steps/s
after one warm-up step (the real size on CPU: the single step, cold), peak resident memory of the process
(CPU) or peak CUDA memory, and the trainable parameter count; then LoRA / full ratios.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402

BENCH = "s2mel_train"


def one_run(size: str, mode: str, steps: int, batch: int, seconds: float, device: str) -> dict:
    import torch

    from demo.s2mel_kit import s2mel_section
    from networks.s2mel import S2Mel, S2MelConfig
    from trainer.s2mel.batches import S2MelClip
    from trainer.s2mel.loop import S2MelTrainer
    from trainer.s2mel.lora import S2MelLoRASettings
    from trainer.s2mel.train_settings import S2MelTrainSettings

    torch.manual_seed(0)
    if size == "real":
        model = S2Mel(S2MelConfig(with_gpt_layer=False))
    else:
        model = S2Mel.from_config(s2mel_section(), with_gpt_layer=False)
    config = model.config
    frames = int(seconds * 22050 / 256)
    g = torch.Generator().manual_seed(0)
    clips = [
        S2MelClip(
            mel=torch.randn(80, frames - 7 * i, generator=g) - 5,
            style=torch.randn(config.style_dim, generator=g),
            code_embedding=torch.randn(int((frames - 7 * i) / 1.72), config.semantic_dim, generator=g),
        )
        for i in range(batch)
    ]
    settings = S2MelTrainSettings(
        mode=mode,
        batch_size=batch,
        max_steps=10**6,
        save_interval=10**6,
        lora=S2MelLoRASettings(rank=16, alpha=32),
    )
    with tempfile.TemporaryDirectory() as out:
        trainer = S2MelTrainer(model, clips, settings, out, device=device)
        trainable = sum(p.numel() for p in trainer.trainable)
        if steps > 1:
            trainer.train_step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        timed = max(1, steps - 1)
        started = time.perf_counter()
        for _ in range(timed):
            trainer.train_step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        elapsed = time.perf_counter() - started
    peak = (
        torch.cuda.max_memory_allocated()
        if device.startswith("cuda")
        else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    )
    return {
        "steps_per_s": timed / elapsed,
        "peak_bytes": peak,
        "trainable": trainable,
        "total": sum(p.numel() for p in trainer.model.parameters()),
        "frames": frames,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="demo,real")
    parser.add_argument("--demo-steps", type=int, default=8)
    parser.add_argument("--real-steps", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        size, mode = args.child
        steps = args.real_steps if size == "real" else args.demo_steps
        print(json.dumps(one_run(size, mode, steps, args.batch_size, args.seconds, args.device)))
        return 0
    for size in args.sizes.split(","):
        results = {}
        for mode in ("full", "lora"):
            argv_child = [
                sys.executable,
                __file__,
                "--child",
                size,
                mode,
                "--batch-size",
                str(args.batch_size),
                "--seconds",
                str(args.seconds),
                "--device",
                args.device,
                "--demo-steps",
                str(args.demo_steps),
                "--real-steps",
                str(args.real_steps),
            ]
            done = subprocess.run(argv_child, capture_output=True, text=True, timeout=3600, check=False)
            if done.returncode != 0:
                print(done.stderr[-2000:], file=sys.stderr)
                return 1
            results[mode] = json.loads(done.stdout.strip().splitlines()[-1])
            r = results[mode]
            headline(
                BENCH,
                f"{size} {mode} steps/s ({args.device}, batch {args.batch_size} x {args.seconds:g} s)",
                r["steps_per_s"],
                "steps/s",
                note=f"trainable {r['trainable']:,} of {r['total']:,} parameters",
            )
            headline(BENCH, f"{size} {mode} peak memory ({args.device})", r["peak_bytes"] / 2**20, "MiB")
        headline(
            BENCH,
            f"{size} LoRA / full speed",
            results["lora"]["steps_per_s"] / results["full"]["steps_per_s"],
            "ratio",
        )
        headline(
            BENCH,
            f"{size} LoRA / full peak memory",
            results["lora"]["peak_bytes"] / results["full"]["peak_bytes"],
            "ratio",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
