"""Reading a BigVGAN v1.5 vocoder file for synthesis: the file through the checkpoint reader (its one-line
refusals for missing, empty or foreign files), the network through networks.indextts15."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from networks import indextts15
from networks.bigvgan import BigVGAN, VocoderError
from trainer.synthesis.errors import SynthesisError


def load_vocoder(path: str | Path, config: Mapping[str, Any], device: torch.device | str = "cpu",
                 source: str = "config") -> BigVGAN:
    """Load a BigVGAN v1.5 generator strictly; eval mode, weight norm folded.

    Raises ConfigError for a bad ``bigvgan:`` section and SynthesisError (one line) for a file that is not
    a loadable generator of the layout the config describes.
    """
    from trainer.checkpoints import CheckpointError, load_checkpoint

    path = Path(path)
    indextts15.vocoder_spec(config, source)  # a bad config is refused before the file is read
    try:
        obj = load_checkpoint(path)
    except CheckpointError as exc:
        raise SynthesisError(str(exc)) from None
    try:
        return indextts15.load_vocoder(obj, config, path, source, device)
    except VocoderError as exc:
        raise SynthesisError(str(exc)) from None

