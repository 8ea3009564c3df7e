"""FSDP2 (``--sharding fsdp``) under torchrun on CPU (Gloo): two real processes on slices of the demo workspace.

An uninterrupted 2-process run, and one whose ranks were all SIGKILLed mid-epoch, resumed with 2 processes (it
ends bitwise equal to the uninterrupted run) and with 1 (its batch doubled, so the global batch stays 4: equal
within float tolerance). The data is ``test_torchrun``'s uniform set without dropout (every micro-batch has the padded width of
its global batch), so one process with the whole global batch computes what two with half of it do.
Checkpoints are consolidated on rank 0: the stock file, whose export loads strictly into a fresh model.
"""

from __future__ import annotations

import shutil
import sys

import pytest
import torch
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_optimizer_state_dict

from tests.test_torchrun import HOOKS, torchrun, uniform  # noqa: F401  (uniform: the data fixture)
from tests.trainer_helpers import (
    REPO,
    assert_same_training_state,
    events,
    load,
    run_cli,
    step_losses,
    tiny_args,
)
from trainer.fsdp_state import optimizer_state_by_index, optimizer_state_by_name
from trainer.sharding import fsdp_refusal
from trainer.vocab import TEXT_TENSORS

STEPS = 6  # 8 items, 2 per rank, 2 ranks: 2 steps per epoch
KILL_AT = 3  # saved every step: latest.pth holds step 3, half-way through the second epoch
TOLERANCE = {"rtol": 1e-4, "atol": 1e-6}


def fsdp_args(ws, uniform_dir, out, **overrides):
    data = {"train": uniform_dir / "train.jsonl", "val": uniform_dir / "train.jsonl"}
    # Validation every 2 steps (every rank runs the sharded model on its slice) and activation checkpointing of
    # the sharded blocks: both under FSDP too.
    values = {"max_steps": STEPS, "config": str(uniform_dir / "config.yaml"), "val_interval": 2,
              "max_val_batches": 1, "save_interval": 1, "grad_checkpointing": True, "sharding": "fsdp",
              **overrides}
    return tiny_args(ws, data, out, **values)


@pytest.fixture(scope="module")
def runs(demo_workspace, uniform, tmp_path_factory):  # noqa: F811
    root = tmp_path_factory.mktemp("fsdp")
    full, killed = root / "full", root / "killed"
    done = torchrun(fsdp_args(demo_workspace, uniform, full))
    assert done.returncode == 0, done.stderr[-3000:]
    cut = torchrun(fsdp_args(demo_workspace, uniform, killed), env={**HOOKS, "STUDIO_TEST_KILL_AFTER_STEP": str(KILL_AT)})
    assert cut.returncode != 0
    saved = load(killed / "latest.pth")
    assert (saved["step"], saved["epoch"], saved["position"]) == (KILL_AT, 1, 1)  # mid-epoch
    snapshot = root / "snapshot"
    shutil.copytree(killed, snapshot)
    return {"full": full, "full_stdout": done.stdout, "killed": killed, "snapshot": snapshot}


def assert_close_training_state(a: dict, b: dict) -> None:
    """The same step / epoch / position, and model and optimizer tensors equal within float tolerance."""
    assert (a["step"], a["epoch"], a["position"]) == (b["step"], b["epoch"], b["position"])
    assert a["model"].keys() == b["model"].keys()
    for key in a["model"]:
        torch.testing.assert_close(a["model"][key], b["model"][key], **TOLERANCE, msg=key)
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for index in sa:
        for name, value in sa[index].items():
            torch.testing.assert_close(value, sb[index][name], **TOLERANCE, msg=f"{index} {name}")
    assert a["optimizer"]["param_groups"] == b["optimizer"]["param_groups"]
    assert a["scheduler"] == b["scheduler"]


@pytest.mark.slow
def test_the_run_is_sharded_and_rank_0_writes_stock_checkpoints(runs, demo_workspace):
    from networks.unified_voice import build_model

    out, stdout = runs["full"], runs["full_stdout"]
    assert "sharding: FSDP2 over 2 processes" in stdout and "consolidated on rank 0" in stdout
    assert [e["step"] for e in events(out, "train")] == list(range(1, STEPS + 1))
    assert [e["step"] for e in events(out, "save")] == list(range(1, STEPS + 1))
    assert [e["step"] for e in events(out, "val")] == [2, 4, 6]
    ckpt = load(out / "latest.pth")
    base = load(demo_workspace.base_checkpoint)["model"]
    assert list(ckpt["model"]) == list(build_model(ckpt["model_config"]).state_dict())  # the stock keys, in order
    assert all(type(t) is torch.Tensor for t in ckpt["model"].values())  # plain tensors, not DTensors
    names = [name for group in ckpt["optimizer_param_names"] for name in group]
    assert sorted(ckpt["optimizer"]["state"]) == list(range(len(names)))
    for index, name in enumerate(names):  # each moment has its parameter's full shape
        assert ckpt["optimizer"]["state"][index]["exp_avg"].shape == ckpt["model"][name].shape, name
    assert ckpt["model"]["text_embedding.weight"].shape[0] == 1917  # grown: 1917 rows over 2 shards of 959
    for path in sorted(out.glob("model_step*.pth")):  # the freezer held the rows on both shards at every save
        model = load(path)["model"]
        for key in TEXT_TENSORS:
            assert torch.equal(model[key][:1000], base[key][:1000]), (path.name, key)
            assert torch.equal(model[key][1916], base[key][1000]), (path.name, key)
    moved = ckpt["model"]["text_head.weight"][1000:1916] != load(out / "model_step1.pth")["model"]["text_head.weight"][1000:1916]
    assert moved.any()  # the new rows train


