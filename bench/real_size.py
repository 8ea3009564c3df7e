"""Every generation's networks at their real size on a CPU: parameter counts, one training step's peak memory
beside the memory estimate, and one short synthesis.

    python bench/real_size.py [--generations 1.5,2,2.5] [--text 24] [--codes 60] [--prompt 150]
                              [--optimizer auto|adamw|sgd|none] [--lora] [--no-synthesis]

1. Counts: each GPT and audio network is built on the meta device from its real configuration (the
   reference tables under shared/reference/) and its parameter count printed beside the reference's.
2. Step: in a fresh process per generation, the real GPT (fp32, random weights) takes two training steps at
   batch 1 with a short item through the trainer's own ``micro_step`` / ``optimizer_step`` (fused AdamW, clip).
   Peak memory is the process's resident high-water mark (``VmHWM``) over the step, minus the resident size
   just before the model was built: the kernel's figure, so it includes the allocator's slack, which the
   estimate does not model. The mark is reset (``/proc/self/clear_refs``) after a tiny warm-up step, so
   library start-up (oneDNN, thread pools) is not counted. The estimate (``trainer.memory_estimate``, CPU,
   fp32) is printed beside it with the ratio. ``--optimizer auto`` uses AdamW where the machine's available
   memory holds the estimate with a margin, else SGD without momentum (no optimizer state), else no optimizer
   step at all; the estimate leaves out what the step did not hold, and the table says which.
3. Synthesis (``--no-synthesis`` skips it): the real GPT generates a short code sequence with its KV cache,
   and the generation's real decoder turns it into audio: BigVGAN v1.5 from the GPT latents for 1.5, S2Mel
   (CFM/DiT, 10 steps) + BigVGAN v2 for 2 and 2.5. Real-time factor and peak memory per generation.

``--child step|synthesis`` is the per-measurement process (its result is one JSON line); ``--config-json``
gives it another gpt section (tests use a small one to check the estimate cheaply).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from trainer.memory_estimate import RunShape, estimate_run_memory, gb  # noqa: E402
from trainer.memory_facts import model_facts  # noqa: E402

# The reference tables: ../shared beside the checkout, or shared/ inside it (a device machine's copy).
REFERENCE = next((path for path in (REPO.parent / "shared" / "reference", REPO / "shared" / "reference")
                  if path.is_dir()), REPO.parent / "shared" / "reference")
GPT_TABLES = {"1.5": "indextts15_gpt_state_dict_shapes.json", "2": "indextts2_gpt_state_dict_shapes.json",
              "2.5": "indextts25/indextts25_gpt_state_dict_shapes.json"}
CHILD_TIMEOUT_S = 1800
MEMORY_MARGIN = 1.3  # AdamW only where the machine has this much more than the estimate available


# ----- reference facts ------------------------------------------------------------------------------------


def real_gpt_config(generation: str) -> tuple[dict[str, Any], int]:
    """(gpt section, reference parameter count) of the released GPT of ``generation``."""
    table = json.loads((REFERENCE / GPT_TABLES[generation]).read_text(encoding="utf-8"))
    if generation == "2.5":
        return {**table["gpt_config"], "spk_cond_mode": table["spk_cond_mode"]}, int(table["n_parameters"])
    return dict(table["config"]), int(table["num_parameters"])


def _count(module: torch.nn.Module, what: str = "state") -> int:
    if what == "parameters":
        return sum(p.numel() for p in module.parameters())
    return sum(t.numel() for t in module.state_dict().values())


def audio_counts(generation: str) -> list[tuple[str, int, int]]:
    """(network, built on meta, reference) for the generation's audio networks (state-dict elements)."""
    from networks import indextts2
    from networks.bigvgan_v2 import HUB_CONFIG
    from networks.campplus import REAL_SIZES, CAMPPlus

    rows: list[tuple[str, int, int]] = []
    if generation == "1.5":
        from networks.bigvgan import VocoderSpec, build_bigvgan
        from networks.dvae import DiscreteVAE

        shapes = json.loads((REFERENCE / "fixtures_indextts15_infer" / "indextts15_bigvgan_state_dict_shapes.json").read_text())
        vocoder = build_bigvgan(VocoderSpec.from_config({"bigvgan": shapes["config"]}), "meta")
        rows.append(("BigVGAN v1.5 (+ECAPA)", _count(vocoder, "parameters"), int(shapes["num_parameters"])))
        dvae_table = json.loads((REFERENCE / "indextts15_dvae_state_dict_shapes.json").read_text())
        with torch.device("meta"):
            dvae = DiscreteVAE.from_config(dvae_table["config"])
        rows.append(("DVAE", _count(dvae, "parameters"), int(dvae_table["num_parameters"])))
        return rows
    with torch.device("meta"):
        campplus = CAMPPlus(**REAL_SIZES)
    vocoder = indextts2.build_vocoder_v2(HUB_CONFIG, "meta")
    s2mel = real_s2mel(meta=True, gpt_layer=generation == "2")
    net = s2mel.net_state_dict()
    if generation == "2":
        table = json.loads((REFERENCE / "indextts2_audio_state_dict_shapes.json").read_text())
        counts = {name: value[1] for name, value in table["_counts_keys_elements"].items()}
        from networks.semantic_codec import SemanticCodec, SemanticCodecConfig

        with torch.device("meta"):
            codec = SemanticCodec(SemanticCodecConfig())
        rows.append(("semantic codec (MaskGCT)", _count(codec), counts["semantic_codec"]))
        for part in ("cfm", "length_regulator", "gpt_layer"):
            rows.append((f"S2Mel {part}", sum(t.numel() for t in net[part].values()), counts[f"s2mel.{part}"]))
        w2v = counts["w2v_bert_2"]
        rows += [("CAMPPlus", _count(campplus), counts["campplus"]), ("BigVGAN v2", _count(vocoder), counts["bigvgan_v2"])]
    else:
        table = json.loads((REFERENCE / "indextts25" / "indextts25_audio_state_dict_shapes.json").read_text())
        counts = {name.split(" ")[0]: value[1] for name, value in table["_counts_keys_elements_params"].items()}
        from networks.codec25 import build_codec25

        codec = build_codec25(REAL_CODEC_SECTION, device="meta")
        rows.append(("2.5 codec", _count(codec), counts["codec"]))
        for part in ("cfm", "length_regulator"):
            rows.append((f"S2Mel {part}", sum(t.numel() for t in net[part].values()), counts[f"s2mel.{part}"]))
        w2v = counts["w2v_bert_2"]
        rows += [("CAMPPlus", _count(campplus), counts["campplus"]),
                 ("BigVGAN v2", _count(vocoder), counts["bigvgan_v2_22khz_80band_256x"])]
    from networks.w2v_bert import build_w2v_bert

    rows.append(("w2v-BERT 2.0", _count(build_w2v_bert(None, device="meta")), w2v))
    return rows


