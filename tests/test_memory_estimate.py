"""The memory estimate of a run (trainer.memory_estimate): counts on the meta device at the real size, the
pre-flight's refusal with the option that fits, the presets per card, and the estimate against a measured peak
(a small model's training step in a fresh process, on the CPU; on a GPU, ``torch.cuda.max_memory_allocated``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.conftest import shared_file
from trainer.memory_estimate import (
    CUDA_RESERVE_BYTES,
    GIB,
    GPU_PRESETS_GB,
    RunShape,
    estimate_run_memory,
    fitting_change,
    gpu_bytes_of,
    gpu_presets,
    longest_item,
    memory_check,
    memory_refusal,
    run_shape,
)
from trainer.memory_facts import model_facts

REPO = Path(__file__).resolve().parents[1]
SMALL_GPT = {  # big enough that weights and activations both count, small enough for a CPU test
    "model_dim": 256, "max_mel_tokens": 400, "max_text_tokens": 200, "heads": 4, "layers": 4,
    "number_text_tokens": 2000, "condition_num_latent": 32,
    "condition_module": {"output_size": 128, "linear_units": 512, "attention_heads": 4, "num_blocks": 2,
                         "input_layer": "conv2d2", "perceiver_mult": 2},
}
SMALL_GPT_V2 = {**SMALL_GPT, "emo_condition_module": SMALL_GPT["condition_module"], "semantic_dim": 64,
                "emo_perceiver_dim": 64}
LONG_ITEMS = RunShape(batch_size=8, text_tokens=200, codes=600, amp="bf16")


@pytest.fixture(scope="module")
def real_v2() -> tuple:
    table = json.loads(shared_file("reference", "indextts2_gpt_state_dict_shapes.json").read_text())
    return model_facts(table["config"]), table


def test_real_v2_counts_on_meta(real_v2) -> None:
    facts, table = real_v2
    assert facts.version == "2"
    assert facts.parameters == table["num_parameters"] == 865_980_639
    # IndexTTS2 trains from precomputed conditioning: the speaker and emotion encoders get no gradient.
    with torch.device("meta"):
        from generations.registry import build_gpt

        model = build_gpt(table["config"])
    unused = ("conditioning_encoder.", "perceiver_encoder.", "emo_conditioning_encoder.", "emo_perceiver_encoder.",
              "emovec_layer.", "emo_layer.")
    expected = sum(p.numel() for name, p in model.named_parameters() if not name.startswith(unused))
    assert facts.reached == expected
    assert 0 < facts.lora_trained < facts.reached  # adapters + heads + embeddings, the blocks frozen
    # rank 16 (the default) on c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj of 24 blocks: r x (in + out) each
    assert facts.lora_extra == 24 * 16 * ((1280 + 3840) + (1280 + 1280) + (1280 + 5120) + (5120 + 1280))


def test_dora_counts_its_magnitude_vectors(real_v2) -> None:
    facts, table = real_v2
    dora = model_facts(table["config"], {"lora_dora": True})
    magnitudes = 24 * (3840 + 1280 + 5120 + 1280)  # one per output feature of each adapted projection
    assert dora.lora_extra == facts.lora_extra + magnitudes
    assert dora.lora_trained == facts.lora_trained + magnitudes  # and they train


def test_parts_follow_the_settings(real_v2) -> None:
    facts, _ = real_v2
    full = estimate_run_memory(facts, LONG_ITEMS)
    assert full.weights == 4 * facts.parameters
    assert full.gradients == 4 * facts.reached and full.optimizer == 8 * facts.reached
    assert full.autocast == 2 * facts.reached
    checkpointed = estimate_run_memory(facts, dataclasses.replace(LONG_ITEMS, grad_checkpointing=True))
    assert checkpointed.activations < full.activations / 3
    assert checkpointed.weights == full.weights
    lora = estimate_run_memory(facts, dataclasses.replace(LONG_ITEMS, lora=True))
    assert lora.optimizer == 8 * facts.lora_trained < full.optimizer
    fp32 = estimate_run_memory(facts, dataclasses.replace(LONG_ITEMS, amp="off"))
    assert fp32.activations > full.activations and fp32.autocast == 0
    sharded = estimate_run_memory(facts, dataclasses.replace(LONG_ITEMS, world_size=4, strategy="fsdp"))
    ddp = estimate_run_memory(facts, dataclasses.replace(LONG_ITEMS, world_size=4))
    assert sharded.optimizer == full.optimizer // 4 and ddp.gradients == 2 * full.gradients
    assert full.device_bytes == full.peak + CUDA_RESERVE_BYTES


def test_preflight_refuses_a_run_that_does_not_fit_and_names_the_option(real_v2) -> None:
    facts, _ = real_v2
    needed = estimate_run_memory(facts, LONG_ITEMS).device_bytes
    card = 16 * GIB
    assert needed > card
    refusal = memory_refusal(facts, LONG_ITEMS, card)
    assert refusal is not None and "\n" not in refusal
    assert refusal.startswith(f"this run needs about {needed / GIB:.1f} GB per GPU; this GPU has 16.0 GB")
    option, fitting = fitting_change(facts, LONG_ITEMS, card)
    assert f"with {option} it needs about" in refusal
    assert option.startswith("--grad-checkpointing") and fitting.device_bytes <= card
    assert fitting.shape == dataclasses.replace(LONG_ITEMS, grad_checkpointing=True)
    assert memory_refusal(facts, LONG_ITEMS, 80 * GIB) is None


def test_a_small_card_needs_lora_and_a_tiny_card_nothing_fits(real_v2) -> None:
    facts, _ = real_v2
    refusal = memory_refusal(facts, LONG_ITEMS, 8 * GIB)
    assert refusal is not None and "with --lora" in refusal
    nothing = memory_refusal(facts, LONG_ITEMS, 2 * GIB)
    assert nothing is not None and "no setting fits this card" in nothing


def test_presets_fit_their_cards_and_grow_with_them(real_v2) -> None:
    facts, _ = real_v2
    presets = gpu_presets(facts, 200, 600)
    assert [p.gpu_gb for p in presets] == list(GPU_PRESETS_GB)
    for preset in presets:
        assert preset.estimate is not None and preset.estimate.device_bytes <= 0.97 * preset.gpu_gb * GIB
        assert preset.options["batch_size"] * preset.options["grad_accumulation"] >= 32
    assert presets[0].options["lora"] is True  # 8 GB cannot hold a full fine-tune of the 866 M GPT
    assert presets[-1].options["lora"] is False and presets[-1].options["grad_checkpointing"] is False
    # A bigger card never gets slower settings: full before LoRA, no checkpointing before it, larger batches.
    keys = [(p.options["lora"], p.options["grad_checkpointing"], -p.options["batch_size"]) for p in presets]
    assert keys == sorted(keys, reverse=True)


def test_shape_and_card_from_the_options() -> None:
    gpt = {"max_text_tokens": 600, "max_mel_tokens": 1815}
    shape = run_shape({"batch_size": 4, "amp": "bf16", "grad_checkpointing": True, "lora": False}, gpt, "cuda")
    assert (shape.batch_size, shape.text_tokens, shape.codes, shape.amp, shape.grad_checkpointing) == (
        4, 600, 1815, "bf16", True)
    assert run_shape({"batch_size": 2}, gpt, "cpu", longest=(50, 300)).codes == 300
    assert gpu_bytes_of({"gpu_memory_gb": 24}, None) == 24 * GIB
    assert gpu_bytes_of({}, torch.device("cpu")) is None


def test_preflight_check_reads_the_card_from_the_option_and_the_items(real_v2) -> None:
    facts, table = real_v2
    items = [SimpleNamespace(text_ids=np.zeros(120, dtype=np.int32), num_codes=500),
             SimpleNamespace(text_ids=np.zeros(200, dtype=np.int32), num_codes=300)]
    assert longest_item(items) == (200, 500, 600)
    opts = {"batch_size": 8, "amp": "bf16", "gpu_memory_gb": 12}
    ok, message, warning = memory_check(opts, table["config"], torch.device("cpu"), items=items, facts=facts)
    assert not ok and not warning
    assert "this GPU has 12.0 GB" in message and "it cannot fit; with --" in message
    ok, message, warning = memory_check({**opts, "gpu_memory_gb": 80}, table["config"], torch.device("cpu"),
                                        items=items, facts=facts)
    assert ok and not warning and "this GPU has 80.0 GB" in message
    ok, message, _ = memory_check({"batch_size": 8, "amp": "off"}, table["config"], torch.device("cpu"), facts=facts)
    assert ok and "no GPU size to check" in message


@pytest.mark.slow
@pytest.mark.parametrize("gpt", [SMALL_GPT, SMALL_GPT_V2], ids=["v1.5", "v2"])
def test_estimate_within_a_quarter_of_a_measured_cpu_peak(gpt: dict) -> None:
    """A small GPT's two training steps (fused AdamW) in a fresh process: resident peak vs the estimate."""
    sys.path.insert(0, str(REPO))
    from bench.real_size import measure_step

    args = argparse.Namespace(text=60, codes=200, prompt=150, batch=4, steps=1, optimizer="adamw", lora=False,
                              grad_checkpointing=False)
    result = measure_step("1.5", gpt, args, json.dumps(gpt))
    assert "error" not in result, result.get("error")
    assert result["optimizer"] == "adamw"
    assert 0.75 <= result["ratio"] <= 1.25, result


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("checkpointing", [False, True])
def test_estimate_within_a_quarter_of_cuda_max_memory_allocated(checkpointing: bool) -> None:
    from generations.registry import build_gpt
    from trainer import steps

    sys.path.insert(0, str(REPO))
    from bench.real_size import training_batch

    device = torch.device("cuda")
    shape = RunShape(batch_size=8, text_tokens=100, codes=300, amp="bf16", grad_checkpointing=checkpointing)
    facts = model_facts(SMALL_GPT_V2)
    model = build_gpt(SMALL_GPT_V2).to(device).train()
    model.set_gradient_checkpointing(checkpointing)
    optimizer = steps.build_optimizer(model, 1e-5, 0.01, device)
    batch = training_batch(model, 8, 100, 300, 150)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(2):
        losses = steps.micro_step(model, batch, device, "bf16", "masked", steps.LossWeights(0.2, 0.8), 1.0, None,
                                  contextlib.nullcontext())
        steps.optimizer_step(model, optimizer, None, 1.0, losses.loss)
    torch.cuda.synchronize()
    measured = torch.cuda.max_memory_allocated()
    ratio = measured / estimate_run_memory(facts, shape).peak
    assert 0.75 <= ratio <= 1.25, ratio
