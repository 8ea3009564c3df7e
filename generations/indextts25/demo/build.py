"""The IndexTTS-2.5 part of the demo workspace: a tiny 2.5 GPT and 2.5 paired data from real Amharic text.

Written under ``<workspace>/v25/``:

- ``v25/checkpoints/config.yaml`` (IndexTTS2 layout with ``version: 2.5`` at the top), a random-init tiny
  ``gpt.pth`` in the real 2.5 key layout (CAM++ projection, language table, the full 60,510-row text table)
  and the 2.5 tokenizer table ``multilingual_zh_ja_yue_char_del.tiktoken`` (with its licence);
- ``v25/data/{codes,spk_vec,emo_vec}/<id>.npy``: per-utterance features as 2.5 preprocessing makes them
  (int32 25 Hz codes, float32 [192] CAM++ vectors, float32 [dim] emotion vectors);
- ``v25/data/train_pairs.jsonl`` / ``val_pairs.jsonl``: 2.5 paired manifests with the raw Amharic text
  (tokenised by the trainer with its ``--text-scheme``) and ``language: am``;
- every other network of a 2.5 download folder in ``v25/checkpoints/`` (codec, S2Mel without gpt_layer,
  CAMPPlus, BigVGAN v2, w2v-BERT + stats; ``synthesis``), so ``networks.indextts25.
  load_indextts25(v25/checkpoints)`` loads the folder and IndexTTS-2.5 speaks (noise) on a CPU;
- ``v25/data/wavs/<id>.wav``: synthetic audio of the validation utterances (their pairs' prompt and target
  audio: the voice of samples at saves).

Codes are derived from the text (as in the other demos) and each speaker has its own vectors, so the loss
visibly falls within a minute or two of CPU training.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_tools.config import save_config
from data_tools.fileio import atomic_write_with
from data_tools.shape_rules import SPEAKER_VECTOR_DIM, V25_CODES_PER_SECOND
from demo.data import codes_for_text, demo_folder_of, demo_train_argv, paired_gpt_section, stable_int
from demo.paired_paths import PairedDemoPaths, save_base_gpt, write_demo_utterances, write_pair_manifests
from demo.voices import write_demo_wavs
from generations.demo_facts import DemoProject
from generations.indextts25 import INDEXTTS25
from generations.indextts25.data.text_table import DEFAULT_TABLE
from generations.indextts25.data.tiktoken_table import BASE_VOCAB_SIZE, TABLE_NAME
from generations.indextts25.demo.synthesis import (
    gpt_widths,
    synthesis_ready,
    synthesis_sections,
    write_synthesis_kit,
)

FOLDER = demo_folder_of(INDEXTTS25)  # <workspace>/FOLDER/: its registry entry's demo folder
MODEL_DIM = 32


def demo_config() -> dict:
    """The 2.5 config.yaml layout (an IndexTTS2 gpt section; ``version: 2.5`` says what it is)."""
    return {
        "dataset": {"sample_rate": 24000, "squeeze": False},
        "gpt": paired_gpt_section(MODEL_DIM, BASE_VOCAB_SIZE, max_text_tokens=128, **gpt_widths()),
        "gpt_checkpoint": "gpt.pth",
        **synthesis_sections(),
        "version": 2.5,
    }


@dataclass(frozen=True)
class DemoPaths(PairedDemoPaths):
    tokenizer: Path

    @classmethod
    def under(cls, workspace: Path) -> DemoPaths:
        root = Path(workspace) / FOLDER
        return cls(**cls.common(root), tokenizer=root / "checkpoints" / TABLE_NAME)

    def exists(self) -> bool:
        return all(p.is_file() for p in (self.config, self.base_checkpoint, self.tokenizer, self.train_manifest,
                                         self.val_manifest))

    def synthesis_ready(self) -> bool:
        """Whether ``checkpoints/`` is a whole 2.5 download folder (demos from before 2.5 synthesis are not)."""
        return synthesis_ready(self.config.parent)

    def train_argv(self, max_steps: int = 200) -> list[str]:
        """The demo's command: the merges scheme, and samples at every save through the demo's own folder."""
        return demo_train_argv(self.train_manifest, self.val_manifest, self.tokenizer, self.config,
                               self.base_checkpoint, self.output_dir, max_steps,
                               ("--text-scheme", "merges", *self.sample_args()))


def speaker_vectors(speaker: str, utterance: str) -> tuple[np.ndarray, np.ndarray]:
    """A speaker's CAM++-like vector and emotion vector, with a little per-utterance noise."""
    spk = np.random.default_rng(stable_int(speaker) % 2**32).normal(0.0, 1.0, size=(SPEAKER_VECTOR_DIM,))
    noise = np.random.default_rng(stable_int(utterance) % 2**32).normal(0.0, 0.05, size=(SPEAKER_VECTOR_DIM,))
    emo = np.random.default_rng(stable_int(speaker + "/emo25") % 2**32).normal(0.0, 0.1, size=(MODEL_DIM,))
    return (spk + noise).astype(np.float32), emo.astype(np.float32)


