"""IndexTTS-2.5 through the trainer (needs the 2.5 training path): --lang-init-from changes only the run's
language row (the others bitwise, through a resume), and LoRA trains adapters that export merged."""

from __future__ import annotations

import torch

from generations.indextts25.data.tiktoken_table import language_index
from tests.test_train_v25 import pair_subset, v25_args, v25_data, v25_ws  # noqa: F401 (fixtures)
from tests.trainer_helpers import load, run_main
from trainer.checkpoints import export_checkpoint
from trainer.lora_setup import ADAPTER_COMPONENT


def test_lang_init_from_changes_only_the_run_language_row(v25_ws, v25_data, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "run"
    data = {"train": f"{v25_data['train']}::am", "val": v25_data["val"]}
    argv = v25_args(v25_ws, data, out, max_steps=4, lang_init_from="en", lang_lr_mult=10.0, weight_decay=0.1)
    assert run_main(argv) == 0
    said = capsys.readouterr().out
    assert "language row am (row 75) initialised from en (row 0)" in said
    base = torch.load(v25_ws.base_checkpoint, weights_only=True)
    base = base.get("model", base)["lang_embedding.weight"]
    table = load(out / "latest.pth")["model"]["lang_embedding.weight"]
    changed = [row for row in range(table.shape[0]) if not torch.equal(table[row], base[row])]
    assert changed == [language_index("am")]
    assert not torch.equal(table[75], base[0])  # copied from en, then trained
    resumed = v25_args(v25_ws, data, out, max_steps=6, lang_init_from="en", lang_lr_mult=10.0, weight_decay=0.1)
    assert run_main(resumed) == 0
    assert "not copied again on resume" in capsys.readouterr().out
    table = load(out / "latest.pth")["model"]["lang_embedding.weight"]
    assert [row for row in range(table.shape[0]) if not torch.equal(table[row], base[row])] == [75]


def test_v25_lora_exports_merged(v25_ws, v25_data, tmp_path):  # noqa: F811
    out = tmp_path / "run"
    argv = [*v25_args(v25_ws, v25_data, out, max_steps=3, lora_rank=4), "--lora", "--grad-checkpointing"]
    assert run_main(argv) == 0
    ckpt = load(out / "latest.pth")
    assert ckpt["extra"]["state"][ADAPTER_COMPONENT]["adapter"]
    export_checkpoint(out / "latest.pth", tmp_path / "bundle")
    from networks.gpt_v25 import load_gpt_v25_file

    model = load_gpt_v25_file(yaml_of(tmp_path / "bundle" / "config.yaml"), tmp_path / "bundle" / "gpt.pth")
    assert model is not None


def yaml_of(path):
    import yaml

    return yaml.safe_load(path.read_text(encoding="utf-8"))
