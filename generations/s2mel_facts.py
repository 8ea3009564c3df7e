"""A generation's S2Mel facet (issue 37): how ``python -m trainer.train --train s2mel`` (``trainer.s2mel``) trains,
evaluates and exports its S2Mel decoder.

The S2Mel hubs ask ``entry.s2mel``; its sources function lives in the generation's folder and is named lazily.
An entry without the facet has no S2Mel decoder (IndexTTS-1.5's BigVGAN speaks the GPT's latent directly): it
names ``Capability.TRAIN_S2MEL`` in ``missing``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class S2MelFacts:
    """What training one generation's S2Mel decoder reads."""

    sources: Callable[..., Any]  # (opts, download folder, device) -> s2mel.sources.S2MelSources
    # its S2Mel is fed the GPT's latent (a GPT layer in the decoder; the prepared folder's text_ids/, condition/,
    # emo_vec/ are read); False: it decodes from semantic codes alone
    gpt_latent: bool = False
