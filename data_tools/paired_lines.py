"""The lines of the manifests paired preparation writes, for every generation with a paired manifest.

- ``utterance_line``: one line of ``utterances.jsonl`` (what every generation's line has, plus its own arrays);
- ``draw_pairs``: each target with prompts of its speaker, seeded per target, and ``pair_lines``: the paired
  lines built from them (IndexTTS2's and IndexTTS-2.5's differ only in their fields);
- ``write_pairs_manifest``: ``pairs.jsonl`` written atomically, or none when there is no pair.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_tools.fileio import atomic_write_text
from data_tools.preprocess_inputs import SourceItem


def draw_pairs(utterances: Sequence[Mapping[str, Any]], pairs_per_target: int, seed: int
               ) -> tuple[list[tuple[Mapping[str, Any], Mapping[str, Any]]], list[str]]:
    """(target, prompt) in input order of targets, and the speakers with a single utterance.

    Each target's prompts are ``pairs_per_target`` (at most) distinct other utterances of its speaker, drawn
    with a generator seeded by ``seed`` and the target's id, so a target's pairs do not depend on the rest.
    Both generations pair this way (IndexTTS2's and IndexTTS-2.5's manifests differ only in the fields).
    """
    by_speaker: dict[str, list[Mapping[str, Any]]] = {}
    for utt in utterances:
        by_speaker.setdefault(utt["speaker"], []).append(utt)
    drawn = []
    for target in utterances:
        others = [u for u in by_speaker[target["speaker"]] if u["id"] != target["id"]]
        if not others:
            continue
        rng = random.Random(f"{seed}/{target['id']}")
        drawn += [(target, prompt) for prompt in rng.sample(others, min(pairs_per_target, len(others)))]
    lonely = sorted(speaker for speaker, group in by_speaker.items() if len(group) == 1)
    return drawn, lonely


def pair_lines(utterances: Sequence[Mapping[str, Any]], pairs_per_target: int, seed: int, *,
               prompt_fields: Sequence[str], target_fields: Mapping[str, str] | None = None
               ) -> tuple[list[dict[str, Any]], list[str]]:
    """Paired lines (input order of targets) and the speakers with a single utterance (no pair possible).

    Every generation's line has the same core; ``prompt_fields`` are the prompt utterance's own arrays
    (written as ``prompt_<field>``), ``target_fields`` maps extra line keys to the target utterance's fields."""
    drawn, lonely = draw_pairs(utterances, pairs_per_target, seed)
    lines = []
    for target, prompt in drawn:
        line = {"id": f"{target['id']}__{prompt['id']}", "speaker": target["speaker"],
                **({"language": target["language"]} if target["language"] else {}),
                "prompt_id": prompt["id"], "prompt_audio_path": prompt["audio_path"],
                **{f"prompt_{name}": prompt[name] for name in prompt_fields},
                "prompt_emo_vec_path": prompt["emo_vec_path"], "prompt_duration": prompt["duration"],
                "target_id": target["id"], "target_audio_path": target["audio_path"], "target_text": target["text"],
                "target_text_ids_path": target["text_ids_path"], "target_text_len": target["text_len"],
                **{key: target[name] for key, name in (target_fields or {}).items()},
                "target_codes_path": target["codes_path"], "target_code_len": target["code_len"],
                "target_emo_vec_path": target["emo_vec_path"], "target_duration": target["duration"]}
        if target.get("source"):  # the target's recording: a split keeps every clip of it on one side
            line["source"] = target["source"]
        lines.append(line)
    return lines, lonely


def utterance_line(item: SourceItem, record: Mapping[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the per-utterance manifest: what every generation's line has, the generation's ``own`` fields
    (its arrays and their lengths), and the clip's source recording when the input names one."""
    return {"id": item.id, "audio_path": str(item.audio), "text": item.text, "speaker": item.speaker,
            "language": item.language or "", "duration": round(float(record["seconds"]), 3),
            "text_ids_path": f"text_ids/{item.stem}.npy", "text_len": int(record["text_len"]), **own,
            **({"source": item.source} if item.source else {})}


def write_pairs_manifest(path: Path, pairs: Sequence[Mapping[str, Any]]) -> str:
    """Write the paired manifest atomically; with no pair, write none (and remove an earlier one): a 0-byte
    manifest is no result. Returns the path written, or "" when there was nothing to write."""
    if not pairs:
        path.unlink(missing_ok=True)
        return ""
    atomic_write_text(path, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    return str(path)
