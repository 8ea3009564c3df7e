"""Samples while training (issue 11): wavs at every save, TensorBoard audio, ``sample`` events, and a run with
samples ends bitwise equal to the same run without them; a failing sample never stops training."""

from __future__ import annotations

import pytest
import soundfile

from tests.trainer_helpers import (
    assert_same_training_state,
    events,
    load,
    run_main,
    subset_manifest,
    tiny_args,
)
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight


@pytest.fixture(scope="module")
def data(demo_workspace, tmp_path_factory):
    root = tmp_path_factory.mktemp("samples")
    return {"train": subset_manifest(demo_workspace.train_manifest, root / "train.jsonl", 8),
            "val": subset_manifest(demo_workspace.val_manifest, root / "val.jsonl", 4)}


def _args(ws, data, out, **extra):
    return tiny_args(ws, data, out, max_steps=4, save_interval=2, **extra)


def test_samples_at_every_save_and_the_run_is_unchanged(demo_workspace, data, tmp_path):
    plain, voiced = tmp_path / "plain", tmp_path / "voiced"
    assert run_main(_args(demo_workspace, data, plain)) == 0
    assert run_main(_args(demo_workspace, data, voiced, vocoder=demo_workspace.vocoder)) == 0

    assert_same_training_state(load(voiced / "latest.pth"), load(plain / "latest.pth"))
    assert not (plain / "samples").exists()
    sample_events = events(voiced, "sample")
    assert [e["step"] for e in sample_events] == [2, 4]
    for event in sample_events:
        assert "error" not in event and len(event["files"]) == 3 and event["seconds"] >= 0
        for item in event["files"]:
            info = soundfile.info(item["path"])
            assert info.samplerate == 24000 and info.frames > 0
    assert sorted(p.name for p in (voiced / "samples").iterdir()) == ["step_2", "step_4"]
    from tensorboard.backend.event_processing.event_accumulator import AUDIO, EventAccumulator

    (run_logs,) = list((voiced / "logs").iterdir())
    accumulator = EventAccumulator(str(run_logs), size_guidance={AUDIO: 0})
    accumulator.Reload()
    audio_tags = accumulator.Tags()[AUDIO]
    assert len(audio_tags) == 3, audio_tags
    clips = accumulator.Audio(audio_tags[0])
    assert [clip.step for clip in clips] == [2, 4] and all(clip.sample_rate == 24000 for clip in clips)


def test_samples_of_rotated_checkpoints_stay_and_sample_every_picks_saves(demo_workspace, data, tmp_path):
    out = tmp_path / "run"
    argv = tiny_args(demo_workspace, data, out, max_steps=8, save_interval=2, keep_checkpoints=1, val_interval=2,
                     sample_every=4, vocoder=demo_workspace.vocoder)
    assert run_main(argv) == 0
    assert [e["step"] for e in events(out, "sample")] == [4, 8]  # saves at 2, 4, 6, 8; samples at multiples of 4
    assert sorted(p.name for p in (out / "samples").iterdir()) == ["step_4", "step_8"]
    kept = sorted(p.name for p in out.glob("model_step*.pth"))
    best_step = load(out / "best.pth")["step"]
    assert kept == ["model_step8.pth"] or kept == sorted(["model_step8.pth", f"model_step{best_step}.pth"])
    assert len(kept) < 4  # rotation ran: fewer step files than saves
    assert (out / "samples" / "step_4").is_dir() and list((out / "samples" / "step_4").glob("*.wav"))
    assert (out / "best.pth").exists() and (out / "latest.pth").exists()


def test_a_failing_sample_is_reported_and_training_goes_on(demo_workspace, data, tmp_path, capsys):
    texts = tmp_path / "texts.txt"
    texts.write_text("ሰላም " * 400 + "\n", encoding="utf-8")  # longer than the model's max_text_tokens
    out = tmp_path / "run"
    assert run_main(_args(demo_workspace, data, out, vocoder=demo_workspace.vocoder, sample_texts=texts)) == 0
    failed = events(out, "sample")
    assert [e["step"] for e in failed] == [2, 4] and all("error" in e for e in failed)
    assert "warning: samples at step 2 failed" in capsys.readouterr().out
    assert load(out / "latest.pth")["step"] == 4


def test_preflight_says_whether_samples_are_made(demo_workspace, tmp_path):
    values = parse_argv(demo_workspace.train_argv(max_steps=4))
    values["output_dir"] = str(tmp_path / "run")
    samples = next(c for c in run_preflight(values).checks if c.name == "samples")
    assert samples.ok and samples.message.startswith("samples at every save: the first 3 validation transcript(s)")
    values["vocoder"] = ""
    samples = next(c for c in run_preflight(values).checks if c.name == "samples")
    assert samples.ok and "no samples: give --vocoder" in samples.message


def test_a_vocoder_of_the_wrong_layout_is_refused_alike(demo_workspace, tmp_path, capsys):
    from tests.test_train_cli import refusal

    values = parse_argv(demo_workspace.train_argv(max_steps=4))
    values["output_dir"] = str(tmp_path / "run")
    values["vocoder"] = str(demo_workspace.base_checkpoint)  # a GPT, not a BigVGAN
    report = run_preflight(values)
    failed = {c.name: c.message for c in report.checks if not c.ok}
    assert list(failed) == ["samples"] and failed["samples"].startswith(f"--vocoder {demo_workspace.base_checkpoint}")
    from trainer.options import options_to_argv

    capsys.readouterr()
    assert run_main(options_to_argv(values)) == 2
    assert refusal(capsys) == f"error: {failed['samples']}"
