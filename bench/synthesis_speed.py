"""Synthesis speed: KV-cached generation vs recomputing the whole prefix, and the real-time factor.

    python bench/synthesis_speed.py [--lengths 32 64 128 256] [--repeats 3] [--device cpu] [--dim 256 --layers 4]
                                    [--threads 1]

1. Codes per second of greedy generation with the KV cache (``generate_codes(use_cache=True)``) and
   without it (every step runs the whole sequence again), on a random GPT of ``--dim``/``--layers`` (its
   stop logit is pushed down, so every run makes exactly N codes). The two alternate ``--repeats`` times
   per length and the fastest run of each is compared: the cache should win by a factor that grows with N
   (each uncached step costs O(prefix + N), a cached one O(1) in the sequence length, up to attention reads).
2. The real-time factor (seconds taken per second of audio) of the whole path at the demo size: the demo
   GPT (random, 64-dim) and the demo vocoder, ``Synthesizer.synthesize_ids`` with ``--rtf-codes`` codes,
   split into generation and the rest (latent + BigVGAN), measured side by side.

How it is measured, and why:

- ``--threads`` (default 1) sets torch's intra-op threads on CPU; 0 keeps torch's default (one per core).
  A cached step is ~20 small ops (GEMVs, layer norms, one attention read), and with several threads each
  op ends in a thread barrier. On a shared machine (these benches run on 2 cores beside other jobs) a
  barrier waits for whichever thread the OS has descheduled, so a step's time becomes mostly scheduling
  luck, added in equal measure to both sides and flattening their ratio. Measured side by side under a
  load of ~6 on 2 cores (dim 256 x 4, 32/128/256 codes): 1 thread gave cached 197-227 codes/s and
  speed-ups 3.0x/4.7x/4.9x and 3.2x/4.4x/6.2x; 2 threads gave cached 24-47 codes/s (5-9x slower, in
  absolute terms) and speed-ups 3.9x/4.2x/3.5x and 3.4x/5.4x/6.7x. One thread measures the algorithm,
  not the scheduler; on a quiet dedicated machine pass ``--threads 0`` for its best throughput.
- The fastest of the ``--repeats`` runs is reported (as ``timeit`` advises): other processes only ever
  add time, and with 2 repeats a median is just the mean, which one disturbed run drags.
"""

from __future__ import annotations

import argparse
import itertools
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from generations.indextts15.demo.build import demo_config  # noqa: E402
from networks.unified_voice import build_model  # noqa: E402
from trainer.synthesis import DecodeSettings, Synthesizer, generate_codes  # noqa: E402
from trainer.synthesis.demo_vocoder import build_demo_vocoder, demo_bigvgan_config  # noqa: E402

TEXT_TOKENS = 24
COND_FRAMES = 300


def gpt_config(dim: int, layers: int, max_codes: int) -> dict:
    gpt = dict(demo_config(1000)["gpt"])
    gpt.update(model_dim=dim, layers=layers, heads=max(1, dim // 64), max_mel_tokens=max_codes,
               max_text_tokens=max(TEXT_TOKENS, 32), condition_num_latent=32)
    return gpt


def random_gpt(gpt: dict, device: torch.device, seed: int = 0) -> torch.nn.Module:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(gpt)
    with torch.no_grad():
        model.mel_head.bias[model.stop_mel_token] = -1e4  # never stop: exactly max_codes codes
    return model.to(device).eval()


def threads_text() -> str:
    threads = torch.get_num_threads()
    return f"{threads} thread{'s' if threads > 1 else ''}"


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device: torch.device) -> float:
    sync(device)
    started = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - started


def bench_cache(args: argparse.Namespace, device: torch.device) -> None:
    longest = max(args.lengths)
    model = random_gpt(gpt_config(args.dim, args.layers, longest), device)
    generator = torch.Generator().manual_seed(1)
    mel = (torch.randn(1, 100, COND_FRAMES, generator=generator) - 4).to(device)
    text = torch.randint(2, 1000, (1, TEXT_TOKENS), generator=generator).to(device)
    with torch.no_grad():
        conds = model.get_conditioning(mel, torch.tensor([COND_FRAMES], device=device))
    print(f"KV cache vs full recompute: greedy, GPT dim {args.dim} x {args.layers} layers, "
          f"prefix {conds.size(1) + TEXT_TOKENS + 3} positions, device {device}, {threads_text()}")
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
    headline("synthesis_speed", f"KV cache speed-up at {longest} codes", speedups[-1], "x",
             "grows with length", grows,
             "speed-ups " + ", ".join(f"{s:.1f}x" for s in speedups) + f" at {', '.join(map(str, args.lengths))} codes, "
             + threads_text())


def bench_rtf(args: argparse.Namespace, device: torch.device) -> None:
    config = demo_config(1000)
    model = random_gpt(config["gpt"], device)
    vocoder = build_demo_vocoder(demo_bigvgan_config(config["gpt"]["model_dim"])).to(device)
    synth = Synthesizer(model, vocoder)
    mel = torch.randn(100, COND_FRAMES, generator=torch.Generator().manual_seed(2)) - 4
    reference = synth.prepare_reference(mel)
    settings = DecodeSettings(mode=args.rtf_decode, max_codes=args.rtf_codes)
    ids = list(range(2, 2 + TEXT_TOKENS))
    synth.synthesize_ids(ids, reference, settings)  # warm-up
    totals, gens, audio = [], [], 0.0
    for _ in range(args.repeats):
        gens.append(timed(lambda: generate_codes(model, reference.conds, torch.tensor([ids], device=device),
                                                 settings), device))
        result = synth.synthesize_ids(ids, reference, settings)
        totals.append(result.seconds)
        audio = result.audio_seconds
    total, gen = min(totals), min(gens)
    print(f"\nwhole path at the demo size ({args.rtf_decode}, {args.rtf_codes} codes = {audio:.2f} s of audio, "
          f"device {device}, {threads_text()}, reference prepared once in {reference.seconds:.3f} s)")
    print(f"  total     {total:7.3f} s   real-time factor {total / audio:.3f}")
    print(f"  generate  {gen:7.3f} s   {gen / total:6.1%} of the total")
    print(f"  latent + vocoder {total - gen:7.3f} s   {(total - gen) / total:6.1%} of the total")
    headline("synthesis_speed", "real-time factor of the whole path (demo size)", total / audio, "x", "", None,
             f"{args.rtf_decode}, {args.rtf_codes} codes, {device}, {threads_text()}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[32, 64, 128, 256])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rtf-codes", type=int, default=100, help="codes for the real-time factor (max 128)")
    parser.add_argument("--rtf-decode", choices=("greedy", "beam", "sample"), default="beam")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (0: torch's default); see the module docstring for why 1")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    bench_cache(args, device)
    bench_rtf(args, device)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
