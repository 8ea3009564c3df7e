"""Trainer throughput vs a bare forward/backward/step loop on the same model and batches.

    python bench/train_throughput.py [--steps 60] [--repeats 3] [--batch-size 8] [--device auto] [--amp off]

Builds (or reuses) the demo workspace, runs ``python -m trainer.train`` in this process for ``--steps``
optimizer steps (no validation, no saves until the end), and reads its tokens/s from metrics.jsonl (the
first log window, which holds the start-up, is skipped). Then runs a bare loop over the very same
batches, pre-collated in memory, with the same model, optimizer, clipping and AMP setting, and prints
both rates and their ratio. The two alternate ``--repeats`` times and the medians are compared, so
a busy machine skews both alike. Goal: ratio >= 0.95.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from data_tools.config import load_config  # noqa: E402
from data_tools.text_tokenizer import TextTokenizer  # noqa: E402
from trainer import loop  # noqa: E402
from trainer.data import BucketBatchSampler, CodesDataset, Collator, load_items  # noqa: E402
from trainer.demo import build_demo  # noqa: E402
from trainer.model import build_model, load_gpt_state_dict  # noqa: E402
from trainer.model_source import from_base_checkpoint  # noqa: E402
from trainer.train import main as trainer_main  # noqa: E402

LOG_EVERY = 10


def trainer_rate(ws, out: Path, args: argparse.Namespace) -> float:
    argv = ws.train_argv(max_steps=args.steps)
    argv[argv.index("--output-dir") + 1] = str(out)
    argv += ["--batch-size", str(args.batch_size), "--device", args.device, "--amp", args.amp,
             "--log-interval", str(LOG_EVERY), "--val-interval", str(10 * args.steps),
             "--save-interval", str(10 * args.steps), "--num-workers", str(args.num_workers), "--warmup-steps", "5"]
    code = trainer_main(argv)
    if code != 0:
        raise SystemExit(f"trainer exited {code}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    rates = [row["tokens_per_s"] for row in rows if row["event"] == "train"][1:]
    return statistics.mean(rates)


def bare_rate(ws, args: argparse.Namespace) -> float:
    """The same work with nothing around it: batches already in memory, no logging, no metrics."""
    config = load_config(ws.config)
    tokenizer = TextTokenizer(ws.extended_tokenizer)
    start = from_base_checkpoint(ws.base_checkpoint, config["gpt"], ws.config, config, tokenizer)
    device = loop.resolve_device(args.device)
    torch.manual_seed(0)
    model = build_model(start.gpt_config)
    load_gpt_state_dict(model, start.state_dict)
    model.to(device).train()
    gpt = start.gpt_config
    items, _ = load_items([ws.train_manifest], tokenizer, int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]))
    dataset = CodesDataset(items, int(gpt["start_mel_token"]))
    collate = Collator(int(gpt["stop_text_token"]), int(gpt["stop_mel_token"]))
    sampler = BucketBatchSampler(dataset.lengths(), args.batch_size, seed=1234)  # the trainer's default seed
    order: list[list[int]] = []
    epoch = 0
    while len(order) < args.steps:  # the trainer's batches, epoch after epoch
        order += sampler.batches(epoch)
        epoch += 1
    batches = [loop.to_device(collate([dataset[i] for i in batch]), device) for batch in order[: args.steps]]
    optimizer = loop.build_optimizer(model, 3e-3, 0.01, device)
    scaler = loop.make_scaler(args.amp, device)
    weights = loop.LossWeights(0.2, 0.8)
    tokens, started = 0, 0.0
    for index, batch in enumerate(batches):
        if index == LOG_EVERY:  # skip the same warm-up window as for the trainer
            if device.type == "cuda":
                torch.cuda.synchronize()
            tokens, started = 0, time.perf_counter()
        with loop.autocast(device, args.amp):
            out = model(**loop.model_inputs(batch), loss_mode="masked")
        loss = weights.text * out.loss_text + weights.mel * out.loss_mel
        (scaler.scale(loss) if scaler else loss).backward()
        loop.optimizer_step(model, optimizer, scaler, 1.0)
        tokens += batch["num_tokens"]
    if device.type == "cuda":
        torch.cuda.synchronize()
    return tokens / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--amp", default="off", choices=("off", "bf16", "fp16"))
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--workspace", type=Path, help="demo workspace to use (built there if missing)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as tmp:
        ws = build_demo(args.workspace or Path(tmp) / "demo")
        trainer_runs, bare_runs = [], []
        for index in range(args.repeats):
            trainer_runs.append(trainer_rate(ws, Path(tmp) / f"run{index}", args))
            bare_runs.append(bare_rate(ws, args))
    trainer, bare = statistics.median(trainer_runs), statistics.median(bare_runs)
    print(f"trainer   {trainer:12,.0f} tokens/s  (runs: {', '.join(f'{r:,.0f}' for r in trainer_runs)})")
    print(f"bare loop {bare:12,.0f} tokens/s  (runs: {', '.join(f'{r:,.0f}' for r in bare_runs)})")
    print(f"ratio     {trainer / bare:12.3f}  (goal >= 0.95)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
