"""IndexTTS-2.5 GPT (networks/gpt_v25.py): parity with the reference sets, the real key layout, strict loading.

Parity runs on set A (shared/reference/indextts25) and, where it is present, on the hidden set B (same file
names, other sizes, batch 4); the numbers asserted come from the fixture, not from this file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from data_tools.config import ConfigError, load_config
from networks.generation_rule import describes_indextts25
from networks.gpt_segments import pad_and_wrap
from networks.gpt_v25 import (
    MODULE_ORDER,
    V25_ONLY_KEYS,
    UnifiedVoiceV25,
    build_gpt_v25,
    load_gpt_v25,
    load_gpt_v25_file,
    read_gpt_state_dict,
)
from networks.loading import StateDictMismatchError
from tests.conftest import FIXTURES, SHARED, shared_file

TOL = {"atol": 1e-4, "rtol": 1e-4}  # FIXTURES.md: float32 re-implementations stay well inside this
HIDDEN_SET_B = ("fixtures_hidden", "indextts25_b")


def reference(name: str) -> Path:
    return shared_file("reference", "indextts25", name)


def hidden_set_b() -> Path | None:
    for folder in (SHARED.joinpath(*HIDDEN_SET_B), SHARED.joinpath("reference", *HIDDEN_SET_B)):
        if folder.is_dir():
            return folder
    return None


PARITY_SETS = ["A"] + (["B"] if hidden_set_b() else [])


@pytest.fixture(scope="module")
def config() -> dict:
    return load_config(reference("tiny_config_v25.yaml"))


@pytest.fixture(scope="module", params=PARITY_SETS)
def parity(request) -> tuple[UnifiedVoiceV25, dict]:
    """(model loaded through our loader, expected tensors) of one reference set."""
    folder = reference("tiny_expected_v25.pt").parent if request.param == "A" else hidden_set_b()
    config = load_config(folder / "tiny_config_v25.yaml")
    model = load_gpt_v25_file(config, folder / config.get("gpt_checkpoint", "tiny_gpt_v25.pth")).eval()
    return model, torch.load(folder / "tiny_expected_v25.pt", weights_only=True)


@pytest.fixture(scope="module")
def model_a(config: dict) -> UnifiedVoiceV25:
    return load_gpt_v25_file(config, reference("tiny_gpt_v25.pth")).eval()


@pytest.fixture(scope="module")
def expected_a() -> dict:
    return torch.load(reference("tiny_expected_v25.pt"), weights_only=True)


def batch(expected: dict) -> dict:
    return {
        "text_ids": expected["text_ids"],
        "text_lengths": expected["text_lengths"],
        "codes": expected["codes"],
        "code_lengths": expected["code_lengths"],
        "spk_vec": expected["spk_vec"],
        "emo_vec": expected["emo_vec"],
        "langs": expected["langs"],
    }


def mel_positions(expected: dict) -> int:
    """Counted mel positions: every real code plus each item's first stop."""
    return int(expected["code_lengths"].sum()) + expected["code_lengths"].numel()


def counted_hits(top1: torch.Tensor | float, tokens: int) -> int:
    return round(float(top1) * tokens)


def test_loaded_from_file_is_a_real_cpu_model(model_a, real_state) -> None:
    tensors = [*model_a.parameters(), *model_a.buffers()]
    assert all(t.device.type == "cpu" and t.dtype == torch.float32 for t in tensors)
    assert all(p.requires_grad for p in model_a.parameters())
    assert torch.equal(model_a.lang_embedding.weight, real_state["lang_embedding.weight"])
    assert "spk_cond_mode" not in model_a.gpt_config and model_a.version == "2.5"


def test_speaker_and_emotion_paths_build_the_three_vector_block(parity) -> None:
    model, expected = parity
    with torch.no_grad():
        emo_vec = model.get_emovec(expected["w2v_feat"].transpose(1, 2), expected["w2v_lengths"])
        speaker = model.speaker_latent(expected["spk_vec"])
        conds = model.build_conds(speaker, expected["emo_vec"])
    torch.testing.assert_close(emo_vec, expected["emo_vec"], **TOL)
    torch.testing.assert_close(speaker, expected["spk_latent"], **TOL)
    torch.testing.assert_close(conds, expected["conds"], **TOL)
    assert conds.size(1) == 3 and not conds[:, 1:].any()


