"""LoRA adapters (issue 23 item 4) at the network level, for IndexTTS-1.5, 2 and 2.5 GPTs.

- with the base frozen and gradient checkpointing on, every adapter gets a non-zero gradient;
- the re-entrant checkpoint trap is real (so the test above would catch a switch to it);
- bf16 autocast leaves the adapters (and their gradients) float32;
- a merged export loads strictly into the plain model and gives the adapted model's logits;
- the adapter on/off switch and merge/unmerge give back the base and adapted behaviour.
"""

from __future__ import annotations

import copy

import pytest
import torch

from networks.gpt_v25 import build_gpt_v25
from networks.lora import (
    LoRAConfig,
    LoRAError,
    adapter_modules,
    adapter_parameters,
    adapter_state_dict,
    base_state_dict,
    inject_lora,
    keep_adapters_float32,
    merged_state_dict,
    parse_layers,
    parse_targets,
    set_adapters_enabled,
    set_merged,
)
from networks.unified_voice import build_model
from tests.test_gpt_v25 import tiny_batch as tiny_batch_v25
from tests.test_gpt_v25 import tiny_gpt as tiny_gpt_v25
from tests.test_model import TINY_GPT
from tests.test_model import tiny_batch as tiny_batch_v15
from tests.test_model_v2 import TINY_GPT_V2


def batch_v2() -> dict:
    gen = torch.Generator().manual_seed(3)
    return {"text_ids": torch.randint(2, 100, (2, 5), generator=gen), "text_lengths": torch.tensor([5, 3]),
            "codes": torch.randint(0, 8192, (2, 8), generator=gen), "code_lengths": torch.tensor([8, 6]),
            "condition": torch.randn(2, 32, 64, generator=gen), "emo_vec": torch.randn(2, 64, generator=gen)}


VERSIONS = {
    "1.5": (lambda: build_model({**copy.deepcopy(TINY_GPT), "gpt_dropout": 0.0}), tiny_batch_v15),
    "2": (lambda: build_model({**copy.deepcopy(TINY_GPT_V2), "gpt_dropout": 0.0}), batch_v2),
    "2.5": (lambda: build_gpt_v25({**tiny_gpt_v25(), "gpt_dropout": 0.0}), tiny_batch_v25),
}


def make(version: str, config: LoRAConfig | None = None):
    torch.manual_seed(0)
    build, batch = VERSIONS[version]
    model = build()
    base = copy.deepcopy(model)
    inject_lora(model, config or LoRAConfig(rank=4, alpha=8.0))
    return base, model, batch()


def freeze_base(model: torch.nn.Module) -> None:
    for name, param in model.named_parameters():
        param.requires_grad_(name.endswith((".lora_A", ".lora_B")))


def loss_of(model, batch) -> torch.Tensor:
    out = model(**batch)
    return out.loss_text + out.loss_mel


def nudge_b(model) -> None:
    """Give every lora_B a non-zero value (as one optimizer step would), so lora_A gets a gradient too."""
    gen = torch.Generator().manual_seed(9)
    with torch.no_grad():
        for module in adapter_modules(model).values():
            module.lora_B.copy_(torch.randn(module.lora_B.shape, generator=gen) * 0.01)


@pytest.mark.parametrize("version", list(VERSIONS))
def test_every_adapter_gets_a_gradient_with_frozen_base_and_checkpointing(version):
    _, model, batch = make(version)
    freeze_base(model)
    model.set_gradient_checkpointing(True)
    model.train()
    loss_of(model, batch).backward()
    modules = adapter_modules(model)
    assert len(modules) == 4 * len(model.gpt.h)
    for name, module in modules.items():  # lora_B starts at zero: its gradient is the first to flow
        assert module.lora_B.grad is not None and module.lora_B.grad.abs().sum() > 0, name
    model.zero_grad(set_to_none=True)
    nudge_b(model)
    loss_of(model, batch).backward()
    for name, module in modules.items():
        for param in (module.lora_A, module.lora_B):
            assert param.grad is not None and param.grad.abs().sum() > 0, name
    assert all(p.grad is None for n, p in model.named_parameters() if not n.endswith((".lora_A", ".lora_B")))


def test_reentrant_checkpointing_with_a_frozen_base_starves_the_adapters(monkeypatch):
    """The trap the backbone avoids: re-entrant checkpointing of blocks whose input needs no grad."""
    import networks.gpt2 as gpt2

    original = gpt2.checkpoint
    monkeypatch.setattr(gpt2, "checkpoint", lambda fn, *args, use_reentrant: original(fn, *args, use_reentrant=True))
    _, model, batch = make("1.5")
    freeze_base(model)
    model.set_gradient_checkpointing(True)
    nudge_b(model)
    with pytest.warns(UserWarning, match="requires_grad"):  # torch: none of the block's inputs requires grad
        loss = loss_of(model, batch)
    assert not loss.requires_grad  # no path back to any adapter: training them would silently do nothing


