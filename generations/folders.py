"""Download folders of the generations that speak through one (IndexTTS2, IndexTTS-2.5): recognised and
checked cheaply (files and config keys; no network is built). ``networks_module`` names the generation's
assembly module in networks/ (its ``resolve_files`` raises a ValueError that says what is missing).

``model_folder_files`` answers what an export carries over from its base model folder: every file and folder the
folder's assembly resolves (S2Mel, w2v-BERT stats, feat1/feat2, codecs, CAMPPlus, BigVGAN, a local w2v-BERT) but
the GPT, the config and the text table, which the export writes itself."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Sequence
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


W2V_BERT_HUB_ID = "facebook/w2v-bert-2.0"  # a folder without a local w2v-BERT loads it by this id, as upstream does
WRITTEN_BY_EXPORT = frozenset({"folder", "config_path", "gpt", "tokenizer", "table"})


def model_folder_files(networks_module: str, w2v_bert_places: Sequence[str], folder: Path) -> list[Path]:
    """The files and folders inside ``folder`` a complete model folder needs beside its GPT, config and text table;
    ValueError (one line) naming what is missing."""
    folder = Path(folder)
    local_w2v = any((folder / place).is_dir() for place in w2v_bert_places)
    resolve_files = importlib.import_module(networks_module).resolve_files
    files, _ = resolve_files(folder, w2v_bert=None if local_w2v else W2V_BERT_HUB_ID, need_gpt=False)
    return _inside(folder, [getattr(files, item.name) for item in dataclasses.fields(files)
                            if item.name not in WRITTEN_BY_EXPORT])


def config_named_files(keys: Sequence[str], folder: Path) -> list[Path]:
    """The files a folder's config.yaml names under ``keys`` (e.g. IndexTTS-1.5's ``bigvgan_checkpoint``);
    ValueError (one line) naming a key or file that is missing."""
    from data_tools.config import ConfigError, load_config

    folder = Path(folder)
    try:
        config = load_config(folder / "config.yaml")
    except (ConfigError, OSError) as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    found = []
    for key in keys:
        if not str(config.get(key) or "").strip():
            raise ValueError(f"{folder / 'config.yaml'} names no {key}")
        path = Path(str(config[key])).expanduser()
        path = path if path.is_absolute() else folder / path
        if not path.is_file():
            raise ValueError(f"{folder} is missing {path} ({key})")
        found.append(path)
    return _inside(folder, found)


def _inside(folder: Path, values: list[Any]) -> list[Path]:
    """The existing paths among ``values`` (None and model ids dropped); ValueError for one outside ``folder``."""
    out: list[Path] = []
    for value in values:
        if value is None or not Path(value).exists():
            continue
        path = Path(value)
        if not path.resolve().is_relative_to(folder.resolve()) and not path.absolute().is_relative_to(
                folder.absolute()):
            raise ValueError(f"{path} lies outside the model folder {folder}: an export carries files from inside "
                             "it only")
        out.append(path)
    return list(dict.fromkeys(out))
