"""CAM++ speaker style and its Kaldi fbank against the IndexTTS2 audio fixtures (fixtures_indextts2_audio).

Tolerances from FIXTURES.md: fbank (log domain) atol 1e-3; CAMPPlus intermediates and style atol/rtol 1e-4.
"""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from networks.campplus import REAL_SIZES, CAMPPlus, load_campplus
from networks.frontends.kaldi_fbank import kaldi_fbank, kaldi_mel_banks, speaker_fbank, subtract_time_mean
from networks.loading import StateDictMismatchError
from tests.conftest import shared_file

FIXTURE_DIR = ("reference", "fixtures_indextts2_audio")
TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.fixture(scope="module")
def synthesis() -> dict:
    path = shared_file(*FIXTURE_DIR, "synthesis_expected.pt")
    return torch.load(path, map_location="cpu", weights_only=True)["synthesis"]


@pytest.fixture(scope="module")
def tiny_sizes() -> dict:
    config = yaml.safe_load(shared_file(*FIXTURE_DIR, "tiny_audio_config.yaml").read_text(encoding="utf-8"))
    return dict(config["fixture_campplus"])


@pytest.fixture(scope="module")
def tiny_state_dict() -> dict:
    return torch.load(shared_file(*FIXTURE_DIR, "tiny_campplus.pth"), map_location="cpu", weights_only=True)


@pytest.fixture(scope="module")
def tiny_model(tiny_sizes: dict) -> CAMPPlus:
    return load_campplus(shared_file(*FIXTURE_DIR, "tiny_campplus.pth"), **tiny_sizes)


def test_fbank_raw_matches_torchaudio_kaldi(synthesis: dict) -> None:
    fbank = kaldi_fbank(synthesis["prompt_audio_16k"])
    assert fbank.shape == synthesis["fbank_raw"].shape == (158, 80)
    torch.testing.assert_close(fbank, synthesis["fbank_raw"], atol=1e-3, rtol=0)


def test_fbank_minus_time_mean(synthesis: dict) -> None:
    features = speaker_fbank(synthesis["prompt_audio_16k"])
    assert features.shape == (1, 158, 80)
    torch.testing.assert_close(features[0], synthesis["fbank"], atol=1e-3, rtol=0)
    torch.testing.assert_close(subtract_time_mean(synthesis["fbank_raw"]), synthesis["fbank"], **TOL)


def test_campplus_intermediates_and_style(tiny_model: CAMPPlus, synthesis: dict) -> None:
    stages = {
        "campplus_head_out": tiny_model.head,
        "campplus_tdnn_out": tiny_model.xvector.tdnn,
        "campplus_block1_out": tiny_model.xvector.block1,
        "campplus_transit3_out": tiny_model.xvector.transit3,
        "campplus_stats_out": tiny_model.xvector.stats,
    }
    seen: dict[str, torch.Tensor] = {}
    hooks = [
        module.register_forward_hook(lambda _m, _i, out, name=name: seen.__setitem__(name, out))
        for name, module in stages.items()
    ]
    try:
        with torch.no_grad():
            style = tiny_model(synthesis["fbank"].unsqueeze(0))
    finally:
        for hook in hooks:
            hook.remove()
    for name in stages:
        assert seen[name].shape == synthesis[name].shape, name
        torch.testing.assert_close(
            seen[name], synthesis[name], **TOL, msg=lambda m, name=name: f"{name}: {m}"
        )
    torch.testing.assert_close(style, synthesis["style"], **TOL)


def test_style_from_prompt_audio(tiny_model: CAMPPlus, synthesis: dict) -> None:
    style = tiny_model.style_of(synthesis["prompt_audio_16k"])
    assert style.shape == (1, 24)
    assert not style.requires_grad
    torch.testing.assert_close(style, synthesis["style"], **TOL)


def test_batch_rows_are_independent(tiny_model: CAMPPlus, synthesis: dict) -> None:
    audio = synthesis["prompt_audio_16k"][0]
    batch = torch.stack([audio, audio.flip(0)])
    styles = tiny_model.style_of(batch)
    torch.testing.assert_close(styles[0:1], tiny_model.style_of(audio), **TOL)
    torch.testing.assert_close(styles[1:2], tiny_model.style_of(audio.flip(0)), **TOL)


