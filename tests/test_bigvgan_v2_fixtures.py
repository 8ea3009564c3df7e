"""BigVGAN v2 (IndexTTS2 / 2.5's 22.05 kHz vocoder) against the reference fixtures.

IndexTTS2 set A: fixtures_indextts2_audio (synthesis_expected.pt BigVGAN keys); IndexTTS-2.5 set A:
indextts25/fixtures_audio (audio_expected_v25.pt ``synthesis`` vc_target -> wav). Tolerances from FIXTURES.md:
floats atol 1e-4 / rtol 1e-4, wav_scaled atol 1e-2, int16 within 2 LSB.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml

from networks import indextts2
from networks.bigvgan import VocoderError
from networks.bigvgan_v2 import HUB_CONFIG, BigVGANV2, BigVGANV2Spec, build_bigvgan_v2, load_bigvgan_v2
from networks.gpt_config import ConfigError
from tests.conftest import shared_file
from trainer.synthesis.wav import join_segments_int16, scale_to_int16_range, silence_samples, to_int16

V2 = ("reference", "fixtures_indextts2_audio")
V25 = ("reference", "indextts25", "fixtures_audio")
TOL = {"atol": 1e-4, "rtol": 1e-4}


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny convolutions gain nothing from threads, and contended intra-op threads on a busy 2-core machine
    make them many times slower (as tests/trainer_helpers.run_main does)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _fixture_spec(*parts: str) -> BigVGANV2Spec:
    config = yaml.safe_load(shared_file(*parts).read_text())
    return BigVGANV2Spec.from_config(config["fixture_bigvgan"], "fixture_bigvgan")


def _max_int16_diff(a: np.ndarray, b: np.ndarray) -> int:
    return int(np.abs(a.astype(np.int32) - b.astype(np.int32)).max())


@pytest.fixture(scope="module")
def v2_synthesis() -> dict:
    return torch.load(shared_file(*V2, "synthesis_expected.pt"), weights_only=True)["synthesis"]


@pytest.fixture(scope="module")
def v2_state() -> dict:
    return torch.load(shared_file(*V2, "tiny_bigvgan_v2.pth"), weights_only=True)


@pytest.fixture(scope="module")
def v2_spec() -> BigVGANV2Spec:
    return _fixture_spec(*V2, "tiny_audio_config.yaml")


@pytest.fixture(scope="module")
def v2_vocoder(v2_state, v2_spec) -> BigVGANV2:
    return indextts2.load_vocoder_v2(v2_state, v2_spec)


def test_fixture_config_is_the_hub_config_but_narrower(v2_spec):
    for parts in ((*V2, "tiny_audio_config.yaml"), (*V25, "tiny_audio_config_v25.yaml")):
        fixture = yaml.safe_load(shared_file(*parts).read_text())["fixture_bigvgan"]
        assert set(fixture) == set(HUB_CONFIG)
        assert {k for k in HUB_CONFIG if fixture[k] != HUB_CONFIG[k]} == {"upsample_initial_channel"}
    assert v2_spec.samples_per_frame == 256 and v2_spec.sampling_rate == 22050
    assert not v2_spec.use_tanh_at_final and not v2_spec.use_bias_at_final


def test_v2_stages_match_reference(v2_vocoder, v2_synthesis):
    ref = v2_synthesis
    assert not v2_vocoder.training
    with torch.no_grad():
        conv_pre = v2_vocoder.conv_pre(ref["mel"])
        torch.testing.assert_close(conv_pre, ref["bigvgan_conv_pre_out"], **TOL)
        # the first AMP block of stage 0 alone, on stage 0's upsampled input
        block0 = v2_vocoder.resblocks[0](v2_vocoder.ups[0][0](ref["bigvgan_conv_pre_out"]))
        torch.testing.assert_close(block0, ref["bigvgan_resblock0_out"], **TOL)
        x = conv_pre
        for index, stage in enumerate(v2_vocoder.ups):
            x = sum(block(stage[0](x)) for block in v2_vocoder.stage_blocks(index)) / v2_vocoder.num_kernels
        activated = v2_vocoder.activation_post(x)
        torch.testing.assert_close(activated, ref["bigvgan_activation_post_out"], **TOL)
        torch.testing.assert_close(v2_vocoder.conv_post(ref["bigvgan_activation_post_out"]),
                                   ref["bigvgan_conv_post_out"], **TOL)
        wav = v2_vocoder(ref["mel"])
    torch.testing.assert_close(wav, ref["wav"], **TOL)
    assert wav.shape[-1] == ref["mel"].shape[-1] * 256


def test_v2_waveform_post_processing(v2_vocoder, v2_synthesis):
    ref = v2_synthesis
    with torch.no_grad():
        wav = v2_vocoder(ref["mel"]).squeeze(1).numpy()
    np.testing.assert_allclose(scale_to_int16_range(wav), ref["wav_scaled"].numpy(), atol=1e-2, rtol=0)
    assert _max_int16_diff(to_int16(wav), ref["wav_int16"].numpy()) <= 2
    joined = join_segments_int16([wav[0]], 22050)
    assert joined.dtype == np.int16 and _max_int16_diff(joined, ref["wav_int16"].numpy()[0]) <= 2
    # infer()'s own output for the same text (one segment) equals the step-by-step waveform
    e2e = torch.load(shared_file(*V2, "synthesis_expected.pt"), weights_only=True)["infer_e2e"]["text0"]
    assert _max_int16_diff(joined, e2e["wav_int16"].numpy()[0]) <= 2


def test_clamp_not_tanh_and_no_final_bias(v2_state, v2_spec, v2_synthesis):
    model = indextts2.load_vocoder_v2(v2_state, v2_spec)
    assert model.conv_post.bias is None
    with torch.no_grad():
        model.conv_post.weight.mul_(300.0)  # drive the output far past [-1, 1]
        mel = v2_synthesis["mel"][..., :8]
        x = model.conv_pre(mel)
        for index, stage in enumerate(model.ups):
            x = sum(block(stage[0](x)) for block in model.stage_blocks(index)) / model.num_kernels
        raw = model.conv_post(model.activation_post(x))
        wav = model(mel)
    assert raw.abs().max() > 2.0 and (wav.abs() == 1.0).any()
    assert torch.equal(wav, raw.clamp(-1.0, 1.0))


def test_weight_norm_fold_keeps_the_output(v2_state, v2_spec, v2_synthesis):
    model = build_bigvgan_v2(v2_spec)
    model.load_state_dict(v2_state["generator"], strict=True)
    model.eval()
    mel = v2_synthesis["mel"][..., :16]
    with torch.no_grad():
        before = model(mel)
        model.fold_weight_norm()
        after = model(mel)
    assert not any(name.endswith(("weight_g", "weight_v")) for name in model.state_dict())
    torch.testing.assert_close(after, before, atol=1e-6, rtol=1e-6)


def test_v25_vocoder_matches_reference():
    spec = _fixture_spec(*V25, "tiny_audio_config_v25.yaml")
    vocoder = indextts2.load_vocoder_v2(shared_file(*V25, "tiny_bigvgan_generator.pt"), spec)
    ref = torch.load(shared_file(*V25, "audio_expected_v25.pt"), weights_only=True)
    synthesis = ref["synthesis"]
    with torch.no_grad():
        wav = vocoder(synthesis["vc_target"]).squeeze(1)
    torch.testing.assert_close(wav, synthesis["wav"], **TOL)
    assert _max_int16_diff(join_segments_int16([wav.numpy()], 22050), synthesis["wav_int16"].numpy()[0]) <= 2
    # e2e: 3 segments of 10496 samples joined by 4410 zeros (200 ms at 22050 Hz)
    e2e = ref["e2e"]["wav_int16"].numpy()[0]
    gap, segment = silence_samples(22050), 10496
    assert gap == 4410 and e2e.size == 3 * segment + 2 * gap
    for start in (segment, 2 * segment + gap):
        assert not e2e[start : start + gap].any()


def test_join_segments_layout():
    first, second = np.full(5, 0.5, dtype=np.float32), np.full((1, 3), -2.0, dtype=np.float32)
    joined = join_segments_int16([first, second], 100)  # 20 zeros at 100 Hz
    assert joined.tolist() == [16383] * 5 + [0] * 20 + [-32767] * 3
    with pytest.raises(ValueError, match="no segments"):
        join_segments_int16([], 22050)


@pytest.mark.parametrize("table", [("indextts2_audio_state_dict_shapes.json", "bigvgan_v2"), (
    "indextts25/indextts25_audio_state_dict_shapes.json",
    "bigvgan_v2_22khz_80band_256x (weight-norm form, bigvgan_generator.pt[\"generator\"])")])
def test_real_size_layout_on_meta(table):
    name, key = table
    expected = json.loads(shared_file("reference", *name.split("/")).read_text())[key]
    shapes = {k: (v[0] if isinstance(v[0], list) else v) for k, v in expected.items()}
    model = indextts2.build_vocoder_v2(HUB_CONFIG, "meta")
    actual = {k: list(t.shape) for k, t in model.state_dict().items()}
    assert list(actual) == list(shapes)  # same keys in the same order
    assert actual == shapes
    assert len(actual) == 783
    assert sum(t.numel() for t in model.state_dict().values()) == 112_233_865


def test_wrong_state_is_refused_naming_the_key(v2_state, v2_spec, tmp_path):
    state = dict(v2_state["generator"])
    state["ups.2.0.weight_v"] = torch.zeros(3, 3, 3)
    with pytest.raises(VocoderError, match=r"ups\.2\.0\.weight_v: checkpoint \[3, 3, 3\] vs model \[32, 16, 4\]"):
        load_bigvgan_v2({"generator": state}, v2_spec, "bad.pt")
    missing = {k: v for k, v in v2_state["generator"].items() if k != "conv_pre.bias"}
    with pytest.raises(VocoderError, match=r"missing 1 key\(s\): conv_pre\.bias") as caught:
        indextts2.load_vocoder_v2({"generator": missing}, v2_spec)
    assert "\n" not in str(caught.value)
    with_bias = dict(v2_state["generator"], **{"conv_post.bias": torch.zeros(1)})
    with pytest.raises(VocoderError, match=r"unexpected 1 key\(s\): conv_post\.bias"):
        indextts2.load_vocoder_v2(with_bias, v2_spec)
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(VocoderError, match="could not be read as a BigVGAN v2 generator file"):
        indextts2.load_vocoder_v2(junk, v2_spec)
    with pytest.raises(VocoderError, match="not a BigVGAN generator file"):
        indextts2.load_vocoder_v2({"optimizer": {}}, v2_spec)


def test_bad_config_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="lacks num_mels"):
        BigVGANV2Spec.from_config({k: v for k, v in HUB_CONFIG.items() if k != "num_mels"})
    with pytest.raises(ConfigError, match="hop_size 300 differs"):
        BigVGANV2Spec.from_config({**HUB_CONFIG, "hop_size": 300})
    with pytest.raises(ConfigError, match="activation 'snake'"):
        BigVGANV2Spec.from_config({**HUB_CONFIG, "activation": "snake"})
    tanh = BigVGANV2Spec.from_config({k: v for k, v in HUB_CONFIG.items() if not k.startswith("use_")})
    assert tanh.use_tanh_at_final and tanh.use_bias_at_final  # BigVGAN's defaults when the keys are absent
