"""Conformer attention through SDPA, and the conformer inside gradient checkpointing (issue 12 item 4).

The hand-written softmax (`eager_attention`) is the reference the SDPA path must reproduce: outputs and
gradients with padded prompts, a prompt with no valid frame at all, v1.5 and v2 (whose emotion conformer
has another head size), and under bf16 autocast.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from networks import conformer
from networks.conformer import ConformerEncoder, use_eager_attention
from networks.unified_voice import UnifiedVoice, build_model
from tests.test_host_syncs import count_host_reads
from tests.test_model import tiny_batch, tiny_model
from tests.test_model_v2 import TINY_GPT_V2


def tiny_v2() -> UnifiedVoice:
    torch.manual_seed(0)
    return build_model({**TINY_GPT_V2, "gpt_dropout": 0.0})


def v2_batch(seed: int = 1) -> dict[str, torch.Tensor]:
    """Speaker and emotion prompts of different lengths, so both conformers see padding."""
    gen = torch.Generator().manual_seed(seed)
    return {
        "text_ids": torch.randint(2, 100, (2, 6), generator=gen),
        "text_lengths": torch.tensor([6, 4]),
        "codes": torch.randint(0, 8192, (2, 9), generator=gen),
        "code_lengths": torch.tensor([9, 5]),
        "cond_mels": torch.randn(2, 1024, 26, generator=gen),
        "cond_mel_lengths": torch.tensor([17, 26]),
        "emo_cond_mels": torch.randn(2, 1024, 20, generator=gen),
        "emo_cond_mel_lengths": torch.tensor([20, 11]),
    }


MODELS: dict[str, tuple[Callable[[], UnifiedVoice], Callable[[], dict[str, torch.Tensor]]]] = {
    "v1.5": (lambda: tiny_model(gpt_dropout=0.0), tiny_batch),
    "v2": (tiny_v2, v2_batch),
}


def loss_and_grads(model: UnifiedVoice, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    out = model(**batch)
    loss = 0.2 * out.loss_text + 0.8 * out.loss_mel
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return loss.detach(), grads


def assert_same_grads(actual: dict[str, torch.Tensor], expected: dict[str, torch.Tensor], tol: float) -> None:
    assert actual.keys() == expected.keys()
    for name, grad in expected.items():
        torch.testing.assert_close(actual[name], grad, rtol=tol, atol=tol, msg=name)


def count_forward_calls(module: torch.nn.Module, calls: list[int], tag: int) -> None:
    """Append ``tag`` to ``calls`` on every run of ``module``; hooks would not see a recomputation in backward."""
    original = module.forward

    def counted(*args: torch.Tensor) -> torch.Tensor:
        calls.append(tag)
        return original(*args)

    module.forward = counted


def conformer_blocks(model: UnifiedVoice) -> list[torch.nn.Module]:
    return [block for module in model.modules() if isinstance(module, ConformerEncoder) for block in module.encoders]


@pytest.mark.parametrize("version", MODELS)
def test_sdpa_matches_eager_attention_outputs_and_grads(version: str) -> None:
    build, make_batch = MODELS[version]
    model, batch = build().train(), make_batch()
    assert not any(m.eager for m in model.modules() if isinstance(m, conformer.RelPositionMultiHeadedAttention))
    sdpa_loss, sdpa_grads = loss_and_grads(model, batch)
    with torch.no_grad():
        sdpa_out = model(**batch)
    use_eager_attention(model)
    eager_loss, eager_grads = loss_and_grads(model, batch)
    with torch.no_grad():
        eager_out = model(**batch)
    torch.testing.assert_close(sdpa_loss, eager_loss, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sdpa_out.conds, eager_out.conds, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(sdpa_out.mel_logits, eager_out.mel_logits, rtol=1e-5, atol=1e-5)
    assert any(".self_attn.pos_bias_v" in name for name in sdpa_grads)  # the position term gets gradients
    assert_same_grads(sdpa_grads, eager_grads, 1e-5)


def test_default_path_never_calls_the_eager_softmax(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("eager attention used outside the comparison")

    monkeypatch.setattr(conformer, "eager_attention", refuse)
    model = tiny_model()
    model(**tiny_batch()).loss_mel.backward()


@pytest.mark.parametrize("heads", [4, 2])
def test_prompt_with_no_valid_frame_matches_eager(heads: int) -> None:
    """2 input frames subsample to a frame whose mask is false: every key of that item is masked."""
    torch.manual_seed(0)
    encoder = ConformerEncoder(input_size=20, output_size=32, attention_heads=heads, linear_units=64, num_blocks=2)
    gen = torch.Generator().manual_seed(5)
    features = torch.randn(3, 23, 20, generator=gen)
    lengths = torch.tensor([2, 23, 14])
    weights = torch.randn(3, 11, 32, generator=gen)

    def run(eager: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
        use_eager_attention(encoder, eager)
        encoder.zero_grad(set_to_none=True)
        x = features.clone().requires_grad_()
        hidden, mask = encoder(x, lengths)
        assert not mask[0].any() and mask[1].all()
        (hidden * weights).sum().backward()
        return hidden.detach(), [x.grad] + [p.grad for p in encoder.parameters()]

    sdpa_out, sdpa_grads = run(False)
    eager_out, eager_grads = run(True)
    assert torch.isfinite(sdpa_out).all() and all(torch.isfinite(g).all() for g in sdpa_grads)
    torch.testing.assert_close(sdpa_out, eager_out, rtol=1e-5, atol=1e-5)
    for actual, expected in zip(sdpa_grads, eager_grads, strict=True):
        torch.testing.assert_close(actual, expected, rtol=1e-5, atol=1e-5)


def test_sdpa_runs_under_bf16_autocast() -> None:
    model, batch = tiny_model(gpt_dropout=0.0).eval(), tiny_batch()
    with torch.no_grad():
        reference = model.get_conditioning(batch["cond_mels"], batch["cond_mel_lengths"])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = model.get_conditioning(batch["cond_mels"], batch["cond_mel_lengths"])
    torch.testing.assert_close(low.float(), reference, rtol=0.05, atol=0.05)


@pytest.mark.parametrize("version", MODELS)
def test_gradient_checkpointing_recomputes_conformer_with_identical_grads(version: str) -> None:
    build, make_batch = MODELS[version]
    batch = make_batch()
    results = {}
    for enabled in (False, True):
        model = build().train()
        model.set_gradient_checkpointing(enabled)
        blocks = conformer_blocks(model)
        assert len(blocks) == (2 if version == "v2" else 1)  # v2: speaker and emotion conformers
        calls: list[int] = []
        for index, block in enumerate(blocks):
            count_forward_calls(block, calls, index)
        loss, grads = loss_and_grads(model, batch)
        expected_calls = sorted(list(range(len(blocks))) * (2 if enabled else 1))
        assert sorted(calls) == expected_calls  # with checkpointing each block runs again in backward
        results[enabled] = loss, grads
    (plain_loss, plain_grads), (ckpt_loss, ckpt_grads) = results[False], results[True]
    torch.testing.assert_close(ckpt_loss, plain_loss, rtol=0, atol=1e-7)
    assert any(name.startswith("conditioning_encoder.encoders.") for name in plain_grads)
    assert_same_grads(ckpt_grads, plain_grads, 1e-6)


def test_no_recompute_without_grad() -> None:
    model = tiny_model().eval()
    model.set_gradient_checkpointing(True)
    calls: list[int] = []
    count_forward_calls(model.conditioning_encoder.encoders[0], calls, 1)
    with torch.no_grad():
        model(**tiny_batch())
    assert calls == [1]


def test_conformer_step_reads_nothing_back_to_the_host() -> None:
    """Padding masks and the no-valid-frame guard stay on the device: no .item()/.tolist()/bool() in a step."""
    model = tiny_model().train()
    model.set_gradient_checkpointing(True)
    batch = tiny_batch()
    calls: list[str] = []
    with count_host_reads(calls):
        hidden, _ = model.conditioning_encoder(batch["cond_mels"].transpose(1, 2), batch["cond_mel_lengths"])
        hidden.square().mean().backward()
    assert calls == []
