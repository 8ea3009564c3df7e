"""IndexTTS-2.5 data preparation against the bare model calls it makes: utterances/s, side by side in one run.

    .venv/bin/python bench/prepare_v25_speed.py [--utterances 48] [--width 256] [--device auto] [--repeats 2]

Builds random 2.5 preparation networks in a temp folder (``generations.indextts25.demo.prep_kit``: a w2v-BERT of
``--width`` channels and 17 layers, its stats, the 2.5 codec, a small CAM++ and a 2.5 GPT reading that width)
and ``--utterances`` synthetic utterances of 1 to ``--max-seconds`` seconds, then times, in turn:

- **prepare**: ``data_tools.prepare_v25`` end to end on the audio folder (decode, resample, features and text
  ids in loader threads; batching; the models; writing four .npy per utterance; the done log), counted from
  the first batch to the last commit (model loading is a one-time cost and left out: it is printed apart);
- **bare**: the model calls it makes (padding a batch, w2v-BERT + stats, codec, emotion vector, CAM++ per
  item), timed inside that same run (``model_s`` of its report): same process, same moment, same batches.

Prints both rates and prepare / bare (goal >= 0.8: batching and I/O cost little), the median of ``--repeats``
runs. As for ``bench/prepare_v2_speed.py``: on a CPU the loader threads compete with the models for the cores,
so the ratio is a floor; on a GPU they overlap.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import soundfile
import torch

from bench.report import headline
from data_tools.config import load_config
from data_tools.paired_prep import resolve_device
from demo.voices import synthetic_voice
from generations.indextts25.data.prepare import prepare
from generations.indextts25.data.prepare_models import load_models
from generations.indextts25.data.text_table import DEFAULT_TABLE
from generations.indextts25.demo.prep_kit import write_prep_kit

WORDS = ("ሰላም", "ኢትዮጵያ", "አዲስ", "አበባ", "ቋንቋ", "መጽሐፍ", "ትምህርት", "ቤት", "ውሃ", "ዛሬ", "ነገ", "ጥሩ")


def build(root: Path, utterances: int, width: int, max_seconds: float) -> tuple[object, Path]:
    kit = write_prep_kit(root / "models", seed=0, width=width, max_mel_tokens=int(max_seconds * 25) + 10)
    rng = np.random.default_rng(0)
    audio = root / "audio"
    for k in range(utterances):
        speaker = f"spk{k % 4}"
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(2, 8))))
        seconds = float(rng.uniform(1.0, max_seconds))
        (audio / speaker).mkdir(parents=True, exist_ok=True)
        soundfile.write(str(audio / speaker / f"{k:04d}.wav"), synthetic_voice(speaker, text, seconds), 24000)
        (audio / speaker / f"{k:04d}.txt").write_text(text + "\n", encoding="utf-8")
    return kit, audio


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=48)
    parser.add_argument("--width", type=int, default=256, help="w2v-BERT / semantic width (real: 1024)")
    parser.add_argument("--max-seconds", type=float, default=6.0)
    parser.add_argument("--batch-seconds", type=float, default=60.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory(prefix="prep-v25-bench-") as tmp:
        root = Path(tmp)
        kit, audio = build(root, args.utterances, args.width, args.max_seconds)
        start = time.perf_counter()
        load_models(load_config(kit.config), gpt=kit.gpt, codec=kit.codec, campplus=kit.campplus,
                    w2v_bert=str(kit.w2v_bert), w2v_stats=kit.w2v_stats, table=DEFAULT_TABLE,
                    text_scheme="merges", text_merges=None, device=device)
        load_s = time.perf_counter() - start
        rates: dict[str, list[float]] = {"bare": [], "prepare": []}
        batches = 0
        for k in range(max(1, args.repeats)):
            report = prepare(audio, root / f"out{k}", kit.config, w2v_bert=str(kit.w2v_bert), language="am",
                             device=str(device), batch_seconds=args.batch_seconds, max_batch_items=64)
            assert report.new == args.utterances and not report.skipped, report.summary()
            rates["prepare"].append(report.utterances_per_s)
            rates["bare"].append(report.new / report.model_s)
            batches = report.batches
        if device.type == "cuda":
            torch.cuda.synchronize()
    bare_rate, prep_rate = (statistics.median(rates[name]) for name in ("bare", "prepare"))
    ratio = prep_rate / bare_rate
    print(f"{args.utterances} utterances, {batches} batches, width {args.width}, device {device}; "
          f"model loading {load_s:.1f} s (once)")
    print(f"bare model calls (in the run): {bare_rate:.2f} utt/s; prepare_v25: {prep_rate:.2f} utt/s (samples: "
          + ", ".join(f"{name} {[round(r, 2) for r in values]}" for name, values in rates.items()) + ")")
    headline("prepare_v25_speed", "IndexTTS-2.5 preparation / bare model calls, utterances/s", ratio, "x",
             goal=">= 0.8", met=ratio >= 0.8,
             note=f"({args.utterances} utterances of 1-{args.max_seconds:g} s, width {args.width}, {device}; "
                  f"{prep_rate:.2f} vs {bare_rate:.2f} utt/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
