"""IndexTTS2 S2Mel: every stage against synthesis_expected.pt; the real key layout on the meta device."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
import yaml

from networks.frontends.s2mel_mel import S2MelMelSettings, s2mel_log_mel
from networks.loading import StateDictMismatchError
from networks.s2mel import (
    S2Mel,
    S2MelCheckpointError,
    S2MelConfig,
    S2MelConfigError,
    load_s2mel,
    read_s2mel_net,
    target_mel_frames,
)
from tests.conftest import shared_file

FIXTURE_DIR = ("reference", "fixtures_indextts2_audio")

# The s2mel section of IndexTTS2 v2.0's checkpoints/config.yaml (README_indextts2_audio.md, section 5).
REAL_S2MEL_SECTION = {
    "preprocess_params": {
        "sr": 22050,
        "spect_params": {
            "n_fft": 1024, "win_length": 1024, "hop_length": 256, "n_mels": 80, "fmin": 0, "fmax": "None",
        },
    },
    "dit_type": "DiT",
    "reg_loss_type": "l1",
    "style_encoder": {"dim": 192},
    "length_regulator": {
        "channels": 512, "is_discrete": False, "in_channels": 1024, "content_codebook_size": 2048,
        "sampling_ratios": [1, 1, 1, 1], "vector_quantize": False, "n_codebooks": 1, "quantizer_dropout": 0.0,
        "f0_condition": False, "n_f0_bins": 512,
    },
    "DiT": {
        "hidden_dim": 512, "num_heads": 8, "depth": 13, "class_dropout_prob": 0.1, "block_size": 8192,
        "in_channels": 80, "style_condition": True, "final_layer_type": "wavenet", "target": "mel",
        "content_dim": 512, "content_codebook_size": 1024, "content_type": "discrete", "f0_condition": False,
        "n_f0_bins": 512, "content_codebooks": 1, "is_causal": False, "long_skip_connection": True,
        "zero_prompt_speech_token": False, "time_as_token": False, "style_as_token": False,
        "uvit_skip_connection": True, "add_resblock_in_transformer": False,
    },
    "wavenet": {
        "hidden_dim": 512, "num_layers": 8, "kernel_size": 5, "dilation_rate": 1, "p_dropout": 0.2,
        "style_condition": True,
    },
}


def close(name: str, actual: torch.Tensor, expected: torch.Tensor, atol: float = 1e-4) -> None:
    torch.testing.assert_close(actual, expected, atol=atol, rtol=1e-4, msg=lambda m: f"{name}: {m}")


@pytest.fixture(scope="module")
def folder() -> Path:
    return shared_file(*FIXTURE_DIR)


@pytest.fixture(scope="module")
def config(folder: Path) -> dict:
    return yaml.safe_load((folder / "tiny_audio_config.yaml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def expected(folder: Path) -> dict:
    return torch.load(folder / "synthesis_expected.pt", weights_only=True)["synthesis"]


def load_tiny(folder: Path, config: dict, path: Path | None = None) -> S2Mel:
    return load_s2mel(
        path or folder / "tiny_s2mel.pth",
        config["s2mel"],
        gpt_dim=config["gpt"]["model_dim"],
        gpt_layer_hidden=tuple(config["fixture_widths"]["gpt_layer_hidden"]),
    )


@pytest.fixture(scope="module")
def model(folder: Path, config: dict) -> S2Mel:
    return load_tiny(folder, config)


@pytest.fixture(scope="module")
def run(model: S2Mel, expected: dict) -> tuple[torch.Tensor, dict]:
    """One full S2Mel call on the fixture's inputs with the stored noise; returns (mel, trace)."""
    with torch.no_grad():
        prompt_condition = model.prompt_condition(expected["S_ref"], expected["ref_mel"].shape[-1])
    trace: dict = {}
    mel = model.infer(
        prompt_condition=prompt_condition,
        ref_mel=expected["ref_mel"],
        style=expected["style"],
        gpt_latent=expected["gpt_latent"],
        code_embedding=expected["vq2emb"],
        steps=expected["diffusion_steps"],
        cfg_rate=expected["inference_cfg_rate"],
        noise=expected["cfm_noise"].clone(),
        trace=trace,
    )
    return mel, trace


