"""IndexTTS-2.5 synthesis speed: the real-time factor split across GPT, S2Mel and vocoder, against IndexTTS2.

    python bench/synthesis_speed_v25.py [--codes 64] [--steps 10] [--repeats 3] [--device cpu] [--threads 1]

Both pipelines run at the same demo size: IndexTTS-2.5 is the demo workspace's tiny 2.5 download folder
(``generations.indextts25.demo.build``, loaded by ``networks.indextts25.load_indextts25``); IndexTTS2 is built from the same
networks where the two generations share them (w2v-BERT + stats, CAMPPlus, BigVGAN v2: the same objects), an
S2Mel of the same section with its ``gpt_layer``, a RepCodec of the same width and a v2 GPT of the 2.5 GPT's
sizes (width, layers, heads, conformers). Each GPT's stop logit is pushed down, so both make exactly
``--codes`` codes for the same ``TEXT_TOKENS`` text ids, and both speak through their own pipeline's
``synthesize_ids`` with ``--steps`` flow-matching steps and the same prompt audio (prepared once, not timed).

What differs, and what the numbers show: 2.5 makes 25 Hz codes (each is 2 x 1.72 mel frames) where IndexTTS2
makes 50 Hz codes (1.72 frames), so the same number of codes is twice the audio in 2.5: its GPT costs half per
second of speech; 2.5 has no GPT latent pass (IndexTTS2 runs the GPT once more over text + codes for
S2Mel's ``gpt_layer``; counted as GPT here) and decodes codes with the codec's ``decode`` instead of
``vq2emb``. S2Mel and the vocoder cost about the same per second of audio in both; the flow matching runs
over the prompt's mel frames too, which the shorter IndexTTS2 output spreads over fewer seconds.

Parts are timed by wrapping the pipelines' own calls (``generate_codes`` and IndexTTS2's ``latent_with_conds``:
GPT; ``segment_mel`` / ``s2mel.infer``: S2Mel, codec decode included; BigVGAN's forward: vocoder); the rest
(joins, int16) is "other". ``--threads 1`` and the fastest of ``--repeats`` runs, as in
``bench/synthesis_speed.py`` and for its reasons (a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402

TEXT_TOKENS = 24
PARTS = ("GPT", "S2Mel", "vocoder", "other")


class PartTimer:
    """Seconds spent in each part, accumulated by wrapped calls (device-synchronised)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.seconds: dict[str, float] = defaultdict(float)

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def wrap(self, part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.sync()
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.sync()
                self.seconds[part] += time.perf_counter() - started

        return timed

    def hook_module(self, part: str, module: torch.nn.Module) -> None:
        starts: list[float] = []

        def before(*_: Any) -> None:
            self.sync()
            starts.append(time.perf_counter())

        def after(*_: Any) -> None:
            self.sync()
            self.seconds[part] += time.perf_counter() - starts.pop()

        module.register_forward_pre_hook(before)
        module.register_forward_hook(after)


def never_stop(model: torch.nn.Module) -> None:
    with torch.no_grad():
        model.mel_head.bias[model.stop_mel_token] = -1e4  # exactly max_codes codes


def build_v25(folder: Path, device: torch.device) -> Any:
    from generations.indextts25.synthesis import SynthesizerV25
    from networks.indextts25 import load_indextts25

    nets = load_indextts25(folder, local_files_only=True, device=device)
    never_stop(nets.gpt)
    return SynthesizerV25(nets, None, language="am")


def build_v2(nets25: Any, seed: int, device: torch.device) -> Any:
    """IndexTTS2 at the 2.5 demo's sizes, sharing the networks both generations have."""
    from generations.indextts2.demo.build import demo_config as demo_config_v2
    from networks.indextts2 import IndexTTS2Networks
    from networks.s2mel import S2Mel
    from networks.semantic_codec import SemanticCodec, SemanticCodecConfig
    from networks.unified_voice import build_model
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer

    gpt25 = nets25.config["gpt"]
    gpt = dict(demo_config_v2(1000)["gpt"])
    gpt.update({key: gpt25[key] for key in ("model_dim", "layers", "heads", "max_mel_tokens", "max_text_tokens",
                                            "condition_module", "emo_condition_module", "semantic_dim",
                                            "emo_perceiver_dim")})
    config = {**nets25.config, "gpt": gpt, "version": 2.0}
    rows = 8
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build_model(gpt).to(device).eval()
        codec = SemanticCodec(SemanticCodecConfig.from_section(config["semantic_codec"])).to(device).eval()
        s2mel = S2Mel.from_config(config["s2mel"], gpt_dim=int(gpt["model_dim"])).to(device).eval()
        spk_matrix = torch.randn(rows, nets25.campplus.embedding_size, device=device)
        emo_matrix = 0.1 * torch.randn(rows, int(gpt["model_dim"]), device=device)
    never_stop(model)
    nets = IndexTTS2Networks(config=config, files=nets25.files, gpt=model, extractor=nets25.extractor,
                             semantic=nets25.semantic, codec=codec, campplus=nets25.campplus, s2mel=s2mel,
                             vocoder=nets25.vocoder, spk_matrix=spk_matrix, emo_matrix=emo_matrix,
                             emo_num=(rows,))
    return S2MelSynthesizer(nets, None)


def instrument(synth: Any, timer: PartTimer) -> None:
    """Wrap this synthesizer's parts (module globals of its pipeline, and its own networks)."""
    import generations.indextts25.synthesis as v25
    import trainer.synthesis.s2mel_pipeline as v2

    for module in (v2, v25):
        if not hasattr(module.generate_codes, "__wrapped_by_bench__"):
            module.generate_codes = timer.wrap("GPT", module.generate_codes)
            module.generate_codes.__wrapped_by_bench__ = True  # type: ignore[attr-defined]
    if not hasattr(v25.segment_mel, "__wrapped_by_bench__"):
        v25.segment_mel = timer.wrap("S2Mel", v25.segment_mel)
        v25.segment_mel.__wrapped_by_bench__ = True  # type: ignore[attr-defined]
    nets = synth.nets
    if nets.s2mel.config.with_gpt_layer:
        nets.s2mel.infer = timer.wrap("S2Mel", nets.s2mel.infer)
        synth.model.latent_with_conds = timer.wrap("GPT", synth.model.latent_with_conds)


def run(synth: Any, voice: Any, timer: PartTimer, codes: int, steps: int, v25: bool) -> tuple[dict[str, float], float]:
    from generations.indextts25.synthesis import MelSettings25
    from trainer.synthesis.generation import DecodeSettings

    settings = DecodeSettings(mode="greedy", max_codes=codes)
    mel = MelSettings25(steps=steps, seed=1)
    ids = list(range(2, 2 + TEXT_TOKENS))
    timer.seconds.clear()
    timer.sync()
    started = time.perf_counter()
    if v25:
        result = synth.synthesize_ids([ids], voice, None, settings, mel, language="am")
    else:
        result = synth.synthesize_ids([ids], voice, None, settings, replace(mel))
    timer.sync()
    total = time.perf_counter() - started
    parts = {part: timer.seconds.get(part, 0.0) for part in PARTS[:-1]}
    parts["other"] = max(0.0, total - sum(parts.values()))
    parts["total"] = total
    return parts, result.audio_seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--codes", type=int, default=64, help="codes each GPT makes (at most the demo's 128)")
    parser.add_argument("--steps", type=int, default=10, help="S2Mel flow-matching steps (inference: 25)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    threads = f"{torch.get_num_threads()} thread(s)"

    from demo.data import ASSETS
    from generations.indextts25.demo.build import build_demo as build_demo_v25

    sentences = [s for s in (ASSETS / "amharic_sentences.txt").read_text(encoding="utf-8").splitlines() if s.strip()]
    with tempfile.TemporaryDirectory(prefix="bench-v25-") as scratch:
        paths = build_demo_v25(Path(scratch), sentences, 24, 0)
        prompt = next((paths.val_manifest.parent / "wavs").glob("*.wav"))
        synth25 = build_v25(paths.config.parent, device)
        synth2 = build_v2(synth25.nets, 0, device)
        timer = PartTimer(device)
        for synth in (synth25, synth2):
            instrument(synth, timer)
        timer.hook_module("vocoder", synth25.nets.vocoder)  # one object, shared by both pipelines
        voices = {"2.5": synth25.prepare_voice(prompt), "2": synth2.prepare_voice(prompt)}
        best: dict[str, tuple[dict[str, float], float]] = {}
        for name, synth in (("2.5", synth25), ("2", synth2)):
            run(synth, voices[name], timer, min(8, args.codes), 2, name == "2.5")  # warm-up
        for _ in range(args.repeats):  # alternated, so drift in the background load hits both
            for name, synth in (("2.5", synth25), ("2", synth2)):
                parts, audio = run(synth, voices[name], timer, args.codes, args.steps, name == "2.5")
                if name not in best or parts["total"] < best[name][0]["total"]:
                    best[name] = (parts, audio)

    print(f"IndexTTS-2.5 vs IndexTTS2 at the demo size: {args.codes} codes, {TEXT_TOKENS} text ids, "
          f"{args.steps} S2Mel steps, device {device}, {threads}, fastest of {args.repeats}")
    print(f"{'model':>11} {'audio s':>8} {'total s':>8} {'RTF':>7} " + " ".join(f"{p + ' RTF':>12}" for p in PARTS))
    for name in ("2.5", "2"):
        parts, audio = best[name]
        print(f"{'IndexTTS-' + name if name == '2.5' else 'IndexTTS2':>11} {audio:>8.2f} {parts['total']:>8.3f} "
              f"{parts['total'] / audio:>7.3f} " + " ".join(f"{parts[p] / audio:>12.3f}" for p in PARTS))
    (p25, a25), (p2, a2) = best["2.5"], best["2"]
    note = f"{args.codes} codes, {args.steps} steps, {device}, {threads}"
    headline("synthesis_speed_v25", "IndexTTS-2.5 real-time factor (demo size)", p25["total"] / a25, "x", "", None,
             note + ", split GPT/S2Mel/vocoder " + "/".join(f"{p25[p] / a25:.3f}" for p in PARTS[:3]))
    headline("synthesis_speed_v25", "IndexTTS2 real-time factor (same size)", p2["total"] / a2, "x", "", None,
             note + ", split GPT/S2Mel/vocoder " + "/".join(f"{p2[p] / a2:.3f}" for p in PARTS[:3]))
    ratio = (p2["GPT"] / a2) / (p25["GPT"] / a25)
    headline("synthesis_speed_v25", "GPT seconds per audio second, IndexTTS2 / 2.5", ratio, "x",
             "> 1 (25 Hz codes)", ratio > 1, note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
