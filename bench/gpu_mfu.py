"""Training tokens/s and model FLOPs utilisation of the IndexTTS-1.5 GPT at its real size, in bf16.

    python bench/gpu_mfu.py [--batch-size 8] [--text 120] [--codes 400] [--prompt 300] [--steps 10]
                            [--peak-tflops N] [--grad-checkpointing] [--tiny --device cpu]

Builds the real v1.5 GPT (1280 wide, 24 layers, 20 heads, 12,001 text rows, six-block conformer +
perceiver conditioning: the layout of the released gpt.pth, random weights), feeds it batches of the
given text / code / prompt lengths and times forward + backward + fused AdamW steps under bf16
autocast. The FLOPs of one step are counted by torch's FlopCounterMode on the step itself (matmuls,
convolutions and attention as they actually run), so MFU = counted FLOPs per second / the GPU's peak
dense bf16 rate (looked up by name, or ``--peak-tflops``). The GPU's name is printed with the result.
``--tiny --device cpu`` runs the same code on the demo-size model, to check the script without a GPU.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.report import headline  # noqa: E402
from generations.indextts15.demo.build import demo_config  # noqa: E402
from networks.unified_voice import build_model  # noqa: E402
from trainer import steps  # noqa: E402

# The released IndexTTS-1.5 gpt section (shared/reference/README.md, "GPT model").
V15_GPT = {
    "model_dim": 1280, "max_mel_tokens": 800, "max_text_tokens": 600, "heads": 20, "use_mel_codes_as_input": True,
    "mel_length_compression": 1024, "layers": 24, "number_text_tokens": 12000, "number_mel_codes": 8194,
    "start_mel_token": 8192, "stop_mel_token": 8193, "start_text_token": 0, "stop_text_token": 1,
    "train_solo_embeddings": False, "condition_num_latent": 32, "condition_type": "conformer_perceiver",
    "condition_module": {"output_size": 512, "linear_units": 2048, "attention_heads": 8, "num_blocks": 6,
                         "input_layer": "conv2d2", "perceiver_mult": 2},
}
# Dense bf16 peak (no sparsity), TFLOP/s, by a substring of torch.cuda.get_device_name().
PEAK_BF16_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.1, "L4": 121.0, "A10G": 70.0,
                    "RTX 4090": 165.2, "RTX 3090": 71.0}


def make_batch(gpt: dict, size: int, text: int, codes: int, prompt: int, device: torch.device) -> dict:
    generator = torch.Generator().manual_seed(0)
    tensors = {
        "text_ids": torch.randint(2, int(gpt["number_text_tokens"]), (size, text), generator=generator),
        "text_lengths": torch.full((size,), text),
        "codes": torch.randint(0, 8192, (size, codes), generator=generator),
        "code_lengths": torch.full((size,), codes),
        "cond_mels": torch.randn(size, 100, prompt, generator=generator) - 4,
        "cond_mel_lengths": torch.full((size,), prompt),
    }
    out = {name: value.to(device) for name, value in tensors.items()}
    return out | {"text_lengths_host": [text] * size, "code_lengths_host": [codes] * size}


def peak_tflops(name: str, given: float | None) -> float | None:
    if given:
        return given
    return next((value for key, value in PEAK_BF16_TFLOPS.items() if key in name), None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--text", type=int, default=120, help="text tokens per item")
    parser.add_argument("--codes", type=int, default=400, help="codes per item (~17 s of speech)")
    parser.add_argument("--prompt", type=int, default=300, help="prompt mel frames per item (~3 s)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps (after 3 warm-up steps)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--amp", default="bf16", choices=("bf16", "fp16", "off"))
    parser.add_argument("--peak-tflops", type=float, help="the device's peak dense rate for --amp")
    parser.add_argument("--grad-checkpointing", action="store_true")
    parser.add_argument("--tiny", action="store_true", help="demo-size model (to check the script on a CPU)")
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("error: no CUDA device here; this benchmark measures a GPU (use --tiny --device cpu to check it)",
              file=sys.stderr)
        return 2
    gpt = demo_config(1000)["gpt"] if args.tiny else V15_GPT
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    model = build_model(gpt).to(device).train()
    if args.grad_checkpointing:
        model.set_gradient_checkpointing(True)
    optimizer = steps.build_optimizer(model, 1e-5, 0.01, device)
    inputs = make_batch(gpt, args.batch_size, min(args.text, int(gpt["max_text_tokens"])),
                        min(args.codes, int(gpt["max_mel_tokens"])), args.prompt, device)
    tokens = args.batch_size * (inputs["text_ids"].size(1) + inputs["codes"].size(1))

    def step() -> None:
        with steps.autocast(device, args.amp):
            out = model(**inputs)
        (0.2 * out.loss_text + 0.8 * out.loss_mel).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize()

    counter = FlopCounterMode(display=False)
    with counter:
        step()
    flops = counter.get_total_flops()
    for _ in range(2):
        step()
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        started = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - started)
    seconds = statistics.median(times)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU ({torch.get_num_threads()} threads)"
    params = sum(p.numel() for p in model.parameters())
    achieved = flops / seconds / 1e12
    print(f"device {name}; model {params / 1e6:,.1f} M parameters{' (tiny)' if args.tiny else ''}; amp {args.amp}; "
          f"batch {args.batch_size} x (text {inputs['text_ids'].size(1)} + codes {inputs['codes'].size(1)}) "
          f"tokens, prompt {args.prompt} frames")
    print(f"step {seconds * 1000:.1f} ms (median of {args.steps}); {tokens / seconds:,.0f} tokens/s; "
          f"{flops / 1e12:.2f} TFLOP per step counted; {achieved:.1f} TFLOP/s")
    if device.type == "cuda":
        print(f"peak memory {torch.cuda.max_memory_allocated(device) / 2**30:.1f} GiB")
    headline("gpu_mfu", f"training tokens/s, v1.5 {'tiny' if args.tiny else 'real size'} ({name})",
             tokens / seconds, "tokens/s", "", None, f"{args.amp}, batch {args.batch_size}")
    peak = peak_tflops(name, args.peak_tflops) if device.type == "cuda" else None
    if peak:
        headline("gpu_mfu", f"model FLOPs utilisation ({name})", 100 * achieved / peak, "%", "", None,
                 f"{achieved:.0f} of {peak:.0f} TFLOP/s peak dense {args.amp}")
    elif device.type == "cuda":
        print(f"no peak rate known for {name}: pass --peak-tflops to get the MFU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