def _real_layout(path_parts: tuple[str, ...], section_prefix: str) -> dict[str, list[int]]:
    data = json.loads(shared_file(*path_parts).read_text(encoding="utf-8"))
    (section,) = [key for key in data if key == section_prefix or key.startswith(section_prefix + " (")]
    layout = {}
    for key, value in data[section].items():
        if value and isinstance(value[0], list):  # 2.5 lists [shape, dtype]
            assert value[1] == "float32" or key.endswith("num_batches_tracked"), key
            value = value[0]
        layout[key] = value
    return layout


@pytest.mark.parametrize(
    "path_parts",
    [
        ("reference", "indextts2_audio_state_dict_shapes.json"),
        ("reference", "indextts25", "indextts25_audio_state_dict_shapes.json"),
    ],
)
def test_real_size_layout_on_meta_device(path_parts: tuple[str, ...]) -> None:
    with torch.device("meta"):
        model = CAMPPlus(**REAL_SIZES)
    built = {key: list(tensor.shape) for key, tensor in model.state_dict().items()}
    expected = _real_layout(path_parts, "campplus")
    assert list(built) == list(expected)
    assert built == expected
    assert len(built) == 937
    assert sum(tensor.numel() for tensor in model.state_dict().values()) == 6_930_842


def test_tiny_checkpoint_has_the_real_key_names(tiny_state_dict: dict) -> None:
    real = _real_layout(("reference", "indextts2_audio_state_dict_shapes.json"), "campplus")
    assert list(tiny_state_dict) == list(real)


def test_wrong_shape_is_refused_naming_the_key(tiny_state_dict: dict, tiny_sizes: dict) -> None:
    broken = dict(tiny_state_dict)
    key = "xvector.block2.tdnnd3.cam_layer.linear1.weight"
    broken[key] = torch.zeros(broken[key].shape[0] + 1, *broken[key].shape[1:])
    with pytest.raises(StateDictMismatchError) as caught:
        load_campplus(broken, source="broken.bin", **tiny_sizes)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("broken.bin does not fit CAMPPlus")
    assert key in message


def test_missing_key_and_real_sizes_refuse_tiny_weights(tiny_state_dict: dict) -> None:
    broken = dict(tiny_state_dict)
    del broken["xvector.dense.nonlinear.batchnorm.running_var"]
    with pytest.raises(StateDictMismatchError, match=r"missing 1 key\(s\): xvector\.dense\.nonlinear"):
        load_campplus(broken, embedding_size=24, growth_rate=8, bn_size=2, init_channels=16)
    with pytest.raises(StateDictMismatchError) as caught:
        load_campplus(
            tiny_state_dict
        )  # real sizes: same key names, the head fits, every xvector width differs
    first_problem = str(caught.value).split(": ", 1)[1]
    assert first_problem.startswith(
        "xvector.block1.tdnnd1.cam_layer.linear1.bias: checkpoint [8] vs model [64]"
    )


def test_missing_or_unreadable_weights_file_is_a_clear_error(tmp_path) -> None:
    path = tmp_path / "campplus_cn_common.bin"
    with pytest.raises(FileNotFoundError, match="CAMPPlus weights not found"):
        load_campplus(path)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="could not be read as a CAMPPlus state dict") as caught:
        load_campplus(path)
    assert "\n" not in str(caught.value)
    torch.save([torch.zeros(1)], path)
    with pytest.raises(ValueError, match="is not a plain state dict"):
        load_campplus(path)


def test_fbank_frames_and_bad_input() -> None:
    audio = torch.randn(16000)
    assert kaldi_fbank(audio).shape == (1 + (16000 - 400) // 160, 80)
    assert kaldi_fbank(audio[:400]).shape == (1, 80)
    with pytest.raises(ValueError, match="shorter than one 25 ms frame"):
        kaldi_fbank(audio[:399])
    with pytest.raises(ValueError, match="wants a waveform"):
        kaldi_fbank(torch.zeros(1, 1, 800))


def test_mel_banks_follow_kaldi() -> None:
    banks = kaldi_mel_banks(80, 512, 16000)
    assert banks.shape == (80, 257)
    assert torch.all(banks[:, -1] == 0)
    assert torch.all(banks >= 0) and torch.all(banks <= 1)
    peaks = banks.argmax(dim=1)
    assert torch.all(peaks[1:] >= peaks[:-1])
    assert banks[:, 0].sum() == 0  # DC (0 Hz) lies below the 20 Hz low edge


def test_campplus_rejects_wrong_feature_width(tiny_model: CAMPPlus) -> None:
    with pytest.raises(ValueError, match=r"wants fbank \(B, T, 80\)"):
        tiny_model(torch.zeros(1, 50, 64))
