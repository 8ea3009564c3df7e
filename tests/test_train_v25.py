"""IndexTTS-2.5 training (issue 23): the trainer trains the 2.5 GPT on 2.5 paired manifests.

- On the reference fixture: our manifest reading + data loading + trainer reproduce the fixture's losses
  (language row on every text position, the community-style masked loss) on its batch (1e-4, top-1 exact).
- On the demo's 2.5 workspace: the loss falls; SIGKILL mid-epoch and ``--resume auto`` end bitwise equal to
  an uninterrupted run; with the merges scheme the base rows of the grown text table stay bitwise frozen
  through weight decay and a resume; a resume with another text scheme is refused.
- Export: ``version: 2.5``, text rows in upstream's id order with the exported table, and the bundle loads
  strictly into the plain 2.5 model (``load_gpt_v25_file``) and gives the same logits as the checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from generations.indextts25.data.text_table import TextTable
from generations.indextts25.data.tiktoken_table import BASE_TEXT_ROWS, TABLE_NAME, TiktokenTable
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.registry import build_gpt
from networks.gpt_v25 import load_gpt_v25_file
from tests.conftest import shared_file
from tests.trainer_helpers import assert_same_training_state, events, load, run_cli, run_main, step_losses
from trainer.checkpoints import COMPLETE, export_checkpoint, verify_checkpoint
from trainer.options_parser import parse_argv
from trainer.plan import make_plan
from trainer.vocab import TEXT_TENSORS


def v25_args(ws: DemoV25Paths, data: dict[str, Path], out: Path, **overrides) -> list[str]:
    values = {
        "train_manifest": data["train"], "val_manifest": data["val"], "tokenizer": ws.tokenizer,
        "config": ws.config, "base_checkpoint": ws.base_checkpoint, "output_dir": out, "max_steps": 8,
        "batch_size": 2, "grad_accumulation": 1, "learning_rate": 3e-3, "warmup_steps": 3, "log_interval": 1,
        "val_interval": 1000, "save_interval": 2, "max_val_batches": 2, "num_workers": 0, "device": "cpu",
        "amp": "off", "resume": "auto", "keep_checkpoints": 10, "text_scheme": "merges", **overrides,
    }
    argv: list[str] = []
    for name, value in values.items():
        argv += ["--" + name.replace("_", "-"), str(value)]
    return argv


def pair_subset(source: Path, target: Path, count: int) -> Path:
    lines = [line for line in source.read_text(encoding="utf-8").splitlines() if line.strip()][:count]
    target.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return target


@pytest.fixture(scope="module")
def v25_ws(demo_workspace) -> DemoV25Paths:
    ws = DemoV25Paths.under(demo_workspace.root)
    assert ws.exists()
    return ws


@pytest.fixture(scope="module")
def v25_data(v25_ws) -> dict[str, Path]:
    folder = v25_ws.train_manifest.parent
    return {"train": pair_subset(v25_ws.train_manifest, folder / "exact_train.jsonl", 12),
            "val": pair_subset(v25_ws.val_manifest, folder / "exact_val.jsonl", 4)}


@pytest.fixture(scope="module")
def v25_short_run(v25_ws, v25_data, tmp_path_factory) -> Path:
    """Two steps with the merges scheme: the run the export and scheme tests start from."""
    out = tmp_path_factory.mktemp("v25_short") / "run"
    assert run_main(v25_args(v25_ws, v25_data, out, max_steps=2)) == 0
    return out


def write_fixture_manifest(expected: dict, folder: Path) -> Path:
    """The fixture's batch as a 2.5 paired manifest with precomputed ids (the stock table: 'bytes' scheme)."""
    lines = []
    for i, language in enumerate(("am", "am", "en")):
        text_len, code_len = int(expected["text_lengths"][i]), int(expected["code_lengths"][i])
        arrays = {"text_ids": expected["text_ids"][i, :text_len].numpy().astype(np.int32),
                  "codes": expected["codes"][i, :code_len].numpy().astype(np.int32),
                  "spk_vec": expected["spk_vec"][i].numpy(), "emo_vec": expected["emo_vec"][i].numpy()}
        for name, array in arrays.items():
            (folder / name).mkdir(parents=True, exist_ok=True)
            np.save(folder / name / f"item{i}.npy", array)
        lines.append(json.dumps({
            "id": f"item{i}", "speaker": f"spk{i}", "language": language,
            "prompt_spk_vec_path": f"spk_vec/item{i}.npy", "prompt_emo_vec_path": f"emo_vec/item{i}.npy",
            "target_text_ids_path": f"text_ids/item{i}.npy", "text_scheme": "bytes",
            "target_codes_path": f"codes/item{i}.npy", "target_code_len": code_len}))
    manifest = folder / "pairs.jsonl"
    manifest.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return manifest


