"""IndexTTS2 samples while training (issue 20): with ``--sample-model-dir`` (the demo's tiny download folder) the
live GPT speaks through S2Mel and BigVGAN v2 at every save: 22.05 kHz wavs, TensorBoard audio and ``sample``
events, and the run ends bitwise equal to the same run without samples; the pre-flight says whether samples
will be made, refuses an unusable folder in one line, and a failing sample never stops training."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import soundfile

from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from tests.test_train_v2 import pair_subset, v2_args
from tests.trainer_helpers import assert_same_training_state, events, load, run_main
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight


@pytest.fixture(scope="module")
def ws(demo_workspace) -> DemoV2Paths:
    paths = DemoV2Paths.under(demo_workspace.root)
    assert paths.exists() and paths.synthesis_ready()
    return paths


@pytest.fixture(scope="module")
def data(ws) -> dict[str, Path]:
    folder = ws.train_manifest.parent
    return {"train": pair_subset(ws.train_manifest, folder / "samples_train.jsonl", 8),
            "val": pair_subset(ws.val_manifest, folder / "samples_val.jsonl", 4)}


def _args(ws: DemoV2Paths, data: dict[str, Path], out: Path, **extra) -> list[str]:
    return v2_args(ws, data, out, max_steps=4, save_interval=2, **extra)


def _samples_check(values: dict) -> tuple[bool, str]:
    check = next(c for c in run_preflight(values).checks if c.name == "samples")
    return check.ok, check.message


def test_v2_samples_at_every_save_and_the_run_is_unchanged(ws, data, tmp_path):
    plain, voiced = tmp_path / "plain", tmp_path / "voiced"
    assert run_main(_args(ws, data, plain)) == 0
    assert run_main(_args(ws, data, voiced, sample_model_dir=ws.config.parent)) == 0

    assert_same_training_state(load(voiced / "latest.pth"), load(plain / "latest.pth"))
    assert not (plain / "samples").exists()
    sample_events = events(voiced, "sample")
    assert [e["step"] for e in sample_events] == [2, 4]
    for event in sample_events:
        assert "error" not in event and len(event["files"]) == 3 and event["seconds"] >= 0
        for item in event["files"]:
            info = soundfile.info(item["path"])
            assert info.samplerate == 22050 and info.frames > 0
            assert item["audio_seconds"] > 0
    assert sorted(p.name for p in (voiced / "samples").iterdir()) == ["step_2", "step_4"]
    from tensorboard.backend.event_processing.event_accumulator import AUDIO, EventAccumulator

    (run_logs,) = list((voiced / "logs").iterdir())
    accumulator = EventAccumulator(str(run_logs), size_guidance={AUDIO: 0})
    accumulator.Reload()
    audio_tags = accumulator.Tags()[AUDIO]
    assert len(audio_tags) == 3, audio_tags
    clips = accumulator.Audio(audio_tags[0])
    assert [clip.step for clip in clips] == [2, 4] and all(clip.sample_rate == 22050 for clip in clips)


def test_a_failing_v2_sample_is_reported_and_training_goes_on(ws, data, tmp_path, capsys):
    damaged = tmp_path / "IndexTTS-2"  # every file is there (the pre-flight passes), the vocoder is not readable
    shutil.copytree(ws.config.parent, damaged)
    (damaged / "bigvgan" / "bigvgan_generator.pt").write_bytes(b"not a torch file")
    out = tmp_path / "run"
    assert run_main(_args(ws, data, out, sample_model_dir=damaged)) == 0
    failed = events(out, "sample")
    assert [e["step"] for e in failed] == [2, 4] and all("bigvgan_generator.pt" in e["error"] for e in failed)
    assert "warning: samples at step 2 failed (--sample-model-dir" in capsys.readouterr().out
    assert load(out / "latest.pth")["step"] == 4


def test_preflight_says_whether_v2_samples_are_made(ws, tmp_path):
    values = parse_argv(ws.train_argv(max_steps=4))  # the demo's command speaks at every save
    values["output_dir"] = str(tmp_path / "run")
    ok, message = _samples_check(values)
    assert ok and message.startswith("samples at every save: the first 3 validation transcript(s)")
    assert f"IndexTTS2 {ws.config.parent} (10 S2Mel steps)" in message
    values["sample_model_dir"] = ""
    ok, message = _samples_check(values)
    assert ok and "no samples: give --sample-model-dir" in message


def test_an_incomplete_download_folder_is_refused_alike(ws, tmp_path, capsys):
    from tests.test_train_cli import refusal
    from trainer.options import options_to_argv

    broken = tmp_path / "IndexTTS-2"
    shutil.copytree(ws.config.parent, broken)
    (broken / "s2mel.pth").unlink()
    values = parse_argv(ws.train_argv(max_steps=4))
    values.update(output_dir=str(tmp_path / "run"), sample_model_dir=str(broken))
    failed = {c.name: c.message for c in run_preflight(values).checks if not c.ok}
    assert list(failed) == ["samples"]
    assert failed["samples"].startswith(f"--sample-model-dir {broken}: ") and "s2mel.pth" in failed["samples"]
    capsys.readouterr()
    assert run_main(options_to_argv(values)) == 2
    assert refusal(capsys) == f"error: {failed['samples']}"
