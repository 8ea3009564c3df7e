"""IndexTTS-1.5 GPT (UnifiedVoice): parity with the reference fixtures, key layout, loading, losses."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch
import torch.nn.functional as F

from data_tools.config import ConfigError, load_config
from networks.gpt_segments import pad_and_wrap
from networks.loading import StateDictMismatchError
from networks.unified_voice import (
    ModelOutput,
    UnifiedVoice,
    build_model,
    load_gpt_state_dict,
)
from tests.conftest import FIXTURES, shared_file

TINY_GPT = {
    "model_dim": 64,
    "max_mel_tokens": 48,
    "max_text_tokens": 32,
    "heads": 4,
    "layers": 2,
    "number_text_tokens": 100,
    "condition_num_latent": 8,
    "condition_module": {
        "output_size": 32,
        "linear_units": 64,
        "attention_heads": 4,
        "num_blocks": 1,
        "input_layer": "conv2d2",
        "perceiver_mult": 2,
    },
}


def tiny_model(**overrides) -> UnifiedVoice:
    torch.manual_seed(0)
    return build_model({**copy.deepcopy(TINY_GPT), **overrides})


def tiny_batch(seed: int = 1) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return {
        "text_ids": torch.randint(2, 100, (2, 7), generator=gen),
        "text_lengths": torch.tensor([7, 4]),
        "codes": torch.randint(0, 8192, (2, 9), generator=gen),
        "code_lengths": torch.tensor([6, 9]),
        "cond_mels": torch.randn(2, 100, 30, generator=gen),
        "cond_mel_lengths": torch.tensor([30, 21]),
    }


# ----- parity with the reference implementation ----------------------------------------------------


@pytest.fixture(scope="module")
def reference():
    folder = shared_file("reference", "fixtures_indextts15")
    model = build_model(load_config(folder / "tiny_config.yaml")["gpt"]).eval()
    state = torch.load(folder / "tiny_gpt.pth", weights_only=True)["model"]
    model.load_state_dict(state)
    inputs = torch.load(folder / "tiny_inputs.pt", weights_only=True)
    expected = torch.load(folder / "tiny_expected.pt", weights_only=True)
    # Upstream v1.5 derives the valid code count from the wav length: ceil(wav/1024) + 1, capped at M.
    width = inputs["mel_codes"].size(1)
    code_lengths = torch.clamp(torch.ceil(inputs["wav_lengths"] / 1024).long() + 1, max=width)
    args = {
        "text_ids": inputs["text_inputs"],
        "text_lengths": inputs["text_lengths"],
        "codes": inputs["mel_codes"],
        "code_lengths": code_lengths,
        "cond_mels": inputs["speech_conditioning_latent"],
        "cond_mel_lengths": inputs["cond_mel_lengths"],
    }
    return model, args, expected


def close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)


def test_reference_forward_matches_fixture(reference) -> None:
    model, args, expected = reference
    with torch.no_grad():
        out = model(**args, loss_mode="indextts")
    assert isinstance(out, ModelOutput)
    close(out.loss_text, expected["loss_text"])
    close(out.loss_mel, expected["loss_mel"])
    close(out.text_logits, expected["text_logits"])
    close(out.mel_logits, expected["mel_logits"])
    close(out.conds, expected["conds"])
    assert out.loss_text.dtype == out.loss_mel.dtype == torch.float32


def test_reference_conditioning_encoder_matches_fixture(reference) -> None:
    model, args, expected = reference
    with torch.no_grad():
        hidden, mask = model.conditioning_encoder(args["cond_mels"].transpose(1, 2), args["cond_mel_lengths"])
        conds = model.get_conditioning(args["cond_mels"], args["cond_mel_lengths"])
    close(hidden, expected["conformer_out"])  # padded frames included
    assert torch.equal(mask, expected["conformer_mask"])
    close(conds, expected["conds"])


def test_reference_return_latent_matches_fixture(reference) -> None:
    model, args, expected = reference
    with torch.no_grad():
        latent = model.forward_latent(**args)
    close(latent, expected["mel_latent_return_latent"])


def test_reference_padding_layouts(reference) -> None:
    model, args, expected = reference
    text = pad_and_wrap(args["text_ids"], args["text_lengths"], model.start_text_token, model.stop_text_token)
    mel = pad_and_wrap(args["codes"], args["code_lengths"], model.start_mel_token, model.stop_mel_token)
    assert torch.equal(text.padded, expected["text_inputs_after_padding"])
    assert torch.equal(text.inputs, expected["text_input_ids"])
    assert torch.equal(text.targets, expected["text_targets"])
    assert torch.equal(mel.padded, expected["mel_codes_after_padding"])
    assert torch.equal(mel.inputs, expected["mel_input_ids"])
    assert torch.equal(mel.targets, expected["mel_targets"])


# ----- key layout of the real-size model -----------------------------------------------------------


def test_full_size_key_layout_matches_upstream() -> None:
    reference = json.loads((FIXTURES / "indextts15_gpt_state_dict_shapes.json").read_text())
    with torch.device("meta"):
        model = build_model(reference["config"])
    actual = {name: list(tensor.shape) for name, tensor in model.state_dict().items()}
    assert actual == reference["keys"]
    assert type(model) is UnifiedVoice
    assert model.text_vocab_size == 12001
    assert model.gpt_config["condition_num_latent"] == 32
    assert sum(p.numel() for p in model.parameters()) == reference["num_parameters"]


def test_pe_table_is_a_persistent_buffer_matching_the_fixture() -> None:
    folder = shared_file("reference", "fixtures_indextts15")
    stored = torch.load(folder / "tiny_gpt.pth", weights_only=True)["model"][
        "conditioning_encoder.embed.pos_enc.pe"
    ]
    fresh = tiny_model().state_dict()["conditioning_encoder.embed.pos_enc.pe"]
    assert torch.equal(fresh, stored)


# ----- loading -------------------------------------------------------------------------------------


def test_load_drops_inference_only_aliases() -> None:
    source = tiny_model()
    state = dict(source.state_dict())
    state["gpt.wte.weight"] = state["mel_embedding.weight"]
    state["inference_model.lm_head.1.weight"] = state["mel_head.weight"]
    state["inference_model.transformer.ln_f.bias"] = state["gpt.ln_f.bias"]
    torch.manual_seed(123)
    target = build_model(TINY_GPT)
    dropped = load_gpt_state_dict(target, state)
    assert dropped == [
        "gpt.wte.weight",
        "inference_model.lm_head.1.weight",
        "inference_model.transformer.ln_f.bias",
    ]
    for name, tensor in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], tensor), name


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda s: s.update({"mystery.weight": torch.zeros(1)}), "unexpected 1 key(s): mystery.weight"),
        (lambda s: s.pop("final_norm.bias"), "missing 1 key(s): final_norm.bias"),
        (
            lambda s: s.update({"text_embedding.weight": torch.zeros(131, 64)}),
            "text_embedding.weight: checkpoint [131, 64] vs model [101, 64]",
        ),
    ],
    ids=["unknown-key", "missing-key", "wrong-shape"],
)
def test_load_rejects_mismatches_with_a_clear_error(edit, needle) -> None:
    model = tiny_model()
    before = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    state = {name: torch.full_like(t, 0.5) for name, t in model.state_dict().items()}
    edit(state)
    with pytest.raises(StateDictMismatchError) as caught:
        load_gpt_state_dict(model, state)
    assert isinstance(caught.value, ValueError)
    assert needle in str(caught.value)
    for name, tensor in model.state_dict().items():  # nothing was half-loaded
        assert torch.equal(tensor, before[name]), name


def test_plain_strict_load_state_dict_round_trip() -> None:
    state = tiny_model().state_dict()
    other = build_model(TINY_GPT)
    other.load_state_dict(state)  # strict by default
    assert all(torch.equal(other.state_dict()[k], v) for k, v in state.items())


# ----- losses and forward behaviour ----------------------------------------------------------------


def test_masked_loss_matches_hand_computation() -> None:
    model = tiny_model().eval()
    batch = tiny_batch()
    with torch.no_grad():
        out = model(**batch)  # loss_mode defaults to "masked"
    text_logits = out.text_logits  # (B, V, T+2)
    mel_logits = out.mel_logits
    ids, codes = batch["text_ids"].tolist(), batch["codes"].tolist()
    text_nll, mel_nll, hits = [], [], 0
    for item in range(2):
        t_len = int(batch["text_lengths"][item])
        text_targets = [*ids[item][:t_len], 1]  # real tokens + first stop
        for pos, target in enumerate(text_targets):
            text_nll.append(-torch.log_softmax(text_logits[item, :, pos], dim=0)[target].item())
        c_len = int(batch["code_lengths"][item])
        mel_targets = [*codes[item][:c_len], 8193]
        for pos, target in enumerate(mel_targets):
            mel_nll.append(-torch.log_softmax(mel_logits[item, :, pos], dim=0)[target].item())
            hits += int(mel_logits[item, :, pos].argmax().item() == target)
    assert out.text_tokens == len(text_nll) == 7 + 1 + 4 + 1
    assert out.mel_tokens == len(mel_nll) == 6 + 1 + 9 + 1
    assert out.loss_text.item() == pytest.approx(sum(text_nll) / len(text_nll), rel=1e-5)
    assert out.loss_mel.item() == pytest.approx(sum(mel_nll) / len(mel_nll), rel=1e-5)
    assert out.mel_top1.item() == pytest.approx(hits / len(mel_nll))
    assert out.mel_top1.dtype == torch.float32 and not out.mel_top1.requires_grad


def test_indextts_loss_is_plain_mean_over_every_position() -> None:
    model = tiny_model().eval()
    batch = tiny_batch()
    with torch.no_grad():
        out = model(**batch, loss_mode="indextts")
    text = pad_and_wrap(batch["text_ids"], batch["text_lengths"], 0, 1)
    mel = pad_and_wrap(batch["codes"], batch["code_lengths"], 8192, 8193)
    assert out.loss_text.item() == pytest.approx(
        F.cross_entropy(out.text_logits, text.targets).item(), rel=1e-6
    )
    assert out.loss_mel.item() == pytest.approx(F.cross_entropy(out.mel_logits, mel.targets).item(), rel=1e-6)


def test_unknown_loss_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="loss_mode"):
        tiny_model()(**tiny_batch(), loss_mode="mean")


def test_inputs_are_not_modified_in_place() -> None:
    model = tiny_model().train()
    batch = tiny_batch()
    before = {name: tensor.clone() for name, tensor in batch.items()}
    out = model(**batch)
    (out.loss_text + out.loss_mel).backward()
    model.forward_latent(**batch)
    for name, tensor in batch.items():
        assert torch.equal(tensor, before[name]), name


def test_padding_layout_rewrites_only_positions_past_the_length() -> None:
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    wrapped = pad_and_wrap(ids, torch.tensor([4, 2]), start=0, stop=1)
    assert wrapped.inputs.tolist() == [[0, 5, 6, 7, 8, 1], [0, 9, 10, 1, 1, 1]]
    assert wrapped.targets.tolist() == [[5, 6, 7, 8, 1, 1], [9, 10, 1, 1, 1, 1]]
    assert wrapped.counted.tolist() == [[True] * 5 + [False], [True] * 3 + [False] * 3]


def test_lengths_outside_the_padded_width_are_refused() -> None:
    batch = tiny_batch()
    batch["code_lengths"] = torch.tensor([6, 10])
    with pytest.raises(ValueError, match="code_lengths"):
        tiny_model()(**batch)


def test_sequence_may_exceed_upstream_n_positions() -> None:
    model = tiny_model().eval()
    n_positions = (32 + 2) + (48 + 3)
    batch = tiny_batch()
    batch.update(
        text_ids=torch.randint(2, 100, (2, 32)),
        text_lengths=torch.tensor([32, 20]),
        codes=torch.randint(0, 8192, (2, 49)),
        code_lengths=torch.tensor([49, 30]),
    )
    with torch.no_grad():
        out = model(**batch)
    assert 8 + out.text_logits.size(2) + out.mel_logits.size(2) > n_positions
    assert torch.isfinite(out.loss_mel)
    batch["codes"] = torch.randint(0, 8192, (2, 50))
    with pytest.raises(ValueError, match="codes too long"):
        model(**batch)


def test_gradient_checkpointing_gives_identical_loss_and_grads() -> None:
    def loss_and_grads(checkpointing: bool, dropout: float) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        model = tiny_model(gpt_dropout=dropout).train()
        model.set_gradient_checkpointing(checkpointing)
        calls = []
        block, block_forward = model.gpt.h[0], model.gpt.h[0].forward
        block.forward = lambda x: calls.append(1) or block_forward(x)  # hooks do not see recomputation
        torch.manual_seed(7)
        out = model(**tiny_batch())
        loss = 0.2 * out.loss_text + 0.8 * out.loss_mel
        loss.backward()
        assert len(calls) == (2 if checkpointing else 1)  # checkpointed blocks are recomputed in backward
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        return loss.detach(), grads

    for dropout in (0.0, 0.1):  # with dropout on, checkpointing replays the same RNG state
        plain_loss, plain_grads = loss_and_grads(False, dropout)
        ckpt_loss, ckpt_grads = loss_and_grads(True, dropout)
        torch.testing.assert_close(ckpt_loss, plain_loss, rtol=0, atol=1e-6)
        assert plain_grads.keys() == ckpt_grads.keys()
        assert any(name.startswith("gpt.h.") for name in plain_grads)
        for name, grad in plain_grads.items():
            torch.testing.assert_close(ckpt_grads[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_gpt_dropout_key_controls_train_mode_randomness() -> None:
    batch = tiny_batch()
    deterministic = tiny_model(gpt_dropout=0.0)
    with torch.no_grad():
        eval_loss = deterministic.eval()(**batch).loss_mel
        train_loss = deterministic.train()(**batch).loss_mel
    assert torch.equal(eval_loss, train_loss)
    default = tiny_model()
    assert "gpt_dropout" not in default.gpt_config  # the effective config stays upstream-compatible
    with torch.no_grad():
        eval_loss = default.eval()(**batch).loss_mel
        train_loss = default.train()(**batch).loss_mel
    assert not torch.equal(eval_loss, train_loss)  # upstream's 0.1 dropout is on in train mode


def test_forward_and_backward_under_cpu_bf16_autocast() -> None:
    model = tiny_model().train()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(**tiny_batch())
    assert out.loss_text.dtype == out.loss_mel.dtype == torch.float32
    assert torch.isfinite(out.loss_text) and torch.isfinite(out.loss_mel)
    (out.loss_text + out.loss_mel).backward()
    assert model.text_embedding.weight.grad is not None
    assert model.conditioning_encoder.embed.out[0].weight.grad is not None
    with torch.no_grad():
        reference = model.eval()(**tiny_batch())
    assert math.isclose(out.loss_mel.item(), reference.loss_mel.item(), rel_tol=0.05)


def test_build_model_accepts_whole_config_and_raw_section() -> None:
    from_section = build_model(TINY_GPT)
    from_whole = build_model({"gpt": TINY_GPT, "version": 1.5})
    assert from_section.gpt_config == from_whole.gpt_config
    assert from_section.gpt_config["stop_mel_token"] == 8193  # defaults filled in
    assert from_section.text_vocab_size == 101


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"condition_module": {**TINY_GPT["condition_module"], "input_layer": "conv2d"}}, "input_layer"),
        ({"condition_module": {**TINY_GPT["condition_module"], "macaron_style": True}}, "macaron_style"),
        ({"condition_type": "perceiver"}, "condition_type"),
        ({"gpt_dropout": 1.5}, "gpt_dropout"),
        ({"activation_function": "swish_of_doom"}, "activation"),
    ],
)
def test_unsupported_config_is_refused(change, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        build_model({**TINY_GPT, **change})


def test_config_errors_are_config_errors() -> None:
    with pytest.raises(ConfigError):
        build_model({**TINY_GPT, "condition_type": "perceiver"})
