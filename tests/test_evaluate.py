"""Checkpoint evaluation (issue 22): CER, WER and speaker similarity of every save, best.pth by a chosen number.

Tiny CTC and x-vector models made here and saved as local folders go through the real loading path (their
transcripts of the demo's noise are garbage: CER is still a number). Where a test needs scores it can
steer (best.pth following the lowest CER), a scorer is injected through the Evaluator's seam.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.speech_model_factory import judge_models, tone_wav
from tests.trainer_helpers import (
    REPO,
    assert_same_training_state,
    events,
    load,
    run_main,
    subset_manifest,
    tiny_args,
)
from trainer.evaluate import build_parser, evaluator_for
from trainer.evaluate import main as evaluate_main
from trainer.evaluation import EvaluationError
from trainer.evaluation.results import read_result, result_path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    root = tmp_path_factory.mktemp("speech_models")
    return judge_models(root)


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_data")
    voice = tone_wav(root / "voice.wav")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 8),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4), "voice": voice}


def _eval_flags(models, data, **extra):
    values = {"eval_asr": str(models["asr"]), "eval_speaker_model": str(models["speaker"]), "eval_sentences": 2,
              "eval_reference": str(data["voice"]), "eval_base": False, "vocoder": None}
    values.update(extra)
    return values


@pytest.fixture(scope="module")
def trained_run(demo_workspace, data, models, tmp_path_factory):
    """A demo run with three saves, its evaluation options recorded in train_config.yaml."""
    out = tmp_path_factory.mktemp("run") / "run"
    argv = tiny_args(demo_workspace, data, out, max_steps=6, save_interval=2,
                     **_eval_flags(models, data, vocoder=str(demo_workspace.vocoder)))
    assert run_main(argv) == 0
    return out


def _copy_run(run: Path, target: Path) -> Path:
    shutil.copytree(run, target, copy_function=shutil.copy2)
    return target


def test_cli_measures_every_checkpoint_once_and_skips_them_on_rerun(trained_run, tmp_path, capsys):
    run = _copy_run(trained_run, tmp_path / "run")
    assert evaluate_main([str(run)]) == 0
    evals = events(run, "eval")
    assert [e["step"] for e in evals] == [2, 4, 6]
    for event in evals:
        assert event["model"] == "checkpoint" and event["checkpoint"] == f"model_step{event['step']}.pth"
        assert event["cer"] >= 0.0 and event["wer"] >= 0.0 and -1.0 <= event["sim"] <= 1.0
        assert set(event["seconds"]) == {"synthesis", "asr", "speaker", "total"}
        result = read_result(result_path(run / event["checkpoint"]))
        assert result["cer"] == event["cer"] and len(result["items"]) == 6  # 2 sentences x 1 voice x 3 seeds
        assert all(isinstance(item["transcript"], str) for item in result["items"])
    stored = json.loads((run / "eval" / "eval_set.json").read_text(encoding="utf-8"))
    assert len(stored["sentences"]) == 2 and stored["voices"][0]["audio"].startswith("eval/voices/")
    assert (run / stored["voices"][0]["audio"]).is_file()
    capsys.readouterr()

    assert evaluate_main([str(run)]) == 0
    assert "0 checkpoint(s) measured" in capsys.readouterr().out
    assert len(events(run, "eval")) == 3


def test_same_checkpoint_same_scores_and_a_rewritten_checkpoint_is_measured_again(trained_run, tmp_path):
    run = _copy_run(trained_run, tmp_path / "run")
    assert evaluate_main([str(run)]) == 0
    first = read_result(result_path(run / "model_step4.pth"))
    # A resumed timeline rewrites model_step4.pth: its identity changes, so it is measured again.
    os.replace(run / "model_step6.pth", run / "model_step4.pth")
    assert evaluate_main([str(run)]) == 0
    again = read_result(result_path(run / "model_step4.pth"))
    assert again["identity"] != first["identity"]
    assert [e["checkpoint"] for e in events(run, "eval")][3:] == ["model_step4.pth"]
    # Determinism: the same weights on the same set give the same numbers.
    six = read_result(result_path(run / "model_step6.pth"))
    assert (again["cer"], again["wer"], again["sim"]) == (six["cer"], six["wer"], six["sim"])


def test_base_model_and_second_language(trained_run, demo_workspace, tmp_path):
    run = _copy_run(trained_run, tmp_path / "run")
    english = tmp_path / "en.txt"
    english.write_text("hello world\n", encoding="utf-8")
    shutil.rmtree(run / "eval", ignore_errors=True)
    assert evaluate_main([str(run), "--eval-base", "--base-checkpoint", str(demo_workspace.base_checkpoint),
                          "--eval-second-texts", str(english), "--eval-second-language", "en"]) == 0
    base = [e for e in events(run, "eval") if e["model"] == "base"]
    assert len(base) == 1 and base[0]["step"] == 0 and (run / "eval" / "base.eval.json").is_file()
    for event in events(run, "eval"):
        assert event["second"]["language"] == "en" and isinstance(event["second"]["cer"], float)
    result = read_result(result_path(run / "model_step2.pth"))
    assert [item["language"] for item in result["items"]].count("en") == 3  # 1 sentence x 1 voice x 3 seeds


def test_another_eval_set_is_refused_once_one_is_stored(trained_run, tmp_path, capsys):
    run = _copy_run(trained_run, tmp_path / "run")
    assert evaluate_main([str(run)]) == 0
    capsys.readouterr()
    texts = tmp_path / "other.txt"
    texts.write_text("ሰላም\n", encoding="utf-8")
    assert evaluate_main([str(run), "--eval-texts", str(texts)]) == 2
    assert "is not the one asked for now" in capsys.readouterr().err


def test_indextts2_without_its_download_folder_is_one_line(demo_workspace):
    from trainer.evaluation.backend_choice import synthesis_backend

    with pytest.raises(EvaluationError, match=r"IndexTTS2 speaks through .*give --model-dir") as caught:
        synthesis_backend("2", demo_workspace.config, demo_workspace.extended_tokenizer, None)
    assert "\n" not in str(caught.value)


def test_missing_asr_is_one_line(trained_run, tmp_path):
    run = _copy_run(trained_run, tmp_path / "run")
    done = subprocess.run([sys.executable, "-m", "trainer.evaluate", str(run), "--eval-asr", str(tmp_path / "nope")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1


class _ScriptedScorer:
    """Transcripts chosen per checkpoint: a perfect one for ``perfect_steps``, garbage otherwise."""

    def __init__(self) -> None:
        self.seconds = {"asr": 0.0, "speaker": 0.0}
        self.perfect = False
        self.refs: list[str] = []

    def transcribe(self, clips, sample_rate, language):
        return list(self.refs) if self.perfect else ["x" for _ in clips]

    def similarity(self, clips, sample_rate, reference_audio):
        return [0.5 for _ in clips]


def test_best_by_cer_follows_the_lowest_cer_and_pins_survive_rotation(trained_run, tmp_path):
    run = _copy_run(trained_run, tmp_path / "run")
    args = build_parser().parse_args([str(run), "--best-by", "cer"])
    evaluator = evaluator_for(args, say=lambda _line: None)
    scorer = _ScriptedScorer()
    scorer.refs = [s.text for s in evaluator.eval_set.sentences]
    evaluator.scorer = scorer
    scorer.perfect = False
    evaluator.evaluate_checkpoint(run / "model_step2.pth")
    assert os.path.samefile(run / "best.pth", run / "model_step2.pth")
    scorer.perfect = True
    evaluator.evaluate_checkpoint(run / "model_step4.pth")
    assert os.path.samefile(run / "best.pth", run / "model_step4.pth")
    scorer.perfect = False
    evaluator.evaluate_checkpoint(run / "model_step6.pth")
    assert os.path.samefile(run / "best.pth", run / "model_step4.pth")  # a worse CER leaves best.pth alone
    assert [e["best"] for e in events(run, "eval")] == [True, True, False]

    # Rotation keeping one step file spares the pinned best two (by CER: step 4, then step 2).
    from trainer.checkpoints.store import CheckpointManager
    from trainer.evaluation.best import rotation_guard

    state = load(run / "model_step6.pth")
    manager = CheckpointManager(run, keep=1, protect=rotation_guard(run, "cer", 2))
    manager.save(state, 8)
    assert sorted(p.name for p in run.glob("model_step*.pth")) == ["model_step2.pth", "model_step4.pth",
                                                                   "model_step8.pth"]
    unprotected = CheckpointManager(run, keep=1)
    unprotected.save(state, 10)
    assert sorted(p.name for p in run.glob("model_step*.pth")) == ["model_step10.pth"]
    assert load(run / "best.pth")["step"] == 4  # best.pth is a link of its own: rotation never touches it


def test_eval_at_saves_measures_every_save_and_leaves_training_bitwise_unchanged(demo_workspace, data, models,
                                                                                 tmp_path):
    plain, measured = tmp_path / "plain", tmp_path / "measured"
    base = tiny_args(demo_workspace, data, plain, max_steps=4, save_interval=2)
    assert run_main(base) == 0
    argv = tiny_args(demo_workspace, data, measured, max_steps=4, save_interval=2, eval_at_saves=True,
                     best_by="cer", **_eval_flags(models, data, vocoder=str(demo_workspace.vocoder)))
    assert run_main(argv) == 0
    assert_same_training_state(load(measured / "latest.pth"), load(plain / "latest.pth"))
    assert [e["step"] for e in events(measured, "eval")] == [2, 4]
    assert all(result_path(measured / f"model_step{s}.pth").is_file() for s in (2, 4))
    from trainer.evaluation.best import BestRule, best_of, replay

    chosen = best_of(replay(measured, BestRule("cer")))  # the documented rule (tests/test_eval_stats.py)
    assert os.path.samefile(measured / "best.pth", measured / f"model_step{chosen}.pth")
    assert all(e["best_reason"] for e in events(measured, "eval"))
    assert not any(e.get("best") for e in events(measured, "save"))  # best.pth is the evaluation's, not val loss's
    assert [e["event"] for e in events(measured)].count("end") == 1


def test_a_crash_while_moving_best_leaves_the_old_best_whole(trained_run, tmp_path, monkeypatch):
    from trainer.evaluation import best as best_module
    from trainer.evaluation.results import write_result

    run = _copy_run(trained_run, tmp_path / "run")
    before = load(run / "best.pth")["step"]
    write_result(result_path(run / "model_step2.pth"), {"step": 2, "cer": 0.1})

    def power_cut(*_args):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", power_cut)
    with pytest.raises(OSError):
        best_module.update_best(run, "cer")
    monkeypatch.undo()
    assert load(run / "best.pth")["step"] == before
    assert not [p.name for p in run.iterdir() if p.name.endswith(".tmp")]
    assert best_module.update_best(run, "cer") == (2, 0.1)
    assert os.path.samefile(run / "best.pth", run / "model_step2.pth")


def test_studio_views_and_model_card_carry_the_scores(trained_run, data, tmp_path):
    from trainer.checkpoints.export import export_checkpoint
    from webui.checkpoints.rows import LIST_COLUMNS, list_view
    from webui.training.metrics_view import MetricsReader

    run = _copy_run(trained_run, tmp_path / "run")
    unmeasured = list_view(str(run), tmp_path)
    assert set(unmeasured.table["CER"]) == {""}  # nothing measured yet: empty cells
    assert evaluate_main([str(run)]) == 0
    scores = {e["checkpoint"]: e for e in events(run, "eval")}

    view = list_view(str(run), tmp_path)
    assert list(view.table.columns) == LIST_COLUMNS
    rows = {row["file"]: row for row in view.table.to_dict("records")}
    for name in ("model_step2.pth", "model_step4.pth", "model_step6.pth"):
        cer, sim = scores[name]["cer"], scores[name]["sim"]  # CER in percent, SIM a cosine, each with its interval
        assert rows[name]["CER"].startswith(f"{cer * 100:.1f} % [") and rows[name]["SIM"].startswith(f"{sim:.3f} [")
    assert rows["latest.pth"]["WER"] == rows["model_step6.pth"]["WER"]  # a link shows its file's scores

    reader = MetricsReader(run)
    reader.poll()
    frame = reader.eval_frame()
    # the scores and the health's rate ratio and runaway share (issue 38)
    assert sorted(set(frame["series"])) == ["eval cer", "eval rate", "eval runaway", "eval sim", "eval wer"]
    assert sorted(frame[frame["series"] == "eval cer"]["step"]) == [2, 4, 6]

    report = export_checkpoint(run / "model_step4.pth", tmp_path / "export")
    card = (report.out_dir / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "## Evaluation" in card and "**model_step4 (this export)**" in card
    assert f"| model_step6 | 6 | {scores['model_step6.pth']['cer'] * 100:.1f} |" in card  # stored fraction, shown in %
    assert str(build_parser().prog) in card or "python -m trainer.evaluate" in card
    assert "### Held-out test set" not in card  # no frozen test set: no section

    # A frozen test set measured for the exported checkpoint: the card carries its scores with intervals.
    from data_tools.split import split_manifest

    split = split_manifest(data["val"], tmp_path / "split", val_fraction=0.25, test_fraction=0.5)
    assert split.test_path is not None and split.test_count >= 1
    assert evaluate_main([str(run), "--test-set", str(split.test_path), "--checkpoint",
                          str(run / "model_step4.pth")]) == 0
    card = (export_checkpoint(run / "model_step4.pth", tmp_path / "export2").out_dir / "MODEL_CARD.md").read_text(
        encoding="utf-8")
    assert "### Held-out test set" in card and "never used to choose a checkpoint" in card
    assert re.search(r"model_step4: CER \d+\.\d % \[\d+\.\d, \d+\.\d\]", card), card


def test_model_card_without_evaluation_has_no_table(trained_run, tmp_path):
    from trainer.checkpoints.export import export_checkpoint

    run = _copy_run(trained_run, tmp_path / "run")
    report = export_checkpoint(run / "model_step4.pth", tmp_path / "export")
    assert "## Evaluation" not in (report.out_dir / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_a_stopped_run_ends_its_evaluation_process(demo_workspace, data, models, tmp_path):
    import re

    from tests.trainer_helpers import run_cli

    out = tmp_path / "run"
    argv = tiny_args(demo_workspace, data, out, max_steps=8, save_interval=2, eval_at_saves=True,
                     **_eval_flags(models, data, vocoder=str(demo_workspace.vocoder)))
    done = run_cli(argv, env={"STUDIO_TEST_STOP_AFTER_STEP": "2"})
    assert done.returncode == 130, done.stderr[-2000:]
    pid = int(re.search(r"evaluation at saves: process (\d+)", done.stdout).group(1))
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    assert [e["status"] for e in events(out, "end")] == ["stopped"]
    # What the stop left unmeasured is measured afterwards by the CLI, and nothing twice.
    assert evaluate_main([str(out)]) == 0
    measured = [e["step"] for e in events(out, "eval")]
    assert sorted(measured) == sorted(set(measured)) and set(measured) == {2}
