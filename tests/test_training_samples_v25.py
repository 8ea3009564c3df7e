"""IndexTTS-2.5 samples while training (issue 24 item 3): with ``--sample-model-dir`` (the demo's tiny 2.5
download folder) the live 2.5 GPT speaks through the codec, S2Mel (no gpt_layer) and BigVGAN v2 at every save:
22.05 kHz wavs, TensorBoard audio and ``sample`` events, and the run ends bitwise equal to the same run without
samples; the pre-flight says whether samples will be made and refuses an unusable folder in one line; a failing
sample never stops training. The demo's folder itself is a 2.5 download folder the 2.5 loader accepts."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import soundfile
import torch

from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from tests.test_train_v25 import pair_subset, v25_args
from tests.trainer_helpers import assert_same_training_state, events, load, run_main
from trainer.options_parser import parse_argv
from trainer.preflight import run_preflight

FAST = {"sample_steps": 2}


@pytest.fixture(scope="module")
def ws(demo_workspace) -> DemoV25Paths:
    paths = DemoV25Paths.under(demo_workspace.root)
    assert paths.exists() and paths.synthesis_ready()
    return paths


@pytest.fixture(scope="module")
def data(ws) -> dict[str, Path]:
    folder = ws.train_manifest.parent
    return {"train": pair_subset(ws.train_manifest, folder / "samples_train.jsonl", 8),
            "val": pair_subset(ws.val_manifest, folder / "samples_val.jsonl", 4)}


def _args(ws: DemoV25Paths, data: dict[str, Path], out: Path, **extra) -> list[str]:
    return v25_args(ws, data, out, max_steps=4, save_interval=2, **extra)


def _samples_check(values: dict) -> tuple[bool, str]:
    check = next(c for c in run_preflight(values).checks if c.name == "samples")
    return check.ok, check.message


def test_the_demo_folder_is_a_25_download_folder(ws):
    from networks.indextts25 import load_indextts25

    nets = load_indextts25(ws.config.parent, local_files_only=True)
    assert nets.gpt is not None and nets.sample_rate == 22050
    assert nets.s2mel.config.with_gpt_layer is False and nets.s2mel.config.semantic_dim == nets.codec.config.hidden_size
    assert nets.campplus.embedding_size == 192
    assert "gpt_layer" not in torch.load(ws.config.parent / "s2mel.pth", weights_only=True)["net"]


def test_v25_samples_at_every_save_and_the_run_is_unchanged(ws, data, tmp_path):
    plain, voiced = tmp_path / "plain", tmp_path / "voiced"
    assert run_main(_args(ws, data, plain)) == 0
    assert run_main(_args(ws, data, voiced, sample_model_dir=ws.config.parent, **FAST)) == 0

    assert_same_training_state(load(voiced / "latest.pth"), load(plain / "latest.pth"))
    assert not (plain / "samples").exists()
    sample_events = events(voiced, "sample")
    assert [e["step"] for e in sample_events] == [2, 4]
    for event in sample_events:
        assert "error" not in event and len(event["files"]) == 3 and event["seconds"] >= 0, event
        for item in event["files"]:
            info = soundfile.info(item["path"])
            assert info.samplerate == 22050 and info.frames > 0 and item["audio_seconds"] > 0
    assert sorted(p.name for p in (voiced / "samples").iterdir()) == ["step_2", "step_4"]

    # The Training tab's players: the newest save's three wavs, and the older save on request.
    from webui.training.sample_saves import SampleEvents, samples_gallery

    saves = SampleEvents(voiced).refresh()
    gallery = samples_gallery(saves)
    assert gallery.steps == [4, 2] and gallery.step == 4 and len(gallery.players) == 3
    assert gallery.note == "step 4: 3 sample(s)"
    assert all(path.is_file() and path.parent.name == "step_4" for _label, path in gallery.players)
    assert samples_gallery(saves, 2).step == 2


def test_a_failing_v25_sample_is_reported_and_training_goes_on(ws, data, tmp_path, capsys):
    damaged = tmp_path / "IndexTTS-2.5"  # every file is there (the pre-flight passes), the codec is not readable
    shutil.copytree(ws.config.parent, damaged)
    (damaged / "codec.pth").write_bytes(b"not a torch file")
    out = tmp_path / "run"
    assert run_main(_args(ws, data, out, sample_model_dir=damaged, **FAST)) == 0
    failed = events(out, "sample")
    assert [e["step"] for e in failed] == [2, 4] and all("codec.pth" in e["error"] for e in failed), failed
    assert "warning: samples at step 2 failed (--sample-model-dir" in capsys.readouterr().out
    assert load(out / "latest.pth")["step"] == 4


def test_preflight_says_whether_v25_samples_are_made(ws, tmp_path):
    values = parse_argv(ws.train_argv(max_steps=4))  # the demo's command speaks at every save
    values["output_dir"] = str(tmp_path / "run")
    ok, message = _samples_check(values)
    assert ok and message.startswith("samples at every save: the first 3 validation transcript(s)"), message
    assert f"IndexTTS-2.5 {ws.config.parent} (10 S2Mel steps)" in message
    values["sample_model_dir"] = ""
    ok, message = _samples_check(values)
    assert ok and "no samples: give --sample-model-dir (an IndexTTS-2.5 download folder" in message


def test_an_incomplete_25_folder_is_refused_in_one_line(ws, tmp_path):
    broken = tmp_path / "IndexTTS-2.5"
    shutil.copytree(ws.config.parent, broken)
    (broken / "codec.pth").unlink()
    values = parse_argv(ws.train_argv(max_steps=4))
    values.update(output_dir=str(tmp_path / "run"), sample_model_dir=str(broken))
    failed = {c.name: c.message for c in run_preflight(values).checks if not c.ok}
    assert list(failed) == ["samples"]
    assert failed["samples"].startswith(f"--sample-model-dir {broken}: ") and "codec.pth" in failed["samples"]
    assert "\n" not in failed["samples"]


def test_a_lora_25_run_speaks_samples_with_its_live_adapters(ws, data, tmp_path):
    out = tmp_path / "lora"
    argv = [*v25_args(ws, data, out, max_steps=2, save_interval=2, sample_model_dir=ws.config.parent, **FAST), "--lora"]
    assert run_main(argv) == 0
    (event,) = events(out, "sample")
    assert "error" not in event and len(event["files"]) == 3, event
