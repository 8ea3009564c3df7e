"""Transcription speed: clips/s of ``CtcAsr.transcribe`` in length-sorted batches against one clip at a time.

    python bench/transcription_speed.py [--clips 48] [--min-s 1] [--max-s 8] [--batch-size 8]
                                        [--hidden 64 --layers 2] [--repeats 3] [--device auto] [--threads 0]

A random wav2vec2 CTC model (the real convolution layout, 50 frames/s, at ``--hidden``/``--layers``) is
saved to a temp folder and loaded through ``load_ctc_asr``, as a user's model is. The same clips (random
durations between ``--min-s`` and ``--max-s``, at 16 kHz) are transcribed with ``--batch-size`` and with
batch size 1, in turn ``--repeats`` times, and the fastest run of each is kept (other processes only ever
add time). Both sides give the same transcripts (checked). Prints clips/s and the ratio batched / one at
a time. With this small model much of a call is fixed cost (feature extraction, Python, dispatching each
layer), which a batch pays once: on 2 busy CPU cores 24 clips of 1-8 s ran 2.4x faster in batches of 8.
A large model on a CPU is compute-bound and gains less; on a GPU, where one short clip leaves most of the
device idle, batching is where the throughput comes from.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from data_tools.asr import load_ctc_asr  # noqa: E402
from tests.speech_model_factory import SAMPLE_RATE, WAV2VEC2_CONV, build_ctc_model, noise_clips  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=48)
    parser.add_argument("--min-s", type=float, default=1.0)
    parser.add_argument("--max-s", type=float, default=8.0)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    durations = rng.uniform(args.min_s, args.max_s, args.clips).round(2).tolist()
    clips = noise_clips(durations, seed=1)
    audio_s = sum(durations)
    with tempfile.TemporaryDirectory(prefix="asr-bench-") as tmp:
        folder = build_ctc_model(Path(tmp) / "ctc", hidden=args.hidden, layers=args.layers, conv=WAV2VEC2_CONV)
        asr = load_ctc_asr(str(folder), device=args.device)
        asr.transcribe(clips[:2], SAMPLE_RATE)  # warm-up (first-call allocations)
        best = {"batched": float("inf"), "single": float("inf")}
        outputs = {}
        for _ in range(max(1, args.repeats)):
            for name, batch_size in (("batched", args.batch_size), ("single", 1)):
                start = time.perf_counter()
                outputs[name] = asr.transcribe(clips, SAMPLE_RATE, batch_size=batch_size)
                best[name] = min(best[name], time.perf_counter() - start)
    same_text = [t.text for t in outputs["batched"]] == [t.text for t in outputs["single"]]
    rate = {name: args.clips / seconds for name, seconds in best.items()}
    ratio = rate["batched"] / rate["single"]
    print(f"{args.clips} clips, {audio_s:.0f} s of audio ({args.min_s}-{args.max_s} s each); model hidden "
          f"{args.hidden} x {args.layers} layers on {asr.device}; torch threads {torch.get_num_threads()}")
    print(f"batch size {args.batch_size:<3}: {rate['batched']:8.1f} clips/s ({best['batched']:.2f} s, "
          f"{audio_s / best['batched']:.0f}x real time)")
    print(f"one at a time : {rate['single']:8.1f} clips/s ({best['single']:.2f} s, "
          f"{audio_s / best['single']:.0f}x real time)")
    print(f"ratio batched / one at a time: {ratio:.2f}; same transcripts: {same_text}")
    headline("transcription_speed", "CTC transcription, batched / one clip at a time, clips/s", ratio, "x",
             ">= 1", ratio >= 1.0 and same_text,
             f"{args.clips} clips of {args.min_s:g}-{args.max_s:g} s, batch {args.batch_size}, {asr.device}, "
             f"fastest of {max(1, args.repeats)}")
    return 0 if same_text else 1


if __name__ == "__main__":
    raise SystemExit(main())