def test_ref_mel_from_the_22k_prompt(expected: dict, config: dict) -> None:
    settings = S2MelMelSettings.from_preprocess_params(config["s2mel"]["preprocess_params"])
    assert settings == S2MelMelSettings()
    mel = s2mel_log_mel(expected["prompt_audio_22k"], settings)
    assert mel.shape == expected["ref_mel"].shape
    close("ref_mel", mel, expected["ref_mel"], atol=1e-3)


def test_mel_frame_count_and_short_audio() -> None:
    for samples in (1024, 35280, 35281):
        assert s2mel_log_mel(torch.zeros(samples)).shape[-1] == (samples + 768 - 1024) // 256 + 1
    with pytest.raises(ValueError, match="too short"):
        s2mel_log_mel(torch.zeros(100))


def test_length_regulator_on_the_prompt(model: S2Mel, expected: dict) -> None:
    regulator = model.length_regulator
    frames = expected["ref_mel"].shape[-1]
    with torch.no_grad():
        projected = regulator.content_in_proj(expected["S_ref"])
        stretched = regulator.stretch(projected, frames)
        condition = model.prompt_condition(expected["S_ref"], frames)
    close("lr_prompt_in_proj", projected, expected["lr_prompt_in_proj"])
    close("lr_prompt_model_in", stretched, expected["lr_prompt_model_in"])
    close("prompt_condition", condition, expected["prompt_condition"])


STAGES = [
    "gpt_layer_out", "S_infer", "cond", "cat_condition",
    "dit_t1", "dit_cond_projection_out", "dit_x_in", "dit_transformer_out", "dit_skip_linear_out",
    "dit_wavenet_out", "dit_final_layer_out", "cfm_est_out_first", "cfm_est_out_last", "cfm_out_full",
]
TRACE_NAMES = {"cfm_est_out_first": "est_out_first", "cfm_est_out_last": "est_out_last"}


@pytest.mark.parametrize("name", STAGES)
def test_synthesis_stage(run: tuple, expected: dict, name: str) -> None:
    _, trace = run
    close(name, trace[TRACE_NAMES.get(name, name)], expected[name])


def test_target_lengths_and_time_steps(run: tuple, expected: dict) -> None:
    _, trace = run
    assert target_mel_frames(expected["codes"].shape[-1]) == 68
    assert trace["target_lengths"].tolist() == expected["target_lengths"].tolist()
    close("cfm_t_steps", trace["t_steps"], expected["cfm_t_steps"])


def test_every_euler_step(run: tuple, expected: dict) -> None:
    _, trace = run
    steps = expected["cfm_x_steps"]
    assert trace["x_steps"].shape == steps.shape
    for index in range(steps.shape[0]):
        close(f"cfm_x_steps[{index}]", trace["x_steps"][index], steps[index])


def test_mel(run: tuple, expected: dict) -> None:
    mel, _ = run
    assert mel.shape == expected["mel"].shape == (1, 80, 68)
    close("mel", mel, expected["mel"])


def test_fewer_steps_seeded_noise_and_no_guidance(model: S2Mel, expected: dict) -> None:
    inputs = {
        "prompt_condition": expected["prompt_condition"],
        "ref_mel": expected["ref_mel"],
        "style": expected["style"],
        "gpt_latent": expected["gpt_latent"][:, :10],
        "code_embedding": expected["vq2emb"][:, :, :10],
    }
    first = model.infer(**inputs, steps=3, generator=torch.Generator().manual_seed(7))
    again = model.infer(**inputs, steps=3, generator=torch.Generator().manual_seed(7))
    unguided = model.infer(**inputs, steps=2, cfg_rate=0.0, generator=torch.Generator().manual_seed(7))
    assert first.shape == unguided.shape == (1, 80, target_mel_frames(10))
    assert torch.equal(first, again)
    assert torch.isfinite(unguided).all()
    with pytest.raises(ValueError, match="at least 1"):
        model.infer(**inputs, steps=0)


def test_bad_inputs_are_named(model: S2Mel, expected: dict) -> None:
    inputs = {
        "prompt_condition": expected["prompt_condition"],
        "ref_mel": expected["ref_mel"],
        "style": expected["style"],
        "gpt_latent": expected["gpt_latent"],
        "code_embedding": expected["vq2emb"],
    }
    with pytest.raises(ValueError, match=r"gpt_latent must be \(batch, codes, 64\)"):
        model.infer(**{**inputs, "gpt_latent": torch.zeros(1, 40, 65)})
    with pytest.raises(ValueError, match="code_embedding must be"):
        model.infer(**{**inputs, "code_embedding": expected["vq2emb"].transpose(1, 2)})
    with pytest.raises(ValueError, match="style must be"):
        model.infer(**{**inputs, "style": torch.zeros(1, 192)})
    with pytest.raises(ValueError, match="noise must have shape"):
        model.infer(**inputs, noise=torch.zeros(1, 80, 10))