def test_sequence_wrapping_matches_the_reference(parity) -> None:
    _, expected = parity
    text = pad_and_wrap(expected["text_ids"], expected["text_lengths"], 0, 1)
    mel = pad_and_wrap(expected["codes"], expected["code_lengths"], 8192, 8193)
    for name, value in (("text_inputs", text.inputs), ("text_targets", text.targets), ("text_mask", text.counted),
                        ("mel_inputs", mel.inputs), ("mel_targets", mel.targets), ("mel_mask", mel.counted)):
        assert torch.equal(value, expected[name]), name


def test_training_forward_adds_the_language_row_like_inference(parity) -> None:
    model, expected = parity
    with torch.no_grad():
        out = model(**batch(expected))
    torch.testing.assert_close(out.conds, expected["conds"], **TOL)
    torch.testing.assert_close(out.text_logits, expected["text_logits"], **TOL)
    torch.testing.assert_close(out.mel_logits, expected["mel_logits"], **TOL)
    torch.testing.assert_close(out.loss_text, expected["text_loss"], **TOL)
    torch.testing.assert_close(out.loss_mel, expected["mel_loss"], **TOL)
    torch.testing.assert_close(0.2 * out.loss_text + 0.8 * out.loss_mel, expected["total_loss_0p2_0p8"], **TOL)
    positions = mel_positions(expected)
    assert out.mel_tokens == positions
    assert counted_hits(out.mel_top1, positions) == counted_hits(expected["mel_top1"], positions)


def test_without_the_row_it_is_upstreams_training_forward(parity) -> None:
    """The comparison switch reproduces upstream's forward (and its losses), proving the row matters."""
    model, expected = parity
    with torch.no_grad():
        without = model(**batch(expected), language_row=False)
        latent = model.forward_latent(**batch(expected), language_row=False)
        with_row = model.forward_latent(**batch(expected))
    torch.testing.assert_close(without.mel_logits, expected["nolang_mel_logits"], **TOL)
    torch.testing.assert_close(without.loss_text, expected["nolang_text_loss"], **TOL)
    torch.testing.assert_close(without.loss_mel, expected["nolang_mel_loss"], **TOL)
    torch.testing.assert_close(
        0.2 * without.loss_text + 0.8 * without.loss_mel, expected["nolang_total_loss_0p2_0p8"], **TOL
    )
    positions = mel_positions(expected)
    assert counted_hits(without.mel_top1, positions) == counted_hits(expected["nolang_mel_top1"], positions)
    torch.testing.assert_close(latent, expected["forward_latent"], **TOL)
    assert (with_row - latent).abs().max() > 0.1
    assert (expected["mel_logits"] - expected["nolang_mel_logits"]).abs().max() > 0.1


def test_set_a_numbers_as_documented(model_a, expected_a) -> None:
    """FIXTURES.md's stated results for set A: 8 of 54 mel hits with the row, 5 of 54 without."""
    with torch.no_grad():
        with_row = model_a(**batch(expected_a))
        without = model_a(**batch(expected_a), language_row=False)
    assert mel_positions(expected_a) == 54
    assert counted_hits(with_row.mel_top1, 54) == 8 and counted_hits(without.mel_top1, 54) == 5
    assert float(with_row.loss_mel) == pytest.approx(8.951055526733398, abs=1e-4)


def test_emotion_from_the_speaker_prompt_features(parity) -> None:
    """Without emo_vec, the speaker prompt's w2v-BERT features set the emotion, as at inference."""
    model, expected = parity
    args = batch(expected)
    del args["emo_vec"]
    with torch.no_grad():
        out = model(**args, cond_mels=expected["w2v_feat"].transpose(1, 2), cond_mel_lengths=expected["w2v_lengths"])
    torch.testing.assert_close(out.mel_logits, expected["mel_logits"], **TOL)


def test_generation_prefix_matches_prepare_gpt_inputs(parity) -> None:
    model, expected = parity
    with torch.no_grad():
        prefix = model.generation_prefix(expected["conds"], expected["inference_text_tokens"], expected["langs"])
    torch.testing.assert_close(prefix.inputs_embeds, expected["inference_inputs_embeds"], **TOL)
    assert torch.equal(prefix.attention_mask, expected["inference_attention_mask"])
    assert torch.equal(prefix.fake_input_ids, expected["inference_fake_input_ids"])


