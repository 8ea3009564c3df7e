"""Taking over a community IndexTTS2 run end to end (issue 10): repair its model_step file, resume our trainer from
the repaired file, and check that the first optimizer step after the resume used the community's AdamW moments."""

from __future__ import annotations

import shutil

import pytest
import torch

from tests.conftest import shared_file
from tests.test_community_v2 import V2_CONFIG, community_v2_run, model_step_file
from tests.test_train_cli import refusal
from tests.trainer_helpers import load, run_main
from trainer.checkpoints.repair import repair_checkpoint

BETA1, BETA2 = 0.9, 0.999


@pytest.fixture(scope="module")
def base_tokenizer(tmp_path_factory):
    from data_tools.tokenizer import train_tokenizer
    from tests.test_community_v2 import CORPUS

    return train_tokenizer([CORPUS / "english_train.txt"], tmp_path_factory.mktemp("tok") / "en", 100, "bpe", "en")


def _args(data, tokenizer, out, resume):
    manifest = str(data / "gpt_pairs_train.jsonl")
    return ["--train-manifest", manifest, "--val-manifest", manifest, "--tokenizer", str(tokenizer),
            "--config", str(V2_CONFIG), "--output-dir", str(out), "--resume", str(resume), "--batch-size", "3",
            "--max-steps", "3", "--learning-rate", "2e-5", "--warmup-steps", "4", "--num-workers", "0",
            "--device", "cpu", "--amp", "off", "--save-interval", "1", "--keep-checkpoints", "5"]


def test_repaired_community_run_resumes_with_its_moments(tmp_path, base_tokenizer, capsys):
    data = tmp_path / "data"
    shutil.copytree(shared_file("reference", "fixtures_indextts2", "tiny_dataset"), data)
    run = community_v2_run()
    community = model_step_file(run, tmp_path / "model_step2.pth", base_tokenizer)
    out = tmp_path / "run"

    capsys.readouterr()
    assert run_main(_args(data, base_tokenizer, out, community)) == 2  # straight to --resume: names repair
    assert "python -m trainer.checkpoints repair" in refusal(capsys)

    repaired = tmp_path / "repaired.pth"
    repair_checkpoint(community, repaired, config=V2_CONFIG, tokenizer=base_tokenizer)
    assert run_main(_args(data, base_tokenizer, out, repaired)) == 0
    said = capsys.readouterr().out
    assert f"resumed from {repaired} at step 2" in said and "optimizer + scheduler" in said

    before = load(repaired)
    after = load(out / "model_step3.pth")  # one optimizer step after the resume
    names = before["optimizer_param_names"]
    assert names == after["optimizer_param_names"]
    index = {name: i for i, name in enumerate(n for group in names for n in group)}
    i = index["text_head.weight"]
    old, new = before["optimizer"]["state"][i], after["optimizer"]["state"][i]
    assert int(old["step"]) == 2 and int(new["step"]) == 3
    # From the first moment recover this step's gradient; the second moment must have started from the
    # restored one (with fresh moments it would be (1 - beta2) * g^2 alone).
    grad = (new["exp_avg"] - BETA1 * old["exp_avg"]) / (1 - BETA1)
    expected_sq = BETA2 * old["exp_avg_sq"] + (1 - BETA2) * grad * grad
    torch.testing.assert_close(new["exp_avg_sq"], expected_sq, rtol=1e-3, atol=1e-12)
    assert not torch.allclose(new["exp_avg_sq"], (1 - BETA2) * grad * grad, rtol=1e-3, atol=1e-12)
