"""Checkpoint evaluation of IndexTTS-2.5 runs (issue 29 item 1): CER, WER and speaker similarity through
SynthesizerV25 (the demo's tiny 2.5 download folder, each checkpoint's text scheme, language row and LoRA
adapters), at saves, from the command line, and refused in one line without a download folder.

The runs train on a few of the demo workspace's 2.5 pairs (their prompts have audio: the evaluation voices);
tiny CTC and x-vector models (tests/speech_model_factory.py) score the speech.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.speech_model_factory import judge_models
from tests.test_train_v25 import pair_subset, v25_args
from tests.trainer_helpers import events, run_main
from trainer.evaluate import main as evaluate_main
from trainer.evaluation.results import read_result, result_path


@pytest.fixture(scope="module")
def ws(demo_workspace) -> DemoV25Paths:
    paths = DemoV25Paths.under(demo_workspace.root)
    assert paths.exists() and paths.synthesis_ready()
    return paths


@pytest.fixture(scope="module")
def data(ws) -> dict[str, Path]:
    folder = ws.train_manifest.parent
    return {"train": pair_subset(ws.train_manifest, folder / "eval25_train.jsonl", 6),
            "val": pair_subset(ws.val_manifest, folder / "eval25_val.jsonl", 2)}


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("speech_models_v25")
    return judge_models(root)


def _argv(ws: DemoV25Paths, data: dict[str, Path], out: Path, models: dict[str, Path], *flags: str,
          **overrides) -> list[str]:
    values = {"max_steps": 4, "save_interval": 2, "eval_asr": models["asr"], "eval_speaker_model": models["speaker"],
              "eval_sentences": 1, "eval_voices": 1, "eval_seeds": 1, **overrides}
    return [*v25_args(ws, data, out, **values), "--no-eval-base", *flags]


def _measured(ws, data, models, out: Path, *flags: str, **overrides) -> Path:
    assert run_main(_argv(ws, data, out, models, "--eval-at-saves", *flags, **overrides)) == 0
    return out


@pytest.fixture(scope="module")
def measured_run(ws, data, models, tmp_path_factory) -> Path:
    """Two saves with --eval-at-saves: each is measured by the evaluation process."""
    return _measured(ws, data, models, tmp_path_factory.mktemp("run_v25") / "run", best_by="cer")


def _assert_scored_per_save(run: Path) -> list[dict]:
    evals = events(run, "eval")
    assert [(e["step"], e["model"], e["checkpoint"]) for e in evals] == [
        (2, "checkpoint", "model_step2.pth"), (4, "checkpoint", "model_step4.pth")]
    for event in evals:
        assert event["cer"] >= 0.0 and event["wer"] >= 0.0 and -1.0 <= event["sim"] <= 1.0, event
        result = read_result(result_path(run / event["checkpoint"]))
        assert (result["cer"], result["wer"], result["sim"]) == (event["cer"], event["wer"], event["sim"])
        assert result["language"] == "am" and result["items"]  # 1 sentence x 1 voice, per seed
        assert all(item["audio_seconds"] > 0 and item["voice"] for item in result["items"])
    return evals


def test_eval_at_saves_scores_each_indextts25_save(measured_run):
    _assert_scored_per_save(measured_run)
    # Four steps teach the tiny 2.5 GPT no stop code: every item runs to the code limit, so its health (issue 38)
    # keeps both saves from best.pth, and each eval event says so.
    assert not (measured_run / "best.pth").exists()
    for event in events(measured_run, "eval"):
        assert event["health"].startswith("runaway 1/1 (no stop code") and "(health)" in event["best_reason"]


def test_a_lora_run_is_scored_with_its_live_adapters(ws, data, models, measured_run, tmp_path):
    import torch

    from trainer.evaluation.backend_choice import synthesis_backend
    from trainer.lora_setup import checkpoint_adapter

    run = _measured(ws, data, models, tmp_path / "lora", "--lora", lora_rank=4)
    _assert_scored_per_save(run)
    ckpt = torch.load(run / "model_step4.pth", map_location="cpu", weights_only=True)
    assert checkpoint_adapter(ckpt) is not None  # the adapters live beside the frozen base weights
    # The speaker the evaluation builds carries them: its GPT differs from the same checkpoint's base weights.
    backend = synthesis_backend("2.5", ws.config, ws.tokenizer, None, language="am")
    merged = backend.for_checkpoint(run / "model_step4.pth").synth.model.state_dict()
    from generations.indextts25.synthesis import load_gpt25_checkpoint

    bare = load_gpt25_checkpoint(run / "model_step4.pth", backend.nets.config, adapter=False).model.state_dict()
    assert any(not torch.equal(merged[key], bare[key]) for key in bare)


def test_cli_skips_what_is_measured_and_remeasures_the_same(measured_run, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(measured_run, run)
    capsys.readouterr()
    assert evaluate_main([str(run)]) == 0
    assert "0 checkpoint(s) measured" in capsys.readouterr().out
    before = read_result(result_path(run / "model_step4.pth"))
    result_path(run / "model_step4.pth").unlink()
    assert evaluate_main([str(run)]) == 0  # python -m trainer.evaluate on a 2.5 run: the same speech, same scores
    assert "1 checkpoint(s) measured" in capsys.readouterr().out
    after = read_result(result_path(run / "model_step4.pth"))
    assert (after["cer"], after["wer"], after["sim"]) == (before["cer"], before["wer"], before["sim"])


def _preflight(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = run_main([*argv, "--preflight"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_preflight_names_the_25_folder_or_refuses_in_one_line(ws, data, models, tmp_path, capsys):
    argv = _argv(ws, data, tmp_path / "run", models, "--eval-at-saves")
    code, text = _preflight(argv, capsys)
    assert code == 0, text
    line = next(line for line in text.splitlines() if "evaluation at saves on cpu" in line)
    assert f"IndexTTS-2.5 folder {ws.config.parent}" in line and "duration factor 1" in line

    config = tmp_path / "elsewhere" / "config.yaml"  # the config alone: its folder holds no codec, S2Mel, ...
    config.parent.mkdir()
    shutil.copyfile(ws.config, config)
    code, text = _preflight([*argv, "--config", str(config)], capsys)
    assert code == 2
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: --eval-at-saves: IndexTTS-2.5 speaks through"), text
    assert f"give --model-dir (the folder of --config, {config.parent}, is not one)" in errors[0]
    code, text = _preflight([*argv, "--config", str(config), "--model-dir", str(ws.config.parent)], capsys)
    assert code == 0, text


def test_a_mel_prompt_is_refused_in_one_line(ws, tmp_path):
    from trainer.evaluation import EvaluationError
    from trainer.evaluation.backend_choice import synthesis_backend
    from trainer.synthesis.generation import DecodeSettings

    backend = synthesis_backend("2.5", ws.config, ws.tokenizer, None, language="am")
    assert backend.sample_rate == 22050
    speaker = backend.for_checkpoint(ws.base_checkpoint, base=True)
    mel = tmp_path / "prompt.npy"
    np.save(mel, np.zeros((100, 40), dtype=np.float32))
    with pytest.raises(EvaluationError, match=r"IndexTTS-2\.5 speaks from reference audio"):
        speaker.speak(["ሰላም"], mel, DecodeSettings(), "am")
