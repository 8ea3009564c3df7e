"""How IndexTTS-2.5 is assembled: a download folder's files, each network built from its config section and
loaded strictly (facts: shared/reference/indextts25/README_audio.md section 0).

``load_indextts25(folder, w2v_bert=...)`` -> :class:`IndexTTS25Networks` (every network in eval mode). The
folder holds IndexTeam/IndexTTS-2.5's files:

- ``config.yaml`` (``version: 2.5``): ``gpt``, ``semantic_codec``, ``s2mel`` sections; the file names
  ``gpt_checkpoint`` (gpt.pth), ``s2mel_checkpoint`` (s2mel.pth), ``w2v_stat`` (wav2vec2bert_stats.pt), and
  optionally ``spk_matrix`` / ``emo_matrix`` (feat1.pt / feat2.pt, only for emotion weights) with ``emo_num``;
- ``codec.pth``: the 2.5 codec, under this fixed name (upstream hard-codes it; the config cannot move it);
- ``multilingual_zh_ja_yue_char_del.tiktoken``: the text table (read by the caller's tokenizer);
- what upstream fetches from the hub, looked for in the folder and then in its ``hf_cache/``:
  ``campplus_cn_common.bin``, ``bigvgan/{config.json,bigvgan_generator.pt}``, ``w2v-bert-2.0/`` (or name a
  w2v-BERT 2.0 folder / model id with ``w2v_bert``).

2.5 never reads the MaskGCT ``semantic_codec/model.safetensors`` and builds its S2Mel without ``gpt_layer``
(a ``gpt_layer`` part of s2mel.pth is not read). Every missing file or config key is named in one line
(:class:`IndexTTS25FilesError`); a file whose keys or shapes do not fit its config section is refused in one
line naming the first mismatched key. Shrunken models (tests) size CAMPPlus by an optional ``campplus:``
section, as for IndexTTS2 (``networks.indextts2.campplus_sizes``).

The per-utterance steps live beside this module: ``networks.prep25`` (prompt loading, w2v-BERT features, CAM++
style, emotion vector) and ``networks.synthesis25`` (prompt condition, codes -> mel with duration factor).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from networks.bigvgan_v2 import BigVGANV2
from networks.codec25 import CODEC_FILE_NAME, Codec25
from networks.download_folder import (
    BIGVGAN_FILES,
    W2V_BERT_FOLDER,
    DownloadFolder,
    DownloadFolderError,
    load_w2v_bert_frontend,
    read_config,
    read_matrix,
)
from networks.generation_rule import describes_indextts25
from networks.gpt_config import ConfigError
from networks.gpt_v25 import UnifiedVoiceV25

VERSION = "2.5"
TABLE_NAME = "multilingual_zh_ja_yue_char_del.tiktoken"  # the 2.5 tiktoken table (CosyVoice's)
HUB_CACHE = "hf_cache"
CAMPPLUS_FILE = "campplus_cn_common.bin"
BIGVGAN_FOLDER = "bigvgan"
REQUIRED_FILE_KEYS = {"gpt": "gpt_checkpoint", "s2mel": "s2mel_checkpoint", "w2v_stats": "w2v_stat"}
OPTIONAL_FILE_KEYS = {"spk_matrix": "spk_matrix", "emo_matrix": "emo_matrix"}
REQUIRED_SECTIONS = ("gpt", "semantic_codec", "s2mel")


class IndexTTS25FilesError(DownloadFolderError):
    """The download folder lacks a file or its config a key, or a file does not fit its config (one line)."""


@dataclass(frozen=True)
class IndexTTS25Files:
    """Where each file of a 2.5 download folder is (every required one checked to exist)."""

    folder: Path
    config_path: Path
    gpt: Path
    codec: Path
    s2mel: Path
    w2v_stats: Path
    table: Path  # the .tiktoken text table
    campplus: Path
    bigvgan: Path  # folder with config.json + bigvgan_generator.pt
    w2v_bert: str  # a local folder or a model id
    spk_matrix: Path | None  # feat1.pt, when the config names one that exists
    emo_matrix: Path | None  # feat2.pt


@dataclass
class IndexTTS25Networks:
    """Every network of IndexTTS-2.5 inference, loaded strictly and in eval mode."""

    config: dict[str, Any]
    files: IndexTTS25Files
    gpt: UnifiedVoiceV25 | None  # None when the caller loads its own GPT (``load_gpt_weights=False``)
    extractor: Any  # SeamlessM4TFeatureExtractor
    semantic: nn.Module  # (input_features, attention_mask) -> normalised w2v-BERT layer-17 features (B, T, W)
    codec: Codec25
    campplus: nn.Module  # networks.campplus.CAMPPlus
    s2mel: nn.Module  # networks.s2mel.S2Mel without gpt_layer
    vocoder: BigVGANV2
    spk_matrix: Tensor | None  # feat1 (rows, 192), only for emotion weights
    emo_matrix: Tensor | None  # feat2 (rows, GPT width)
    emo_num: tuple[int, ...] | None

    @property
    def sample_rate(self) -> int:
        return int(self.config["s2mel"]["preprocess_params"]["sr"])


def is_indextts25_folder(folder: str | Path) -> bool:
    """Whether a download folder's config.yaml describes IndexTTS-2.5 (``version: 2.5``), or it holds codec.pth."""
    try:
        path, config = read_config(folder)
    except DownloadFolderError:
        return False
    return describes_indextts25(config) or (path.parent / CODEC_FILE_NAME).is_file()


