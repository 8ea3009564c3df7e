"""The Checkpoints tab picks the best by ear and number (issue 28, item 4): Evaluate scores what a stop left
without scores (through the evaluation CLI, as a job), the base model is the table's first row, CER and WER are
percentages with their interval, and the number best.pth follows is shown and changed from the page."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

from tests.speech_model_factory import build_ctc_model, build_xvector_model
from tests.test_ui_tabs import run_job
from tests.trainer_helpers import run_main, subset_manifest, tiny_args
from webui.checkpoints import rows as ck_rows
from webui.checkpoints import scores as ck_scores
from webui.form_inputs import InputProblem


@pytest.fixture(scope="module")
def stopped_run(demo_workspace, tmp_path_factory) -> Path:
    """A demo run trained with evaluation options but no evaluation at saves, stopped at step 3 (saves 2 and 3)."""
    root = tmp_path_factory.mktemp("ckpt_eval")
    voice = root / "voice.wav"
    t = np.arange(24_000) / 24_000
    soundfile.write(voice, (0.3 * np.sin(2 * np.pi * 140 * t)).astype(np.float32), 24_000)
    data = {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 6),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 2)}
    out = root / "runs" / "stopped"
    argv = tiny_args(demo_workspace, data, out, max_steps=8, save_interval=2, val_interval=2,
                     eval_asr=build_ctc_model(root / "ctc"), eval_speaker_model=build_xvector_model(root / "xvector"),
                     eval_sentences=1, eval_reference=voice, vocoder=demo_workspace.vocoder)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("STUDIO_TEST_HOOKS", "1")  # the autouse fixture acts per test, after this one
        patch.setenv("STUDIO_TEST_STOP_AFTER_STEP", "3")
        assert run_main(argv) == 130
    return out


def test_evaluate_scores_what_the_stop_left_and_adds_the_base_row(stopped_run, tmp_path):
    from webui.context import StudioContext

    before = ck_rows.list_view(str(stopped_run), tmp_path)
    assert before.unscored == 2 and set(before.table["CER"]) == {""}  # model_step2 and the stopping save
    assert "2 step checkpoints without scores" in ck_scores.unscored_html(before)
    assert before.samples_owed == [3] and "the samples of step 3 were not made" in ck_scores.unscored_html(before)
    best_by, asr, _speaker = ck_scores.run_defaults(str(stopped_run), tmp_path)
    assert best_by == "val_loss" and asr  # from the run's train_config.yaml

    ctx = StudioContext.create(tmp_path)
    argv = ck_scores.evaluate_argv(ctx.python, str(stopped_run), "cer", "", "", tmp_path, ck_scores.EVALUATE_JOB.report_path(ctx))
    assert argv[1:4] == ["-m", "trainer.evaluate", str(stopped_run)] and "--eval-base" in argv
    result = run_job(ctx, ck_scores.EVALUATE_JOB, argv, timeout_s=400)
    assert "EVALUATED" in ck_scores.evaluate_message_of(result) and "2 checkpoints and the base model measured" in ck_scores.evaluate_message_of(result), \
        result.view.log

    after = ck_rows.list_view(str(stopped_run), tmp_path)
    rows = after.table.to_dict("records")
    assert rows[0]["file"].startswith(ck_rows.BASE_FILE) and rows[0]["kind"] == "base" and rows[0]["CER"].endswith("]")
    assert after.row_paths[0] == "" and after.row_paths[1:] == after.paths  # a click on the base row picks nothing
    scored = {row["file"]: row for row in rows[1:]}
    for name in ("model_step2.pth", "model_step3.pth"):
        cer = scored[name]["CER"]
        assert " % [" in cer and cer.endswith("]") and " % [" in scored[name]["WER"], cer  # 7.7 % [6.1, 9.4]
    assert after.unscored == 0
    assert 'data-best-by="cer"' in ck_scores.best_html(str(stopped_run), tmp_path)  # Evaluate's choice is remembered

    # The base is measured once per evaluation set: its cached result matches its file, so Evaluate skips it.
    from trainer.evaluate import run_options
    from trainer.evaluation.results import base_result_path, is_measured, read_result

    base = Path(run_options(stopped_run)["base_checkpoint"])
    assert is_measured(base, read_result(base_result_path(stopped_run))["eval_set"], base_result_path(stopped_run))


def test_best_pth_follows_the_number_chosen_on_the_page(stopped_run, tmp_path):
    import os

    from trainer.evaluation.best import followed
    from webui.context import StudioContext

    ctx = StudioContext.create(tmp_path)
    result = run_job(ctx, ck_scores.BEST_JOB, ck_scores.best_argv(ctx.python, str(stopped_run), "val_loss", tmp_path,
                                                    ck_scores.BEST_JOB.report_path(ctx)))
    assert "the lowest validation loss" in ck_scores.best_message_of(result), result.view.log
    assert followed(stopped_run) == ("val_loss", "chosen after training")
    assert os.path.samefile(stopped_run / "best.pth", stopped_run / "model_step2.pth")  # the only validated save
    with pytest.raises(InputProblem, match="val_loss, cer or sim"):
        ck_scores.best_argv(ctx.python, str(stopped_run), "loss", tmp_path, ck_scores.BEST_JOB.report_path(ctx))


def test_an_indextts25_checkpoint_is_listed_as_indextts25(tmp_path):
    from generations.indextts25.model import SPK_COND_MODE
    from tests.checkpoint_factory import make_checkpoint, tiny_gpt_config, trained_state

    run = tmp_path / "runs" / "am25"
    run.mkdir(parents=True)
    gpt = tiny_gpt_config()
    torch.save(make_checkpoint(4, state=trained_state(gpt), model_config={**gpt, "spk_cond_mode": SPK_COND_MODE}),
               run / "model_step4.pth")
    torch.save(make_checkpoint(2, state=trained_state(gpt)), run / "model_step2.pth")
    models = dict(zip(ck_rows.list_view(str(run), tmp_path).table["file"], ck_rows.list_view(str(run), tmp_path).table["model"]))
    assert models == {"model_step4.pth": "IndexTTS-2.5", "model_step2.pth": "IndexTTS-1.5"}


def test_the_recognisers_floor_is_a_row_beside_the_scores(tmp_path):
    from tests.checkpoint_factory import make_checkpoint
    from trainer.evaluation.eval_set import eval_dir
    from trainer.evaluation.floor import floor_path
    from trainer.evaluation.results import write_result

    run = tmp_path / "runs" / "am"
    run.mkdir(parents=True)
    torch.save(make_checkpoint(2), run / "model_step2.pth")
    assert ck_rows.FLOOR_FILE not in list(ck_rows.list_view(str(run), tmp_path).table["file"])  # not measured: no row
    eval_dir(run).mkdir(parents=True)
    write_result(floor_path(eval_dir(run)), {"model": "real speech", "eval_set": "x", "cer": 0.071, "wer": 0.25,
                                             "intervals": {"cer": {"low": 0.05, "high": 0.09}, "wer": None}})
    view = ck_rows.list_view(str(run), tmp_path)
    rows = view.table.to_dict("records")
    floor = next(row for row in rows if row["file"] == ck_rows.FLOOR_FILE)
    assert floor["CER"] == "7.1 % [5.0, 9.0]" and floor["WER"] == "25.0 %" and floor["SIM"] == ""
    assert view.row_paths[:1] == [""] and view.row_paths[1:] == view.paths  # picking the floor row picks nothing
