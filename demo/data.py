"""The demo's stand-in data, shared by every generation's demo: codes made from the text, speaker-specific
prompts, stable hashing (nothing random: the workspace is the same on every machine), and the paired demos'
tiny gpt section."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from data_tools.text import normalize_text
from generations.spec import Generation

ASSETS = Path(__file__).resolve().parent / "assets"  # the demo's text (nothing here reads ../shared)
SPEAKERS = ("spk_abebe", "spk_selam", "spk_tigist")
DEMO_CODE_RANGE = 256  # the demo's "speech" only uses the first 256 codes, which keeps it learnable
CODES_PER_CHAR = 2


def demo_folder_of(generation: Generation) -> str:
    """The folder ``generation``'s demo is built in under a demo workspace: its registry entry's ``demo_folder``."""
    if generation.demo_folder is None:
        raise ValueError(f"{generation.name} has no demo folder")
    return generation.demo_folder


def stable_int(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")


def codes_for_text(text: str) -> np.ndarray:
    """Deterministic stand-in for DVAE codes: each normalised character becomes CODES_PER_CHAR codes."""
    codes: list[int] = []
    for ch in normalize_text(text, "am"):
        value = stable_int(ch)
        for k in range(CODES_PER_CHAR):
            codes.append((value >> (9 * k)) % DEMO_CODE_RANGE)
    return np.asarray(codes, dtype=np.int16)


def cond_mel_for(speaker: str, utterance: str, frames: int) -> np.ndarray:
    """A speaker-specific log-mel-like prompt: a fixed spectral envelope plus per-utterance noise."""
    envelope = np.random.default_rng(stable_int(speaker) % 2**32).normal(-4.0, 1.5, size=(100, 1))
    noise = np.random.default_rng(stable_int(utterance) % 2**32).normal(0.0, 0.3, size=(100, frames))
    return (envelope + noise).astype(np.float32)


def write_npy(path: Path, array: np.ndarray) -> None:
    # Plain writes: hundreds of small regenerable files; fsync-ing each costs seconds for no safety gained.
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, array)


def demo_train_argv(train: Path, val: Path, tokenizer: Path, config: Path, base: Path, out: Path, max_steps: int,
                    extra: tuple[str, ...] = ()) -> list[str]:
    """Trainer flags for a short demo run on CPU (both demos and the studio's demo presets use these)."""
    return [
        "--train-manifest", str(train), "--val-manifest", str(val), "--tokenizer", str(tokenizer),
        "--config", str(config), "--base-checkpoint", str(base), "--output-dir", str(out),
        "--max-steps", str(max_steps), "--batch-size", "8", "--learning-rate", "3e-3",
        "--warmup-steps", "10", "--log-interval", "5", "--val-interval", "20", "--save-interval", "20",
        "--device", "cpu", "--amp", "off", *extra,
    ]


def paired_gpt_section(model_dim: int, number_text_tokens: int, max_text_tokens: int, max_mel_tokens: int = 128,
                       latents: int = 32, **widths: int) -> dict:
    """The tiny ``gpt:`` section IndexTTS2 and 2.5 demos share (2.5 keeps IndexTTS2's gpt layout); ``widths``:
    the semantic / emotion widths that follow the demo's w2v-BERT."""
    return {
        "model_dim": model_dim, "max_mel_tokens": max_mel_tokens, "max_text_tokens": max_text_tokens, "heads": 4,
        "use_mel_codes_as_input": True, "mel_length_compression": 1024, "layers": 2,
        "number_text_tokens": number_text_tokens, "number_mel_codes": 8194, "start_mel_token": 8192,
        "stop_mel_token": 8193, "start_text_token": 0, "stop_text_token": 1, "train_solo_embeddings": False,
        "condition_num_latent": latents, "condition_type": "conformer_perceiver",
        "condition_module": {"output_size": 32, "linear_units": 64, "attention_heads": 4, "num_blocks": 1,
                             "input_layer": "conv2d2", "perceiver_mult": 2},
        "emo_condition_module": {"output_size": 32, "linear_units": 64, "attention_heads": 2, "num_blocks": 1,
                                 "input_layer": "conv2d2", "perceiver_mult": 1},
        **widths,
    }
