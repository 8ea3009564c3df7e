"""A tiny IndexTTS-2.5 "download folder" built from indextts25/fixtures_audio, under the real file names.

config.yaml (the fixture config without its ``fixture_*`` keys, file names as the real ones, CAMPPlus sizes
as the optional ``campplus:`` section), gpt.pth (the 2.5 GPT set A), codec.pth, s2mel.pth,
wav2vec2bert_stats.pt, the .tiktoken table, and the hub files under ``hf_cache/``: campplus_cn_common.bin,
bigvgan/{config.json, bigvgan_generator.pt} and w2v-bert-2.0/ in transformers' format. Nothing is downloaded.

The fixture's one non-upstream step: its w2v-BERT is 32 wide, so its layer-17 output is tiled to the
1024 channels the codec and GPT read (``fixture_width_bridge``). ``tiled_features`` installs that bridge in
place of ``networks.indextts25.semantic_feature_model`` while a folder is loaded.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch
import yaml
from torch import Tensor, nn

from tests.conftest import shared_file

FIXTURE_DIR = ("reference", "indextts25", "fixtures_audio")
TILE_TO = 1024
LINKED = {
    "gpt.pth": ("reference", "indextts25", "tiny_gpt_v25.pth"),
    "codec.pth": (*FIXTURE_DIR, "tiny_codec.pth"),
    "s2mel.pth": (*FIXTURE_DIR, "tiny_s2mel.pth"),
    "wav2vec2bert_stats.pt": (*FIXTURE_DIR, "tiny_w2v_stats.pt"),
    "multilingual_zh_ja_yue_char_del.tiktoken": (*FIXTURE_DIR, "multilingual_zh_ja_yue_char_del.tiktoken"),
    "hf_cache/campplus_cn_common.bin": (*FIXTURE_DIR, "tiny_campplus.pth"),
    "hf_cache/bigvgan/bigvgan_generator.pt": (*FIXTURE_DIR, "tiny_bigvgan_generator.pt"),
}


def fixture_path(name: str) -> Path:
    return shared_file(*FIXTURE_DIR, name)


def fixture_config() -> dict:
    return yaml.safe_load(fixture_path("tiny_audio_config_v25.yaml").read_text(encoding="utf-8"))


def expected() -> dict:
    return torch.load(fixture_path("audio_expected_v25.pt"), weights_only=True)


def download_config() -> dict:
    """The fixture config as a download folder's config.yaml (real file names, CAMPPlus sizes as a section)."""
    config = fixture_config()
    config["campplus"] = {key: value for key, value in config["fixture_campplus"].items() if key != "feat_dim"}
    config.update(gpt_checkpoint="gpt.pth", s2mel_checkpoint="s2mel.pth", w2v_stat="wav2vec2bert_stats.pt")
    for key in [key for key in config if key.startswith("fixture_")]:
        del config[key]
    return config


def build_download_folder(root: Path, *, config: dict | None = None) -> Path:
    """Write the tiny 2.5 download folder into ``root`` (symlinks to the fixture files)."""
    from networks.frontends.seamless_features import build_feature_extractor
    from networks.w2v_bert import load_w2v_bert_state

    fixture = fixture_config()
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(config or download_config(), sort_keys=False), encoding="utf-8")
    for name, source in LINKED.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(shared_file(*source))
    (root / "hf_cache" / "bigvgan" / "config.json").write_text(json.dumps(fixture["fixture_bigvgan"]), encoding="utf-8")
    w2v = load_w2v_bert_state(fixture["fixture_w2v_bert"], fixture_path(fixture["fixture_w2v_bert_checkpoint"]))
    w2v.save_pretrained(root / "hf_cache" / "w2v-bert-2.0")
    build_feature_extractor(fixture["fixture_feature_extractor"]).save_pretrained(root / "hf_cache" / "w2v-bert-2.0")
    return root


def shared_download_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny 2.5 download folder, built once per test session."""
    root = tmp_path_factory.getbasetemp() / "indextts25_download" / "IndexTTS-2.5"
    if not (root / "hf_cache" / "w2v-bert-2.0" / "preprocessor_config.json").is_file():
        shutil.rmtree(root, ignore_errors=True)
        build_download_folder(root)
    return root


class TiledFeatures(nn.Module):
    """w2v-BERT layer 17, tiled to 1024 channels (the fixture's bridge), then the stats normalisation."""

    def __init__(self, model: nn.Module, stats: nn.Module) -> None:
        super().__init__()
        self.model = model.eval()
        self.stats = stats

    def forward(self, input_features: Tensor, attention_mask: Tensor | None) -> Tensor:
        from networks.w2v_bert import SEMANTIC_LAYER

        hidden = self.model(input_features=input_features, attention_mask=attention_mask,
                            output_hidden_states=True).hidden_states[SEMANTIC_LAYER]
        return self.stats(hidden.repeat(1, 1, TILE_TO // hidden.shape[-1]))


@contextmanager
def tiled_features() -> Iterator[None]:
    """Within the block, 2.5 folders load the fixture's tiled w2v-BERT features."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("networks.indextts25.semantic_feature_model", TiledFeatures)
        yield


def load_synthesizer(folder: Path, **kwargs):
    """A SynthesizerV25 of the tiny download folder (never downloads)."""
    from generations.indextts25.synthesis import SynthesizerV25

    with tiled_features():
        return SynthesizerV25.load(folder, local_files_only=True, **kwargs)
