"""What S2Mel training reads per clip: the writer reproduces the fixture's training inputs; reruns only add files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from data_tools.batch_prep import write_npy
from data_tools.s2mel_clip import (
    add_missing_s2mel_files,
    missing_s2mel_stems,
    s2mel_clip_features,
    s2mel_paths,
)
from networks.campplus import load_campplus
from networks.frontends.s2mel_mel import S2MelMelSettings
from networks.semantic_codec import load_semantic_codec
from tests.conftest import shared_file
from trainer.s2mel.dataset import load_clips

FIXTURES = ("reference", "fixtures_indextts2_audio")


@pytest.fixture(scope="module")
def fixture() -> dict:
    folder = shared_file(*FIXTURES)
    config = yaml.safe_load((folder / "tiny_audio_config.yaml").read_text(encoding="utf-8"))
    expected = torch.load(folder / "s2mel_train_expected.pt", weights_only=True)
    campplus = load_campplus(
        folder / "tiny_campplus.pth",
        **{k: v for k, v in config["fixture_campplus"].items() if k != "feat_dim"},
    )
    codec = load_semantic_codec(folder / "tiny_semantic_codec.pth", config["semantic_codec"])
    settings = S2MelMelSettings.from_preprocess_params(config["s2mel"]["preprocess_params"])
    return {
        "config": config,
        "expected": expected,
        "campplus": campplus,
        "codec": codec,
        "settings": settings,
    }


def test_writer_reproduces_the_fixture_training_inputs(fixture: dict) -> None:
    inputs = fixture["expected"]["inputs"]
    for index in range(2):
        features = s2mel_clip_features(inputs["audio_22k"][index], fixture["campplus"], fixture["settings"])
        frames = int(inputs["x_lens"][index])
        assert features.mel.shape == (80, frames)
        torch.testing.assert_close(
            torch.from_numpy(features.mel), inputs["x1"][index, :, :frames], atol=1e-4, rtol=1e-4
        )
        torch.testing.assert_close(
            torch.from_numpy(features.style), inputs["style"][index], atol=1e-4, rtol=1e-4
        )


def test_rerun_adds_only_missing_files_and_clips_load(tmp_path: Path, fixture: dict) -> None:
    inputs = fixture["expected"]["inputs"]
    stems = ["utt0", "utt1"]
    for stem, codes in zip(stems, inputs["codes"], strict=True):
        write_npy(tmp_path, Path("codes") / f"{stem}.npy", codes.numpy().astype(np.int32))
    audio = dict(zip(stems, inputs["audio_22k"], strict=True))
    done = add_missing_s2mel_files(
        tmp_path, stems, audio.__getitem__, fixture["campplus"], fixture["settings"]
    )
    assert done == stems and missing_s2mel_stems(tmp_path, stems) == []
    kept = tmp_path / s2mel_paths("utt0")[0]
    before = kept.stat().st_mtime_ns
    (tmp_path / s2mel_paths("utt1")[1]).unlink()
    calls: list[str] = []

    def load(stem: str) -> torch.Tensor:
        calls.append(stem)
        return audio[stem]

    assert add_missing_s2mel_files(tmp_path, stems, load, fixture["campplus"], fixture["settings"]) == [
        "utt1"
    ]
    assert calls == ["utt1"] and kept.stat().st_mtime_ns == before

    codec = fixture["codec"]
    clips = load_clips(tmp_path, stems, lambda codes: codec.vq2emb(codes[None])[0].T)
    for index, clip in enumerate(clips):
        length = int(inputs["S_lens"][index])
        torch.testing.assert_close(clip.code_embedding, inputs["S"][index, :length], atol=1e-5, rtol=1e-5)
        assert clip.frames == int(inputs["x_lens"][index]) and clip.gpt_latent is None


def test_prepared_clips_build_each_clip_on_demand_and_train(tmp_path: Path, fixture: dict) -> None:
    from trainer.s2mel.dataset import PreparedClips
    from trainer.s2mel.loop import S2MelTrainer
    from trainer.s2mel.train_settings import S2MelTrainSettings

    inputs = fixture["expected"]["inputs"]
    stems = ["utt0", "utt1"]
    for stem, codes in zip(stems, inputs["codes"], strict=True):
        write_npy(tmp_path, Path("codes") / f"{stem}.npy", codes.numpy().astype(np.int32))
    audio = dict(zip(stems, inputs["audio_22k"], strict=True))
    add_missing_s2mel_files(tmp_path, stems, audio.__getitem__, fixture["campplus"], fixture["settings"])
    codec = fixture["codec"]
    calls: list[int] = []

    def semantic(codes: torch.Tensor) -> torch.Tensor:
        calls.append(int(codes.numel()))
        return codec.vq2emb(codes[None])[0].T

    lazy = PreparedClips(tmp_path, stems, semantic)
    assert len(lazy) == 2 and calls == []
    eager = load_clips(tmp_path, stems, semantic)
    for a, b in zip(lazy[:], eager, strict=True):
        assert torch.equal(a.mel, b.mel) and torch.equal(a.code_embedding, b.code_embedding)

    from networks.s2mel import load_s2mel

    folder = shared_file(*FIXTURES)
    config = fixture["config"]
    model = load_s2mel(
        folder / "tiny_s2mel.pth",
        config["s2mel"],
        gpt_dim=config["gpt"]["model_dim"],
        gpt_layer_hidden=tuple(config["fixture_widths"]["gpt_layer_hidden"]),
    )
    trainer = S2MelTrainer(
        model,
        lazy,
        S2MelTrainSettings(mode="lora", batch_size=2, max_steps=2, save_interval=2),
        tmp_path / "run",
    )
    trainer.run()
    assert trainer.step_count == 2 and (tmp_path / "run" / "latest.pth").is_file()
