"""A generation's export facet (issue 37): how ``python -m trainer.checkpoints export`` turns its checkpoint into
a complete inference folder, and what the folder calls the model.

``trainer.checkpoints.export`` asks ``entry.export``; the builder and the base-folder rule are named lazily
(``lazy(module, name)``), so reading the facet imports no torch. An entry without the facet cannot export: it
names ``Capability.EXPORT`` in ``missing``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ExportFacts:
    """How one generation's export is built and named."""

    # (ckpt, path, out_dir, gpt, weights, raw_config, dtype, safetensors, movement, tokenizer, report) -> its
    # ExportReport: the generation's part of export_model (weights, text table, config.yaml, notice, card)
    build: Callable[..., Any]
    name: str  # the model's name in exported cards and notices
    version: float  # config.yaml ``version:`` of an export
    # base model folder -> the files and folders inside it that a complete inference folder carries beside the
    # GPT, its config and its text table; ValueError (one line) naming what is missing. None: nothing else
    folder_files: Callable[[Path], list[Path]] | None = None
    # the files an export writes beyond the shared bundle (an --out folder holding one is refused without --force)
    bundle_files: tuple[str, ...] = ()
