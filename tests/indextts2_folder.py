"""A tiny IndexTTS2 "download folder" built from fixtures_indextts2_audio, under the real file names.

Used by the v2 synthesis tests: config.yaml (the fixture config with its shrunk widths written as the optional
keys ``gpt.semantic_dim`` / ``gpt.emo_perceiver_dim`` and a ``campplus:`` section), gpt.pth, s2mel.pth,
wav2vec2bert_stats.pt, feat1.pt, feat2.pt, campplus_cn_common.bin, semantic_codec/model.safetensors (the real
flat safetensors layout), bigvgan/{config.json, bigvgan_generator.pt} and a local w2v-bert-2.0/ folder in
transformers' format (config, weights, preprocessor_config.json). Nothing is downloaded.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import yaml

from tests.conftest import shared_file

FIXTURE_DIR = ("reference", "fixtures_indextts2_audio")
LINKED = {
    "gpt.pth": "tiny_gpt_v2_audio.pth",
    "s2mel.pth": "tiny_s2mel.pth",
    "wav2vec2bert_stats.pt": "tiny_w2v_stats.pt",
    "feat1.pt": "tiny_feat1.pt",
    "feat2.pt": "tiny_feat2.pt",
    "campplus_cn_common.bin": "tiny_campplus.pth",
    "bigvgan/bigvgan_generator.pt": "tiny_bigvgan_v2.pth",
}


def fixture_path(name: str) -> Path:
    return shared_file(*FIXTURE_DIR, name)


def fixture_config() -> dict:
    return yaml.safe_load(fixture_path("tiny_audio_config.yaml").read_text(encoding="utf-8"))


def download_config() -> dict:
    """The fixture config as a download folder's config.yaml (real file names, widths as optional keys)."""
    config = fixture_config()
    widths = config["fixture_widths"]
    config["gpt"] = {**config["gpt"], "semantic_dim": widths["semantic_dim"],
                     "emo_perceiver_dim": widths["emo_perceiver_dim"]}
    config["campplus"] = {key: value for key, value in config["fixture_campplus"].items() if key != "feat_dim"}
    config.update(gpt_checkpoint="gpt.pth", s2mel_checkpoint="s2mel.pth", w2v_stat="wav2vec2bert_stats.pt",
                  emo_matrix="feat2.pt", spk_matrix="feat1.pt")
    for key in [key for key in config if key.startswith("fixture_")]:
        del config[key]
    return config


def build_download_folder(root: Path, *, copy: bool = False) -> Path:
    """Write the tiny download folder into ``root`` (symlinks to the fixture files unless ``copy``)."""
    from safetensors.torch import save_file

    from networks.frontends.seamless_features import build_feature_extractor
    from networks.w2v_bert import load_w2v_bert_state

    fixture = fixture_config()
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.yaml").write_text(yaml.safe_dump(download_config(), sort_keys=False), encoding="utf-8")
    for name, source in LINKED.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if copy:
            shutil.copyfile(fixture_path(source), target)
        else:
            target.symlink_to(fixture_path(source))
    (root / "bigvgan" / "config.json").write_text(json.dumps(fixture["fixture_bigvgan"]), encoding="utf-8")
    codec = torch.load(fixture_path("tiny_semantic_codec.pth"), weights_only=True)["model"]
    (root / "semantic_codec").mkdir(exist_ok=True)
    save_file({key: value.contiguous() for key, value in codec.items()}, str(root / "semantic_codec" / "model.safetensors"))
    w2v = load_w2v_bert_state(fixture["fixture_w2v_bert"], fixture_path("tiny_w2v_bert.pth"))
    w2v.save_pretrained(root / "w2v-bert-2.0")
    build_feature_extractor(fixture["fixture_feature_extractor"]).save_pretrained(root / "w2v-bert-2.0")
    return root


def shared_download_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny download folder, built once per test session (under the session's base temp folder)."""
    root = tmp_path_factory.getbasetemp() / "indextts2_download" / "IndexTTS-2"
    if not (root / "w2v-bert-2.0" / "preprocessor_config.json").is_file():
        shutil.rmtree(root, ignore_errors=True)
        build_download_folder(root)
    return root


def load_synthesizer(folder: Path, **kwargs):
    """A S2MelSynthesizer of the tiny download folder (never downloads)."""
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer

    return S2MelSynthesizer.load(folder, local_files_only=True, **kwargs)
