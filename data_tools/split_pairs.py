"""Splitting an IndexTTS2 / IndexTTS-2.5 paired manifest by target utterance, leak-free.

No utterance is a target in train and a prompt or target in val: a val pair whose prompt is a train target gets
another prompt of its speaker that is not (one whose prompt features the manifest has); when there is none the
pair is left out, and the notes say how many. ``data_tools.split`` writes the rows this chooses.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass
from pathlib import Path

from data_tools.manifest import ManifestError, load_json_object
from data_tools.pair_fields import PairLine
from data_tools.split_plan import SplitError, SplitItem, SplitPlan, plan_split, recording_source
from generations.format_facts import ManifestFormat
from generations.spec import resolved


@dataclass
class PairSplit:
    """The rows of each side (as the manifest has them), the plan over the targets, and what to tell the user."""

    train_rows: list[dict]
    val_rows: list[dict]
    plan: SplitPlan
    notes: list[str]
    val_speakers: int


PROMPT_FIELDS = ("prompt_id", "prompt_audio_path", "prompt_condition_path", "prompt_condition_len",
                 "prompt_emo_vec_path", "prompt_duration", "prompt_spk_vec_path")


def _read_pairs(manifest: Path, fmt: ManifestFormat) -> tuple[list[PairLine], list[dict]]:
    from data_tools.manifest import iter_lines

    parse = resolved(fmt.parse_object)
    entries: list[PairLine] = []
    objects: list[dict] = []
    try:
        for lineno, raw in iter_lines(manifest):
            if isinstance(raw, ManifestError):
                raise raw
            obj = load_json_object(raw, manifest, lineno)
            entries.append(parse(obj, manifest, lineno))
            objects.append(obj)
    except ManifestError as exc:
        raise SplitError(str(exc)) from None
    if not entries:
        raise SplitError(f"{manifest}: manifest has no entries")
    return entries, objects


def _utterance(entry: PairLine, role: str) -> str:
    """A pair's target or prompt utterance (its id, else its feature file)."""
    if role == "target":
        return entry.target_id or os.path.normpath(entry.target_features)
    return entry.prompt_id or os.path.normpath(entry.prompt_features)


def split_pairs(manifest: Path, val_fraction: float, seed: int, held_out_speakers: int, fmt: ManifestFormat,
                by_speaker: bool = False) -> PairSplit:
    """Choose each side's pairs (SplitError on bad input); nothing is written."""
    entries, objects = _read_pairs(manifest, fmt)
    targets: dict[str, int] = {}  # target utterance -> its first pair
    for i, entry in enumerate(entries):
        targets.setdefault(_utterance(entry, "target"), i)
    names = list(targets)
    items = [SplitItem(name, entries[i].target_text or name, entries[i].speaker, os.path.normpath(entries[i].codes),
                       entries[i].language, recording_source(objects[i])) for name, i in targets.items()]
    plan = plan_split(items, val_fraction, seed, held_out_speakers, by_speaker)
    val_targets = {names[k] for k in plan.val}
    train_rows = [i for i, e in enumerate(entries) if _utterance(e, "target") not in val_targets]
    trained = {_utterance(entries[i], "target") for i in train_rows}
    prompt_source: dict[str, int] = {}  # prompt utterance -> a pair that has its prompt features
    for i, entry in enumerate(entries):
        prompt_source.setdefault(_utterance(entry, "prompt"), i)
    val_objects: list[dict] = []
    reprompted = dropped = 0
    used = {(_utterance(e, "target"), _utterance(e, "prompt")) for e in entries}
    for i, entry in enumerate(entries):
        target = _utterance(entry, "target")
        if target not in val_targets:
            continue
        obj = objects[i]
        if _utterance(entry, "prompt") in trained:
            choices = sorted(u for u, j in prompt_source.items()
                             if u not in trained and u != target and entries[j].speaker == entry.speaker
                             and (target, u) not in used)
            if not choices:
                dropped += 1
                continue
            chosen = random.Random(f"{seed}:{entry.id}").choice(choices)
            used.add((target, chosen))
            donor = objects[prompt_source[chosen]]
            obj = {k: v for k, v in obj.items() if k not in PROMPT_FIELDS}
            obj.update({k: donor[k] for k in PROMPT_FIELDS if k in donor})
            obj["id"] = f"{target}__{donor.get('prompt_id', 'prompt')}"
            reprompted += 1
        val_objects.append(obj)
    notes = []
    if reprompted:
        notes.append(f"{reprompted} val pair(s) got another prompt of their speaker (theirs is a train target)")
    if dropped:
        notes.append(f"{dropped} val pair(s) left out: no prompt of their speaker outside the train targets")
    if val_fraction > 0 and not val_objects:
        notes.append("val is empty: every target is needed in train to keep its speaker seen")
    val_speakers = {obj.get("speaker") for obj in val_objects if obj.get("speaker") is not None}
    return PairSplit([objects[i] for i in train_rows], val_objects, plan, notes, len(val_speakers))
