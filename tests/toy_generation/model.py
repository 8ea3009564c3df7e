"""The toy's own GPT: IndexTTS-1.5's with another name and a differently built text head.

The head keeps the stock parameters (``text_head.weight``, ``text_head.bias``), so the toy's weights keep the 1.5
layout (it starts from the 1.5 demo's gpt.pth and exports as a 1.5 folder would); the head's scale and the
class's name go into the model config its saves record (``saved_config``), which is how the registry recognises
a toy config or checkpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from networks.unified_voice import UnifiedVoice
from tests.toy_generation import TOY_SCALE, toy_gpt_keys


class ToyHead(nn.Linear):
    """A text head whose logits are scaled by a constant (1.0 in the demo: the stock numbers)."""

    def __init__(self, in_features: int, out_features: int, scale: float) -> None:
        super().__init__(in_features, out_features)
        self.scale = float(scale)

    def forward(self, hidden: Tensor) -> Tensor:
        return super().forward(hidden) * self.scale


class ToyGPT(UnifiedVoice):
    """A 1.5 GPT with its own name and a ``ToyHead`` text head (``toy_head_scale`` of its gpt section)."""

    def __init__(self, gpt_config: Mapping[str, Any]) -> None:
        super().__init__(gpt_config)
        stock = self.text_head
        self.text_head = ToyHead(stock.in_features, stock.out_features, float(gpt_config.get(TOY_SCALE, 1.0)))
        self.text_head.load_state_dict(stock.state_dict(), assign=True)  # the same initialisation as the stock head


def saved_config(model: ToyGPT) -> dict[str, Any]:
    """The model config a toy save records: its gpt section, marked with its class and its head's scale."""
    return {**model.gpt_config, **toy_gpt_keys(model.text_head.scale)}
