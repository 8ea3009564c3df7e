"""IndexTTS-2.5's S2Mel training sources: the 2.5 download folder's synthesizer with the GPT of
``--base-checkpoint``; the semantic input is ``codec.decode(codes)``; no GPT term (its S2Mel has no gpt_layer)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from trainer.s2mel.dataset import SemanticFn
from trainer.s2mel.sources import S2MelSources, w2v_bert_of


def semantic_fn(codec: nn.Module) -> SemanticFn:
    @torch.no_grad()
    def semantic(codes: Tensor) -> Tensor:
        return codec.decode(codes[None])[0]  # type: ignore[operator]

    return semantic


def sources(opts: dict[str, Any], folder: Path, device: torch.device) -> S2MelSources:
    from generations.indextts25.synthesis import SynthesizerV25

    w2v, local = w2v_bert_of(opts)
    synth = SynthesizerV25.load(folder, w2v_bert=w2v, checkpoint=opts.get("base_checkpoint") or None,
                                device=device, local_files_only=local)
    return S2MelSources(synth, semantic_fn(synth.nets.codec), None, {"with_gpt_layer": False})
