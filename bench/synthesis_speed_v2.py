"""IndexTTS2 synthesis speed: KV-cached v2 generation vs recomputing the prefix, and the real-time factor.

    python bench/synthesis_speed_v2.py [--lengths 32 64 128 256] [--repeats 3] [--device cpu]
                                       [--dim 256 --layers 4] [--rtf-codes 100] [--rtf-steps 25 10] [--threads 1]

1. Codes per second of greedy generation with the KV cache (``generate_codes(use_cache=True)``) and without it
   (every step runs the whole sequence again), on a random IndexTTS2 GPT of ``--dim``/``--layers`` with v2's
   34-row conditioning block (32 speaker latents + the emotion vector, 2 speed rows) in front; its stop logit is
   pushed down, so every run makes exactly N codes. The two alternate ``--repeats`` times per length and the
   fastest run of each is compared: the cache should win by a factor that grows with N.
2. The real-time factor (seconds taken per second of audio) of the whole IndexTTS2 path at the demo size: the
   demo workspace's tiny download folder (random GPT 64-dim, w2v-BERT, codec, CAMPPlus, S2Mel, BigVGAN v2 of
   32 channels; built in a temporary folder), ``S2MelSynthesizer.synthesize_ids`` of ``--rtf-codes`` codes
   (greedy, stop pushed down) for each ``--rtf-steps`` S2Mel step count (25: inference's default; 10: samples
   at saves), split into the GPT (codes + latent pass), S2Mel (length regulator + CFM) and the vocoder, timed
   inside the same runs. Preparing the voice (w2v-BERT, codec, CAMPPlus, the prompt's mel) happens once per
   voice and is reported apart.

``--threads`` (default 1) and the fastest of ``--repeats``: see bench/synthesis_speed.py for why (one thread
measures the algorithm, not the scheduler of a shared machine; other processes only ever add time).
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from bench.synthesis_speed import sync, threads_text, timed  # noqa: E402
from generations.indextts2.demo.build import demo_config as demo_config_v2  # noqa: E402
from networks import indextts2  # noqa: E402
from trainer.synthesis import DecodeSettings, generate_codes  # noqa: E402

TEXT_TOKENS = 24
CONDITION_ROWS = 34  # 32 latents (+ emotion vector) and the 2 speed rows of UnifiedVoiceV2.build_conds


def random_gpt_v2(gpt: dict, device: torch.device, seed: int = 0) -> indextts2.UnifiedVoiceV2:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = indextts2.build_gpt(gpt)
    with torch.no_grad():
        model.mel_head.bias[model.stop_mel_token] = -1e4  # never stop: exactly max_codes codes
    return model.to(device).eval()


def bench_cache(args: argparse.Namespace, device: torch.device) -> None:
    longest = max(args.lengths)
    gpt = dict(demo_config_v2(1000)["gpt"])
    gpt.update(model_dim=args.dim, layers=args.layers, heads=max(1, args.dim // 64), max_mel_tokens=longest,
               max_text_tokens=max(TEXT_TOKENS, 32))
    model = random_gpt_v2(gpt, device)
    generator = torch.Generator().manual_seed(1)
    conds = torch.randn(1, CONDITION_ROWS, args.dim, generator=generator).to(device)
    text = torch.randint(2, 1000, (1, TEXT_TOKENS), generator=generator).to(device)
    print(f"IndexTTS2 KV cache vs full recompute: greedy, GPT dim {args.dim} x {args.layers} layers, prefix "
          f"{CONDITION_ROWS + TEXT_TOKENS + 3} positions, device {device}, {threads_text()}")
    print(f"{'codes':>6} {'cached codes/s':>15} {'recompute codes/s':>18} {'speed-up':>9}")
    speedups: list[float] = []
    for length in args.lengths:
        settings = DecodeSettings(mode="greedy", repetition_penalty=10.0, max_codes=length)
        generate_codes(model, conds, text, settings)  # warm-up
        cached, full = [], []
        for _ in range(args.repeats):  # alternated, so slow drift in the background load hits both sides
            cached.append(timed(lambda s=settings: generate_codes(model, conds, text, s, use_cache=True), device))
            full.append(timed(lambda s=settings: generate_codes(model, conds, text, s, use_cache=False), device))
        c, f = min(cached), min(full)
        print(f"{length:>6} {length / c:>15.1f} {length / f:>18.1f} {f / c:>8.2f}x")
        speedups.append(f / c)
    grows = all(b > a for a, b in itertools.pairwise(speedups))
    headline("synthesis_speed_v2", f"IndexTTS2 KV cache speed-up at {longest} codes", speedups[-1], "x",
             "grows with length", grows,
             "speed-ups " + ", ".join(f"{s:.1f}x" for s in speedups) + f" at {', '.join(map(str, args.lengths))} codes, "
             + threads_text())


class StageClock:
    """Seconds spent in S2Mel's ``infer`` and the vocoder's forward, accumulated while a synthesis runs."""

    def __init__(self, nets, device: torch.device) -> None:
        self.device = device
        self.s2mel = 0.0
        self.vocoder = 0.0
        infer = nets.s2mel.infer

        def timed_infer(*a, **k):
            sync(device)
            started = time.perf_counter()
            out = infer(*a, **k)
            sync(device)
            self.s2mel += time.perf_counter() - started
            return out

        nets.s2mel.infer = timed_infer  # this bench's instance only
        self._vocoder_started = 0.0
        nets.vocoder.register_forward_pre_hook(lambda *_: self._start_vocoder())
        nets.vocoder.register_forward_hook(lambda *_: self._stop_vocoder())

    def _start_vocoder(self) -> None:
        sync(self.device)
        self._vocoder_started = time.perf_counter()

    def _stop_vocoder(self) -> None:
        sync(self.device)
        self.vocoder += time.perf_counter() - self._vocoder_started

    def reset(self) -> None:
        self.s2mel = self.vocoder = 0.0


def bench_rtf(args: argparse.Namespace, device: torch.device) -> None:
    from demo.workspace import build_demo
    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer
    from trainer.synthesis.s2mel_types import MelSettings

    scratch = Path(tempfile.mkdtemp(prefix="synthesis_v2_bench_"))
    try:
        demo = DemoV2Paths.under(build_demo(scratch / "workspace").root)
        synth = S2MelSynthesizer.load(demo.config.parent, local_files_only=True, device=device)
        with torch.no_grad():
            synth.model.mel_head.bias[synth.model.stop_mel_token] = -1e4  # exactly --rtf-codes codes
        voice_file = sorted((demo.train_manifest.parent / "wavs").glob("*.wav"))[0]
        voice = synth.prepare_voice(voice_file)
        voice_seconds = min(timed(lambda: synth.prepare_voice(voice_file), device) for _ in range(args.repeats))
        emotion = synth.emotion_vector(voice)
        clock = StageClock(synth.nets, device)
        settings = DecodeSettings(mode="greedy", max_codes=args.rtf_codes)
        ids = [list(range(2, 2 + TEXT_TOKENS))]
        rows = []
        for steps in args.rtf_steps:
            mel = MelSettings(steps=steps)
            synth.synthesize_ids(ids, voice, None, settings, mel, emotion_vector=emotion)  # warm-up
            runs = []
            for _ in range(args.repeats):
                clock.reset()
                result = synth.synthesize_ids(ids, voice, None, settings, mel, emotion_vector=emotion)
                runs.append((result.seconds, clock.s2mel, clock.vocoder, result.audio_seconds))
            rows.append((steps, min(runs)))  # the fastest whole run, with its own split
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    audio = rows[0][1][3]
    print(f"\nIndexTTS2 whole path at the demo size (greedy, {args.rtf_codes} codes = {audio:.2f} s of audio at "
          f"22050 Hz, device {device}, {threads_text()}; the voice prepared in {voice_seconds:.3f} s, once per voice)")
    print(f"{'S2Mel steps':>11} {'total s':>8} {'RTF':>7} {'GPT':>7} {'S2Mel':>7} {'vocoder':>8}")
    for steps, (total, s2mel, vocoder, _audio) in rows:
        gpt = total - s2mel - vocoder
        print(f"{steps:>11} {total:>8.3f} {total / audio:>7.3f} {gpt / total:>7.1%} {s2mel / total:>7.1%} "
              f"{vocoder / total:>8.1%}")
    steps, (total, s2mel, vocoder, _audio) = rows[0]
    others = ", ".join(f"RTF {t / audio:.3f} at {s} steps" for s, (t, *_rest) in rows[1:])
    headline("synthesis_speed_v2", f"IndexTTS2 real-time factor of the whole path (demo size, {steps} S2Mel steps)",
             total / audio, "x", "", None,
             f"GPT {(total - s2mel - vocoder) / total:.0%}, S2Mel {s2mel / total:.0%}, vocoder {vocoder / total:.0%}; "
             + (others + "; " if others else "") + f"greedy, {args.rtf_codes} codes, {device}, {threads_text()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rtf-codes", type=int, default=100, help="codes for the real-time factor (max 128)")
    parser.add_argument("--rtf-steps", type=int, nargs="+", default=[25, 10],
                        help="S2Mel flow-matching steps to time (the first is the headline)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (0: torch's default); see bench/synthesis_speed.py for why 1")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    bench_cache(args, device)
    bench_rtf(args, device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