# The real sections (shared/reference READMEs): the S2Mel of IndexTTS2 v2.0 (2.5 keeps it) and the 2.5 codec.
REAL_S2MEL_SECTION: dict[str, Any] = {
    "preprocess_params": {"sr": 22050, "spect_params": {"n_fft": 1024, "win_length": 1024, "hop_length": 256,
                                                        "n_mels": 80, "fmin": 0, "fmax": "None"}},
    "dit_type": "DiT", "reg_loss_type": "l1", "style_encoder": {"dim": 192},
    "length_regulator": {"channels": 512, "is_discrete": False, "in_channels": 1024, "content_codebook_size": 2048,
                         "sampling_ratios": [1, 1, 1, 1], "vector_quantize": False, "n_codebooks": 1,
                         "quantizer_dropout": 0.0, "f0_condition": False, "n_f0_bins": 512},
    "DiT": {"hidden_dim": 512, "num_heads": 8, "depth": 13, "class_dropout_prob": 0.1, "block_size": 8192,
            "in_channels": 80, "style_condition": True, "final_layer_type": "wavenet", "target": "mel",
            "content_dim": 512, "content_codebook_size": 1024, "content_type": "discrete", "f0_condition": False,
            "n_f0_bins": 512, "content_codebooks": 1, "is_causal": False, "long_skip_connection": True,
            "zero_prompt_speech_token": False, "time_as_token": False, "style_as_token": False,
            "uvit_skip_connection": True, "add_resblock_in_transformer": False},
    "wavenet": {"hidden_dim": 512, "num_layers": 8, "kernel_size": 5, "dilation_rate": 1, "p_dropout": 0.2,
                "style_condition": True},
}
REAL_CODEC_SECTION = {"codebook_size": 8192, "hidden_size": 1024, "codebook_dim": 8, "vocos_dim": 384,
                      "vocos_intermediate_dim": 2048, "vocos_num_layers": 12}
