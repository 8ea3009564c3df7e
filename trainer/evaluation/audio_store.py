"""The evaluation's clips on disk, for the listening page: nothing heard there is synthesised twice.

    <run>/eval/audio/<model>/index.json          [{"sentence", "voice", "language", "text", "seed", "file"}, ...]
    <run>/eval/audio/<model>/<voice>__<sentence>.wav

``<model>`` is ``base`` or ``model_step<N>``. Only the first seed's clips are kept (one clip per text and
voice is what a listener compares; the other seeds only feed the scores). Each file and the index are written
to a temp name and renamed, the index last: a listed clip is a whole file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.fileio import atomic_write_text
from trainer.evaluation.eval_set import EvalSet, Sentence, eval_dir

AUDIO_DIR = "audio"
INDEX_FILE = "index.json"


def audio_dir(run_dir: Path) -> Path:
    return eval_dir(run_dir) / AUDIO_DIR


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in str(name))[:60] or "x"


def save_clips(run_dir: Path, model: str, eval_set: EvalSet, groups: Sequence[tuple[str | None, list[Sentence]]],
               clips: Sequence[Sequence[Sequence[np.ndarray]]], sample_rate: int) -> Path:
    """Write ``clips`` ([group][voice][sentence], the first seed's) of ``model``; the folder."""
    import soundfile

    folder = audio_dir(run_dir) / _safe(model)
    folder.mkdir(parents=True, exist_ok=True)
    seed = eval_set.all_seeds[0]
    index: list[dict[str, Any]] = []
    for (language, sentences), group in zip(groups, clips):
        for voice, voice_clips in zip(eval_set.voices, group):
            for sentence, clip in zip(sentences, voice_clips):
                name = f"{_safe(voice.id)}__{_safe(sentence.id)}.wav"
                temp = folder / f".{name}.tmp"
                soundfile.write(temp, np.clip(np.asarray(clip, dtype=np.float32), -1.0, 1.0), sample_rate,
                                subtype="PCM_16", format="WAV")
                os.replace(temp, folder / name)
                index.append({"sentence": sentence.id, "voice": voice.id, "language": language,
                              "text": sentence.text, "seed": seed, "file": name})
    atomic_write_text(folder / INDEX_FILE, json.dumps({"eval_set": eval_set.fingerprint, "clips": index},
                                                      indent=1, ensure_ascii=False) + "\n")
    return folder


def clips_on_disk(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Every model's kept clips: {model: {"eval_set": fingerprint, "clips": [{..., "path": Path}]}}, base first,
    then by step."""
    from trainer.checkpoints.store import step_of

    found: dict[str, dict[str, Any]] = {}
    root = audio_dir(run_dir)
    if not root.is_dir():
        return found
    for folder in root.iterdir():
        try:
            data = json.loads((folder / INDEX_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        clips = [{**c, "path": folder / c["file"]} for c in data.get("clips") or []
                 if isinstance(c, dict) and isinstance(c.get("file"), str) and (folder / c["file"]).is_file()]
        if clips:
            found[folder.name] = {"eval_set": data.get("eval_set"), "clips": clips}

    def order(name: str) -> tuple[int, int]:
        step = step_of(name + ".pth")
        return (0, 0) if name == "base" else (1, step if step is not None else 1 << 60)

    return {name: found[name] for name in sorted(found, key=order)}
