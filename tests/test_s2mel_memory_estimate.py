"""The S2Mel step's memory estimate (issue 38): with cross-clip prompts an item is another clip's first frames (up
to half of it) and the whole target, so up to 1.5x the longest clip, and the estimate counts it. The LoRA / DoRA
trained count is checked against the real adapters; the pre-flight row runs on a folder of header-only clips."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from data_tools.config import load_config
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from networks.s2mel import load_s2mel
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight
from trainer.s2mel.lora import S2MelLoRASettings, attach_lora
from trainer.s2mel.memory_estimate import S2MelShape, estimate_s2mel_memory, item_frames, s2mel_facts

V25_S2MEL = {"with_gpt_layer": False}
CLIP_FRAMES = (120, 301, 77)  # the prepared clips' mel frames: the longest is 301


@pytest.fixture(scope="module")
def folder(demo_workspace) -> Path:
    return DemoV25Paths.under(demo_workspace.root).config.parent


def test_a_cross_item_is_the_target_and_up_to_half_another_clip():
    assert item_frames(301, "own") == 301
    assert item_frames(301, "cross") == 301 + 150
    assert item_frames(301, "cross", 0.25) == 301 + 75


@pytest.mark.parametrize("device_type", ["cuda", "cpu"])
def test_the_cross_estimate_grows_its_activations_by_the_items_length(folder, device_type):
    facts = s2mel_facts(load_config(folder / "config.yaml")["s2mel"], V25_S2MEL, None)
    own = estimate_s2mel_memory(facts, S2MelShape(4, 301, "own", 0.5, device_type))
    cross = estimate_s2mel_memory(facts, S2MelShape(4, 301, "cross", 0.5, device_type))
    assert (own.item_frames, cross.item_frames) == (301, 451)
    assert (own.weights, own.gradients, own.optimizer) == (cross.weights, cross.gradients, cross.optimizer)
    ratio = cross.activations / own.activations
    if device_type == "cuda":  # fused attention: every saved tensor is linear in the frames
        assert ratio == pytest.approx(451 / 301, rel=1e-12)
    else:  # the math path's scores grow with the frames squared
        assert 451 / 301 < ratio < (451 / 301) ** 2
    assert cross.peak > own.peak and cross.device_bytes - cross.peak == own.device_bytes - own.peak


@pytest.mark.parametrize("dora", [False, True])
def test_the_trained_count_of_a_lora_is_its_real_adapters(folder, dora):
    section = load_config(folder / "config.yaml")["s2mel"]
    lora = S2MelLoRASettings(rank=4, alpha=8, dora=dora)
    model = load_s2mel(folder / "s2mel.pth", section, **V25_S2MEL)
    attach_lora(model, lora)
    real = sum(p.numel() for name, p in model.named_parameters() if "lora_" in name and p.requires_grad)
    facts = s2mel_facts(section, V25_S2MEL, lora)
    assert facts.trained == real and facts.parameters == s2mel_facts(section, V25_S2MEL, None).trained


def _prepared(tmp_path: Path) -> Path:
    """Header-only clips (the pre-flight reads the mel files' shapes): two clips of one speaker, one of another."""
    data = tmp_path / "data"
    for sub in ("codes", "s2mel_mel", "s2mel_style"):
        (data / sub).mkdir(parents=True)
    lines = []
    for index, frames in enumerate(CLIP_FRAMES):
        stem = f"clip{index}"
        np.save(data / "codes" / f"{stem}.npy", np.zeros(8, dtype=np.int64))
        np.save(data / "s2mel_mel" / f"{stem}.npy", np.zeros((80, frames), dtype=np.float32))
        np.save(data / "s2mel_style" / f"{stem}.npy", np.zeros(192, dtype=np.float32))
        lines.append(json.dumps({"target_codes_path": f"codes/{stem}.npy", "speaker": "a" if index < 2 else "b"}))
    manifest = data / "train.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def test_the_preflight_counts_cross_items(folder, tmp_path):
    manifest = _prepared(tmp_path)
    rows = {}
    for mode in ("own", "cross"):
        argv = ["--train", "s2mel", "--model-dir", str(folder), "--train-manifest", str(manifest), "--output-dir",
                str(tmp_path / mode), "--batch-size", "2", "--device", "cpu", "--s2mel-prompt", mode]
        plan = run_preflight(parse_argv(argv))
        assert plan.refusal is None, plan.lines()
        rows[mode] = next(check.message for check in plan.checks if check.name == "memory")
    assert "items up to 301 mel frames" in rows["own"] and "another clip" not in rows["own"]
    assert "items up to 451 mel frames: another clip's first 50% then the target" in rows["cross"]