def test_fixture_batch_losses_through_our_trainer(tmp_path):
    """lr 0: validation on the fixture's batch gives its losses (language row included) and its mel top-1."""
    root = shared_file("reference", "indextts25")
    expected = torch.load(root / "tiny_expected_v25.pt", weights_only=True)
    manifest = write_fixture_manifest(expected, tmp_path / "data")
    out = tmp_path / "run"
    table = Path(__file__).resolve().parents[1] / "tokenizers" / "indextts25" / TABLE_NAME
    argv = ["--train-manifest", str(manifest), "--val-manifest", str(manifest), "--tokenizer", str(table),
            "--text-scheme", "bytes", "--config", str(root / "tiny_config_v25.yaml"), "--base-checkpoint",
            str(root / "tiny_gpt_v25.pth"), "--output-dir", str(out), "--batch-size", "3", "--max-steps", "1",
            "--learning-rate", "0", "--val-interval", "1", "--num-workers", "0", "--device", "cpu", "--amp", "off"]
    assert run_main(argv) == 0
    val = events(out, "val")[-1]
    assert val["text_loss"] == pytest.approx(float(expected["text_loss"]), abs=1e-4)
    assert val["mel_loss"] == pytest.approx(float(expected["mel_loss"]), abs=1e-4)
    assert round(val["mel_top1"] * 54) == round(float(expected["mel_top1"]) * 54) == 8  # 8 of 54, exactly
    assert events(out, "start")[0]["version"] == "2.5"
    assert events(out, "train")[0]["mel_loss"] == pytest.approx(float(expected["mel_loss"]), rel=0.05)  # dropout
    fixture = torch.load(root / "tiny_gpt_v25.pth", weights_only=True)["model"]
    final = load(out / "latest.pth")
    assert all(torch.equal(final["model"][k], fixture[k]) for k in fixture)  # lr 0 changed nothing
    assert final["tokenizer"]["text_scheme"]["scheme"] == "bytes"


def test_v25_demo_loss_falls(v25_ws, tmp_path):
    out = tmp_path / "run"
    argv = v25_args(v25_ws, {"train": v25_ws.train_manifest, "val": v25_ws.val_manifest}, out, max_steps=30,
                    batch_size=8, log_interval=5, save_interval=30, val_interval=30)
    assert run_main(argv) == 0
    losses = step_losses(out)
    first = sum(losses[s] for s in range(1, 6)) / 5
    last = sum(losses[s] for s in range(26, 31)) / 5
    assert last < 0.8 * first, (first, last)


def test_v25_sigkill_mid_epoch_then_resume_is_bitwise_exact(v25_ws, v25_data, tmp_path, capsys):
    reference = tmp_path / "reference"
    # The uninterrupted reference and the resume run in this process (one thread, as the CLI runs); only the
    # run that is killed needs a process of its own.
    assert run_main(v25_args(v25_ws, v25_data, reference, grad_accumulation=2, val_interval=4)) == 0

    out = tmp_path / "run"
    argv = v25_args(v25_ws, v25_data, out, grad_accumulation=2, val_interval=4, num_workers=1)
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


def test_v25_merges_base_rows_stay_frozen_through_weight_decay_and_resume(v25_ws, v25_data, tmp_path):
    out = tmp_path / "run"
    argv = v25_args(v25_ws, v25_data, out, max_steps=10, weight_decay=0.1, learning_rate=3e-2)
    stopped = run_cli(argv, env={"STUDIO_TEST_STOP_AFTER_STEP": "5"})
    assert stopped.returncode == 130, stopped.stderr
    assert run_main(argv) == 0
    base = load(v25_ws.base_checkpoint)["model"]
    final = load(out / "latest.pth")
    tokenizer = TextTable(v25_ws.tokenizer)
    rows = tokenizer.number_text_tokens + 1
    assert final["step"] == 10 and final["base_vocab_size"] == BASE_TEXT_ROWS - 1
    assert final["model_config"]["number_text_tokens"] == tokenizer.number_text_tokens
    for key in TEXT_TENSORS:
        assert final["model"][key].shape[0] == rows
        assert torch.equal(final["model"][key][:BASE_TEXT_ROWS], base[key]), key  # spare row 60509 included
    # The Ethiopic rows the data uses trained: they are no longer the mean of their bytes' base rows.
    texts = [json.loads(line)["target_text"] for line in v25_data["train"].read_text(encoding="utf-8").splitlines()]
    used = sorted({i for text in texts for i in tokenizer.encode(text, "am") if i >= BASE_TEXT_ROWS})
    assert used
    from generations.indextts25.data.ethiopic_merges import added_token_base_ids

    start = {i: base["text_embedding.weight"][ids].double().mean(dim=0).float()
             for i, ids in added_token_base_ids(tokenizer.tokenizer).items() if i in used}
    assert all(not torch.equal(final["model"]["text_embedding.weight"][i], row) for i, row in start.items())


def test_resume_with_another_text_scheme_is_refused(v25_ws, v25_data, v25_short_run, tmp_path):
    for scheme in ("bytes", "translit"):
        values = parse_argv(v25_args(v25_ws, v25_data, v25_short_run, text_scheme=scheme))
        plan = make_plan(values, mmap=True)
        assert not plan.ok
        assert "text scheme differs: the checkpoint was trained with the 'merges' scheme" in plan.refusal
        assert f"this run uses '{scheme}'" in plan.refusal and "--text-scheme merges" in plan.refusal


