"""Builds small IndexTTS2 paired datasets on disk (the community layout: features under one root)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

DIM = 16
VOCAB = 100


class PairsBuilder:
    """Utterances with features; ``pair`` writes a paired line, ``write`` the manifest in the root."""

    def __init__(self, root: Path, dim: int = DIM, seed: int = 0) -> None:
        self.root = root
        self.dim = dim
        self.rng = np.random.default_rng(seed)
        self.lines: list[str] = []
        for folder in ("codes", "condition", "emo_vec", "text_ids"):
            (root / folder).mkdir(parents=True, exist_ok=True)

    def utterance(self, uid: str, text_len: int = 8, code_len: int = 20, *, codes: np.ndarray | None = None,
                  text_ids: np.ndarray | None = None, condition: np.ndarray | None = None,
                  emo_vec: np.ndarray | None = None) -> str:
        np.save(self.root / "text_ids" / f"{uid}.npy",
                self.rng.integers(2, VOCAB, text_len).astype(np.int32) if text_ids is None else text_ids)
        np.save(self.root / "codes" / f"{uid}.npy",
                self.rng.integers(0, 8192, code_len).astype(np.int32) if codes is None else codes)
        np.save(self.root / "condition" / f"{uid}.npy",
                self.rng.standard_normal((32, self.dim)).astype(np.float32) if condition is None else condition)
        np.save(self.root / "emo_vec" / f"{uid}.npy",
                self.rng.standard_normal(self.dim).astype(np.float32) if emo_vec is None else emo_vec)
        return uid

    def pair_object(self, target: str, prompt: str, speaker: str = "spk1", **extra: object) -> dict:
        text_len = int(np.load(self.root / "text_ids" / f"{target}.npy").shape[0])
        code_len = int(np.load(self.root / "codes" / f"{target}.npy").shape[0])
        obj = {
            "id": f"{target}__{prompt}", "speaker": speaker, "prompt_id": prompt,
            "prompt_audio_path": f"wavs/{prompt}.wav", "prompt_condition_path": f"condition/{prompt}.npy",
            "prompt_condition_len": 32, "prompt_emo_vec_path": f"emo_vec/{prompt}.npy", "prompt_duration": 1.0,
            "target_id": target, "target_audio_path": f"wavs/{target}.wav", "target_text": f"text of {target}",
            "target_text_ids_path": f"text_ids/{target}.npy", "target_text_len": text_len,
            "target_codes_path": f"codes/{target}.npy", "target_code_len": code_len,
            "target_emo_vec_path": f"emo_vec/{target}.npy",
        }
        obj.update(extra)
        return {k: v for k, v in obj.items() if v is not None}

    def pair(self, target: str, prompt: str, speaker: str = "spk1", **extra: object) -> int:
        self.lines.append(json.dumps(self.pair_object(target, prompt, speaker, **extra), ensure_ascii=False))
        return len(self.lines)

    def write(self, name: str = "pairs.jsonl") -> Path:
        path = self.root / name
        path.write_text("".join(line + "\n" for line in self.lines), encoding="utf-8")
        return path


class FakeTokenizer:
    """What the trainer's v2 loading needs of a tokenizer: its size (and an unknown id)."""

    def __init__(self, vocab_size: int = VOCAB, unk_id: int = -1) -> None:
        self.vocab_size = vocab_size
        self.unk_id = unk_id


def gpt_config(dim: int = DIM, max_text_tokens: int = 32, max_mel_tokens: int = 48) -> dict:
    return {"model_dim": dim, "max_text_tokens": max_text_tokens, "max_mel_tokens": max_mel_tokens,
            "number_text_tokens": VOCAB, "start_mel_token": 8192, "stop_mel_token": 8193,
            "number_mel_codes": 8194, "start_text_token": 0, "stop_text_token": 1, "condition_num_latent": 32}


def write_config(path: Path, dim: int = DIM, max_text_tokens: int = 32, max_mel_tokens: int = 48) -> Path:
    import yaml

    gpt = dict(gpt_config(dim, max_text_tokens, max_mel_tokens), layers=1, heads=2, condition_module={})
    path.write_text(yaml.safe_dump({"gpt": gpt}), encoding="utf-8")
    return path
