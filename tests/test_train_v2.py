"""IndexTTS2 training (issue 10): the trainer trains the v2 GPT on community-format paired data.

- On the reference fixture: our data loading + trainer reproduce the community trainer's validation losses and
  mel_top1 on its tiny batch (1e-4 / exact).
- On the demo's IndexTTS2 workspace: the loss falls within ~40 CPU steps; SIGKILL mid-epoch and
  ``--resume auto`` end bitwise equal to an uninterrupted run; with the extended tokenizer the base rows stay
  bitwise frozen through weight decay and a resume.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from data_tools.tokenizer import train_tokenizer
from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from tests.conftest import shared_file
from tests.trainer_helpers import assert_same_training_state, events, load, run_cli, run_main, step_losses
from trainer.checkpoints import export_checkpoint
from trainer.vocab import TEXT_TENSORS

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "english_train.txt"


def v2_args(ws: DemoV2Paths, data: dict[str, Path], out: Path, **overrides) -> list[str]:
    values = {
        "train_manifest": data["train"], "val_manifest": data["val"], "tokenizer": ws.extended_tokenizer,
        "config": ws.config, "base_checkpoint": ws.base_checkpoint, "output_dir": out, "max_steps": 8,
        "batch_size": 2, "grad_accumulation": 1, "learning_rate": 3e-3, "warmup_steps": 3, "log_interval": 1,
        "val_interval": 1000, "save_interval": 2, "max_val_batches": 2, "num_workers": 0, "device": "cpu",
        "amp": "off", "resume": "auto", "keep_checkpoints": 10, **overrides,
    }
    argv: list[str] = []
    for name, value in values.items():
        argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


def pair_subset(source: Path, target: Path, count: int) -> Path:
    """The first ``count`` pairs of a paired manifest, written beside it (paths stay relative to its folder)."""
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()][:count]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def v2_ws(demo_workspace) -> DemoV2Paths:
    ws = DemoV2Paths.under(demo_workspace.root)
    assert ws.exists()
    return ws


@pytest.fixture(scope="module")
def v2_data(v2_ws) -> dict[str, Path]:
    folder = v2_ws.train_manifest.parent
    return {"train": pair_subset(v2_ws.train_manifest, folder / "exact_train.jsonl", 12),
            "val": pair_subset(v2_ws.val_manifest, folder / "exact_val.jsonl", 4)}


def test_fixture_batch_losses_through_our_trainer(tmp_path):
    """lr 0: the model stays the fixture's, so validation on the fixture's batch gives its community values."""
    root = shared_file("reference", "fixtures_indextts2")
    expected = torch.load(root / "tiny_expected_v2.pt", weights_only=True)
    data = tmp_path / "data"
    shutil.copytree(root / "tiny_dataset", data)
    tokenizer = train_tokenizer([CORPUS], tmp_path / "tok100", vocab_size=100, model_type="bpe", language="en")
    out = tmp_path / "run"
    argv = ["--train-manifest", str(data / "gpt_pairs_train.jsonl"), "--val-manifest",
            str(data / "gpt_pairs_train.jsonl"), "--tokenizer", str(tokenizer), "--config",
            str(root / "tiny_config_v2.yaml"), "--base-checkpoint", str(root / "tiny_gpt_v2.pth"),
            "--output-dir", str(out), "--batch-size", "3", "--max-steps", "1", "--learning-rate", "0",
            "--val-interval", "1", "--num-workers", "0", "--device", "cpu", "--amp", "off"]
    assert run_main(argv) == 0
    val = events(out, "val")[-1]
    assert val["text_loss"] == pytest.approx(float(expected["text_loss"]), abs=1e-4)
    assert val["mel_loss"] == pytest.approx(float(expected["mel_loss"]), abs=1e-4)
    assert val["mel_top1"] == float(expected["mel_top1"])  # 11 of 54 masked positions, exactly
    assert events(out, "start")[0]["version"] == "2"
    final = load(out / "latest.pth")
    fixture = torch.load(root / "tiny_gpt_v2.pth", weights_only=True)["model"]
    assert all(torch.equal(final["model"][k], fixture[k]) for k in fixture)  # lr 0 changed nothing


def test_v2_demo_loss_falls_within_40_steps(v2_ws, tmp_path):
    out = tmp_path / "run"
    argv = v2_args(v2_ws, {"train": v2_ws.train_manifest, "val": v2_ws.val_manifest}, out, max_steps=40,
                   batch_size=8, log_interval=5, save_interval=40, val_interval=40)
    assert run_main(argv) == 0
    losses = step_losses(out)
    first = sum(losses[s] for s in range(1, 6)) / 5
    last = sum(losses[s] for s in range(36, 41)) / 5
    assert last < 0.8 * first, (first, last)


def test_v2_sigkill_mid_epoch_then_resume_is_bitwise_exact(v2_ws, v2_data, tmp_path, capsys):
    reference = tmp_path / "reference"
    # The uninterrupted reference and the resume run in this process (one thread, as the CLI runs); only the
    # run that is killed needs a process of its own.
    assert run_main(v2_args(v2_ws, v2_data, reference, grad_accumulation=2, val_interval=4)) == 0

    out = tmp_path / "run"
    argv = v2_args(v2_ws, v2_data, out, grad_accumulation=2, val_interval=4, num_workers=1)
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "5"})
    assert killed.returncode == -9, killed.stderr
    interrupted = load(out / "latest.pth")
    assert (interrupted["step"], interrupted["epoch"], interrupted["position"]) == (4, 1, 2)  # mid-epoch
    capsys.readouterr()
    assert run_main(argv) == 0
    resumed = capsys.readouterr().out
    assert "resumed from" in resumed and "data or batching changed" not in resumed
    assert_same_training_state(load(out / "latest.pth"), load(reference / "latest.pth"))
    assert step_losses(out) == step_losses(reference)


def test_v2_base_rows_stay_frozen_through_weight_decay_and_resume(v2_ws, v2_data, tmp_path):
    out = tmp_path / "run"
    argv = v2_args(v2_ws, v2_data, out, max_steps=10, weight_decay=0.1, learning_rate=3e-2)
    stopped = run_cli(argv, env={"STUDIO_TEST_STOP_AFTER_STEP": "5"})
    assert stopped.returncode == 130, stopped.stderr
    assert run_main(argv) == 0
    base = load(v2_ws.base_checkpoint)["model"]
    final = load(out / "latest.pth")
    assert final["step"] == 10 and final["base_vocab_size"] == 1000
    for key in TEXT_TENSORS:
        assert torch.equal(final["model"][key][:1000], base[key][:1000]), key
        assert torch.equal(final["model"][key][1916], base[key][1000]), key
    assert not torch.equal(final["model"]["text_head.weight"][1000:1916], base["text_head.weight"][:916])
    assert json.loads((out / "metrics.jsonl").read_text().splitlines()[0])["version"] == "2"


@pytest.fixture(scope="module")
def v2_short_run(v2_ws, v2_data, tmp_path_factory) -> Path:
    """Two plain steps (masked loss, fp32): the baseline the variants below are compared with."""
    out = tmp_path_factory.mktemp("v2_short") / "run"
    assert run_main(v2_args(v2_ws, v2_data, out, max_steps=2)) == 0
    return out


@pytest.mark.parametrize("extra", [["--grad-checkpointing"], ["--amp", "bf16"], ["--loss-mode", "indextts"]],
                         ids=["grad-checkpointing", "bf16", "loss-indextts"])
def test_v2_trains_with_checkpointing_amp_and_either_loss(v2_ws, v2_data, v2_short_run, tmp_path, extra):
    out = tmp_path / "run"
    assert run_main(v2_args(v2_ws, v2_data, out, max_steps=2) + extra) == 0
    losses, baseline = step_losses(out), step_losses(v2_short_run)
    assert sorted(losses) == [1, 2] and all(math.isfinite(v) for v in losses.values())
    resolved = yaml.safe_load((out / "train_config.yaml").read_text(encoding="utf-8"))
    if extra[0] == "--grad-checkpointing":  # recomputation changes memory, not numbers (dropout replays its RNG)
        assert resolved["grad_checkpointing"] is True
        assert losses[1] == pytest.approx(baseline[1], abs=1e-5) and losses[2] == pytest.approx(baseline[2], abs=1e-5)
    elif extra[0] == "--amp":
        assert resolved["amp"] == "bf16" and losses[1] == pytest.approx(baseline[1], rel=0.05)
    else:  # every position counts, stop padding included: another number from the same batch
        assert resolved["loss_mode"] == "indextts" and losses[1] != pytest.approx(baseline[1], abs=1e-4)


def test_v2_init_from_a_run_and_export_records_the_data_hours(v2_ws, v2_data, v2_short_run, tmp_path, capsys):
    source = v2_short_run / "latest.pth"
    out = tmp_path / "continued"
    argv = v2_args(v2_ws, v2_data, out, max_steps=2, init_from=source)
    argv = argv[:argv.index("--base-checkpoint")] + argv[argv.index("--base-checkpoint") + 2:]
    assert run_main(argv) == 0
    assert f"initialised from {source} weights with a fresh optimizer" in capsys.readouterr().out
    ckpt = load(out / "latest.pth")
    assert ckpt["step"] == 2
    assert {s["step"].item() for s in ckpt["optimizer"]["state"].values()} == {2}  # fresh: only this run's steps

    bundle = tmp_path / "bundle"
    export_checkpoint(out / "latest.pth", bundle, config=v2_ws.config)
    pairs = [json.loads(line) for line in v2_data["train"].read_text(encoding="utf-8").splitlines() if line.strip()]
    hours = sum(p["target_code_len"] for p in pairs) / 50 / 3600  # IndexTTS2 codes: 50 per second
    card = (bundle / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"- train: {len(pairs)} items, {hours:.2f} hours ({hours * 60:.1f} minutes) (exact_train.jsonl)" in card
