"""Download folders of the generations that speak through one (IndexTTS2, IndexTTS-2.5): recognised and
checked cheaply (files and config keys; no network is built)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from networks.generation_rule import describes_indextts2


def is_indextts2_folder(folder: Path) -> bool:
    """An IndexTTS2 download folder: a config.yaml whose gpt section has the emotion module."""
    from data_tools.config import ConfigError, load_config

    try:
        return describes_indextts2(load_config(Path(folder) / "config.yaml"))
    except (ConfigError, OSError):
        return False


def indextts2_folder_problem(folder: Path, w2v_bert: str | None) -> str | None:
    from networks.indextts2 import IndexTTS2FilesError, resolve_files

    return _problem(lambda: resolve_files(folder, w2v_bert=w2v_bert, need_gpt=False), IndexTTS2FilesError)


def indextts25_folder_problem(folder: Path, w2v_bert: str | None) -> str | None:
    from networks.indextts25 import IndexTTS25FilesError, resolve_files

    return _problem(lambda: resolve_files(folder, w2v_bert=w2v_bert, need_gpt=False), IndexTTS25FilesError)


def _problem(resolve: Callable[[], object], error: type[Exception]) -> str | None:
    """Why resolving a folder's files fails (one line), None when they are all there."""
    try:
        resolve()
    except (error, ValueError) as exc:
        return " ".join(str(exc).split())
    return None
