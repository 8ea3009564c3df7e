"""networks/: the per-generation assembly modules and the IndexTTS2 GPT's configurable widths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from networks import indextts2, indextts15
from networks.bigvgan import BigVGAN, VocoderError
from networks.dvae import DiscreteVAE, DVAEError
from networks.gpt_config import ConfigError
from networks.loading import StateDictMismatchError
from networks.unified_voice import DEFAULT_V2_WIDTH, UnifiedVoice, UnifiedVoiceV2
from tests.conftest import FIXTURES, shared_file

AUDIO_FIXTURES = ("reference", "fixtures_indextts2_audio")


def _audio_config() -> dict:
    return yaml.safe_load(shared_file(*AUDIO_FIXTURES, "tiny_audio_config.yaml").read_text(encoding="utf-8"))


def _fixture_gpt_section() -> dict:
    """The fixture's gpt section plus its shrunk widths (W = semantic_dim, P = emo_perceiver_dim)."""
    config = _audio_config()
    widths = config["fixture_widths"]
    return {**config["gpt"], "semantic_dim": widths["semantic_dim"], "emo_perceiver_dim": widths["emo_perceiver_dim"]}


def test_fixture_v2_gpt_loads_strictly_with_its_widths() -> None:
    gpt = _fixture_gpt_section()
    assert (gpt["semantic_dim"], gpt["emo_perceiver_dim"]) == (96, 64)
    model = indextts2.build_gpt(gpt)
    assert (model.cond_input_size, model.emo_dim) == (96, 64)
    state = torch.load(shared_file(*AUDIO_FIXTURES, "tiny_gpt_v2_audio.pth"), weights_only=True)["model"]
    indextts2.load_gpt(model, state)
    for name, tensor in model.state_dict().items():
        assert torch.equal(tensor, state[name]), name
    features = torch.randn(1, 96, 20)
    assert model.get_emo_conditioning(features).shape == (1, 64)
    assert model.get_conditioning(features).shape == (1, 32, 64)


def test_fixture_v2_gpt_without_its_widths_is_refused_naming_the_key() -> None:
    model = indextts2.build_gpt(_audio_config()["gpt"])
    state = torch.load(shared_file(*AUDIO_FIXTURES, "tiny_gpt_v2_audio.pth"), weights_only=True)["model"]
    with pytest.raises(StateDictMismatchError, match=r"conditioning_encoder\.embed\.out\.0\.weight: checkpoint \[32, 1504\] vs model \[32, 16352\]"):
        indextts2.load_gpt(model, state)


def test_real_v2_config_without_width_keys_builds_the_1024_wide_layout() -> None:
    reference = json.loads((FIXTURES / "indextts2_gpt_state_dict_shapes.json").read_text())
    assert "semantic_dim" not in reference["config"] and "emo_perceiver_dim" not in reference["config"]
    with torch.device("meta"):
        model = indextts2.build_gpt(reference["config"])
    assert model.cond_input_size == model.emo_dim == DEFAULT_V2_WIDTH == 1024
    assert "semantic_dim" not in model.gpt_config and "emo_perceiver_dim" not in model.gpt_config
    shapes = {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
    assert shapes == reference["keys"]


@pytest.mark.parametrize("value", [0, -3, 1.5, "96", True])
def test_bad_width_is_a_one_line_config_error(value) -> None:
    with pytest.raises(ConfigError, match=r"gpt\.semantic_dim must be a positive integer"):
        UnifiedVoiceV2({**_tiny_gpt(v2=True), "semantic_dim": value})


def _tiny_gpt(v2: bool) -> dict:
    config = yaml.safe_load((FIXTURES / ("tiny_config_v2.yaml" if v2 else "tiny_config.yaml")).read_text())
    return config["gpt"]


def test_each_generation_builds_its_own_gpt_and_refuses_the_other() -> None:
    assert type(indextts15.build_gpt(_tiny_gpt(v2=False))) is UnifiedVoice
    assert type(indextts2.build_gpt({"gpt": _tiny_gpt(v2=True)})) is UnifiedVoiceV2
    with pytest.raises(ConfigError, match="IndexTTS2 GPT"):
        indextts15.build_gpt(_tiny_gpt(v2=True))
    with pytest.raises(ConfigError, match=r"IndexTTS-1\.5 GPT"):
        indextts2.build_gpt(_tiny_gpt(v2=False))


def test_indextts15_dvae_from_the_whole_config_or_its_section(tmp_path: Path) -> None:
    config = yaml.safe_load((FIXTURES / "tiny_config.yaml").read_text())
    for source in (config, config["vqvae"]):
        assert isinstance(indextts15.build_dvae(source), DiscreteVAE)
        assert isinstance(indextts15.load_dvae(FIXTURES / "tiny_dvae.pth", source), DiscreteVAE)
    with pytest.raises(DVAEError, match="no 'vqvae:' section"):
        indextts15.build_dvae({"gpt": config["gpt"], "vqvae": None})


def test_indextts15_vocoder_round_trip() -> None:
    from trainer.synthesis.demo_vocoder import build_demo_vocoder, demo_bigvgan_config

    section = demo_bigvgan_config()
    state = build_demo_vocoder(section, seed=0).state_dict()
    config = {"bigvgan": section}
    loaded = indextts15.load_vocoder({"generator": state}, config, "demo.pth")
    assert isinstance(loaded, BigVGAN) and not loaded.training
    with pytest.raises(VocoderError, match=r"demo\.pth does not fit the BigVGAN"):
        indextts15.load_vocoder({"generator": {k: v for k, v in state.items() if k != "conv_post.bias"}},
                                config, "demo.pth")
    with pytest.raises(ConfigError, match="bigvgan section lacks"):
        indextts15.build_vocoder({"bigvgan": {"gpt_dim": 64}})
