"""A generation's demo facet (issue 37): how ``python -m demo`` builds its demo and what the studio takes from it.

Its functions live in the generation's demo package (``generations/<name>/demo/``, the demo layer), named
lazily by the entry, so the registry imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DemoProject:
    """What a demo's voice project is made of."""

    model_dir: Path  # the demo's base model folder
    tokenizer: Path | None  # its --tokenizer file (None: the model folder's own table)
    folder: Path  # the demo's own folder: the project prepares into its data/prepared and trains into its runs/
    prepared: tuple[Path, ...]  # the demo's ready-made training data, recorded as the project's prepared data


@dataclass(frozen=True)
class DemoFacts:
    """Where the generation's demo lives in a demo workspace (the folder its entry's ``demo_folder`` names)."""

    paths: Callable[[Path], Any]  # workspace -> the demo's files (its package's ``DemoPaths``: train_argv(), ...)
    ensure: Callable[..., Any]  # (workspace, sentences, n_val, seed, force) -> its files, built when forced or
    # missing; demos are built oldest generation first (IndexTTS2's reads the IndexTTS-1.5 demo's tokenizers)
    project: str  # the name of its demo voice project
    project_files: Callable[[Any], DemoProject]  # its files -> what its voice project is made of
    # its files -> the training form's files (WorkspaceFiles' fields) its demo preset fills in; None: the
    # workspace's own files (the demo at the workspace's root)
    form_files: Callable[[Any], dict[str, Path | None]] | None = None
