"""DoRA adapters on the GPT (issue 38 item 3) at the network level, for IndexTTS-1.5, 2 and 2.5 GPTs.

- an adapted model starts equal to its base, and the magnitude vectors are adapter keys beside A and B;
- merged weights load strictly into the stock layout and give the DoRA model's logits within 1e-5;
- the magnitude is what makes it DoRA: the same factors merged as plain LoRA give other weights;
- live merge / unmerge / off give back the adapted and the base behaviour exactly;
- the magnitudes get gradients with the base frozen, and stay float32.
"""

from __future__ import annotations

import copy

import pytest
import torch

from networks.lora import (
    MAGNITUDE_SUFFIX,
    LoRAConfig,
    adapter_modules,
    adapter_parameters,
    adapter_state_dict,
    base_state_dict,
    is_adapter_key,
    keep_adapters_float32,
    merged_state_dict,
    set_adapters_enabled,
    set_merged,
)
from tests.test_lora import VERSIONS, loss_of, make, nudge_b

DORA = LoRAConfig(rank=4, alpha=8.0, dora=True)


def nudge_magnitudes(model) -> None:
    """Move every magnitude off its start (as training would), so the merge has to fold it in."""
    gen = torch.Generator().manual_seed(11)
    with torch.no_grad():
        for module in adapter_modules(model).values():
            weight = module.lora_magnitude.weight
            weight.mul_(1 + 0.2 * torch.randn(weight.shape, generator=gen))


def trained(version: str):
    base, model, batch = make(version, DORA)
    nudge_b(model)
    nudge_magnitudes(model)
    return base.eval(), model.eval(), batch


@pytest.mark.parametrize("version", list(VERSIONS))
def test_starts_as_the_base_model_with_a_magnitude_per_projection(version):
    base, model, batch = make(version, DORA)
    base.eval(), model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).mel_logits, base(**batch).mel_logits, rtol=0, atol=0)
    assert list(base_state_dict(model)) == list(base.state_dict())
    saved = adapter_state_dict(model)
    for name, module in adapter_modules(model).items():
        magnitude = saved[name + MAGNITUDE_SUFFIX]
        assert magnitude.shape == (module.weight.shape[1],)  # one per output feature
        torch.testing.assert_close(magnitude, module.weight.detach().norm(dim=0))  # W's column norms


@pytest.mark.parametrize("version", list(VERSIONS))
def test_merged_weights_load_strictly_and_give_the_dora_logits(version):
    base, model, batch = trained(version)
    merged = merged_state_dict(base_state_dict(model), adapter_state_dict(model), DORA)
    assert list(merged) == list(base.state_dict())  # exactly the stock key layout
    stock = copy.deepcopy(base).eval()  # a plain model of the stock layout
    stock.load_state_dict(merged, strict=True)
    with torch.no_grad():
        adapted, exported, before = model(**batch), stock(**batch), base(**batch)
    torch.testing.assert_close(exported.mel_logits, adapted.mel_logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(exported.text_logits, adapted.text_logits, rtol=0, atol=1e-5)
    assert not torch.allclose(before.mel_logits, adapted.mel_logits, atol=1e-3)  # the adapters do something
    as_lora = merged_state_dict(base_state_dict(model), adapter_state_dict(model), LoRAConfig(rank=4, alpha=8.0))
    key = "gpt.h.0.attn.c_attn.weight"
    assert not torch.allclose(as_lora[key], merged[key], atol=1e-4)  # the magnitude is folded in


def test_live_merge_unmerge_and_off():
    base, model, batch = trained("1.5")
    weights = {k: v.clone() for k, v in base_state_dict(model).items()}
    with torch.no_grad():
        adapted = model(**batch).mel_logits
        set_merged(model, True)
        torch.testing.assert_close(model(**batch).mel_logits, adapted, rtol=0, atol=1e-5)
        set_merged(model, False)
        for key, value in base_state_dict(model).items():
            assert torch.equal(value, weights[key]), key  # unmerge puts the weight back exactly
        set_merged(model, True)
        set_adapters_enabled(model, False)
        torch.testing.assert_close(model(**batch).mel_logits, base(**batch).mel_logits, rtol=0, atol=0)


def test_magnitudes_train_with_a_frozen_base_and_stay_float32():
    _, model, batch = make("2", DORA)
    for name, param in model.named_parameters():
        param.requires_grad_(is_adapter_key(name))
    nudge_b(model)
    model.train()
    projection = model.gpt.h[0].attn.c_attn
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = loss_of(model, batch)
        assert projection(torch.randn(2, 3, projection.weight.shape[0])).dtype == torch.bfloat16  # as plain LoRA
    loss.backward()
    magnitudes = [p for n, p in model.named_parameters() if n.endswith(MAGNITUDE_SUFFIX)]
    assert len(magnitudes) == len(adapter_modules(model))
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in magnitudes)
    model.to(torch.bfloat16)
    keep_adapters_float32(model)
    assert all(p.dtype == torch.float32 for p in adapter_parameters(model))


def test_config_round_trip_and_records_from_before_dora():
    assert LoRAConfig.from_dict(DORA.to_dict()) == DORA
    old = {k: v for k, v in LoRAConfig(rank=4).to_dict().items() if k != "dora"}
    assert LoRAConfig.from_dict(old).dora is False
