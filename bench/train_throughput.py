"""Trainer throughput vs a bare forward/backward/step loop on the same model and batches.

    python bench/train_throughput.py [--steps 60] [--repeats 7] [--batch-size 8] [--device auto] [--amp off]

Builds (or reuses) the demo workspace and alternates, ``--repeats`` times:

- the trainer: ``python -m trainer.train`` in this process for ``--steps`` optimizer steps (validation
  and saves only after the last step). Its rate is wall-clock time between its train events at step
  ``LOG_EVERY`` and at the last step (the ``time`` field of metrics.jsonl), so everything the trainer does
  in between counts: data loading, the frozen-row restore, the schedule, logging, epoch changes.
  Start-up and the first ``LOG_EVERY`` steps are left out on both sides.
- the bare loop: the very same batches, collated in memory beforehand, through the same model,
  optimizer, learning-rate schedule, loss weights, loss mode, gradient clipping and AMP setting.

Both count the same tokens (the unpadded tokens of steps ``LOG_EVERY + 1`` .. ``--steps``). The two
alternate, so slow drifts in the machine's speed reach both alike. On a shared machine single runs
scatter by +-10%, so the headline is the ratio of the two medians; the ratio of the best runs (the
least disturbed ones) is printed beside it. Goal: ratio >= 0.95.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from data_tools.config import load_config  # noqa: E402
from data_tools.text_tokenizer import TextTokenizer  # noqa: E402
from demo.workspace import build_demo  # noqa: E402
from generations.indextts15.demo.build import DemoPaths  # noqa: E402
from networks.unified_voice import build_model, load_gpt_state_dict  # noqa: E402
from trainer import steps  # noqa: E402
from trainer.data import load_items, make_dataset, train_sampler  # noqa: E402
from trainer.model_source import ModelStart, from_base_checkpoint  # noqa: E402
from trainer.schedule import build_scheduler  # noqa: E402
from trainer.train import main as trainer_main  # noqa: E402

LOG_EVERY = 10
# The training recipe both sides use (the trainer gets them as flags, the bare loop directly).
SEED = 1234
LEARNING_RATE = 3e-3
WEIGHT_DECAY = 0.01
WARMUP_STEPS = 5
GRAD_CLIP = 1.0
TEXT_WEIGHT, MEL_WEIGHT = 0.2, 0.8
LOSS_MODE = "masked"


def planned_batches(ws: DemoPaths, batch_size: int, steps: int) -> tuple[list[dict], ModelStart]:
    """The trainer's first ``steps`` batches (epoch after epoch), collated, and the model to start from."""
    config = load_config(ws.config)
    tokenizer = TextTokenizer(ws.extended_tokenizer)
    start = from_base_checkpoint(ws.base_checkpoint, config["gpt"], ws.config, config, tokenizer)
    gpt = start.gpt_config
    items, _ = load_items([ws.train_manifest], tokenizer, int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]),
                          gpt=gpt)
    dataset = make_dataset(items, gpt, tokenizer.vocab_size)
    collate = dataset.collate
    sampler = train_sampler(items, batch_size, seed=SEED)
    order: list[list[int]] = []
    epoch = 0
    while len(order) < steps:
        order += sampler.batches(epoch)
        epoch += 1
    return [collate([dataset[i] for i in batch]) for batch in order[:steps]], start


def trainer_rate(ws: DemoPaths, out: Path, args: argparse.Namespace, timed_tokens: int) -> float:
    argv = ws.train_argv(max_steps=args.steps)
    argv[argv.index("--output-dir") + 1] = str(out)
    argv += ["--batch-size", str(args.batch_size), "--device", args.device, "--amp", args.amp,
             "--seed", str(SEED), "--learning-rate", str(LEARNING_RATE), "--weight-decay", str(WEIGHT_DECAY),
             "--warmup-steps", str(WARMUP_STEPS), "--grad-clip", str(GRAD_CLIP),
             "--text-loss-weight", str(TEXT_WEIGHT), "--mel-loss-weight", str(MEL_WEIGHT), "--loss-mode", LOSS_MODE,
             "--log-interval", str(LOG_EVERY), "--val-interval", str(10 * args.steps),
             "--save-interval", str(10 * args.steps), "--num-workers", str(args.num_workers)]
    with contextlib.redirect_stdout(io.StringIO()):
        code = trainer_main(argv)
    if code != 0:
        raise SystemExit(f"trainer exited {code}")
    gc.collect()  # its DataLoader workers end here, not during the bare loop
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    times = {row["step"]: row["time"] for row in rows if row["event"] == "train"}
    return timed_tokens / (times[args.steps] - times[LOG_EVERY])


