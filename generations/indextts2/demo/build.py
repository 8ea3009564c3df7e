"""The IndexTTS2 half of the demo workspace: a tiny v2 GPT and community-format paired data.

Written under ``<workspace>/v2/`` next to the IndexTTS-1.5 demo, sharing its tokenizers:

- ``v2/checkpoints/config.yaml`` (IndexTTS2 layout, ``version: 2.0``) and a random-init ``gpt.pth``;
- ``v2/data/{text_ids,codes,condition,emo_vec}/<id>.npy``: the community preprocessing's per-utterance
  features (int32 ids and codes, float32 ``[32, dim]`` speaker latents and ``[dim]`` emotion vector);
- ``v2/data/train_pairs.jsonl`` / ``val_pairs.jsonl``: paired manifests (the community trainer's format:
  the prompt is another utterance of the same speaker);
- ``v2/checkpoints/{w2v-bert-2.0/,wav2vec2bert_stats.pt,semantic_codec/}`` and ``v2/audio/<speaker>/*.wav + .txt``:
  tiny random audio models and synthetic speech for IndexTTS2 data preparation (``demo.feature_kit``,
  ``demo.voices``);
- the rest of an IndexTTS2 download folder in ``v2/checkpoints/`` (S2Mel, CAMPPlus, emotion matrices, BigVGAN v2;
  ``synthesis``), so ``networks.indextts2.load_indextts2(v2/checkpoints)`` loads every network
  and IndexTTS2 speaks (noise) on a CPU: samples at saves, the Test tab;
- ``v2/data/wavs/<id>.wav``: synthetic audio of the validation utterances (their prompts' voices for samples).

Codes are derived from the text as in the v1.5 demo, and each speaker has its own latents, so the loss
visibly falls within a minute of CPU training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_tools.config import save_config
from data_tools.fileio import atomic_write_with
from demo.data import (
    SPEAKERS,
    codes_for_text,
    demo_folder_of,
    demo_train_argv,
    paired_gpt_section,
    stable_int,
)
from demo.feature_kit import CODEC_SECTION, DEMO_SEMANTIC_DIM, FeatureKit, write_feature_kit
from demo.paired_paths import PairedDemoPaths, save_base_gpt, write_demo_utterances, write_pair_manifests
from demo.voices import write_demo_audio, write_demo_wavs
from generations.demo_facts import DemoProject
from generations.indextts2 import INDEXTTS2
from generations.indextts2.demo.synthesis import synthesis_sections, write_synthesis_kit

MODEL_DIM = 64
LATENTS = 32
CODES_HZ = 50
FOLDER = demo_folder_of(INDEXTTS2)  # <workspace>/FOLDER/: its registry entry's demo folder


def demo_config(number_text_tokens: int) -> dict:
    """IndexTTS2 config.yaml layout; the semantic width is the tiny demo w2v-BERT's (``gpt.semantic_dim``)."""
    gpt_widths = {"semantic_dim": DEMO_SEMANTIC_DIM, "emo_perceiver_dim": DEMO_SEMANTIC_DIM}
    return {
        "dataset": {"bpe_model": "bpe.model", "sample_rate": 24000, "squeeze": False,
                    "mel": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256, "win_length": 1024,
                            "n_mels": 100, "mel_fmin": 0, "normalize": False}},
        "gpt": paired_gpt_section(MODEL_DIM, number_text_tokens, max_text_tokens=64, latents=LATENTS,
                                  **gpt_widths),
        "semantic_codec": dict(CODEC_SECTION),
        "gpt_checkpoint": "gpt.pth",
        "w2v_stat": "wav2vec2bert_stats.pt",
        **synthesis_sections(),
        "version": 2.0,
    }


@dataclass(frozen=True)
class DemoPaths(PairedDemoPaths):
    base_tokenizer: Path
    extended_tokenizer: Path
    audio: Path  # folder of audio + .txt transcripts (speaker subfolders) for IndexTTS2 preparation
    kit: FeatureKit  # the tiny w2v-BERT folder, its stats and the semantic codec

    @classmethod
    def under(cls, workspace: Path) -> DemoPaths:
        root = Path(workspace) / FOLDER
        return cls(**cls.common(root), base_tokenizer=Path(workspace) / "checkpoints" / "bpe.model",
                   extended_tokenizer=Path(workspace) / "tokenizers" / "amharic_extended.model", audio=root / "audio",
                   kit=FeatureKit.under(root / "checkpoints"))

    def exists(self) -> bool:
        return all(p.is_file() for p in (self.config, self.base_checkpoint, self.train_manifest, self.val_manifest))

    def synthesis_ready(self) -> bool:
        """Whether ``checkpoints/`` is a whole download folder (demos from before IndexTTS2 synthesis are not)."""
        folder = self.config.parent
        return (folder / "s2mel.pth").is_file() and (folder / "bigvgan" / "config.json").is_file()

    def train_argv(self, max_steps: int = 200) -> list[str]:
        return demo_train_argv(self.train_manifest, self.val_manifest, self.extended_tokenizer, self.config,
                               self.base_checkpoint, self.output_dir, max_steps, self.sample_args())


