"""Issue 36 item 3: the training form's GPU presets come from the memory estimate (one source of truth).

Every GPU preset the form offers sets exactly what ``trainer.memory_estimate.gpu_presets`` computes for its
released GPT and card, and its batch fits that card by the estimate; the demo and S2Mel presets stay as they were.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from generations.indextts2 import presets as indextts2_presets
from generations.indextts25 import presets as indextts25_presets
from generations.registry import by_id
from tests.conftest import shared_file
from trainer.memory_estimate import (
    GIB,
    PRESET_CODES,
    PRESET_TEXT_TOKENS,
    RunShape,
    estimate_run_memory,
    gpu_presets,
)
from webui.training import presets
from webui.training import training_form as tf

MEMORY_KEYS = ("amp", "lora", "grad_checkpointing", "batch_size", "grad_accumulation")


def _files() -> tf.WorkspaceFiles:
    root = Path("/ws")
    return tf.WorkspaceFiles(train_manifest=root / "t.jsonl", val_manifest=root / "v.jsonl", tokenizer=root / "t.model",
                             config=root / "config.yaml", base_checkpoint=root / "gpt.pth", output_dir=root / "runs")


def test_released_gpts_are_the_reference_ones():
    v2 = json.loads((Path(__file__).parent / "fixtures" / "indextts2_gpt_state_dict_shapes.json").read_text())
    assert v2["config"] == indextts2_presets.RELEASED_GPT == by_id("2").presets.released_gpt()
    v25 = json.loads(shared_file("reference", "indextts25", "indextts25_gpt_state_dict_shapes.json").read_text())
    assert {**v25["gpt_config"], "spk_cond_mode": v25["spk_cond_mode"]} == indextts25_presets.RELEASED_GPT


def test_every_gpu_preset_of_the_form_is_what_the_estimate_computes():
    offered = [name for name in tf.preset_names() if name not in tf.demo_presets()
               and tf.apply_preset(name, {}, _files())["train"] == "gpt"]
    assert offered and set(offered) == set(presets.gpu_presets())  # no GPT preset written by hand
    for name in offered:
        preset = presets.gpu_presets()[name]
        values = tf.apply_preset(name, {}, _files())
        computed = next(p for p in gpu_presets(preset.facts(), lora=preset.lora) if p.gpu_gb == preset.gpu_gb)
        assert computed.estimate is not None, name
        assert {key: values[key] for key in MEMORY_KEYS} == computed.options, name
        shape = RunShape(batch_size=values["batch_size"], text_tokens=PRESET_TEXT_TOKENS, codes=PRESET_CODES,
                         amp=values["amp"], grad_checkpointing=values["grad_checkpointing"], lora=values["lora"])
        assert estimate_run_memory(preset.facts(), shape).device_bytes <= preset.gpu_gb * GIB, name
        assert values["device"] == "cuda" and str(preset.gpu_gb) in name  # the card its name promises


def test_the_lora_preset_stays_lora_and_the_s2mel_presets_are_kept():
    assert tf.apply_preset(indextts25_presets.LORA24, {}, _files())["lora"] is True
    lora = tf.apply_preset(tf.S2MEL_LORA12_PRESET, {}, _files())
    assert (lora["train"], lora["lora"], lora["batch_size"], lora["amp"]) == ("s2mel", True, 8, "off")
    with pytest.raises(KeyError, match="no preset named"):
        tf.apply_preset("no such preset", {}, _files())
