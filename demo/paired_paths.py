"""What the paired generations' demos (IndexTTS2, IndexTTS-2.5) share: where a demo keeps its files under
``<workspace>/<folder>/``, its random-init base GPT, its per-utterance arrays, and how its utterances become
the val and train pair manifests."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.fileio import atomic_write_text, atomic_write_with
from demo.data import SPEAKERS, write_npy


@dataclass(frozen=True)
class PairedDemoPaths:
    """The files every paired demo has; a generation's subclass adds its own and says when it can synthesise."""

    root: Path  # <workspace>/<folder>
    config: Path
    base_checkpoint: Path
    train_manifest: Path
    val_manifest: Path
    output_dir: Path

    @staticmethod
    def common(root: Path) -> dict[str, Path]:
        """The shared fields' values for a demo at ``root`` (keyword arguments of the subclass)."""
        return {"root": root, "config": root / "checkpoints" / "config.yaml",
                "base_checkpoint": root / "checkpoints" / "gpt.pth", "train_manifest": root / "data" / "train_pairs.jsonl",
                "val_manifest": root / "data" / "val_pairs.jsonl", "output_dir": root / "runs" / "demo"}

    def synthesis_ready(self) -> bool:
        raise NotImplementedError

    def sample_args(self) -> tuple[str, ...]:
        """Samples at every save through the demo's own download folder, once it is a whole one."""
        return ("--sample-model-dir", str(self.config.parent)) if self.synthesis_ready() else ()


def pair_core(target: dict, prompt: dict) -> dict:
    """The fields every paired demo line has: the pair, the language, the target's text and codes, the
    prompt's emotion vector."""
    return {"id": f"{target['id']}__{prompt['id']}", "speaker": target["speaker"], "language": "am",
            "prompt_id": prompt["id"], "prompt_emo_vec_path": f"emo_vec/{prompt['id']}.npy",
            "target_id": target["id"], "target_text": target["text"],
            "target_codes_path": f"codes/{target['id']}.npy", "target_code_len": target["code_len"]}


def write_pair_manifests(paths: PairedDemoPaths, utterances: list[dict], n_val: int,
                         row: Callable[[dict, dict], dict]) -> None:
    """The first ``n_val`` utterances are validation, the rest training; each target is paired with another
    utterance of its speaker in the same split (in turn); its manifest line is ``pair_core`` and the
    generation's own fields, ``row(target, prompt)``."""
    val_ids = {u["id"] for u in utterances[:n_val]}

    def pairs(group: list[dict]) -> str:
        lines = []
        for i, target in enumerate(group):
            same = [u for u in group if u["speaker"] == target["speaker"] and u["id"] != target["id"]]
            prompt = same[i % len(same)]
            lines.append(json.dumps({**pair_core(target, prompt), **row(target, prompt)}, ensure_ascii=False))
        return "\n".join(lines) + "\n"

    atomic_write_text(paths.val_manifest, pairs([u for u in utterances if u["id"] in val_ids]))
    atomic_write_text(paths.train_manifest, pairs([u for u in utterances if u["id"] not in val_ids]))


def save_base_gpt(model: Any, path: Path) -> None:
    """A freshly built GPT's weights as ``{"model": state}``, the base checkpoint the demo trains from."""
    import torch

    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    atomic_write_with(path, lambda handle: torch.save({"model": state}, handle))


def write_demo_utterances(data: Path, sentences: Sequence[str], codes_per_second: float,
                          arrays: Callable[[str, str, str], dict[str, np.ndarray]]) -> list[dict]:
    """One utterance per sentence, speakers in turn: ``arrays(speaker, utterance id, sentence)`` gives its
    ``{folder: array}`` (``codes`` among them, ``text_ids`` when the generation stores ids), written as
    ``data/<folder>/<id>.npy``. Returns the utterances as ``write_pair_manifests`` reads them."""
    utterances = []
    for index, sentence in enumerate(sentences):
        speaker = SPEAKERS[index % len(SPEAKERS)]
        utt = f"{speaker}_{index:04d}"
        files = arrays(speaker, utt, sentence)
        for folder, array in files.items():
            write_npy(data / folder / f"{utt}.npy", array)
        codes = int(files["codes"].size)
        utterances.append({"id": utt, "speaker": speaker, "text": sentence, "code_len": codes,
                           "duration": round(codes / codes_per_second, 3),
                           **({"text_len": int(files["text_ids"].size)} if "text_ids" in files else {})})
    return utterances
