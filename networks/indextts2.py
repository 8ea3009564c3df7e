"""How IndexTTS2 is assembled, each network built from its section of a config.yaml and loaded strictly.

- GPT (``gpt:``): ``build_gpt(config)`` -> UnifiedVoiceV2; ``load_gpt(model, state_dict)`` drops the
  inference-only aliases and loads strictly (networks.unified_voice). The optional gpt keys
  ``semantic_dim`` / ``emo_perceiver_dim`` (default 1024) set the widths upstream hard-codes.

A whole IndexTTS2 download folder: ``load_indextts2(folder, w2v_bert=...)`` -> :class:`IndexTTS2Networks`
(every network in eval mode). The folder holds IndexTeam/IndexTTS-2's files under the names its
``config.yaml`` gives (``gpt_checkpoint``, ``s2mel_checkpoint``, ``w2v_stat``, ``spk_matrix`` feat1,
``emo_matrix`` feat2, ``dataset.bpe_model``) plus the networks upstream fetches from the hub at run time,
under these names (:data:`HUB_FILES`; each may be overridden by an argument):

- ``semantic_codec/model.safetensors`` (amphion/MaskGCT), ``campplus_cn_common.bin`` (funasr/campplus),
- ``bigvgan/config.json`` + ``bigvgan/bigvgan_generator.pt`` (nvidia/bigvgan_v2_22khz_80band_256x),
- the w2v-BERT 2.0 model: ``w2v_bert`` (a local folder or a model id) or else ``w2v-bert-2.0/`` in the folder.

Missing files or config keys are refused in one line naming each (:class:`IndexTTS2FilesError`). Shrunken
models (tests) set optional widths: ``gpt.semantic_dim`` / ``gpt.emo_perceiver_dim`` and a ``campplus:``
section (``embedding_size``, ``growth_rate``, ``bn_size``, ``init_channels``; absent = the real 192/32/4/128).

BigVGAN v2 (the hub's ``config.json``, not a config.yaml section; 2.5 uses the same vocoder):
``build_vocoder_v2(spec)``, ``load_vocoder_v2(path_or_state, spec)`` -> networks.bigvgan_v2.BigVGANV2.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from networks import download_folder
from networks.bigvgan import VocoderError
from networks.bigvgan_v2 import BigVGANV2, BigVGANV2Spec, build_bigvgan_v2, load_bigvgan_v2
from networks.download_folder import (
    BIGVGAN_FILES,
    W2V_BERT_FOLDER,
    DownloadFolder,
    DownloadFolderError,
    load_w2v_bert_frontend,
    read_matrix,
)
from networks.gpt_config import ConfigError
from networks.unified_voice import UnifiedVoiceV2, build_model, load_gpt_state_dict

VERSION = "2"


def build_gpt(config: Mapping[str, Any]) -> UnifiedVoiceV2:
    """The IndexTTS2 GPT from a whole config or its ``gpt:`` section; refuses a v1.5 section."""
    model = build_model(config)
    if not isinstance(model, UnifiedVoiceV2):
        raise ConfigError("gpt section describes an IndexTTS-1.5 GPT (no emo_condition_module), not IndexTTS2")
    return model


def load_gpt(model: UnifiedVoiceV2, state_dict: Mapping[str, Any]) -> list[str]:
    """Strict load of a ``gpt.pth`` state dict; returns the dropped inference-only key names."""
    return load_gpt_state_dict(model, state_dict)


# ----- audio networks (w2v-BERT, semantic codec, CAMPPlus, S2Mel, BigVGAN v2): added here next ---------------


def vocoder_v2_spec(spec: BigVGANV2Spec | Mapping[str, Any], source: str = "config.json") -> BigVGANV2Spec:
    """A BigVGANV2Spec as given, or read from a BigVGAN v2 ``config.json`` dict."""
    return spec if isinstance(spec, BigVGANV2Spec) else BigVGANV2Spec.from_config(spec, source)


def build_vocoder_v2(spec: BigVGANV2Spec | Mapping[str, Any],
                     device: torch.device | str | None = None) -> BigVGANV2:
    """A randomly initialised BigVGAN v2 (``device="meta"`` to only inspect keys and shapes)."""
    return build_bigvgan_v2(vocoder_v2_spec(spec), device)


def load_vocoder_v2(path_or_state: str | Path | Mapping[str, Any], spec: BigVGANV2Spec | Mapping[str, Any],
                    device: torch.device | str = "cpu") -> BigVGANV2:
    """``bigvgan_generator.pt`` (a path, or the dict read from it) strictly into the BigVGAN v2 ``spec``
    describes; weight norm folded, eval mode. Raises ConfigError / VocoderError (one line)."""
    spec = vocoder_v2_spec(spec)
    if isinstance(path_or_state, (str, Path)):
        path = Path(path_or_state)
        if not path.is_file():
            raise VocoderError(f"BigVGAN v2 weights not found: {path}")
        try:
            checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as error:  # a truncated or foreign file: say which, in one line
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise VocoderError(f"{path} could not be read as a BigVGAN v2 generator file: {first_line}") from None
        return load_bigvgan_v2(checkpoint, spec, path, device)
    state = dict(path_or_state)
    if state and all(isinstance(value, torch.Tensor) for value in state.values()):
        state = {"generator": state}  # a bare generator state dict
    return load_bigvgan_v2(state, spec, "bigvgan_generator.pt", device)


# ----- a whole download folder -------------------------------------------------------------------------------

# Config keys of upstream's checkpoints/config.yaml that name files in the folder.
CONFIG_FILES = {
    "gpt": "gpt_checkpoint",
    "s2mel": "s2mel_checkpoint",
    "w2v_stats": "w2v_stat",
    "spk_matrix": "spk_matrix",
    "emo_matrix": "emo_matrix",
}
# What upstream downloads at run time, and where this project looks for it inside the folder.
HUB_FILES = {
    "semantic_codec": "semantic_codec/model.safetensors",
    "campplus": "campplus_cn_common.bin",
    "bigvgan": "bigvgan",
}
CAMPPLUS_SIZE_KEYS = ("embedding_size", "growth_rate", "bn_size", "init_channels")


class IndexTTS2FilesError(DownloadFolderError):
    """The download folder lacks a file or its config a key; the message names every one in one line."""


@dataclass(frozen=True)
class IndexTTS2Files:
    """Where each file of a download folder is (resolved, every one checked to exist)."""

    folder: Path
    config_path: Path
    gpt: Path
    s2mel: Path
    w2v_stats: Path
    spk_matrix: Path
    emo_matrix: Path
    semantic_codec: Path
    campplus: Path
    bigvgan: Path  # folder with config.json + bigvgan_generator.pt
    w2v_bert: str  # a local folder or a model id
    tokenizer: Path | None  # dataset.bpe_model, when the config names one that exists


@dataclass
class IndexTTS2Networks:
    """Every network of IndexTTS2 inference, loaded strictly and in eval mode."""

    config: dict[str, Any]
    files: IndexTTS2Files
    gpt: UnifiedVoiceV2 | None  # None when the caller loads its own GPT (``load_gpt_weights=False``)
    extractor: Any  # SeamlessM4TFeatureExtractor
    semantic: nn.Module  # networks.w2v_bert.SemanticFeatureModel
    codec: nn.Module  # networks.semantic_codec.SemanticCodec
    campplus: nn.Module  # networks.campplus.CAMPPlus
    s2mel: nn.Module  # networks.s2mel.S2Mel
    vocoder: BigVGANV2  # (1, 80, F) log-mel -> (1, 1, F * 256) in [-1, 1]
    spk_matrix: Tensor  # feat1 (rows, style width)
    emo_matrix: Tensor  # feat2 (rows, GPT width)
    emo_num: tuple[int, ...]

    @property
    def sample_rate(self) -> int:
        return int(self.config["s2mel"]["preprocess_params"]["sr"])


def read_config(folder: str | Path) -> tuple[Path, dict[str, Any]]:
    """``config.yaml`` of a download folder (or the file itself) -> (path, mapping)."""
    return download_folder.read_config(folder, "IndexTTS2", IndexTTS2FilesError)


def resolve_files(
    folder: str | Path,
    *,
    w2v_bert: str | Path | None = None,
    semantic_codec: str | Path | None = None,
    campplus: str | Path | None = None,
    bigvgan: str | Path | None = None,
    need_gpt: bool = True,
) -> tuple[IndexTTS2Files, dict[str, Any]]:
    """The files of a download folder; refuses in one line naming every missing config key and file."""
    found = DownloadFolder.open(folder, "IndexTTS2", IndexTTS2FilesError)
    config, root = found.config, found.root
    found.require_keys([*(key for name, key in CONFIG_FILES.items() if (need_gpt or name != "gpt")
                          and not config.get(key)),
                        *(key for key in ("gpt", "s2mel", "semantic_codec", "emo_num") if key not in config)])
    paths = found.files(CONFIG_FILES)
    paths["semantic_codec"] = Path(semantic_codec) if semantic_codec else root / HUB_FILES["semantic_codec"]
    paths["campplus"] = Path(campplus) if campplus else root / HUB_FILES["campplus"]
    paths["bigvgan"] = Path(bigvgan) if bigvgan else root / HUB_FILES["bigvgan"]
    missing = [str(path) for name, path in paths.items() if name != "bigvgan" and (need_gpt or name != "gpt")
               and not path.is_file()]
    missing += [str(paths["bigvgan"] / name) for name in BIGVGAN_FILES if not (paths["bigvgan"] / name).is_file()]
    w2v = found.w2v_bert(w2v_bert, root / W2V_BERT_FOLDER, missing)
    found.refuse_missing(missing)
    bpe = (config.get("dataset") or {}).get("bpe_model") if isinstance(config.get("dataset"), Mapping) else None
    tokenizer = found.at(bpe) if bpe and found.at(bpe).is_file() else None
    files = IndexTTS2Files(
        folder=root, config_path=found.config_path, gpt=paths["gpt"], s2mel=paths["s2mel"],
        w2v_stats=paths["w2v_stats"], spk_matrix=paths["spk_matrix"], emo_matrix=paths["emo_matrix"],
        semantic_codec=paths["semantic_codec"], campplus=paths["campplus"], bigvgan=paths["bigvgan"],
        w2v_bert=w2v, tokenizer=tokenizer,
    )
    return files, config


def campplus_sizes(config: Mapping[str, Any]) -> dict[str, int]:
    """CAMPPlus sizes: the optional ``campplus:`` section over the real ones (upstream hard-codes them)."""
    section = config.get("campplus") or {}
    if not isinstance(section, Mapping):
        raise ConfigError("config campplus must be a mapping")
    unknown = sorted(set(section) - set(CAMPPLUS_SIZE_KEYS) - {"feat_dim"})
    if unknown:
        raise ConfigError(f"config campplus has unsupported key(s) {', '.join(unknown)}")
    return {key: int(value) for key, value in section.items()}


def read_gpt_state(path: Path) -> Mapping[str, Any]:
    """The state dict of a ``gpt.pth`` (flat, or under ``model``)."""
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises several types for a corrupt or foreign file
        raise IndexTTS2FilesError(f"cannot read {path}: {str(exc).strip().splitlines()[0]}") from None
    if isinstance(payload, Mapping) and isinstance(payload.get("model"), Mapping):
        payload = payload["model"]
    if not isinstance(payload, Mapping):
        raise IndexTTS2FilesError(f"{path} holds no state dict")
    return payload


def _read_matrix(path: Path) -> Tensor:
    return read_matrix(path, IndexTTS2FilesError)


def load_vocoder_folder(folder: Path, device: torch.device | str = "cpu") -> BigVGANV2:
    """BigVGAN v2 from a hub-style folder (``config.json`` + ``bigvgan_generator.pt``), weight norm folded."""
    import json

    config_file = folder / "config.json"
    try:
        spec_config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise IndexTTS2FilesError(f"{config_file}: not a readable JSON config ({exc})") from None
    if not isinstance(spec_config, Mapping):
        raise IndexTTS2FilesError(f"{config_file}: not a JSON object")
    return load_vocoder_v2(folder / "bigvgan_generator.pt", vocoder_v2_spec(spec_config, str(config_file)), device)


def load_indextts2(
    folder: str | Path,
    *,
    w2v_bert: str | Path | None = None,
    semantic_codec: str | Path | None = None,
    campplus: str | Path | None = None,
    bigvgan: str | Path | None = None,
    load_gpt_weights: bool = True,
    local_files_only: bool = False,
    device: torch.device | str = "cpu",
) -> IndexTTS2Networks:
    """Every network of a download folder, strictly loaded, in eval mode on ``device``.

    ``w2v_bert``: a folder (``config.json`` + weights, and ``preprocessor_config.json`` for the feature
    extractor, else w2v-bert-2.0's settings are used) or a hub model id (downloaded by transformers unless
    ``local_files_only``). ``load_gpt_weights=False`` leaves ``gpt`` None (the caller brings a fine-tuned one).
    """
    from networks.campplus import load_campplus
    from networks.s2mel import load_s2mel
    from networks.semantic_codec import load_semantic_codec
    from networks.w2v_bert import SemanticFeatureModel, SemanticStats

    files, config = resolve_files(folder, w2v_bert=w2v_bert, semantic_codec=semantic_codec, campplus=campplus,
                                  bigvgan=bigvgan, need_gpt=load_gpt_weights)
    gpt = None
    if load_gpt_weights:
        gpt = build_gpt(config)
        load_gpt(gpt, read_gpt_state(files.gpt))
        gpt = gpt.to(device).eval()
    w2v, extractor = load_w2v_bert_frontend(files.w2v_bert, local_files_only=local_files_only)
    semantic = SemanticFeatureModel(w2v, SemanticStats.from_file(files.w2v_stats)).to(device).eval()
    codec = load_semantic_codec(files.semantic_codec, config["semantic_codec"]).to(device).eval()
    style = load_campplus(files.campplus, **campplus_sizes(config)).to(device).eval()
    gpt_dim = int((config["gpt"] or {}).get("model_dim", 1280))
    s2mel = load_s2mel(files.s2mel, config["s2mel"], gpt_dim=gpt_dim, device=device)
    vocoder = load_vocoder_folder(files.bigvgan, device)
    emo_num = tuple(int(n) for n in config["emo_num"])
    return IndexTTS2Networks(
        config=config, files=files, gpt=gpt, extractor=extractor, semantic=semantic, codec=codec,
        campplus=style, s2mel=s2mel, vocoder=vocoder, spk_matrix=_read_matrix(files.spk_matrix).to(device),
        emo_matrix=_read_matrix(files.emo_matrix).to(device), emo_num=emo_num,
    )
