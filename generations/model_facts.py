"""A generation's model facet (issue 37): which GPT class it trains, how it builds one, what a save records of it.

Shared code never picks code by a GPT class or sniffs a config to learn the generation: it asks the entry of the
run (``plan.generation.model``) or the registry (``generations.registry.build_gpt``, ``generation_of_model``).
The class and the builder are named lazily (``lazy(module, name)``), so reading the facet imports no torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

BIGVGAN = "BigVGAN"  # a GPT whose latents a BigVGAN speaks directly (IndexTTS-1.5)
S2MEL = "S2Mel"  # a GPT whose latents an S2Mel decoder turns into a mel (IndexTTS2, 2.5)


def recorded_gpt_config(model: Any) -> dict[str, Any]:
    """The gpt section a checkpoint records for ``model``: the effective section it was built from."""
    return dict(model.gpt_config)


@dataclass(frozen=True)
class ModelFacts:
    """How one generation's GPT is built and recorded."""

    gpt_class: Any  # lazy(module, "ClassName"): its GPT class (resolved, never called, by ``gpt_type``)
    latent_decoder: str  # what speaks its GPT's latents: BIGVGAN or S2MEL (synthesis pipelines check it)
    # gpt section -> its GPT, freshly initialised; None: the class itself, called with the section
    builder: Callable[[Mapping[str, Any]], Any] | None = None
    # its GPT -> the gpt section its checkpoints record as ``model_config``; recognition reads it back, so it
    # carries whatever marks the generation (2.5's spk_cond_mode, a subclass's own key)
    saved_config: Callable[[Any], dict[str, Any]] = recorded_gpt_config
    # a grown text table's added rows come after the base table's spare row, so nothing moves (IndexTTS-2.5);
    # False: they come before the extra row, which moves to the new end (trainer.vocab.grow_text_vocab)
    appends_text_rows: bool = False
    config_refusal: Callable[[Mapping[str, Any], str], str | None] | None = None  # (gpt, where): its own rule
    ddp_unused_parameters: bool = False  # DDP must look for parameters a step leaves unused (its prompt paths)
    language_table: bool = False  # its GPT has a per-language table (--lang-init-from, --lang-lr-mult apply)
    # (model on the meta device, model dim) -> (the prompt inputs one training step feeds, conditioning positions,
    # whether a prompt encoder runs in training): what the memory estimate counts (trainer.memory_facts)
    training_prompt: Callable[[Any, int], tuple[dict[str, Any], int, bool]] | None = None

    def gpt_type(self) -> type:
        """Its GPT class (its module imported now)."""
        return getattr(importlib.import_module(self.gpt_class.module), self.gpt_class.name)

    def build(self, gpt: Mapping[str, Any]) -> Any:
        """Its GPT of the gpt section ``gpt``, freshly initialised (under ``torch.device("meta")``: no memory)."""
        return (self.builder or self.gpt_type())(gpt)

    def owns(self, model: Any) -> bool:
        """Whether ``model`` is (a subclass, e.g. FSDP's wrapper, of) this generation's GPT class."""
        return isinstance(model, self.gpt_type())
