"""The IndexTTS-1.5 demo: the workspace's own ``checkpoints/``, ``tokenizers/`` and ``data/``.

- ``checkpoints/config.yaml``: a tiny IndexTTS-1.5 config (same layout as the real one);
- ``checkpoints/gpt.pth``: a random-init base GPT in the real state-dict layout (``{"model": ...}``);
- ``checkpoints/bpe.model``: a base BPE tokenizer trained on English (the stand-in for IndexTTS's own);
- ``checkpoints/dvae.pth``: a random-init tiny DVAE, so audio preprocessing can be tried too;
- ``checkpoints/bigvgan_generator.pth``: a tiny random BigVGAN, so samples at saves speak (noise);
- ``tokenizers/amharic_extended.model``: the base tokenizer extended with Amharic pieces (the IndexTTS2 demo
  trains with these tokenizers too: it is built after this one);
- ``data/{train,val}.jsonl`` with ``codes/`` and ``cond_mels/``: real Amharic sentences whose codes are made
  deterministically from the text, so the loss visibly falls within a minute of CPU training.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from data_tools.config import save_config
from data_tools.fileio import atomic_write_text, atomic_write_with
from data_tools.shape_rules import V1_SAMPLES_PER_CODE
from demo.data import ASSETS, SPEAKERS, codes_for_text, cond_mel_for, demo_train_argv, stable_int, write_npy
from generations.demo_facts import DemoProject
from trainer.synthesis.demo_vocoder import DEMO_VOCODER_FILE, demo_bigvgan_config, write_demo_vocoder

BASE_VOCAB = 1000
AMHARIC_PIECES = 800


def demo_config(number_text_tokens: int) -> dict:
    """The demo's config.yaml: IndexTTS-1.5 layout at a size that trains on a laptop CPU."""
    return {
        "dataset": {
            "bpe_model": "bpe.model",
            "sample_rate": 24000,
            "squeeze": False,
            "mel": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256, "win_length": 1024,
                    "n_mels": 100, "mel_fmin": 0, "normalize": False},
        },
        "gpt": {
            "model_dim": 64,
            "max_mel_tokens": 128,
            "max_text_tokens": 64,
            "heads": 4,
            "use_mel_codes_as_input": True,
            "mel_length_compression": V1_SAMPLES_PER_CODE,
            "layers": 2,
            "number_text_tokens": number_text_tokens,
            "number_mel_codes": 8194,
            "start_mel_token": 8192,
            "stop_mel_token": 8193,
            "start_text_token": 0,
            "stop_text_token": 1,
            "train_solo_embeddings": False,
            "condition_num_latent": 8,
            "condition_type": "conformer_perceiver",
            "condition_module": {"output_size": 32, "linear_units": 64, "attention_heads": 4,
                                 "num_blocks": 1, "input_layer": "conv2d2", "perceiver_mult": 2},
        },
        "vqvae": {"channels": 100, "num_tokens": 256, "hidden_dim": 32, "num_resnet_blocks": 1,
                  "codebook_dim": 16, "num_layers": 2, "positional_dims": 1, "kernel_size": 3,
                  "smooth_l1_loss": True, "use_transposed_convs": False},
        "bigvgan": demo_bigvgan_config(64),
        "dvae_checkpoint": "dvae.pth",
        "gpt_checkpoint": "gpt.pth",
        "bigvgan_checkpoint": DEMO_VOCODER_FILE,
        "version": 1.5,
    }


@dataclass(frozen=True)
class DemoPaths:
    root: Path
    config: Path
    base_checkpoint: Path
    base_tokenizer: Path
    extended_tokenizer: Path
    dvae: Path
    vocoder: Path
    train_manifest: Path
    val_manifest: Path
    output_dir: Path

    @classmethod
    def under(cls, root: Path) -> DemoPaths:
        root = Path(root)
        ckpt = root / "checkpoints"
        return cls(
            root=root,
            config=ckpt / "config.yaml",
            base_checkpoint=ckpt / "gpt.pth",
            base_tokenizer=ckpt / "bpe.model",
            extended_tokenizer=root / "tokenizers" / "amharic_extended.model",
            dvae=ckpt / "dvae.pth",
            vocoder=ckpt / DEMO_VOCODER_FILE,
            train_manifest=root / "data" / "train.jsonl",
            val_manifest=root / "data" / "val.jsonl",
            output_dir=root / "runs" / "demo",
        )

    def exists(self) -> bool:
        return all(p.is_file() for p in (self.config, self.base_checkpoint, self.base_tokenizer, self.vocoder,
                                         self.extended_tokenizer, self.train_manifest, self.val_manifest))

    def train_argv(self, max_steps: int = 200) -> list[str]:
        """Trainer flags for a short demo run (the quick start and the UI's demo preset use these)."""
        return demo_train_argv(self.train_manifest, self.val_manifest, self.extended_tokenizer, self.config,
                               self.base_checkpoint, self.output_dir, max_steps, ("--vocoder", str(self.vocoder)))


