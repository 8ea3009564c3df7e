"""Padding share of the trainer's batches: how much of each batch is padding rather than data.

    python bench/batch_padding.py [--batch-size 8] [--epochs 3] [--workspace DIR]

On the demo workspace (IndexTTS-1.5 codes manifest), the trainer's own sampler builds the batches of
``--epochs`` epochs. Each batch pads its text to the longest text, its codes to the longest codes and its
prompt mel to the longest prompt; the padding share is padded positions / all positions, per segment and
overall (prompt frames counted at the conformer's input). Printed beside it: the same items batched in a
random order (no length bucketing), the baseline the bucketing is measured against. Goal: <= 10 %.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from data_tools.config import load_config  # noqa: E402
from data_tools.text_tokenizer import TextTokenizer  # noqa: E402
from demo.workspace import build_demo  # noqa: E402
from trainer.data import load_items, train_sampler  # noqa: E402

GOAL = 0.10


def padding_share(batches: list[list[int]], segments: dict[str, list[int]]) -> dict[str, float]:
    """Padded share of each segment and of all positions together, over every batch."""
    shares: dict[str, float] = {}
    padded_total = positions_total = 0
    for name, lengths in segments.items():
        padded = positions = 0
        for batch in batches:
            longest = max(lengths[i] for i in batch)
            positions += longest * len(batch)
            padded += sum(longest - lengths[i] for i in batch)
        shares[name] = padded / positions if positions else 0.0
        padded_total += padded
        positions_total += positions
    shares["all"] = padded_total / positions_total if positions_total else 0.0
    return shares


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--workspace", type=Path, help="demo workspace to use (built there if missing)")
    args = parser.parse_args()
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-padding-") as tmp:
        ws = build_demo(args.workspace or Path(tmp) / "demo")
        config = load_config(ws.config)
        tokenizer = TextTokenizer(ws.extended_tokenizer)
        gpt = dict(config["gpt"], number_text_tokens=max(tokenizer.vocab_size, config["gpt"]["number_text_tokens"]))
        items, _ = load_items([ws.train_manifest], tokenizer, int(gpt["max_text_tokens"]),
                              int(gpt["max_mel_tokens"]), gpt=gpt)
        segments = {
            "text": [int(item.text_ids.size) for item in items],
            "codes": [item.num_codes for item in items],
            "prompt": [item.prompt_frames for item in items],
        }
    sampler = train_sampler(items, args.batch_size, args.seed)
    bucketed = [batch for epoch in range(args.epochs) for batch in sampler.batches(epoch)]
    order = list(range(len(items)))
    random.Random(args.seed).shuffle(order)
    unbucketed = [order[i:i + args.batch_size] for i in range(0, len(order) - args.batch_size + 1, args.batch_size)]
    ours, plain = padding_share(bucketed, segments), padding_share(unbucketed, segments)
    print(f"{len(items)} items, batch {args.batch_size}, {len(bucketed)} batches over {args.epochs} epoch(s)")
    print(f"{'segment':<8} {'trainer batches':>16} {'random batches':>15}")
    for name in ("text", "codes", "prompt", "all"):
        print(f"{name:<8} {ours[name]:>15.1%} {plain[name]:>15.1%}")
    headline("batch_padding", "padding share of batch positions (text + codes + prompt)", ours["all"] * 100, "%",
             f"<= {GOAL:.0%}", ours["all"] <= GOAL,
             f"random batches: {plain['all']:.0%}; codes {ours['codes']:.0%}, prompt {ours['prompt']:.0%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
