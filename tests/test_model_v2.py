"""IndexTTS2 GPT (UnifiedVoiceV2): parity with the v2 reference fixtures and the real key layout."""

from __future__ import annotations

import json

import pytest
import torch

from data_tools.config import load_config
from networks.gpt_segments import pad_and_wrap
from networks.unified_voice import (
    UnifiedVoice,
    UnifiedVoiceV2,
    build_model,
    load_gpt_state_dict,
)
from tests.conftest import FIXTURES, shared_file

TINY_GPT_V2 = {
    "model_dim": 64,
    "max_mel_tokens": 48,
    "max_text_tokens": 32,
    "heads": 4,
    "layers": 2,
    "number_text_tokens": 100,
    "condition_module": {
        "output_size": 32,
        "linear_units": 64,
        "attention_heads": 4,
        "num_blocks": 1,
        "input_layer": "conv2d2",
        "perceiver_mult": 2,
    },
    "emo_condition_module": {
        "output_size": 32,
        "linear_units": 64,
        "attention_heads": 2,
        "num_blocks": 1,
        "input_layer": "conv2d2",
        "perceiver_mult": 1,
    },
}


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module")
def reference():
    folder = shared_file("reference", "fixtures_indextts2")
    model = build_model(load_config(folder / "tiny_config_v2.yaml")).eval()
    dropped = load_gpt_state_dict(model, torch.load(folder / "tiny_gpt_v2.pth", weights_only=True)["model"])
    assert dropped == []
    conditioning = torch.load(folder / "tiny_conditioning_v2.pt", weights_only=True)
    expected = torch.load(folder / "tiny_expected_v2.pt", weights_only=True)
    return model, conditioning, expected


def precomputed_args(expected: dict) -> dict:
    return {
        "text_ids": expected["text_ids"],
        "text_lengths": expected["text_lengths"],
        "codes": expected["codes"],
        "code_lengths": expected["code_lengths"],
        "condition": expected["condition"],
        "emo_vec": expected["emo_vec"],
    }


def test_reference_conditioning_matches_fixture(reference) -> None:
    model, conditioning, _ = reference
    features = conditioning["w2v_feat"].transpose(1, 2)  # (B, 1024, frames), channels first
    lengths = conditioning["feat_lengths"]
    with torch.no_grad():
        close(model.get_conditioning(features, lengths), conditioning["conditioning"])
        emotion = model.get_emo_conditioning(features, lengths)
        close(emotion, conditioning["emo_perceiver_out"])
        close(model.emovec_layer(emotion), conditioning["emovec_layer_out"])
        close(model.get_emovec(features, lengths), conditioning["emo_vec"])


def test_reference_masked_losses_and_logits_match_community_trainer(reference) -> None:
    model, _, expected = reference
    with torch.no_grad():
        out = model(**precomputed_args(expected))  # masked loss: the community trainer's token mean
    close(out.conds, expected["conds"])
    close(out.text_logits, expected["text_logits"])
    close(out.mel_logits, expected["mel_logits"])
    close(out.loss_text, expected["text_loss"])
    close(out.loss_mel, expected["mel_loss"])
    close(0.2 * out.loss_text + 0.8 * out.loss_mel, expected["total_loss_0p2_0p8"])
    assert out.mel_tokens == int(expected["mel_mask"].sum()) == 54
    assert out.text_tokens == int(expected["text_mask"].sum())
    assert round(out.mel_top1.item() * out.mel_tokens) == round(expected["mel_top1"].item() * 54) == 11


def test_reference_layouts_and_masks(reference) -> None:
    model, _, expected = reference
    text = pad_and_wrap(expected["text_ids"], expected["text_lengths"], 0, 1)
    mel = pad_and_wrap(
        expected["codes"], expected["code_lengths"], model.start_mel_token, model.stop_mel_token
    )
    assert torch.equal(text.inputs, expected["text_inputs"])
    assert torch.equal(text.targets, expected["text_targets"])
    assert torch.equal(text.counted, expected["text_mask"])
    assert torch.equal(mel.inputs, expected["mel_inputs"])
    assert torch.equal(mel.targets, expected["mel_targets"])
    assert torch.equal(mel.counted, expected["mel_mask"])


def test_reference_forward_latents(reference) -> None:
    model, conditioning, expected = reference
    args = precomputed_args(expected)
    with torch.no_grad():
        close(model.forward_latent(**args), expected["forward_latent_precomputed"])
        prompt = expected["forward_full_prompt_index"]
        features = conditioning["w2v_feat"].transpose(1, 2)[prompt]
        lengths = conditioning["feat_lengths"][prompt]
        for name in ("condition", "emo_vec"):
            del args[name]
        latent = model.forward_latent(
            **args,
            cond_mels=features,
            cond_mel_lengths=lengths,
            emo_cond_mels=features,
            emo_cond_mel_lengths=lengths,
        )
        close(latent, expected["forward_latent_full_conditioning"])
        # Without an emotion prompt the speaker prompt sets the emotion, as in upstream inference.
        del args["text_ids"]
        same = model.forward_latent(
            expected["text_ids"], **args, cond_mels=features, cond_mel_lengths=lengths
        )
        close(same, latent)


def test_full_size_v2_key_layout_matches_upstream() -> None:
    reference = json.loads((FIXTURES / "indextts2_gpt_state_dict_shapes.json").read_text())
    with torch.device("meta"):
        model = build_model(reference["config"])
    assert isinstance(model, UnifiedVoiceV2) and model.version == "2"
    actual = {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
    assert actual == reference["keys"]
    assert sum(p.numel() for p in model.parameters()) == reference["num_parameters"]


def test_v2_trains_from_precomputed_conditioning_only() -> None:
    torch.manual_seed(0)
    model = build_model(TINY_GPT_V2).train()
    gen = torch.Generator().manual_seed(3)
    out = model(
        text_ids=torch.randint(2, 100, (2, 5), generator=gen),
        text_lengths=torch.tensor([5, 3]),
        codes=torch.randint(0, 8192, (2, 8), generator=gen),
        code_lengths=torch.tensor([8, 6]),
        condition=torch.randn(2, 32, 64, generator=gen),
        emo_vec=torch.randn(2, 64, generator=gen),
    )
    assert out.conds.shape == (2, 34, 64)
    (out.loss_text + out.loss_mel).backward()
    assert model.speed_emb.weight.grad is not None
    assert model.gpt.h[0].attn.c_attn.weight.grad is not None
    assert model.perceiver_encoder.latents.grad is None  # the encoders never run on this path
    assert model.emo_layer.weight.grad is None


def test_v2_requires_some_conditioning() -> None:
    model = build_model(TINY_GPT_V2)
    with pytest.raises(ValueError, match="condition"):
        model(
            torch.ones(1, 2, dtype=torch.long),
            torch.tensor([2]),
            torch.ones(1, 3, dtype=torch.long),
            torch.tensor([3]),
        )


def test_v15_config_builds_v15_model() -> None:
    v15 = {key: value for key, value in TINY_GPT_V2.items() if key != "emo_condition_module"}
    model = build_model(v15)
    assert type(model) is UnifiedVoice and model.version == "1.5"
    assert model.gpt_config["condition_num_latent"] == 32
