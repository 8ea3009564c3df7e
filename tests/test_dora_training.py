"""DoRA in the GPT trainer (issue 38 item 3): magnitude vectors saved and restored, a killed run resumed bit for bit,
the merged export strict in the stock layout with the wrapped model's logits, and the refusals. Real trainer
processes on slices of the demo workspace (IndexTTS-1.5), as tests/test_lora_training.py does for LoRA."""

from __future__ import annotations

import shutil

import pytest
import torch

from networks.lora import MAGNITUDE_SUFFIX
from tests.test_lora_training import (
    LORA,
    STEPS,
    adapters_of,
    assert_resumed_as_uninterrupted,
    export_beside_adapted,
)
from tests.test_train_cli import refusal
from tests.trainer_helpers import (
    load,
    run_cli,
    run_main,
    subset_manifest,
    tiny_args,
)
from trainer.checkpoints.export import export_checkpoint
from trainer.synthesis.adapter_file import merge_adapter_file

DORA = {**LORA, "lora_dora": True}
PROJECTIONS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("dora")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 12),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4)}


def args(ws, data, out, **overrides):
    return tiny_args(ws, data, out, **{"max_steps": STEPS, "grad_accumulation": 2, "val_interval": 3, **DORA,
                                       "grad_checkpointing": True, **overrides})


@pytest.fixture(scope="module")
def reference(demo_workspace, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("dora_reference") / "run"
    proc = run_cli(args(demo_workspace, data, out))
    assert proc.returncode == 0, proc.stderr
    assert "DoRA: rank 4" in proc.stdout
    return out


def test_a_dora_run_trains_and_saves_its_magnitudes(reference):
    final = load(reference / "latest.pth")
    saved = adapters_of(final)
    assert saved["config"]["dora"] is True
    magnitudes = {f"gpt.h.0.{t}{MAGNITUDE_SUFFIX}" for t in PROJECTIONS}
    assert magnitudes <= set(saved["adapter"]) and len(saved["adapter"]) == 12
    for key in magnitudes:  # trained away from their start, the column norms of the (frozen) base weight
        start = final["model"][key.removesuffix(MAGNITUDE_SUFFIX) + ".weight"].norm(dim=0)
        assert saved["adapter"][key].dtype == torch.float32
        assert not torch.allclose(saved["adapter"][key], start, atol=1e-6), key
    names = [n for group in final["optimizer_param_names"] for n in group]
    assert {n for n in names if n.endswith(MAGNITUDE_SUFFIX)} == magnitudes
    from trainer.checkpoints.inspect import inspect_checkpoint, inspect_lines

    assert any(line.startswith("LoRA:        rank 4, alpha 8, DoRA")
               for line in inspect_lines(inspect_checkpoint(reference / "latest.pth")))


def test_sigkill_then_resume_with_dora_is_bitwise_exact(demo_workspace, data, reference, tmp_path):
    out = tmp_path / "run"
    argv = args(demo_workspace, data, out)
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "5"})
    assert killed.returncode == -9
    assert load(out / "latest.pth")["step"] == 4
    resumed = run_cli(argv)
    assert resumed.returncode == 0, resumed.stderr
    assert "LoRA adapters (12 tensors)" in resumed.stdout
    assert_resumed_as_uninterrupted(out, reference)


def test_merged_export_loads_strictly_and_gives_the_wrapped_logits(reference, tmp_path):
    ckpt, merged, stock, wrapped, batch = export_beside_adapted(reference / "latest.pth", tmp_path / "bundle")
    with torch.no_grad():
        a, b = wrapped(**batch), stock(**batch)
    torch.testing.assert_close(b.mel_logits, a.mel_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(b.text_logits, a.text_logits, rtol=0, atol=1e-5)
    # the adapter-only file carries the magnitudes too: merged for synthesis it is the same gpt.pth
    export_checkpoint(reference / "latest.pth", tmp_path / "adapter", adapter_only=True)
    again = merge_adapter_file(ckpt["model"], tmp_path / "adapter" / "adapter.pth")
    for key, value in merged.items():
        assert torch.equal(again[key], value), key


def test_resume_as_plain_lora_and_dora_without_lora_are_refused(demo_workspace, data, reference, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(reference, out)
    assert run_main(args(demo_workspace, data, out, max_steps=STEPS + 2, lora_dora=False)) == 2
    assert "another layout (DoRA, rank 4" in refusal(capsys)
    fresh = tmp_path / "fresh"
    assert run_main(args(demo_workspace, data, fresh, lora=False)) == 2
    assert "--lora-dora" in refusal(capsys) and not fresh.exists()
