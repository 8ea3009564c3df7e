"""A generation's speech facet (issue 37): how its GPT is heard at saves (samples), in evaluation and through
``python -m trainer.synthesize``.

The hubs (``trainer.samples``, ``trainer.evaluation``, ``trainer.synthesize``) ask ``entry.speech``; each function
lives in the generation's folder and is named lazily (``lazy(module, name)``), so reading the facet imports no
torch. A function left None is a capability the generation lacks: its entry names it in ``missing``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SpeechFacts:
    """How one generation speaks (None: it does not speak that way)."""

    sample_plan: Callable[..., Any] | None = None  # (opts, config, val_items) -> trainer.samples.SamplePlan
    sample_speaker: Callable[..., Any] | None = None  # (plan, model, tokenizer) -> speak(text)
    evaluation_speech: Callable[[dict[str, Any]], tuple[bool, str]] | None = None  # opts -> (ok, note or refusal)
    evaluation_backend: Callable[..., Any] | None = None  # the evaluation's synthesis backend class
    evaluation_needs_audio: bool = False  # its evaluation speaks from reference audio (not prompt mels)
    synthesize: Callable[..., int] | None = None  # (args, texts, settings) -> exit code of trainer.synthesize
    synthesis_options: frozenset[str] = frozenset()  # trainer.synthesize options only this generation takes
