"""LoRA and replay on IndexTTS2 (paired manifests) through the real trainer: adapters trained under bf16
autocast with gradient checkpointing stay float32 and reach a merged export that loads strictly; weighted
manifests draw their shares."""

from __future__ import annotations

import json

import torch

from networks.unified_voice import build_model
from tests.test_train_v2 import pair_subset, v2_args, v2_data, v2_ws  # noqa: F401 (fixtures)
from tests.trainer_helpers import events, load, run_main
from trainer.checkpoints.export import export_checkpoint
from trainer.lora_setup import ADAPTER_COMPONENT


def test_v2_lora_run_under_bf16_with_checkpointing_exports_merged(v2_ws, v2_data, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    argv = v2_args(v2_ws, v2_data, out, max_steps=4, amp="bf16", lora_rank=4, lora_alpha=4.0)
    argv += ["--lora", "--grad-checkpointing", "--no-lora-train-embeddings", "--no-lora-train-heads"]
    assert run_main(argv) == 0
    ckpt = load(out / "latest.pth")
    adapter = ckpt["extra"]["state"][ADAPTER_COMPONENT]["adapter"]
    assert adapter and all(t.dtype == torch.float32 for t in adapter.values())
    assert all(t.abs().sum() > 0 for k, t in adapter.items() if k.endswith("lora_B"))
    export_checkpoint(out / "latest.pth", tmp_path / "bundle")
    merged = torch.load(tmp_path / "bundle" / "gpt.pth", weights_only=True)["model"]
    model = build_model(ckpt["model_config"])
    model.load_state_dict(merged, strict=True)
    key = "gpt.h.0.mlp.c_fc.weight"
    assert not torch.equal(merged[key], ckpt["model"][key])


def test_v2_replay_weights(v2_ws, v2_data, tmp_path, capsys):  # noqa: F811
    folder = v2_data["train"].parent
    rows = [json.loads(line) for line in v2_data["train"].read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in rows:  # copies outside the demo workspace: its relative paths made absolute
        row.update({k: str(folder / v) for k, v in row.items() if k.endswith("_path") and isinstance(v, str)})
    first, second = tmp_path / "replay_a.jsonl", tmp_path / "replay_b.jsonl"
    first.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[:8]), encoding="utf-8")
    second.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[8:]), encoding="utf-8")
    out = tmp_path / "run"
    data = {"train": f"{first}::am@1", "val": f"{v2_data['val']}::am"}
    argv = [*v2_args(v2_ws, data, out, max_steps=2), "--train-manifest", f"{second}::en@3"]
    assert run_main(argv) == 0
    said = capsys.readouterr().out
    assert "replay_a.jsonl::am@1: 3 of 12 samples per epoch (8 items, x0.38)" in said
    assert "replay_b.jsonl::en@3: 9 of 12 samples per epoch (4 items, x2.25)" in said
    assert events(out, "end")[-1]["status"] == "completed"