def test_starts_as_the_base_model_and_keys_stay_stock():
    base, model, batch = make("1.5")
    base.eval(), model.eval()
    torch.testing.assert_close(model(**batch).mel_logits, base(**batch).mel_logits, rtol=0, atol=0)
    assert list(base_state_dict(model)) == list(base.state_dict())
    assert set(adapter_state_dict(model)) == {f"gpt.h.{i}.{t}.{f}" for i in range(2) for t in
                                              ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")
                                              for f in ("lora_A", "lora_B")}


def test_bf16_autocast_keeps_adapters_float32():
    _, model, batch = make("2")
    freeze_base(model)
    nudge_b(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = loss_of(model, batch)
    loss.backward()
    for param in adapter_parameters(model):
        assert param.dtype == torch.float32 and param.grad.dtype == torch.float32
    model.to(torch.bfloat16)  # a whole-model cast (e.g. for inference) is undone for the adapters
    keep_adapters_float32(model)
    assert all(p.dtype == torch.float32 for p in adapter_parameters(model))
    assert model.gpt.h[0].attn.c_attn.weight.dtype == torch.bfloat16


@pytest.mark.parametrize("version", list(VERSIONS))
def test_merged_export_loads_strictly_and_matches_the_adapted_logits(version):
    base, model, batch = make(version)
    nudge_b(model)
    model.eval()
    config = LoRAConfig(rank=4, alpha=8.0)
    merged = merged_state_dict(base_state_dict(model), adapter_state_dict(model), config)
    assert list(merged) == list(base.state_dict())  # exactly the stock key layout
    plain = copy.deepcopy(base).eval()
    plain.load_state_dict(merged, strict=True)
    with torch.no_grad():
        adapted, exported = model(**batch), plain(**batch)
        before = base.eval()(**batch)
    torch.testing.assert_close(exported.mel_logits, adapted.mel_logits, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(exported.text_logits, adapted.text_logits, rtol=1e-4, atol=1e-4)
    assert not torch.allclose(before.mel_logits, adapted.mel_logits, atol=1e-4)  # the adapters do something


def test_on_off_and_merge_unmerge():
    base, model, batch = make("1.5")
    nudge_b(model)
    model.eval(), base.eval()
    with torch.no_grad():
        adapted = model(**batch).mel_logits
        set_adapters_enabled(model, False)
        torch.testing.assert_close(model(**batch).mel_logits, base(**batch).mel_logits, rtol=0, atol=0)
        set_adapters_enabled(model, True)
        set_merged(model, True)
        torch.testing.assert_close(model(**batch).mel_logits, adapted, rtol=1e-4, atol=1e-4)
        with pytest.raises(LoRAError, match="merged"):
            base_state_dict(model)
        set_merged(model, False)
        torch.testing.assert_close(model(**batch).mel_logits, adapted, rtol=1e-5, atol=1e-5)


def test_layers_targets_and_bad_settings():
    _, model, _ = make("1.5", LoRAConfig(rank=2, alpha=2.0, targets=("attn.c_attn", "mlp.c_proj"), layers=(1,)))
    assert sorted(adapter_modules(model)) == ["gpt.h.1.attn.c_attn", "gpt.h.1.mlp.c_proj"]
    with pytest.raises(LoRAError, match="already"):
        inject_lora(model, LoRAConfig())
    fresh = build_model(copy.deepcopy(TINY_GPT))
    with pytest.raises(LoRAError, match="out of range"):
        inject_lora(fresh, LoRAConfig(layers=(5,)))
    assert parse_layers("") is None and parse_layers("0-2, 5") == (0, 1, 2, 5)
    assert parse_targets("all") == parse_targets("attn.c_attn,attn.c_proj,mlp.c_fc,mlp.c_proj")
    for bad in ("x", "3-1"):
        with pytest.raises(LoRAError):
            parse_layers(bad)
    with pytest.raises(LoRAError, match="unknown"):
        parse_targets("attn.q")
    with pytest.raises(LoRAError, match="rank"):
        LoRAConfig(rank=0)
    assert LoRAConfig.from_dict(LoRAConfig(rank=3, layers=(0,)).to_dict()) == LoRAConfig(rank=3, layers=(0,))
