"""LoRA in the trainer (issue 23 item 4): exact resume with adapters, a frozen base, merged and adapter-only
export, and the resume refusals. Real trainer processes on slices of the demo workspace (IndexTTS-1.5)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from networks.lora import LoRAConfig, inject_lora, load_adapter_state
from networks.unified_voice import build_model
from tests.test_train_cli import refusal
from tests.trainer_helpers import (
    assert_same_training_state,
    events,
    load,
    run_cli,
    run_main,
    step_losses,
    subset_manifest,
    tiny_args,
)
from trainer.checkpoints.export import export_checkpoint
from trainer.lora_setup import ADAPTER_COMPONENT

STEPS = 6
LORA = {"lora": True, "lora_rank": 4, "lora_alpha": 8.0, "lora_dropout": 0.1, "lora_layers": "0",
        "lora_train_embeddings": False, "lora_train_heads": False}


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("lora")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 12),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4)}


def args(ws, data, out, **overrides):
    return tiny_args(ws, data, out, **{"max_steps": STEPS, "grad_accumulation": 2, "val_interval": 3, **LORA,
                                       "grad_checkpointing": True, **overrides})


@pytest.fixture(scope="module")
def reference(demo_workspace, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("lora_reference") / "run"
    proc = run_cli(args(demo_workspace, data, out))
    assert proc.returncode == 0, proc.stderr
    return out


def adapters_of(ckpt):
    return ckpt["extra"]["state"][ADAPTER_COMPONENT]


def assert_resumed_as_uninterrupted(out: Path, reference: Path) -> None:
    """The resumed run ``out`` ends bitwise as the uninterrupted ``reference``: state, adapters, losses, steps."""
    a, b = load(out / "latest.pth"), load(reference / "latest.pth")
    assert_same_training_state(a, b)
    assert adapters_of(a)["adapter"].keys() == adapters_of(b)["adapter"].keys()
    for key, value in adapters_of(b)["adapter"].items():
        assert torch.equal(adapters_of(a)["adapter"][key], value), key
    assert step_losses(out) == step_losses(reference)
    assert [e["step"] for e in events(out, "train")] == list(range(1, STEPS + 1))


def export_beside_adapted(latest: Path, out: Path) -> tuple[dict, dict, torch.nn.Module, torch.nn.Module, dict]:
    """Export ``latest`` to ``out``: (its checkpoint, the merged gpt.pth state, the stock model loaded strictly from
    it, the model with the saved adapters live, a small batch for both), all in eval mode."""
    ckpt = load(latest)
    export_checkpoint(latest, out)
    merged = torch.load(out / "gpt.pth", weights_only=True)["model"]
    assert list(merged) == list(ckpt["model"])  # exactly the stock key layout
    stock = build_model(ckpt["model_config"]).eval()
    stock.load_state_dict(merged, strict=True)
    adapted = build_model(ckpt["model_config"])
    adapted.load_state_dict(ckpt["model"], strict=True)
    saved = adapters_of(ckpt)
    inject_lora(adapted, LoRAConfig.from_dict(saved["config"]))
    load_adapter_state(adapted, saved["adapter"], "test")
    gen = torch.Generator().manual_seed(0)
    batch = {"text_ids": torch.randint(2, 100, (2, 7), generator=gen), "text_lengths": torch.tensor([7, 4]),
             "codes": torch.randint(0, 1000, (2, 9), generator=gen), "code_lengths": torch.tensor([6, 9]),
             "cond_mels": torch.randn(2, 100, 30, generator=gen), "cond_mel_lengths": torch.tensor([30, 21])}
    return ckpt, merged, stock, adapted.eval(), batch


def test_lora_run_trains_only_the_adapters(demo_workspace, reference):
    final = load(reference / "latest.pth")
    assert final["step"] == STEPS
    saved = adapters_of(final)
    assert saved["config"]["rank"] == 4 and saved["config"]["layers"] == [0]
    assert sorted(saved["adapter"]) == sorted(f"gpt.h.0.{t}.{f}" for t in ("attn.c_attn", "attn.c_proj", "mlp.c_fc",
                                                                           "mlp.c_proj") for f in ("lora_A", "lora_B"))
    assert all(saved["adapter"][k].dtype == torch.float32 for k in saved["adapter"])
    assert all(saved["adapter"][k].abs().sum() > 0 for k in saved["adapter"] if k.endswith("lora_B"))
    # the model holds the stock layout, and the frozen base is bitwise the base checkpoint (grown) at the start
    assert not any(k.endswith(("lora_A", "lora_B")) for k in final["model"])
    first = load(reference / "model_step2.pth")
    for key, value in final["model"].items():
        assert torch.equal(value, first["model"][key]), key
    names = [n for group in final["optimizer_param_names"] for n in group]
    assert names and all(n.endswith(("lora_A", "lora_B")) for n in names)


def test_sigkill_then_resume_with_adapters_is_bitwise_exact(demo_workspace, data, reference, tmp_path):
    out = tmp_path / "run"
    argv = args(demo_workspace, data, out)
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "5"})
    assert killed.returncode == -9
    interrupted = load(out / "latest.pth")
    assert (interrupted["step"], interrupted["epoch"], interrupted["position"]) == (4, 1, 2)  # mid-epoch
    resumed = run_cli(argv)
    assert resumed.returncode == 0, resumed.stderr
    assert "LoRA adapters (8 tensors)" in resumed.stdout
    assert_resumed_as_uninterrupted(out, reference)


def test_merged_export_loads_strictly_and_matches_the_adapted_model(reference, tmp_path):
    ckpt, _, plain, adapted, batch = export_beside_adapted(reference / "latest.pth", tmp_path / "bundle")
    with torch.no_grad():
        a, b = adapted(**batch), plain(**batch)
        base = build_model(ckpt["model_config"]).eval()
        base.load_state_dict(ckpt["model"])
        c = base(**batch)
    torch.testing.assert_close(b.mel_logits, a.mel_logits, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(c.mel_logits, a.mel_logits, atol=1e-5)


def test_a_lora_checkpoint_verifies_complete(reference):
    from trainer.checkpoints import COMPLETE, verify_checkpoint

    report = verify_checkpoint(reference / "latest.pth")
    assert report.verdict == COMPLETE, report


def test_inspect_shows_the_adapters(reference):
    from trainer.checkpoints.inspect import inspect_checkpoint, inspect_lines

    info = inspect_checkpoint(reference / "latest.pth")
    assert info["lora"]["rank"] == 4 and info["lora"]["tensors"] == 8
    assert any(line.startswith("LoRA:        rank 4, alpha 8") for line in inspect_lines(info))


def test_adapter_only_export(reference, tmp_path):
    report = export_checkpoint(reference / "latest.pth", tmp_path / "adapter", adapter_only=True)
    assert [p.name for p in report.files] == ["adapter.pth"]
    payload = torch.load(tmp_path / "adapter" / "adapter.pth", weights_only=True)
    assert payload["lora_config"]["rank"] == 4 and len(payload["adapter"]) == 8 and payload["step"] == STEPS


def test_resume_without_lora_or_with_another_layout_is_refused(demo_workspace, data, reference, tmp_path, capsys):
    import shutil

    out = tmp_path / "run"
    shutil.copytree(reference, out)
    assert run_main(tiny_args(demo_workspace, data, out, max_steps=STEPS + 2)) == 2
    assert "holds LoRA adapters (rank 4" in refusal(capsys)
    assert run_main(args(demo_workspace, data, out, max_steps=STEPS + 2, lora_rank=8)) == 2
    assert "another layout" in refusal(capsys)


def test_init_from_a_lora_checkpoint_starts_from_its_merged_weights(demo_workspace, data, reference, tmp_path):
    from data_tools.config import load_config
    from data_tools.text_tokenizer import TextTokenizer
    from trainer.checkpoints import load_checkpoint
    from trainer.model_source import from_init_checkpoint

    config = load_config(demo_workspace.config)
    start = from_init_checkpoint(reference / "latest.pth", config["gpt"], demo_workspace.config, config,
                                 TextTokenizer(demo_workspace.extended_tokenizer))
    ckpt = load_checkpoint(reference / "latest.pth")
    key = "gpt.h.0.attn.c_attn.weight"
    assert not torch.equal(start.state_dict[key], ckpt["model"][key])
    assert torch.equal(start.state_dict["gpt.h.1.attn.c_attn.weight"], ckpt["model"]["gpt.h.1.attn.c_attn.weight"])


def test_synthesis_speaks_with_the_adapters_and_the_test_tab_can_switch_them_off(demo_workspace, reference,
                                                                                  tmp_path):
    import shutil

    from data_tools.config import load_config
    from trainer.synthesis.gpt_loading import load_gpt
    from webui.testing.listen import (
        ADAPTER_OFF_PREFIX,
        DecodeChoice,
        model_choices,
        resolve_model,
        synthesis_argv,
    )

    config = load_config(demo_workspace.config)
    ckpt = load(reference / "latest.pth")
    key = "gpt.h.0.attn.c_attn.weight"
    on = load_gpt(reference / "latest.pth", config, demo_workspace.config)
    off = load_gpt(reference / "latest.pth", config, demo_workspace.config, adapter=False)
    assert not torch.equal(on.state_dict()[key], ckpt["model"][key])  # merged
    assert torch.equal(off.state_dict()[key], ckpt["model"][key])  # the base weights alone

    workspace = tmp_path / "ws"
    shutil.copytree(reference, workspace / "runs" / "lora")
    keys = [choice.key for choice in model_choices(workspace)]
    latest = str(workspace / "runs" / "lora" / "latest.pth")
    assert latest in keys and ADAPTER_OFF_PREFIX + latest in keys
    spec_on = resolve_model(latest, workspace)
    spec_off = resolve_model(ADAPTER_OFF_PREFIX + latest, workspace)
    assert spec_on.adapter and not spec_off.adapter and "adapter off" in spec_off.label
    args = ("python", Path("ref.wav"), Path("out.wav"), Path("r.json"), DecodeChoice())
    argv_off = synthesis_argv(args[0], spec_off, "ሰላም", *args[1:])
    argv_on = synthesis_argv(args[0], spec_on, "ሰላም", *args[1:])
    assert "--no-adapter" in argv_off and "--no-adapter" not in argv_on
    from trainer.synthesize import build_parser

    assert build_parser().parse_args(argv_off[3:]).adapter is False


@pytest.mark.parametrize(("change", "expected"), [
    ({"lora": True, "lora_layers": "0,99"}, "block(s) 99 do not exist"),
    ({"lora": True, "lora_targets": "attn.q"}, "unknown LoRA target(s) attn.q"),
    ({"lora": True, "lora_layers": "x"}, "expected block indices"),
    ({"lang_init_from": "en"}, "applies to IndexTTS-2.5 GPTs"),
    ({"lang_lr_mult": 3.0}, "applies to IndexTTS-2.5 GPTs"),
])
def test_preflight_and_trainer_refuse_bad_lora_and_language_options_alike(demo_workspace, tmp_path, capsys, change,
                                                                          expected):
    from trainer.options import options_to_argv
    from trainer.options_parser import parse_argv
    from trainer.preflight import run_preflight

    values = parse_argv(demo_workspace.train_argv(max_steps=2))
    values.update(output_dir=str(tmp_path / "run"), **change)
    report = run_preflight(values)
    failed = {c.name: c.message for c in report.checks if not c.ok}
    assert list(failed) == ["LoRA and languages"] and expected in failed["LoRA and languages"], report.lines()
    capsys.readouterr()
    assert run_main(options_to_argv(values)) == 2
    assert refusal(capsys) == f"error: {failed['LoRA and languages']}"


def test_preflight_says_what_lora_will_do(demo_workspace, tmp_path):
    from trainer.options_parser import parse_argv
    from trainer.preflight import run_preflight

    values = parse_argv(demo_workspace.train_argv(max_steps=2))
    values.update(output_dir=str(tmp_path / "run"), **LORA)
    report = run_preflight(values)
    assert report.ok, report.lines()
    check = next(c for c in report.checks if c.name == "LoRA and languages")
    assert "LoRA rank 4, alpha 8 on attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj" in check.message
