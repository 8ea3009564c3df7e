"""IndexTTS2 data preparation against the bare model calls it makes: utterances/s, side by side in one run.

    .venv/bin/python bench/prepare_v2_speed.py [--utterances 48] [--width 256] [--device auto] [--repeats 2]

Builds random models in a temp folder (a w2v-BERT of ``--width`` channels and 17 layers saved as a local
folder, its stats, a semantic codec and an IndexTTS2 GPT reading that width) and ``--utterances`` synthetic
utterances of 1 to ``--max-seconds`` seconds, then times, in turn:

- **prepare**: ``data_tools.prepare_v2`` end to end on the audio folder (decode, resample, features in loader
  threads; batching; the models; writing four .npy per utterance; the done log), counted from the first batch
  to the last commit (model loading is a one-time cost and left out: it is printed apart);
- **bare**: the model calls it makes (padding a batch, w2v-BERT + stats, codec, conditioning and emotion
  vector), timed inside that same run (``model_s`` of its report): same process, same moment, same batches.

Prints both rates and prepare / bare (goal >= 0.8: batching and I/O cost little), the median of ``--repeats``
runs. With ``--separate-loop``, a loop of the same calls on the same batches is timed as well and printed
for reference only: on a CPU shared with other processes it measured 2-10x slower than the same calls inside
the run (the run's idle loader threads change how this process is scheduled; the cause is not pinned down),
so it is no fair baseline there. On a CPU the loader threads also compete with the models for the cores, so
the ratio is a floor; on a GPU they overlap.
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
from data_tools.batch_prep import Planned, plan_batches
from data_tools.config import load_config, save_config
from data_tools.paired_prep import pad_features, resolve_device
from data_tools.preprocess_inputs import read_inputs
from data_tools.tokenizer import train_tokenizer
from demo.feature_kit import write_feature_kit
from demo.voices import synthetic_voice
from generations.indextts2.data.prepare import ItemPreparer, prepare
from generations.indextts2.data.prepare_models import load_models, run_models
from generations.indextts2.demo.build import demo_config as demo_config_v2
from networks import indextts2

WORDS = ("ሰላም", "ኢትዮጵያ", "አዲስ", "አበባ", "ቋንቋ", "መጽሐፍ", "ትምህርት", "ቤት", "ውሃ", "ዛሬ", "ነገ", "ጥሩ")


def build(root: Path, utterances: int, width: int, max_seconds: float) -> dict[str, Path]:
    corpus = root / "corpus.txt"
    rng = np.random.default_rng(0)
    corpus.write_text("\n".join(" ".join(rng.choice(WORDS, size=6)) for _ in range(400)) + "\n", encoding="utf-8")
    tokenizer = train_tokenizer([corpus], root / "tok", vocab_size=90, model_type="bpe", language="am")
    kit = write_feature_kit(root / "models", seed=0, semantic_dim=width)
    config = demo_config_v2(number_text_tokens=90)
    config["gpt"].update(semantic_dim=width, emo_perceiver_dim=width, max_mel_tokens=int(max_seconds * 50) + 10)
    config["semantic_codec"]["hidden_size"] = width
    config_path = root / "models" / "config.yaml"
    save_config(config, config_path)
    torch.manual_seed(0)
    gpt = indextts2.build_gpt(config["gpt"])
    torch.save({"model": gpt.state_dict()}, root / "models" / "gpt.pth")
    audio = root / "audio"
    for k in range(utterances):
        speaker = f"spk{k % 4}"
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(2, 8))))
        seconds = float(rng.uniform(1.0, max_seconds))
        (audio / speaker).mkdir(parents=True, exist_ok=True)
        soundfile.write(str(audio / speaker / f"{k:04d}.wav"), synthetic_voice(speaker, text, seconds), 24000)
        (audio / speaker / f"{k:04d}.txt").write_text(text + "\n", encoding="utf-8")
    return {"config": config_path, "gpt": root / "models" / "gpt.pth", "codec": kit.codec,
            "w2v": kit.w2v_bert, "stats": kit.w2v_stats, "tokenizer": tokenizer, "audio": audio}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=int, default=48)
    parser.add_argument("--width", type=int, default=256, help="w2v-BERT / semantic width (real: 1024)")
    parser.add_argument("--max-seconds", type=float, default=6.0)
    parser.add_argument("--batch-seconds", type=float, default=60.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--separate-loop", action="store_true",
                        help="also time the model calls in a loop of their own (for reference; see above)")
    args = parser.parse_args()
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory(prefix="prep-v2-bench-") as tmp:
        root = Path(tmp)
        files = build(root, args.utterances, args.width, args.max_seconds)
        options = {"codec": files["codec"], "gpt": files["gpt"], "w2v_bert": str(files["w2v"]),
                   "w2v_stats": files["stats"], "tokenizer": files["tokenizer"], "language": "am",
                   "device": str(device), "batch_seconds": args.batch_seconds, "max_batch_items": 64}
        start = time.perf_counter()
        models = load_models(load_config(files["config"]), gpt=files["gpt"], codec=files["codec"],
                             w2v_bert=str(files["w2v"]), w2v_stats=files["stats"], tokenizer=files["tokenizer"],
                             device=device)
        load_s = time.perf_counter() - start
        preparer = ItemPreparer(models=models, fingerprint="bench", min_duration=0.0, max_duration=1e9)
        items, _ = read_inputs(files["audio"])
        loaded = {item.stem: preparer.load(item) for item in items}
        planned = [Planned(item, soundfile.info(str(item.audio)).duration) for item in items]
        batches = [[loaded[p.item.stem] for p in batch]
                   for batch in plan_batches(planned, args.batch_seconds, options["max_batch_items"])]

        def bare() -> float:
            tick = time.perf_counter()
            for batch in batches:
                run_models(models, *pad_features(models.extractor, [(x.features, x.frames) for x in batch]))
            if device.type == "cuda":
                torch.cuda.synchronize()
            return len(items) / (time.perf_counter() - tick)

        rates: dict[str, list[float]] = {"separate loop": [], "bare": [], "prepare": []}
        if args.separate_loop:
            bare()  # warm-up (allocator, kernels)
        for k in range(max(1, args.repeats)):
            if args.separate_loop:
                rates["separate loop"].append(bare())
            report = prepare(files["audio"], root / f"out{k}", files["config"], **options)
            assert report.new == len(items) and not report.skipped, report.summary()
            rates["prepare"].append(report.utterances_per_s)
            rates["bare"].append(report.new / report.model_s)
    bare_rate, prep_rate = (statistics.median(rates[name]) for name in ("bare", "prepare"))
    ratio = prep_rate / bare_rate
    print(f"{len(items)} utterances, {len(batches)} batches, width {args.width}, device {device}; "
          f"model loading {load_s:.1f} s (once)")
    print(f"bare model calls (in the run): {bare_rate:.2f} utt/s; prepare_v2: {prep_rate:.2f} utt/s (samples: "
          + ", ".join(f"{name} {[round(r, 2) for r in values]}" for name, values in rates.items() if values) + ")")
    headline("prepare_v2_speed", "IndexTTS2 preparation / bare model calls, utterances/s", ratio, "x",
             goal=">= 0.8", met=ratio >= 0.8,
             note=f"({len(items)} utterances of 1-{args.max_seconds:g} s, width {args.width}, {device}; "
                  f"{prep_rate:.2f} vs {bare_rate:.2f} utt/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