def bare_rate(batches: list[dict], start: ModelStart, args: argparse.Namespace, timed_tokens: int) -> float:
    """The same training work with nothing around it: batches already in memory, no logging, no metrics."""
    device = steps.resolve_device(args.device)
    model = build_model(start.gpt_config)
    load_gpt_state_dict(model, start.state_dict)
    model.to(device).train()
    batches = [steps.to_device(batch, device) for batch in batches]
    optimizer = steps.build_optimizer(model, LEARNING_RATE, WEIGHT_DECAY, device)
    scheduler = build_scheduler(optimizer, WARMUP_STEPS, args.steps)
    scaler = steps.make_scaler(args.amp, device)
    torch.manual_seed(SEED)
    started = 0.0
    for index, batch in enumerate(batches):
        if index == LOG_EVERY:  # the trainer's first log window is left out too
            if device.type == "cuda":
                torch.cuda.synchronize()
            started = time.perf_counter()
        with steps.autocast(device, args.amp):
            out = model(**steps.model_inputs(batch), loss_mode=LOSS_MODE)
        loss = TEXT_WEIGHT * out.loss_text + MEL_WEIGHT * out.loss_mel
        (scaler.scale(loss) if scaler else loss).backward()
        steps.optimizer_step(model, optimizer, scaler, GRAD_CLIP, loss)
        scheduler.step()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return timed_tokens / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--amp", default="off", choices=("off", "bf16", "fp16"))
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--workspace", type=Path, help="demo workspace to use (built there if missing)")
    args = parser.parse_args()
    if args.steps < 2 * LOG_EVERY or args.steps % LOG_EVERY:
        parser.error(f"--steps must be a multiple of {LOG_EVERY}, at least {2 * LOG_EVERY}")
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        ws = build_demo(args.workspace or Path(tmp) / "demo")
        batches, start = planned_batches(ws, args.batch_size, args.steps)
        timed_tokens = sum(batch["num_tokens"] for batch in batches[LOG_EVERY:])
        trainer_runs, bare_runs = [], []
        for index in range(args.repeats):
            if index % 2:  # which goes first alternates too
                bare_runs.append(bare_rate(batches, start, args, timed_tokens))
            trainer_runs.append(trainer_rate(ws, Path(tmp) / f"run{index}", args, timed_tokens))
            if not index % 2:
                bare_runs.append(bare_rate(batches, start, args, timed_tokens))
            print(f"repeat {index + 1}/{args.repeats}: trainer {trainer_runs[-1]:,.0f}, bare {bare_runs[-1]:,.0f} "
                  "tokens/s", file=sys.stderr, flush=True)
    trainer, bare = statistics.median(trainer_runs), statistics.median(bare_runs)
    print(f"trainer   {trainer:12,.0f} tokens/s  (median; runs: {', '.join(f'{r:,.0f}' for r in trainer_runs)})")
    print(f"bare loop {bare:12,.0f} tokens/s  (median; runs: {', '.join(f'{r:,.0f}' for r in bare_runs)})")
    print(f"ratio     {trainer / bare:12.3f}  (of the medians; of the best runs: "
          f"{max(trainer_runs) / max(bare_runs):.3f}); goal >= 0.95")
    headline("train_throughput", "trainer / bare loop tokens/s", trainer / bare, "x", ">= 0.95", trainer / bare >= 0.95,
             f"{args.steps} steps x {args.repeats} repeats, batch {args.batch_size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
