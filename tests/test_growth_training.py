"""Issue 4 through the trainer: grow to the extended tokenizer, keep base rows frozen across a kill and a
resume (high lr, weight decay 0.1, bf16 after the resume), refuse a changed tokenizer, --init-from."""

from __future__ import annotations

import pytest
import torch

from data_tools.text_tokenizer import TextTokenizer
from tests.trainer_helpers import events, load, run_cli, run_main, subset_manifest, tiny_args
from trainer.vocab import TEXT_TENSORS, grow_text_vocab

STEPS = 30
LR = 3e-2


@pytest.fixture(scope="module")
def grown_run(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("growth")
    data = {
        "train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 12),
        "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2),
    }
    out = root / "run"
    argv = tiny_args(demo_workspace, data, out, max_steps=STEPS, learning_rate=LR, weight_decay=0.1,
                     warmup_steps=2, save_interval=5, log_interval=5, val_interval=10)
    killed = run_cli(argv, env={"STUDIO_TEST_KILL_AFTER_STEP": "22"})
    assert killed.returncode == -9, killed.stderr
    assert "frozen: " in killed.stdout and "text vocabulary grown 1000 -> 1916" in killed.stdout
    assert "new rows initialised" in killed.stdout  # the init method is logged
    argv_bf16 = [*argv, "--amp", "bf16"]
    assert run_main(argv_bf16) == 0
    return {"out": out, "data": data, "argv": argv}


def test_base_rows_bitwise_equal_to_base_checkpoint_and_new_rows_moved(demo_workspace, grown_run):
    base = load(demo_workspace.base_checkpoint)["model"]
    final = load(grown_run["out"] / "latest.pth")
    assert final["step"] == STEPS and final["base_vocab_size"] == 1000
    assert final["model_config"]["number_text_tokens"] == 1916
    assert final["hparams"]["amp"] == "bf16" and final["hparams"]["weight_decay"] == 0.1
    model = final["model"]
    for key in TEXT_TENSORS:
        assert model[key].shape[0] == 1917
        assert torch.equal(model[key][:1000], base[key][:1000]), key  # base piece rows
        assert torch.equal(model[key][1916], base[key][1000]), key  # the extra row, moved to the end

    start = grow_text_vocab(base, load_config_gpt(demo_workspace), TextTokenizer(demo_workspace.extended_tokenizer),
                            TextTokenizer(demo_workspace.base_tokenizer)).state_dict
    head_moved = (model["text_head.weight"][1000:1916] != start["text_head.weight"][1000:1916]).any(dim=1)
    assert head_moved.all()  # every new head row trains (softmax) and decays
    used = new_ids_in(grown_run["data"]["train"], demo_workspace)
    assert used
    for token in used:
        assert not torch.equal(model["text_embedding.weight"][token], start["text_embedding.weight"][token])


def load_config_gpt(ws):
    from data_tools.config import load_config

    return load_config(ws.config)["gpt"]


def new_ids_in(manifest, ws):
    import json

    tokenizer = TextTokenizer(ws.extended_tokenizer)
    ids = set()
    for line in manifest.read_text(encoding="utf-8").splitlines():
        ids.update(i for i in tokenizer.encode(json.loads(line)["text"]) if i >= 1000)
    return sorted(ids)


def test_every_saved_checkpoint_kept_the_base_rows(demo_workspace, grown_run):
    base = load(demo_workspace.base_checkpoint)["model"]
    paths = sorted(grown_run["out"].glob("model_step*.pth"))
    assert len(paths) >= 4
    for path in paths:
        model = load(path)["model"]
        for key in TEXT_TENSORS:
            assert torch.equal(model[key][:1000], base[key][:1000]), (path.name, key)


def test_resume_with_changed_tokenizer_refused_then_init_from_starts_at_step_0(demo_workspace, grown_run,
                                                                               tmp_path, capsys):
    out = grown_run["out"]
    changed = [*grown_run["argv"], "--tokenizer", str(demo_workspace.base_tokenizer)]
    assert run_main(changed) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ")
    assert "tokenizer differs" in err[0] and f"--init-from {out / 'latest.pth'}" in err[0]

    new_out = tmp_path / "continued"
    argv = tiny_args(demo_workspace, grown_run["data"], new_out, tokenizer=demo_workspace.base_tokenizer,
                     init_from=out / "latest.pth", max_steps=2, learning_rate=LR, warmup_steps=4)
    assert run_main(argv) == 0
    text = capsys.readouterr().out
    assert f"initialised from {out / 'latest.pth'} weights with a fresh optimizer, scheduler and grad scaler" in text
    assert "step 0, full warm-up of 4 steps" in text
    start = events(new_out, "start")[0]
    assert start["step"] == 0
    first = events(new_out, "train")[0]
    assert first["step"] == 1 and first["lr"] == pytest.approx(LR / 4)
    ckpt = load(new_out / "latest.pth")
    assert ckpt["step"] == 2 and ckpt["base_vocab_size"] == 1000
    assert ckpt["optimizer"]["state"][0]["step"].item() == 2  # fresh optimizer: only this run's steps
    base = load(demo_workspace.base_checkpoint)["model"]
    assert torch.equal(ckpt["model"]["text_embedding.weight"][:1000], base["text_embedding.weight"][:1000])
