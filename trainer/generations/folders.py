"""Download folders of the generations that speak through one (IndexTTS2, IndexTTS-2.5): recognised and
checked cheaply (files and config keys; no network is built). ``networks_module`` names the generation's
assembly module in networks/ (its ``resolve_files`` raises a ValueError that says what is missing)."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from networks.generation_rule import describes_indextts2


def is_indextts2_folder(folder: Path) -> bool:
    """An IndexTTS2 download folder: a config.yaml whose gpt section has the emotion module."""
    from data_tools.config import ConfigError, load_config

    try:
        return describes_indextts2(load_config(Path(folder) / "config.yaml"))
    except (ConfigError, OSError):
        return False


def folder_config(networks_module: str, folder: Path, w2v_bert: str | None) -> dict[str, Any]:
    """The folder's config once its files are all there; ValueError (one line) naming what is missing."""
    resolve_files = importlib.import_module(networks_module).resolve_files
    return resolve_files(Path(folder), w2v_bert=w2v_bert, need_gpt=False)[1]


def folder_problem(networks_module: str, folder: Path, w2v_bert: str | None) -> str | None:
    """Why the folder cannot speak (one line), None when it can."""
    try:
        folder_config(networks_module, folder, w2v_bert)
    except ValueError as exc:
        return " ".join(str(exc).split())
    return None
