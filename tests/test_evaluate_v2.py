"""Checkpoint evaluation of IndexTTS2 runs (issue 22): CER, WER and speaker similarity through S2MelSynthesizer.

A tiny IndexTTS2 run trains on the tiny download folder (tests/indextts2_folder.py: its config.yaml and
gpt.pth are the run's --config and --base-checkpoint, so the folder of --config is the model folder) with
paired data written here (PairsBuilder, 64-wide latents, text ids of a 90-piece English tokenizer, prompt
audio per speaker). Tiny CTC and x-vector models (tests/speech_model_factory.py) score the speech.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tests.indextts2_folder import shared_download_folder
from tests.pairs_factory import PairsBuilder
from tests.speech_model_factory import judge_models
from tests.trainer_helpers import events, run_main
from trainer.evaluate import main as evaluate_main
from trainer.evaluation.results import read_result, result_path

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus" / "english_train.txt"
SENTENCES = ["the cat sat on the mat", "a red car went by", "she reads a book", "we like warm tea",
             "the sun is bright", "he runs to school"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return shared_download_folder(tmp_path_factory)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech_models_v2")
    return judge_models(root)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> Path:
    """Small enough for the tiny GPT's 100 text tokens."""
    from data_tools.tokenizer import train_tokenizer

    return train_tokenizer([CORPUS], tmp_path_factory.mktemp("entok") / "en", vocab_size=90, language="en")


def _voice(path: Path, pitch: float) -> None:
    t = np.arange(int(22050 * 1.2)) / 22050
    wave = 0.3 * np.sin(2 * np.pi * pitch * t) * (1 + 0.5 * np.sin(2 * np.pi * 3 * t))
    soundfile.write(path, wave.astype(np.float32), 22050)