def build_demo(workspace: Path, sentences: list[str], n_val: int, seed: int) -> DemoPaths:
    """Write the 2.5 demo under ``workspace/v25`` (needs nothing else of the workspace)."""
    import torch

    from networks.gpt_v25 import build_gpt_v25

    paths = DemoPaths.under(workspace)
    config = demo_config()
    save_config(config, paths.config)
    for source in (DEFAULT_TABLE, DEFAULT_TABLE.with_name(DEFAULT_TABLE.name + ".LICENSE")):
        target = paths.config.parent / source.name
        atomic_write_with(target, lambda handle, source=source: handle.write(source.read_bytes()))
    torch.manual_seed(seed)
    save_base_gpt(build_gpt_v25(config["gpt"]), paths.base_checkpoint)
    write_synthesis_kit(paths.config.parent, seed)

    def arrays(speaker: str, utt: str, sentence: str) -> dict[str, np.ndarray]:
        spk_vec, emo_vec = speaker_vectors(speaker, utt)
        return {"codes": codes_for_text(sentence).astype(np.int32), "spk_vec": spk_vec, "emo_vec": emo_vec}

    data = paths.train_manifest.parent
    utterances = write_demo_utterances(data, sentences, V25_CODES_PER_SECOND, arrays)
    write_demo_wavs(data / "wavs", utterances[:n_val])

    def row(target: dict, prompt: dict) -> dict:
        return {"prompt_spk_vec_path": f"spk_vec/{prompt['id']}.npy", "target_duration": target["duration"],
                **_audio_fields(data, prompt["id"], target["id"])}

    write_pair_manifests(paths, utterances, n_val, row)
    return paths


def _audio_fields(data: Path, prompt_id: str, target_id: str) -> dict[str, str]:
    """The audio paths of a pair whose wavs exist (the validation pairs)."""
    fields = {}
    for key, utt in (("prompt_audio_path", prompt_id), ("target_audio_path", target_id)):
        if (data / "wavs" / f"{utt}.wav").is_file():
            fields[key] = f"wavs/{utt}.wav"
    return fields


def ensure_demo(workspace: Path, sentences: list[str], n_val: int, seed: int, force: bool = False) -> DemoPaths:
    """The demo, built when ``force`` (its data rewritten) or when it is missing or cannot speak yet."""
    paths = DemoPaths.under(workspace)
    if force and paths.root.exists():
        shutil.rmtree(paths.root / "data", ignore_errors=True)
    if force or not paths.exists() or not paths.synthesis_ready():
        return build_demo(workspace, sentences, n_val, seed)
    return paths


def paths(workspace: Path) -> DemoPaths:
    return DemoPaths.under(workspace)


def project_files(demo: DemoPaths) -> DemoProject:
    """Its voice project: the demo's download folder, whose table the project's runs read (no --tokenizer file)."""
    return DemoProject(model_dir=demo.config.parent, tokenizer=None, folder=demo.root,
                       prepared=(demo.train_manifest, demo.val_manifest))


def form_files(demo: DemoPaths) -> dict[str, Path | None]:
    """The training form's files for the demo's preset: its data, table and model, and its folder for samples once
    whole."""
    return {"train_manifest": demo.train_manifest, "val_manifest": demo.val_manifest, "tokenizer": demo.tokenizer,
            "config": demo.config, "base_checkpoint": demo.base_checkpoint, "output_dir": demo.output_dir,
            "sample_model_dir": demo.config.parent if demo.synthesis_ready() else None}