def test_generation_prefix_drops_every_0_and_1(model_a, expected_a) -> None:
    """Set A item 0 ends in "!" (id 0, the start token): it vanishes, leaving 2 pad rows rather than 1."""
    with torch.no_grad():
        prefix = model_a.generation_prefix(expected_a["conds"], expected_a["inference_text_tokens"],
                                           expected_a["langs"])
    assert expected_a["inference_text_tokens"][0, 19] == 0
    assert prefix.attention_mask[0].tolist()[:3] == [0, 0, 1]


def test_nolang_logits_are_mel_head_of_the_upstream_latent(parity) -> None:
    """FIXTURES.md's own cross-check, through our model: mel_head(forward_latent) == the no-row logits."""
    model, expected = parity
    latent = expected["forward_latent"]
    with torch.no_grad():
        logits = F.linear(latent, model.mel_head.weight, model.mel_head.bias)
    torch.testing.assert_close(logits.transpose(1, 2), expected["nolang_mel_logits"][..., : latent.size(1)], **TOL)


def test_text_is_never_embedded_without_the_language() -> None:
    tiny = build_gpt_v25(tiny_gpt())
    with pytest.raises(RuntimeError, match="language row"):
        tiny.text_embedding(torch.tensor([[2, 3]]))
    args = tiny_batch()
    del args["langs"]
    with pytest.raises(TypeError, match="langs"):
        tiny(**args)
    with pytest.raises(ValueError, match=r"langs must lie in 0\.\.106"):
        tiny(**{**tiny_batch(), "langs": torch.tensor([107, 0])})
    with pytest.raises(ValueError, match="spk_vec"):
        tiny(**{**tiny_batch(), "spk_vec": None})
    with pytest.raises(TypeError, match="CAM"):
        tiny.get_conditioning(torch.zeros(1, 1024, 8))


def test_training_reaches_the_language_rows_used_and_the_speaker_projection() -> None:
    tiny = build_gpt_v25(tiny_gpt()).train()
    out = tiny(**tiny_batch())
    (0.2 * out.loss_text + 0.8 * out.loss_mel).backward()
    rows_with_grad = tiny.lang_embedding.weight.grad.abs().sum(dim=1).nonzero().flatten().tolist()
    assert rows_with_grad == [0, 75]
    assert tiny.spk_emb_proj.weight.grad.abs().sum() > 0
    assert tiny.emo_layer.weight.grad is None  # emo_vec was precomputed


def test_empty_slots_follow_the_conditioning_dtype() -> None:
    tiny = build_gpt_v25(tiny_gpt())
    conds = tiny.build_conds(torch.ones(2, 1, 64, dtype=torch.bfloat16), torch.ones(2, 64, dtype=torch.bfloat16))
    assert conds.dtype == torch.bfloat16 and conds.shape == (2, 3, 64) and not conds[:, 1:].any()
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        out = tiny(**tiny_batch())
    assert out.mel_logits.dtype == torch.float32 and torch.isfinite(out.loss_mel)


def test_real_layout_built_on_meta_matches_upstream() -> None:
    real = json.loads(reference("indextts25_gpt_state_dict_shapes.json").read_text())
    with torch.device("meta"):
        model = build_gpt_v25({**real["gpt_config"], "spk_cond_mode": real["spk_cond_mode"]})
    state = model.state_dict()
    assert {name: list(tensor.shape) for name, tensor in state.items()} == real["shapes"]
    assert len(state) == real["n_keys"] == 456
    assert sum(p.numel() for p in model.parameters()) == real["n_parameters"]
    assert sum(t.numel() for t in state.values()) == real["n_state_dict_elements"]
    assert {str(t.dtype) for t in state.values()} == set(real["dtypes"])
    first_seen = list(dict.fromkeys(name.split(".")[0] for name in real["shapes"]))
    assert list(dict.fromkeys(name.split(".")[0] for name in state)) == first_seen == list(MODULE_ORDER)


def test_version_detection() -> None:
    v25 = load_config(reference("tiny_config_v25.yaml"))
    v2 = load_config(FIXTURES / "tiny_config_v2.yaml")
    assert describes_indextts25(v25)
    assert not describes_indextts25(v2) and not describes_indextts25(v2["gpt"])
    assert describes_indextts25({**v2["gpt"], "spk_cond_mode": "campplus"})
    assert describes_indextts25(v2, state_keys=["text_embedding.weight", "lang_embedding.weight"])
    with pytest.raises(ConfigError, match="spk_cond_mode"):
        build_gpt_v25({**tiny_gpt(), "spk_cond_mode": "conformer"})