@pytest.mark.slow
def test_killed_and_resumed_with_2_processes_ends_equal(runs, demo_workspace, uniform):  # noqa: F811
    resumed = torchrun(fsdp_args(demo_workspace, uniform, runs["killed"]), env=HOOKS)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "each of 2 ranks its own" in resumed.stdout
    # The same processes with their own RNG streams and shards back: bitwise, as DDP's resume.
    assert_same_training_state(load(runs["killed"] / "latest.pth"), load(runs["full"] / "latest.pth"))
    assert step_losses(runs["killed"]) == step_losses(runs["full"])


@pytest.mark.slow
def test_killed_and_resumed_with_1_process_ends_equal(runs, demo_workspace, uniform, tmp_path):  # noqa: F811
    out = tmp_path / "one"
    shutil.copytree(runs["snapshot"], out)
    done = run_cli(fsdp_args(demo_workspace, uniform, out, batch_size=4))  # the same global batch of 4
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resumed from" in done.stdout and "optimizer + scheduler" in done.stdout
    resume = events(out, "resume")[-1]
    assert (resume["step"], resume["world_size"], resume["global_batch"]) == (KILL_AT, 1, 4)
    assert_close_training_state(load(out / "latest.pth"), load(runs["full"] / "latest.pth"))
    full = step_losses(runs["full"])
    assert step_losses(out) == pytest.approx(full, rel=1e-5)


@pytest.mark.slow
def test_the_export_loads_strictly_as_a_stock_checkpoint(runs, demo_workspace, tmp_path):
    from data_tools.config import load_config
    from networks.unified_voice import build_model, load_gpt_state_dict

    bundle = tmp_path / "bundle"
    command = [sys.executable, "-m", "trainer.checkpoints", "export", str(runs["full"] / "latest.pth"),
               "--out", str(bundle), "--config", str(demo_workspace.config)]
    import subprocess

    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    state = torch.load(bundle / "gpt.pth", weights_only=True)["model"]
    fresh = build_model(load_config(bundle / "config.yaml")["gpt"])
    assert load_gpt_state_dict(fresh, state) == []  # strict: every key, every shape
    saved = load(runs["full"] / "latest.pth")["model"]
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, saved[key]), key


# ----- in one process: the optimizer state layouts, the refusals ----------------------------------------------


def two_group_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    groups = [{"params": [model[0].weight, model[1].weight], "weight_decay": 0.1},
              {"params": [model[0].bias, model[1].bias], "weight_decay": 0.0}]
    optimizer = torch.optim.AdamW(groups, lr=1e-2)
    model(torch.randn(5, 3)).sum().backward()
    optimizer.step()
    return model, optimizer


def test_the_gathered_optimizer_state_is_the_optimizers_own_layout():
    from trainer.checkpoints import optimizer_param_names

    model, optimizer = two_group_optimizer()
    names = optimizer_param_names(model, optimizer)
    by_name = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))
    by_index = optimizer_state_by_index(by_name, names)
    own = optimizer.state_dict()
    assert by_index["param_groups"] == own["param_groups"]
    assert by_index["state"].keys() == own["state"].keys()
    for index, state in own["state"].items():
        for key, value in state.items():
            assert torch.equal(by_index["state"][index][key], value), (index, key)
    back = optimizer_state_by_name(own, names)
    assert back["param_groups"] == by_name["param_groups"] and back["state"].keys() == by_name["state"].keys()


def test_the_gathered_layout_is_checked_against_the_optimizers_order():
    from trainer.checkpoints import optimizer_param_names

    model, optimizer = two_group_optimizer()
    names = optimizer_param_names(model, optimizer)
    by_name = get_optimizer_state_dict(model, optimizer, options=StateDictOptions(full_state_dict=True))
    with pytest.raises(ValueError, match="optimizer's order"):
        optimizer_state_by_index(by_name, [list(reversed(names[0])), names[1]])


def test_fsdp_refuses_lora_and_fp16():
    fsdp = {"sharding": "fsdp", "amp": "bf16", "lora": False}
    assert "LoRA" in (fsdp_refusal({**fsdp, "lora": True}) or "")
    assert "fp16" in (fsdp_refusal({**fsdp, "amp": "fp16"}) or "")
    assert fsdp_refusal(fsdp) is None and fsdp_refusal({**fsdp, "amp": "off"}) is None
    assert fsdp_refusal({**fsdp, "sharding": "ddp", "lora": True, "amp": "fp16"}) is None  # DDP takes both


def test_the_preflight_and_the_trainer_refuse_fsdp_with_lora_alike(demo_workspace, tmp_path, capsys):
    from tests.trainer_helpers import run_main
    from trainer.options import options_to_argv
    from trainer.options_parser import parse_argv
    from trainer.preflight import run_preflight

    values = {**parse_argv(demo_workspace.train_argv(max_steps=1)), "output_dir": str(tmp_path / "run"),
              "sharding": "fsdp", "lora": True}
    report = run_preflight(values)
    failed = {check.name: check.message for check in report.checks if not check.ok}
    assert list(failed) == ["device"] and "LoRA trains adapters only" in failed["device"], report.lines()
    capsys.readouterr()
    assert run_main(options_to_argv(values)) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"error: {failed['device']}"
    assert run_preflight({**values, "sharding": "ddp"}).ok