@pytest.fixture(scope="module")
def pairs(tokenizer, tmp_path_factory) -> dict[str, Path]:
    """Two speakers of three utterances; each pair's prompt is another utterance of its speaker (with audio)."""
    from data_tools.text_tokenizer import TextTokenizer

    root = tmp_path_factory.mktemp("pairs_v2")
    (root / "wavs").mkdir()
    text = TextTokenizer(tokenizer, "en")
    builder = PairsBuilder(root, dim=64)
    ids = []
    for index, sentence in enumerate(SENTENCES):
        uid = f"s{index // 3}u{index}"
        builder.utterance(uid, code_len=12, text_ids=np.asarray(text.encode(sentence), dtype=np.int32))
        _voice(root / "wavs" / f"{uid}.wav", 140.0 + 60 * (index // 3) + 5 * index)
        ids.append(uid)
    for target, prompt in [(0, 1), (1, 2), (3, 4), (4, 5)]:
        builder.pair(ids[target], ids[prompt], speaker=f"spk{target // 3}", target_text=SENTENCES[target],
                     language="en")
    train = builder.write("train_pairs.jsonl")
    builder.lines = []
    for target, prompt in [(2, 0), (5, 3)]:
        builder.pair(ids[target], ids[prompt], speaker=f"spk{target // 3}", target_text=SENTENCES[target],
                     language="en")
    return {"train": train, "val": builder.write("val_pairs.jsonl")}


def _argv(folder: Path, tokenizer: Path, pairs: dict[str, Path], out: Path, models: dict[str, Path],
          **overrides) -> list[str]:
    values = {"train_manifest": pairs["train"], "val_manifest": pairs["val"], "tokenizer": tokenizer,
              "config": folder / "config.yaml", "base_checkpoint": folder / "gpt.pth", "output_dir": out,
              "max_steps": 2, "batch_size": 2, "learning_rate": 1e-3, "warmup_steps": 1, "log_interval": 1,
              "val_interval": 1000, "save_interval": 2, "max_val_batches": 1, "num_workers": 0, "device": "cpu",
              "amp": "off", "eval_asr": models["asr"], "eval_speaker_model": models["speaker"],
              "eval_sentences": 2, "eval_voices": 2, "eval_seeds": 1, "eval_base": False, **overrides}
    argv: list[str] = []
    for name, value in values.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        else:
            argv += [flag, str(value)]
    return argv


@pytest.fixture(scope="module")
def measured_run(folder, tokenizer, pairs, models, tmp_path_factory) -> Path:
    """Two steps with --eval-at-saves: the save at step 2 is measured by the evaluation process."""
    out = tmp_path_factory.mktemp("run_v2") / "run"
    assert run_main(_argv(folder, tokenizer, pairs, out, models, eval_at_saves=True, best_by="cer")) == 0
    return out


def test_eval_at_saves_measures_an_indextts2_checkpoint(measured_run, capsys):
    evals = events(measured_run, "eval")
    assert [(e["step"], e["model"], e["checkpoint"]) for e in evals] == [(2, "checkpoint", "model_step2.pth")]
    event = evals[0]
    assert event["cer"] >= 0.0 and event["wer"] >= 0.0 and -1.0 <= event["sim"] <= 1.0
    result = read_result(result_path(measured_run / "model_step2.pth"))
    assert (result["cer"], result["wer"], result["sim"]) == (event["cer"], event["wer"], event["sim"])
    items = result["items"]
    assert len(items) == 4  # 2 sentences x 2 voices (one per validation speaker) x 1 seed (3: test_evaluate.py)
    assert {item["voice"] for item in items} == {"s0u0", "s1u3"}  # the pairs' prompt utterances
    assert {item["text"] for item in items} == {SENTENCES[2], SENTENCES[5]}
    assert all(item["audio_seconds"] > 0 for item in items)
    stored = json.loads((measured_run / "eval" / "eval_set.json").read_text(encoding="utf-8"))
    assert all(voice["prompt"].endswith(".wav") and voice["audio"] == voice["prompt"] for voice in stored["voices"])
    # The pairs carry no target_duration: their code lengths time the speaker's real speech, so the rate is measured
    # (issue 38). Two steps leave the tiny GPT speaking some texts far too long: health keeps it from best.pth.
    assert isinstance(event["rate"], float) and event["rate"] > 0
    assert event["health"].startswith("runaway") and "(health)" in event["best_reason"]
    assert not (measured_run / "best.pth").exists()


def test_cli_rerun_skips_and_the_same_weights_give_the_same_scores(measured_run, folder, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(measured_run, run)
    capsys.readouterr()
    assert evaluate_main([str(run)]) == 0
    assert "0 checkpoint(s) measured" in capsys.readouterr().out
    # The base model (the folder's gpt.pth) through --model-dir given explicitly: deterministic speech, so a
    # second measurement of the same weights gives the very same numbers.
    assert evaluate_main([str(run), "--eval-base", "--model-dir", str(folder)]) == 0
    base = [e for e in events(run, "eval") if e["model"] == "base"]
    assert len(base) == 1 and (run / "eval" / "base.eval.json").is_file()
    (run / "eval" / "base.eval.json").unlink()
    assert evaluate_main([str(run), "--eval-base"]) == 0
    again = [e for e in events(run, "eval") if e["model"] == "base"]
    assert [(e["cer"], e["wer"], e["sim"]) for e in again] == [(base[0]["cer"], base[0]["wer"], base[0]["sim"])] * 2


def _preflight(argv: list[str], capsys) -> tuple[int, str]:
    capsys.readouterr()
    code = run_main([*argv, "--preflight"])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_preflight_accepts_v2_evaluation_with_the_folder_and_refuses_in_one_line_without(
        folder, tokenizer, pairs, models, tmp_path, capsys):
    config = tmp_path / "elsewhere" / "config.yaml"  # the config alone: its folder holds no S2Mel, codec, ...
    config.parent.mkdir()
    shutil.copyfile(folder / "config.yaml", config)
    argv = _argv(folder, tokenizer, pairs, tmp_path / "run", models, eval_at_saves=True, config=config)
    code, text = _preflight(argv, capsys)
    assert code == 2
    errors = [line for line in text.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and errors[0].startswith("error: --eval-at-saves: IndexTTS2 speaks through"), text
    assert f"give --model-dir (the folder of --config, {config.parent}, is not one)" in errors[0]

    code, text = _preflight([*argv, "--model-dir", str(folder)], capsys)
    assert code == 0, text
    line = next(line for line in text.splitlines() if "evaluation at saves on cpu" in line)
    assert f"IndexTTS2 folder {folder}" in line and "CFM steps" in line

    code, text = _preflight([*argv, "--model-dir", str(tmp_path / "missing")], capsys)
    assert code == 2 and f"error: --eval-at-saves: --model-dir {tmp_path / 'missing'}: " in text


def test_a_wrong_w2v_bert_or_a_mel_prompt_is_one_line(folder, tokenizer, tmp_path):
    from generations.indextts2.evaluation import folder as indextts2_folder
    from trainer.evaluation import EvaluationError
    from trainer.evaluation.backend_choice import synthesis_backend
    from trainer.synthesis.generation import DecodeSettings

    with pytest.raises(EvaluationError, match=r"^--model-dir .*no_w2v \(w2v-BERT folder\)$"):
        indextts2_folder(folder, None, str(tmp_path / "no_w2v"))
    assert indextts2_folder("", folder / "config.yaml") == folder  # the folder of --config when it is one

    backend = synthesis_backend("2", folder / "config.yaml", tokenizer, None, language="en")
    assert backend.sample_rate == 22050
    speaker = backend.for_checkpoint(folder / "gpt.pth", base=True)
    mel = tmp_path / "prompt.npy"
    np.save(mel, np.zeros((100, 40), dtype=np.float32))
    with pytest.raises(EvaluationError, match="IndexTTS2 speaks from reference audio"):
        speaker.speak(["hello"], mel, DecodeSettings(), "en")