# ----- strict loading ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_state() -> dict:
    return read_gpt_state_dict(reference("tiny_gpt_v25.pth"))


def save(tmp_path: Path, state: dict) -> Path:
    path = tmp_path / "gpt.pth"
    torch.save({"model": state}, path)
    return path


@pytest.mark.parametrize("key", V25_ONLY_KEYS)
def test_checkpoint_without_a_25_key_is_refused_by_name(tmp_path, config, real_state, key) -> None:
    state = {name: value for name, value in real_state.items() if name != key}
    path = save(tmp_path, state)
    with pytest.raises(StateDictMismatchError) as info:
        load_gpt_v25_file(config, path)
    message = str(info.value)
    assert key in message and str(path) in message and "\n" not in message
    assert "not an IndexTTS-2.5 GPT" in message


def test_extra_or_misshaped_key_is_refused_naming_it(tmp_path, config, real_state) -> None:
    extra = save(tmp_path, {**real_state, "speed_emb.weight": torch.zeros(2, 64)})
    with pytest.raises(StateDictMismatchError, match=r"unexpected 1 key\(s\): speed_emb\.weight"):
        load_gpt_v25_file(config, extra)
    v2_table = {**real_state, "text_embedding.weight": real_state["text_embedding.weight"][:12001]}
    with pytest.raises(StateDictMismatchError, match=r"text_embedding\.weight: checkpoint \[12001, 64\] vs model \[60510, 64\]"):
        load_gpt_v25_file(config, save(tmp_path, v2_table))
    lost = {name: value for name, value in real_state.items() if name != "final_norm.bias"}
    with pytest.raises(StateDictMismatchError, match=r"missing 1 key\(s\): final_norm\.bias"):
        load_gpt_v25_file(config, save(tmp_path, lost))


def test_refused_load_leaves_the_model_untouched(config, real_state) -> None:
    model = build_gpt_v25(config)
    before = model.lang_embedding.weight.clone()
    with pytest.raises(StateDictMismatchError):
        load_gpt_v25(model, {**real_state, "extra.weight": torch.zeros(1)}, "gpt.pth")
    assert torch.equal(model.lang_embedding.weight, before)


def test_inference_only_aliases_are_dropped(config, real_state) -> None:
    model = build_gpt_v25(config)
    dropped = load_gpt_v25(model, {**real_state, "gpt.wte.weight": real_state["mel_embedding.weight"]}, "gpt.pth")
    assert dropped == ["gpt.wte.weight"]
    assert torch.equal(model.lang_embedding.weight, real_state["lang_embedding.weight"])


def test_unreadable_checkpoint_is_one_line(tmp_path, config) -> None:
    with pytest.raises(StateDictMismatchError, match="not found"):
        load_gpt_v25_file(config, tmp_path / "missing.pth")
    junk = tmp_path / "junk.pth"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(StateDictMismatchError, match="not a readable torch checkpoint"):
        load_gpt_v25_file(config, junk)


# ----- a tiny 2.5 GPT for behaviour tests -------------------------------------------------------


def tiny_gpt() -> dict:
    module = {"output_size": 32, "linear_units": 64, "attention_heads": 2, "num_blocks": 1,
              "input_layer": "conv2d2", "perceiver_mult": 1}
    return {"model_dim": 64, "max_mel_tokens": 16, "max_text_tokens": 16, "heads": 4, "layers": 1,
            "number_text_tokens": 100, "condition_module": module, "emo_condition_module": module}


def tiny_batch() -> dict:
    gen = torch.Generator().manual_seed(5)
    return {
        "text_ids": torch.randint(2, 100, (2, 6), generator=gen),
        "text_lengths": torch.tensor([6, 4]),
        "codes": torch.randint(0, 8192, (2, 9), generator=gen),
        "code_lengths": torch.tensor([9, 5]),
        "spk_vec": torch.randn(2, 192, generator=gen),
        "emo_vec": torch.randn(2, 64, generator=gen),
        "langs": torch.tensor([75, 0]),
    }

