"""Duration control survives fine-tuning (issue 38 item 5), IndexTTS2 side: upstream's GPT takes no duration input
(its ``use_speed`` is ignored: the conditioning block always ends with ``speed_emb[1]`` then ``speed_emb[0]``,
../shared/reference/README_indextts2.md "Sequence layout and forward", ARCHITECTURE.md), so training must feed
that very block on every step, or a fine-tune would learn rows inference never shows it.

The trainer's own step (``PairCollator`` -> ``micro_step``) runs a tiny IndexTTS2 GPT whose two speed rows differ
(as after a fine-tune that trained them); the block it feeds is compared with the layout upstream inference builds
and with the block our synthesizer builds (``build_conds``, what ``S2MelSynthesizer.synthesize`` calls).
"""

from __future__ import annotations

import contextlib

import numpy as np
import torch

from generations.indextts2.dataset import PairCollator
from networks.unified_voice import build_model
from tests.test_model_v2 import TINY_GPT_V2
from trainer.steps import LossWeights, micro_step, model_inputs


def _items(dim: int) -> list[dict]:
    rng = np.random.default_rng(0)
    return [{"id": f"item{k}", "text_ids": rng.integers(2, 100, size=5 - k), "codes": rng.integers(0, 8192, size=8 - k),
             "condition": rng.standard_normal((32, dim)).astype(np.float32),
             "emo_vec": rng.standard_normal(dim).astype(np.float32)} for k in range(2)]


def test_every_training_step_feeds_the_conditioning_block_upstream_inference_builds():
    torch.manual_seed(0)
    model = build_model(TINY_GPT_V2).train()
    with torch.no_grad():  # two distinct rows, so their order shows (the stock file's rows are zeros)
        model.speed_emb.weight.copy_(torch.randn(2, model.model_dim))
    batch = PairCollator()(_items(model.model_dim))
    assert not {"use_speed", "speed", "duration"} & set(model_inputs(batch))  # nothing feeds a length
    fed: list[torch.Tensor] = []
    hook = model.register_forward_hook(lambda _module, _args, out: fed.append(out.conds.detach().clone()))
    try:
        for _step in range(2):  # the block is the same on every step (no share of steps gets another one)
            micro_step(model, batch, torch.device("cpu"), "off", "masked", LossWeights(1.0, 1.0), 1.0, None,
                       contextlib.nullcontext())
    finally:
        hook.remove()
    condition, emo_vec = batch["condition"], batch["emo_vec"]
    speed = model.speed_emb.weight.detach()
    upstream = torch.cat([condition + emo_vec[:, None], speed[1].expand(2, 1, -1), speed[0].expand(2, 1, -1)], dim=1)
    for conds in fed:
        assert conds.shape == (2, 34, model.model_dim)
        assert torch.equal(conds, upstream)
        assert torch.equal(conds, model.build_conds(condition, emo_vec).detach())  # what synthesis feeds