def _hub_file(root: Path, name: str, given: str | Path | None) -> Path:
    """An argument as given, else ``root/name``, else ``root/hf_cache/name`` (the first that exists)."""
    if given is not None:
        return Path(given)
    for candidate in (root / name, root / HUB_CACHE / name):
        if candidate.exists():
            return candidate
    return root / name


def resolve_files(
    folder: str | Path,
    *,
    w2v_bert: str | Path | None = None,
    campplus: str | Path | None = None,
    bigvgan: str | Path | None = None,
    table: str | Path | None = None,
    need_gpt: bool = True,
) -> tuple[IndexTTS25Files, dict[str, Any]]:
    """The files of a 2.5 download folder; refuses in one line naming every missing config key and file."""
    found = DownloadFolder.open(folder, "IndexTTS-2.5", IndexTTS25FilesError)
    config, root = found.config, found.root
    found.require_keys([*(key for name, key in REQUIRED_FILE_KEYS.items() if (need_gpt or name != "gpt")
                          and not config.get(key)),
                        *(key for key in REQUIRED_SECTIONS if not isinstance(config.get(key), Mapping))])
    paths = found.files(REQUIRED_FILE_KEYS)
    paths["codec"] = root / CODEC_FILE_NAME
    paths["table"] = Path(table) if table is not None else root / TABLE_NAME
    paths["campplus"] = _hub_file(root, CAMPPLUS_FILE, campplus)
    vocoder = _hub_file(root, BIGVGAN_FOLDER, bigvgan)
    missing = [str(path) for name, path in paths.items() if (need_gpt or name != "gpt") and not path.is_file()]
    missing += [str(vocoder / name) for name in BIGVGAN_FILES if not (vocoder / name).is_file()]
    w2v = found.w2v_bert(w2v_bert, _hub_file(root, W2V_BERT_FOLDER, None), missing)
    found.refuse_missing(missing)
    optional = {name: path if path.is_file() else None
                for name, path in found.files(OPTIONAL_FILE_KEYS).items()}
    files = IndexTTS25Files(
        folder=root, config_path=found.config_path, gpt=paths["gpt"], codec=paths["codec"], s2mel=paths["s2mel"],
        w2v_stats=paths["w2v_stats"], table=paths["table"], campplus=paths["campplus"], bigvgan=vocoder,
        w2v_bert=w2v, spk_matrix=optional["spk_matrix"], emo_matrix=optional["emo_matrix"],
    )
    return files, config


def semantic_feature_model(w2v: nn.Module, stats: nn.Module) -> nn.Module:
    """w2v-BERT layer 17, then the stats normalisation (networks.w2v_bert.SemanticFeatureModel)."""
    from networks.w2v_bert import SemanticFeatureModel

    return SemanticFeatureModel(w2v, stats)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def _first_mismatch(exc: BaseException, section: str) -> str:
    """A strict-load refusal cut to its first difference (missing, unexpected, then shapes by key name), one line."""
    message = _one_line(exc)
    head, found, problems = message.partition(": ")
    if not found:
        return f"{message} ({section})"
    parts = problems.split("; ")
    more = f" (and {len(parts) - 1} more difference(s))" if len(parts) > 1 else ""
    return f"{head} as config.yaml's {section} describes it: {parts[0]}{more}"


