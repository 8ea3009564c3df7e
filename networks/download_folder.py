"""A download folder of a generation that reads w2v-BERT (IndexTTS2, IndexTTS-2.5): its ``config.yaml``, the
files its keys name, the w2v-BERT 2.0 model, and the one-line refusal naming everything that is missing.

Each generation's module (``networks.indextts2``, ``networks.indextts25``) says which keys and files it needs
and under which error type and name it refuses; this module does the reading and resolving they share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

W2V_BERT_FOLDER = "w2v-bert-2.0"
BIGVGAN_FILES = ("config.json", "bigvgan_generator.pt")


class DownloadFolderError(ValueError):
    """A download folder lacks a file or its config a key (one line naming every one)."""


def read_config(folder: str | Path, generation: str = "IndexTTS2",
                error: type[ValueError] = DownloadFolderError) -> tuple[Path, dict[str, Any]]:
    """``config.yaml`` of a download folder (or the file itself) -> (path, mapping); ``error`` for a bad one."""
    import yaml

    path = Path(folder)
    path = path if path.suffix in (".yaml", ".yml") else path / "config.yaml"
    if not path.is_file():
        raise error(f"{generation} config not found: {path}")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise error(f"{path}: not a readable YAML config ({str(exc).splitlines()[0]})") from None
    if not isinstance(config, dict):
        raise error(f"{path}: not a YAML mapping")
    return path, config


def looks_like_folder(name: str | Path) -> bool:
    """Whether a w2v-BERT argument names a folder (a path) rather than a hub model id (``owner/name``)."""
    text = str(name)
    return isinstance(name, Path) or text.startswith((".", "/", "~")) or text.count("/") != 1


@dataclass(frozen=True)
class DownloadFolder:
    """A read config.yaml and how the names in it resolve; refusals name ``generation`` and raise ``error``."""

    config_path: Path
    config: dict[str, Any]
    generation: str
    error: type[ValueError]

    @classmethod
    def open(cls, folder: str | Path, generation: str, error: type[ValueError]) -> DownloadFolder:
        config_path, config = read_config(folder, generation, error)
        return cls(config_path, config, generation, error)

    @property
    def root(self) -> Path:
        return self.config_path.parent

    def at(self, value: str | Path) -> Path:
        """A file name from the config: absolute as given, else relative to the folder."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.root / path

    def require_keys(self, missing_keys: Iterable[str]) -> None:
        missing = list(missing_keys)
        if missing:
            raise self.error(f"{self.config_path} lacks key(s): {', '.join(missing)}")

    def files(self, keys: Mapping[str, str]) -> dict[str, Path]:
        """``{name: config key}`` -> ``{name: path}`` (an absent key gives the folder itself: never a file)."""
        return {name: self.at(self.config.get(key) or "") for name, key in keys.items()}

    def w2v_bert(self, given: str | Path | None, local: Path, missing: list[str]) -> str:
        """The w2v-BERT 2.0 model: ``given`` (a folder that must exist, or a model id), else ``local``; what is
        not there is added to ``missing``."""
        if given is None:
            if not local.is_dir():
                missing.append(f"{local} (or name a w2v-BERT 2.0 folder / model id)")
            return str(local)
        if looks_like_folder(given) and not Path(given).is_dir():
            missing.append(f"{given} (w2v-BERT folder)")
        return str(given)

    def refuse_missing(self, missing: list[str]) -> None:
        if missing:
            raise self.error(f"{self.generation} folder {self.root} is missing: {'; '.join(missing)}")


def load_w2v_bert_frontend(w2v_bert: str, *, local_files_only: bool = False) -> tuple[Any, Any]:
    """(w2v-BERT 2.0 model, its feature extractor) from a folder or a model id; a folder without
    ``preprocessor_config.json`` gets w2v-bert-2.0's extractor settings."""
    from networks.frontends.seamless_features import build_feature_extractor, load_feature_extractor
    from networks.w2v_bert import load_w2v_bert_pretrained

    folder = Path(w2v_bert)
    local = folder.is_dir()
    w2v = load_w2v_bert_pretrained(folder if local else w2v_bert, local_files_only=local_files_only)
    if local and not (folder / "preprocessor_config.json").is_file():
        return w2v, build_feature_extractor()
    return w2v, load_feature_extractor(w2v_bert, local_files_only=local_files_only)


def read_matrix(path: Path, error: type[ValueError] = DownloadFolderError) -> Tensor:
    """An emotion / speaker matrix file (feat1.pt, feat2.pt): a 2-D float tensor."""
    try:
        value = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a corrupt or foreign file
        raise error(f"cannot read {path}: {str(exc).strip().splitlines()[0]}") from None
    if not isinstance(value, Tensor) or value.dim() != 2:
        raise error(f"{path} is not a 2-D tensor (an emotion/speaker matrix)")
    return value.float()