def _write_data(paths: DemoPaths, sentences: list[str], n_val: int) -> None:
    data = paths.train_manifest.parent
    lines: list[str] = []
    for index, sentence in enumerate(sentences):
        speaker = SPEAKERS[index % len(SPEAKERS)]
        utt_id = f"{speaker}_{index:04d}"
        codes = codes_for_text(sentence)
        # The prompt is another utterance of the same speaker, as preprocessing does, to avoid prompt bleed.
        prompt_id = f"{speaker}_{(index + len(SPEAKERS)) % len(sentences):04d}"
        frames = 48 + stable_int(prompt_id) % 40
        write_npy(data / "codes" / f"{utt_id}.npy", codes)
        write_npy(data / "cond_mels" / f"{utt_id}.npy", cond_mel_for(speaker, prompt_id, frames))
        duration = round(len(codes) * V1_SAMPLES_PER_CODE / 24000, 3)
        lines.append(json.dumps({
            "id": utt_id, "text": sentence, "codes": f"codes/{utt_id}.npy",
            "cond_mel": f"cond_mels/{utt_id}.npy", "speaker": speaker, "language": "am", "duration": duration,
        }, ensure_ascii=False))
    atomic_write_text(paths.val_manifest, "\n".join(lines[:n_val]) + "\n")
    atomic_write_text(paths.train_manifest, "\n".join(lines[n_val:]) + "\n")


def _write_tokenizers(paths: DemoPaths, scratch: Path) -> None:
    from data_tools.tokenizer import extend_tokenizer, train_tokenizer

    base = train_tokenizer([ASSETS / "english_corpus.txt"], scratch / "base", vocab_size=BASE_VOCAB,
                           model_type="bpe", language="en")
    paths.base_tokenizer.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(paths.base_tokenizer, lambda handle: handle.write(Path(base).read_bytes()))
    amharic = train_tokenizer([ASSETS / "amharic_corpus.txt", ASSETS / "amharic_sentences.txt"],
                              scratch / "amharic", vocab_size=AMHARIC_PIECES, model_type="bpe", language="am")
    extend_tokenizer(paths.base_tokenizer, Path(amharic), paths.extended_tokenizer, target_size=None)


def _write_models(paths: DemoPaths, config: dict, seed: int) -> None:
    import torch

    from networks import indextts15

    torch.manual_seed(seed)
    model = indextts15.build_gpt(config["gpt"])
    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    atomic_write_with(paths.base_checkpoint, lambda handle: torch.save({"model": state}, handle))
    write_demo_vocoder(paths.vocoder, config["bigvgan"], seed)
    torch.manual_seed(seed)
    dvae = indextts15.build_dvae(config)
    dvae_state = {key: value.detach().clone() for key, value in dvae.state_dict().items()}
    atomic_write_with(paths.dvae, lambda handle: torch.save({"model": dvae_state}, handle))


def build_demo(workspace: Path, sentences: list[str], n_val: int, seed: int) -> DemoPaths:
    """Write the IndexTTS-1.5 demo (and the workspace's tokenizers) under ``workspace``."""
    import tempfile

    from data_tools.text_tokenizer import TextTokenizer

    paths = DemoPaths.under(Path(workspace))
    with tempfile.TemporaryDirectory(prefix="demo-tok-") as scratch:
        _write_tokenizers(paths, Path(scratch))
    config = demo_config(TextTokenizer(paths.base_tokenizer).vocab_size)
    save_config(config, paths.config)
    _write_models(paths, config, seed)
    _write_data(paths, sentences, n_val)
    return paths


def ensure_demo(workspace: Path, sentences: list[str], n_val: int, seed: int, force: bool = False) -> DemoPaths:
    """The demo, built when ``force`` or when any of its files is missing."""
    paths = DemoPaths.under(Path(workspace))
    return build_demo(workspace, sentences, n_val, seed) if force or not paths.exists() else paths


def paths(workspace: Path) -> DemoPaths:
    return DemoPaths.under(workspace)


def project_files(demo: DemoPaths) -> DemoProject:
    return DemoProject(model_dir=demo.config.parent.resolve(), tokenizer=demo.extended_tokenizer.resolve(),
                       folder=demo.root, prepared=(demo.train_manifest.resolve(), demo.val_manifest.resolve()))