def speaker_latents(speaker: str, utterance: str) -> tuple[np.ndarray, np.ndarray]:
    """A speaker-specific conditioning block and emotion vector, with a little per-utterance noise."""
    base = np.random.default_rng(stable_int(speaker) % 2**32).normal(0.0, 0.5, size=(LATENTS, MODEL_DIM))
    noise = np.random.default_rng(stable_int(utterance) % 2**32).normal(0.0, 0.05, size=(LATENTS, MODEL_DIM))
    emo = np.random.default_rng(stable_int(speaker + "/emo") % 2**32).normal(0.0, 0.1, size=(MODEL_DIM,))
    return (base + noise).astype(np.float32), emo.astype(np.float32)


def build_demo(workspace: Path, sentences: list[str], n_val: int, seed: int) -> DemoPaths:
    """Write the v2 demo under ``workspace/v2`` (the v1.5 demo's tokenizers must exist already)."""
    import torch  # here, not at the top: the studio page reads DemoPaths without torch

    from data_tools.text_tokenizer import TextTokenizer
    from networks import indextts2

    paths = DemoPaths.under(workspace)
    base_tokenizer = TextTokenizer(paths.base_tokenizer)
    extended = TextTokenizer(paths.extended_tokenizer)
    config = demo_config(base_tokenizer.vocab_size)
    save_config(config, paths.config)
    atomic_write_with(paths.config.parent / "bpe.model", lambda h: h.write(paths.base_tokenizer.read_bytes()))
    torch.manual_seed(seed)
    save_base_gpt(indextts2.build_gpt(config["gpt"]), paths.base_checkpoint)
    write_feature_kit(paths.config.parent, seed)
    write_synthesis_kit(paths.config.parent, MODEL_DIM, seed)
    write_demo_audio(paths.audio, sentences, SPEAKERS)

    def arrays(speaker: str, utt: str, sentence: str) -> dict[str, np.ndarray]:
        condition, emo = speaker_latents(speaker, utt)
        return {"text_ids": np.asarray(extended.encode(sentence, "am"), dtype=np.int32),
                "codes": codes_for_text(sentence).astype(np.int32), "condition": condition, "emo_vec": emo}

    data = paths.train_manifest.parent
    utterances = write_demo_utterances(data, sentences, CODES_HZ, arrays)
    write_demo_wavs(data / "wavs", utterances[:n_val])

    def row(target: dict, prompt: dict) -> dict:
        return {"prompt_audio_path": f"wavs/{prompt['id']}.wav",
                "prompt_condition_path": f"condition/{prompt['id']}.npy", "prompt_condition_len": LATENTS,
                "prompt_duration": prompt["duration"], "target_audio_path": f"wavs/{target['id']}.wav",
                "target_text_ids_path": f"text_ids/{target['id']}.npy", "target_text_len": target["text_len"],
                "target_emo_vec_path": f"emo_vec/{target['id']}.npy"}

    write_pair_manifests(paths, utterances, n_val, row)
    return paths


def ensure_demo(workspace: Path, sentences: list[str], n_val: int, seed: int, force: bool = False) -> DemoPaths:
    """The demo, built when ``force`` or when it is missing (a workspace made before the IndexTTS2 demo existed)."""
    paths = DemoPaths.under(workspace)
    return build_demo(workspace, sentences, n_val, seed) if force or not paths.exists() else paths


def paths(workspace: Path) -> DemoPaths:
    return DemoPaths.under(workspace)


def project_files(demo: DemoPaths) -> DemoProject:
    return DemoProject(model_dir=demo.config.parent, tokenizer=demo.extended_tokenizer, folder=demo.root,
                       prepared=(demo.train_manifest, demo.val_manifest))


def form_files(demo: DemoPaths) -> dict[str, Path | None]:
    """The training form's files for the demo's preset: its data and model, and its folder for samples once whole."""
    return {"train_manifest": demo.train_manifest, "val_manifest": demo.val_manifest,
            "tokenizer": demo.extended_tokenizer, "config": demo.config, "base_checkpoint": demo.base_checkpoint,
            "output_dir": demo.output_dir, "sample_model_dir": demo.config.parent if demo.synthesis_ready() else None}
