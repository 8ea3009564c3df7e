"""Training time lost to a checkpoint save: written in the background vs synchronously.

    python bench/checkpoint_stall.py [--dim 384] [--layers 8] [--steps 6] [--repeats 3]

One model (demo layout, widened so its checkpoint is tens of MB) and its AdamW state, as the trainer saves
them. Each round times ``--steps`` training steps right after a save, three ways, alternating:
no save at all (the baseline), a synchronous ``CheckpointManager.save`` (the loop waits for the whole
write), and the trainer's way: ``snapshot`` to host memory, ``BackgroundWriter.submit``, train on while
the file is written, then wait for the commit (as the next save would). The stall of a save is its round's
time minus the baseline's; the headline is background stall / synchronous stall (goal <= 0.3). On a
2-core machine the writer's thread competes with the training threads, which this counts too: a write's CPU
time (torch.save, the SHA-256 digest of every byte, the kernel's copy into the page cache) is taken from
training when training keeps every core busy. A second line gives the part the loop itself is held
(snapshot + hand-off) against the synchronous stall: what a run whose CPU is otherwise idle loses per save.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from generations.indextts15.demo.build import demo_config  # noqa: E402
from networks.unified_voice import build_model  # noqa: E402
from trainer import steps  # noqa: E402
from trainer.checkpoints import CheckpointManager  # noqa: E402
from trainer.checkpoints.writer import BackgroundWriter, snapshot  # noqa: E402

GOAL = 0.3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=6, help="training steps timed after each save")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=4)
    args = parser.parse_args()
    gpt = dict(demo_config(1000)["gpt"], model_dim=args.dim, layers=args.layers, heads=max(1, args.dim // 64))
    torch.manual_seed(0)
    model = build_model(gpt).train()
    device = torch.device("cpu")
    optimizer = steps.build_optimizer(model, 1e-4, 0.01, device)
    generator = torch.Generator().manual_seed(1)
    batch = {"text_ids": torch.randint(2, 1000, (args.batch_size, 24), generator=generator),
             "text_lengths": torch.full((args.batch_size,), 24),
             "codes": torch.randint(0, 8192, (args.batch_size, 80), generator=generator),
             "code_lengths": torch.full((args.batch_size,), 80),
             "cond_mels": torch.randn(args.batch_size, 100, 120, generator=generator) - 4,
             "cond_mel_lengths": torch.full((args.batch_size,), 120),
             "text_lengths_host": [24] * args.batch_size, "code_lengths_host": [80] * args.batch_size}

    def train(steps: int) -> None:
        for _ in range(steps):
            out = model(**batch)
            (0.2 * out.loss_text + 0.8 * out.loss_mel).backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

    def state(step: int) -> dict:
        return {"format_version": 2, "step": step, "model": dict(model.state_dict()), "optimizer": optimizer.state_dict()}

    train(2)  # warm-up: optimizer moments exist, kernels are loaded
    rounds: dict[str, list[float]] = {"none": [], "sync": [], "background": []}
    handoff: list[float] = []  # snapshot + submit: the only time the loop itself is held
    with tempfile.TemporaryDirectory(prefix="bench-stall-") as tmp:
        manager = CheckpointManager(Path(tmp), keep=2)
        writer = BackgroundWriter(manager)
        step = 0
        for _ in range(args.repeats):
            for way in rounds:
                step += 1
                started = time.perf_counter()
                if way == "sync":
                    manager.save(state(step), step)
                elif way == "background":
                    writer.submit(snapshot(state(step)), step, False)
                    handoff.append(time.perf_counter() - started)
                train(args.steps)
                if way == "background":
                    result = writer.wait()  # the next save waits for this one: counted if it is still writing
                    assert result is not None and result.error is None, result
                rounds[way].append(time.perf_counter() - started)
        size_mb = manager.latest_path.stat().st_size / 1e6
    base, sync, background = (statistics.median(rounds[w]) for w in ("none", "sync", "background"))
    sync_stall, background_stall = max(sync - base, 1e-9), max(background - base, 0.0)
    print(f"checkpoint {size_mb:.0f} MB ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters + "
          f"AdamW moments); {args.steps} steps after each save, median of {args.repeats} rounds")
    print(f"no save      {base:7.3f} s")
    print(f"synchronous  {sync:7.3f} s   stall {sync_stall:6.3f} s per save")
    print(f"background   {background:7.3f} s   stall {background_stall:6.3f} s per save "
          f"(of which snapshot + hand-off {statistics.median(handoff):.3f} s; the rest is the writer's thread "
          "competing with training for the CPU)")
    ratio = background_stall / sync_stall
    headline("checkpoint_stall", "training stall per save, background / synchronous", ratio, "x", f"<= {GOAL}",
             ratio <= GOAL, f"{size_mb:.0f} MB checkpoint, stall {background_stall:.2f} s vs {sync_stall:.2f} s; "
             f"snapshot + hand-off {statistics.median(handoff):.2f} s")
    # Where training leaves the CPU idle (a GPU run), the loop loses only the snapshot and hand-off: shown beside
    # the headline, which on a CPU-bound machine also counts the writer's CPU time taken from training.
    held = statistics.median(handoff) / sync_stall
    headline("checkpoint_stall", "loop held per save (snapshot + hand-off) / synchronous stall", held, "x",
             note="what a run whose CPU is otherwise idle (GPU training) loses per save")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