def _logits(model, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        out = model(**batch)
    return out.text_logits, out.mel_logits


def test_a_25_checkpoint_verifies_complete(v25_short_run):
    report = verify_checkpoint(v25_short_run / "latest.pth")
    assert report.verdict == COMPLETE, report.lines()
    assert any("IndexTTS-2.5 'merges' text scheme" in c.detail for c in report.components)


def test_export_loads_into_the_plain_25_model_with_the_same_logits(v25_ws, v25_short_run, tmp_path):
    ckpt = load(v25_short_run / "latest.pth")
    bundle = tmp_path / "bundle"
    report = export_checkpoint(v25_short_run / "latest.pth", bundle, config=v25_ws.config)
    assert "'merges' text scheme" in report.notes[0]
    config = yaml.safe_load((bundle / "config.yaml").read_text(encoding="utf-8"))
    assert config["version"] == 2.5 and "spk_cond_mode" not in config["gpt"]
    tokenizer = TextTable(v25_ws.tokenizer)
    assert config["gpt"]["number_text_tokens"] == tokenizer.number_text_tokens
    exported = load_gpt_v25_file(config, bundle / "gpt.pth").eval()  # strict, 2.5 keys required by name

    ours = build_gpt(ckpt["model_config"])
    ours.load_state_dict(ckpt["model"], strict=True)
    ours.eval()
    # The exported table is upstream's layout: its ids for a text are the studio's ids mapped by upstream order.
    upstream = TiktokenTable.load(v25_ws.tokenizer, tokenizer.tokenizer.added)
    order = tokenizer.tokenizer.upstream_id_order()
    to_upstream = {ours_id: up_id for up_id, ours_id in enumerate(order)}
    texts = ["ሰላም ለዓለም", "ኢትዮጵያ"]
    ids = [tokenizer.encode(text, "am") for text in texts]
    width = max(map(len, ids))
    studio_ids = torch.tensor([row + [0] * (width - len(row)) for row in ids])
    upstream_ids = torch.tensor([[to_upstream[i] for i in row] + [0] * (width - len(row)) for row in ids])
    from generations.indextts25.data.ethiopic_merges import check_upstream_table

    assert check_upstream_table(bundle / TABLE_NAME) == tokenizer.added_tokens
    assert upstream.vocab_size == tokenizer.vocab_size
    generator = torch.Generator().manual_seed(3)
    batch = {"text_lengths": torch.tensor([len(r) for r in ids]), "codes": torch.randint(0, 8192, (2, 7), generator=generator),
             "code_lengths": torch.tensor([7, 5]), "spk_vec": torch.randn(2, 192, generator=generator),
             "emo_vec": torch.randn(2, ours.model_dim, generator=generator), "langs": torch.tensor([75, 75])}
    text_a, mel_a = _logits(ours, {"text_ids": studio_ids, **batch})
    text_b, mel_b = _logits(exported, {"text_ids": upstream_ids, **batch})
    assert torch.equal(mel_a, mel_b)
    index = torch.tensor(order)
    assert torch.equal(text_b, text_a.index_select(1, index))  # logits in upstream's id order
    card = (bundle / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "## Text (merges scheme)" in card and "`<|am|>` becomes" in card
    assert (bundle / (TABLE_NAME + ".LICENSE")).is_file() and not (bundle / "bpe.model").exists()


def test_export_of_v2_is_unchanged_by_the_25_branch(demo_workspace, tmp_path):
    """A v2 bundle still holds bpe.model and version 2.0 (the 2.5 branch is taken on the model config only)."""
    from generations.indextts2.demo.build import DemoPaths as DemoV2Paths

    ws = DemoV2Paths.under(demo_workspace.root)
    out = tmp_path / "run"
    data = {"train": pair_subset(ws.train_manifest, tmp_path / "t.jsonl", 4),
            "val": pair_subset(ws.val_manifest, tmp_path / "v.jsonl", 2)}
    for name in ("text_ids", "codes", "condition", "emo_vec"):
        (tmp_path / name).symlink_to(ws.train_manifest.parent / name)
    argv = ["--train-manifest", str(data["train"]), "--val-manifest", str(data["val"]), "--tokenizer",
            str(ws.extended_tokenizer), "--config", str(ws.config), "--base-checkpoint", str(ws.base_checkpoint),
            "--output-dir", str(out), "--max-steps", "1", "--batch-size", "2", "--num-workers", "0",
            "--device", "cpu", "--amp", "off"]
    assert run_main(argv) == 0
    bundle = tmp_path / "bundle"
    export_checkpoint(out / "latest.pth", bundle, config=ws.config)
    assert (bundle / "bpe.model").is_file() and not (bundle / TABLE_NAME).exists()
    assert yaml.safe_load((bundle / "config.yaml").read_text())["version"] == 2.0