def load_gpt25(config: Mapping[str, Any], path: Path, device: torch.device | str = "cpu") -> UnifiedVoiceV25:
    """The folder's gpt.pth strictly into the GPT its config's ``gpt`` section describes, eval mode."""
    from networks.gpt_v25 import load_gpt_v25_file
    from networks.loading import StateDictMismatchError

    try:
        return load_gpt_v25_file(config, path).to(device).eval()
    except (StateDictMismatchError, ConfigError, KeyError) as exc:
        raise IndexTTS25FilesError(_first_mismatch(exc, "gpt section")) from None


def load_indextts25(
    folder: str | Path,
    *,
    w2v_bert: str | Path | None = None,
    campplus: str | Path | None = None,
    bigvgan: str | Path | None = None,
    table: str | Path | None = None,
    load_gpt_weights: bool = True,
    local_files_only: bool = False,
    device: torch.device | str = "cpu",
) -> IndexTTS25Networks:
    """Every network of a 2.5 download folder, strictly loaded, in eval mode on ``device``.

    ``w2v_bert``: a folder (``config.json`` + weights, and ``preprocessor_config.json`` for the feature
    extractor, else w2v-bert-2.0's settings are used) or a hub model id (downloaded by transformers unless
    ``local_files_only``). ``load_gpt_weights=False`` leaves ``gpt`` None (the caller brings a fine-tuned one).
    Raises IndexTTS25FilesError (one line) for a missing file or key, or a file that does not fit its config.
    """
    from networks.campplus import load_campplus
    from networks.codec25 import load_codec25
    from networks.indextts2 import campplus_sizes, load_vocoder_folder
    from networks.s2mel import load_s2mel
    from networks.w2v_bert import SemanticStats

    files, config = resolve_files(folder, w2v_bert=w2v_bert, campplus=campplus, bigvgan=bigvgan, table=table,
                                  need_gpt=load_gpt_weights)
    gpt = load_gpt25(config, files.gpt, device) if load_gpt_weights else None

    def strictly(what: str, load: Any) -> Any:
        try:
            return load()
        except (ValueError, KeyError, TypeError) as exc:  # strict-load and config refusals of each network
            raise IndexTTS25FilesError(_first_mismatch(exc, what)) from None

    codec = strictly("semantic_codec section",
                     lambda: load_codec25(files.codec, config["semantic_codec"], device=device))
    s2mel = strictly("s2mel section",
                     lambda: load_s2mel(files.s2mel, config["s2mel"], with_gpt_layer=False, device=device))
    style = strictly("CAMPPlus", lambda: load_campplus(files.campplus, **campplus_sizes(config)).to(device).eval())
    vocoder = strictly("BigVGAN v2", lambda: load_vocoder_folder(files.bigvgan, device))
    stats = strictly("w2v-BERT stats", lambda: SemanticStats.from_file(files.w2v_stats))
    w2v, extractor = load_w2v_bert_frontend(files.w2v_bert, local_files_only=local_files_only)
    semantic = semantic_feature_model(w2v, stats).to(device).eval()
    spk_matrix = emo_matrix = None
    emo_num = None
    if files.spk_matrix is not None and files.emo_matrix is not None and config.get("emo_num"):
        spk_matrix = read_matrix(files.spk_matrix, IndexTTS25FilesError).to(device)
        emo_matrix = read_matrix(files.emo_matrix, IndexTTS25FilesError).to(device)
        emo_num = tuple(int(n) for n in config["emo_num"])
    return IndexTTS25Networks(
        config=config, files=files, gpt=gpt, extractor=extractor, semantic=semantic, codec=codec,
        campplus=style, s2mel=s2mel, vocoder=vocoder, spk_matrix=spk_matrix, emo_matrix=emo_matrix,
        emo_num=emo_num,
    )