def real_shapes() -> tuple[dict, dict]:
    path = shared_file("reference", "indextts2_audio_state_dict_shapes.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["s2mel"], data["_counts_keys_elements"]


def test_real_size_on_meta_has_exactly_the_real_layout() -> None:
    shapes, counts = real_shapes()
    with torch.device("meta"):
        model = S2Mel.from_config(REAL_S2MEL_SECTION)  # gpt_dim 1280 and (256, 128) are the defaults
    assert model.config == S2MelConfig()
    net = model.net_state_dict()
    assert sorted(net) == sorted(shapes)
    for part, state in net.items():
        built = {key: list(tensor.shape) for key, tensor in state.items()}
        assert built == shapes[part], part
        keys, elements = counts[f"s2mel.{part}"]
        assert (len(state), sum(tensor.numel() for tensor in state.values())) == (keys, elements)


def test_real_size_meta_model_loads_a_real_layout_and_refuses_one_wrong_shape() -> None:
    shapes, _ = real_shapes()
    with torch.device("meta"):
        model = S2Mel.from_config(REAL_S2MEL_SECTION)
        net = {part: {key: torch.empty(size) for key, size in keys.items()} for part, keys in shapes.items()}
    model.load_net(net, "real layout", assign=True)
    bad = "estimator.transformer.layers.7.skip_in_linear.weight"
    with torch.device("meta"):
        net["cfm"][bad] = torch.empty(512, 1023)
    with pytest.raises(StateDictMismatchError) as error:
        model.load_net(net, "s2mel.pth", assign=True)
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("s2mel.pth net.cfm does not fit CFM:")
    assert f"{bad}: checkpoint [512, 1023] vs model [512, 1024]" in message


def test_tiny_checkpoint_wrong_shape_missing_key_and_prefix(
    folder: Path, config: dict, tmp_path: Path, expected: dict
) -> None:
    net = read_s2mel_net(folder / "tiny_s2mel.pth")

    def save(name: str, value: dict) -> Path:
        path = tmp_path / name
        torch.save(value, path)
        return path

    wrong = copy.deepcopy(net)
    wrong["length_regulator"]["content_in_proj.weight"] = torch.zeros(32, 1024)
    with pytest.raises(StateDictMismatchError, match=r"net\.length_regulator .*content_in_proj\.weight"):
        load_tiny(folder, config, save("wrong.pth", {"net": wrong}))

    missing = copy.deepcopy(net)
    del missing["gpt_layer"]["2.bias"]
    with pytest.raises(StateDictMismatchError, match=r"missing 1 key\(s\): 2\.bias"):
        load_tiny(folder, config, save("missing.pth", {"net": missing}))

    with pytest.raises(S2MelCheckpointError, match="no 'cfm'"):
        load_tiny(folder, config, save("partial.pth", {"net": {"gpt_layer": net["gpt_layer"]}}))
    with pytest.raises(S2MelCheckpointError, match="expected a dict with a 'net' dict"):
        load_tiny(folder, config, save("model.pth", {"model": net["gpt_layer"]}))
    with pytest.raises(S2MelCheckpointError, match="not found"):
        load_tiny(folder, config, tmp_path / "absent.pth")

    prefixed = {part: {f"module.{k}": v for k, v in state.items()} for part, state in net.items()}
    model = load_tiny(folder, config, save("ddp.pth", {"net": prefixed, "optimizer": {}}))
    with torch.no_grad():
        close("gpt_layer_out", model.gpt_layer(expected["gpt_latent"]), expected["gpt_layer_out"])


def test_unsupported_variants_are_refused_by_name() -> None:
    section = copy.deepcopy(REAL_S2MEL_SECTION)
    section["DiT"]["final_layer_type"] = "mlp"
    with pytest.raises(S2MelConfigError, match=r"s2mel\.DiT\.final_layer_type = 'mlp' is not supported"):
        S2MelConfig.from_section(section)
    section = copy.deepcopy(REAL_S2MEL_SECTION)
    del section["wavenet"]["hidden_dim"]
    with pytest.raises(S2MelConfigError, match=r"s2mel\.wavenet\.hidden_dim is missing"):
        S2MelConfig.from_section(section)