def real_s2mel(meta: bool, gpt_layer: bool) -> Any:
    from networks.s2mel import S2Mel

    section = dict(REAL_S2MEL_SECTION)
    context = torch.device("meta") if meta else contextlib.nullcontext()
    with context:
        return S2Mel.from_config(section) if gpt_layer else S2Mel.from_config(section, with_gpt_layer=False)


# ----- the measuring process ------------------------------------------------------------------------------


def _status_kib(key: str) -> int:
    match = re.search(rf"^{key}:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"/proc/self/status has no {key}")
    return int(match.group(1))


def reset_peak() -> int:
    """Reset the resident high-water mark; returns the resident bytes now (the baseline)."""
    gc.collect()
    Path("/proc/self/clear_refs").write_text("5")
    return _status_kib("VmRSS") * 1024


def peak_since_reset() -> int:
    return _status_kib("VmHWM") * 1024


def training_batch(model: Any, batch: int, text: int, codes: int, prompt: int) -> dict[str, Any]:
    generator = torch.Generator().manual_seed(0)
    gpt = model.gpt_config
    out: dict[str, Any] = {
        "text_ids": torch.randint(2, int(gpt["number_text_tokens"]), (batch, text), generator=generator),
        "text_lengths": torch.full((batch,), text), "codes": torch.randint(0, 8192, (batch, codes), generator=generator),
        "code_lengths": torch.full((batch,), codes), "text_lengths_host": [text] * batch,
        "code_lengths_host": [codes] * batch, "num_tokens": batch * (text + codes),
    }
    dim = int(model.model_dim)
    if model.version == "2.5":
        return out | {"spk_vec": torch.randn(batch, 192, generator=generator),
                      "emo_vec": torch.randn(batch, dim, generator=generator), "langs": torch.zeros(batch, dtype=torch.long)}
    if model.version == "2":
        return out | {"condition": torch.randn(batch, int(model.num_cond_latents), dim, generator=generator),
                      "emo_vec": torch.randn(batch, dim, generator=generator)}
    return out | {"cond_mels": torch.randn(batch, 100, prompt, generator=generator) - 4,
                  "cond_mel_lengths": torch.full((batch,), prompt)}


def _train_steps(gpt: dict[str, Any], args: argparse.Namespace, count: int) -> float:
    """Build the GPT and take ``count`` training steps as the trainer does; seconds of the last step."""
    from generations.registry import build_gpt
    from trainer import steps
    from trainer.lora_setup import adapt_model

    device = torch.device("cpu")
    model = build_gpt(gpt).train()
    if args.lora:
        adapt_model(model, {"lora": True})
    if args.grad_checkpointing:
        model.set_gradient_checkpointing(True)
    if args.optimizer == "adamw":
        optimizer: torch.optim.Optimizer = steps.build_optimizer(model, 1e-5, 0.01, device)
    else:  # plain SGD holds no state; "none" still builds it but never steps
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    batch = training_batch(model, args.batch, args.text, args.codes, args.prompt)
    weights = steps.LossWeights(text=0.2, mel=0.8)
    seconds = 0.0
    for _ in range(count):
        started = time.perf_counter()
        losses = steps.micro_step(model, batch, device, "off", "masked", weights, 1.0, None, contextlib.nullcontext())
        if args.optimizer == "none":
            model.zero_grad(set_to_none=True)
        else:
            steps.optimizer_step(model, optimizer, None, 1.0, losses.loss)
        seconds = time.perf_counter() - started
    return seconds


def child_step(args: argparse.Namespace) -> dict[str, Any]:
    gpt = json.loads(args.config_json) if args.config_json else real_gpt_config(args.generation)[0]
    tiny = {**gpt, "model_dim": 32, "heads": 2, "layers": 1, "number_text_tokens": 50}
    warm = argparse.Namespace(**{**vars(args), "batch": 1, "text": 4, "codes": 4, "prompt": 16})
    _train_steps(tiny, warm, 1)  # library start-up, outside the measurement
    baseline = reset_peak()
    seconds = _train_steps(gpt, args, 2)
    return {"peak_bytes": peak_since_reset() - baseline, "baseline_bytes": baseline, "step_seconds": seconds}


def child_synthesis(args: argparse.Namespace) -> dict[str, Any]:
    from bench.real_size_synthesis import synthesize_once

    baseline = reset_peak()
    result = synthesize_once(args.generation, args.codes, args.steps)
    return result | {"peak_bytes": peak_since_reset() - baseline}


# ----- the parent: run children, print the table ---------------------------------------------------------


def run_child(mode: str, generation: str, args: argparse.Namespace, optimizer: str,
              config_json: str | None = None) -> dict[str, Any]:
    argv = [sys.executable, str(Path(__file__).resolve()), "--child", mode, "--generations", generation,
            "--text", str(args.text), "--codes", str(args.codes), "--prompt", str(args.prompt),
            "--batch", str(args.batch), "--optimizer", optimizer, "--steps", str(args.steps)]
    argv += ["--lora"] if args.lora else []
    argv += ["--grad-checkpointing"] if args.grad_checkpointing else []
    argv += ["--config-json", config_json] if config_json else []
    done = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: {' | '.join(tail)}"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def available_bytes() -> int:
    match = re.search(r"^MemAvailable:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.MULTILINE)
    return int(match.group(1)) * 1024 if match else 0


def choose_optimizer(requested: str, estimates: dict[str, int]) -> str:
    if requested != "auto":
        return requested
    free = available_bytes()
    for name in ("adamw", "sgd", "none"):
        if estimates[name] * MEMORY_MARGIN <= free:
            return name
    return "none"


def step_estimate(facts: Any, args: argparse.Namespace, optimizer: str) -> int:
    shape = RunShape(batch_size=args.batch, text_tokens=args.text, codes=args.codes, prompt_frames=args.prompt,
                     amp="off", grad_checkpointing=args.grad_checkpointing, lora=args.lora, device_type="cpu")
    estimate = estimate_run_memory(facts, shape)
    if optimizer == "adamw":
        return estimate.peak
    return estimate.peak - estimate.optimizer  # SGD without momentum / no step: no optimizer state


def measure_step(generation: str, gpt: dict[str, Any], args: argparse.Namespace,
                 config_json: str | None = None) -> dict[str, Any]:
    """Run the step child; returns the measured peak, the estimate and their ratio."""
    facts = model_facts(gpt, {"lora": True} if args.lora else None)
    estimates = {name: step_estimate(facts, args, name) for name in ("adamw", "sgd", "none")}
    optimizer = choose_optimizer(args.optimizer, estimates)
    result = run_child("step", generation, args, optimizer, config_json)
    result |= {"optimizer": optimizer, "estimate_bytes": estimates[optimizer], "parameters": facts.parameters,
               "trained": facts.lora_trained if args.lora else facts.reached}
    if "peak_bytes" in result:
        result["ratio"] = result["peak_bytes"] / max(result["estimate_bytes"], 1)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--generations", default="1.5,2,2.5")
    parser.add_argument("--text", type=int, default=24, help="text tokens of the training item")
    parser.add_argument("--codes", type=int, default=60, help="codes of the training item / codes synthesised")
    parser.add_argument("--prompt", type=int, default=150, help="prompt mel frames (IndexTTS-1.5)")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--steps", type=int, default=10, help="S2Mel flow-matching steps in the synthesis")
    parser.add_argument("--optimizer", default="auto", choices=("auto", "adamw", "sgd", "none"))
    parser.add_argument("--lora", action="store_true")
    parser.add_argument("--grad-checkpointing", action="store_true")
    parser.add_argument("--no-synthesis", action="store_true")
    parser.add_argument("--no-step", action="store_true", help="counts and synthesis only")
    parser.add_argument("--child", choices=("step", "synthesis"), help=argparse.SUPPRESS)
    parser.add_argument("--config-json", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.child:
        args.generation = args.generations
        result = child_step(args) if args.child == "step" else child_synthesis(args)
        print(json.dumps(result), flush=True)
        return 0
    generations = [g.strip() for g in args.generations.split(",") if g.strip()]
    bad = [g for g in generations if g not in GPT_TABLES]
    if bad:
        print(f"error: --generations: unknown {', '.join(bad)} (known: {', '.join(GPT_TABLES)})", file=sys.stderr)
        return 2
    print(f"CPU, {torch.get_num_threads()} threads; item: batch {args.batch}, text {args.text}, codes {args.codes}, "
          f"prompt {args.prompt} frames; fp32{' LoRA' if args.lora else ''}"
          f"{' grad-checkpointing' if args.grad_checkpointing else ''}")
    failures = 0
    for generation in generations:
        gpt, reference = real_gpt_config(generation)
        facts = model_facts(gpt, {"lora": True} if args.lora else None)
        equal = "==" if facts.parameters == reference else "!="
        trained = facts.lora_trained if args.lora else facts.reached
        print(f"\nIndexTTS-{generation} GPT: {facts.parameters:,} parameters built {equal} {reference:,} reference; "
              f"{trained:,} train")
        for name, built, expected in audio_counts(generation):
            print(f"  {name:28s} {built:>13,} built {'==' if built == expected else '!='} {expected:,} reference")
        if not args.no_step:
            failures += not print_step(generation, measure_step(generation, gpt, args))
        if not args.no_synthesis:
            failures += not print_synthesis(generation, run_child("synthesis", generation, args, "none"))
    return 1 if failures else 0


def print_step(generation: str, step: dict[str, Any]) -> bool:
    if "error" in step:
        print(f"  step: FAILED ({step['error']})")
        return False
    print(f"  step ({step['optimizer']}): peak {gb(step['peak_bytes'])} measured, {gb(step['estimate_bytes'])} "
          f"estimated, ratio {step['ratio']:.2f}; {step['step_seconds']:.1f} s per step")
    headline("real_size", f"IndexTTS-{generation} step peak / estimate (CPU, {step['optimizer']})",
             step["ratio"], "x", "0.75-1.25", 0.75 <= step["ratio"] <= 1.25,
             f"{gb(step['peak_bytes'])} measured vs {gb(step['estimate_bytes'])} estimated")
    return True


def print_synthesis(generation: str, synth: dict[str, Any]) -> bool:
    if "error" in synth:
        print(f"  synthesis: FAILED ({synth['error']})")
        return False
    print(f"  synthesis: {synth['audio_seconds']:.2f} s of audio in {synth['seconds']:.1f} s (RTF {synth['rtf']:.2f}; "
          f"{synth['codes']} codes; built in {synth['build_seconds']:.0f} s); peak {gb(synth['peak_bytes'])}")
    headline("real_size", f"IndexTTS-{generation} synthesis real-time factor (CPU)", synth["rtf"], "x")
    return True


if __name__ == "__main__":
    with contextlib.suppress(BrokenPipeError):
        raise SystemExit(main())
