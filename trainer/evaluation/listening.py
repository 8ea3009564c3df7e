"""Listening by ear: the grid of kept clips and blind A/B choices between two models, stored with the run.

    <run>/eval/listening.jsonl   one choice per line: {"time", "first", "second", "sentence", "voice",
                                 "a", "b", "choice": "A" | "B" | "equal", "preferred": model | null}

A trial is one text in one voice from two models (two checkpoints, or a checkpoint and the base), taken from
the clips the evaluation already kept (``audio_store``): nothing is synthesised for listening. Which model
plays as A is drawn at random per trial, so the listener cannot know. Trials go through the pairs not yet
judged first. The preference rate of ``first`` over ``second`` counts an "equal" as half, with a Wilson
interval (``stats.preference_rate``). Choices are appended with one ``write`` each (O_APPEND).
"""

from __future__ import annotations

import json
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.evaluation.audio_store import clips_on_disk
from trainer.evaluation.eval_set import eval_dir
from trainer.evaluation.stats import Interval, preference_rate

CHOICES_FILE = "listening.jsonl"
CHOICES = ("A", "B", "equal")


@dataclass(frozen=True)
class Trial:
    first: str  # the pair as the listener chose it (first vs second)
    second: str
    sentence: str
    voice: str
    text: str
    a: str  # the model playing as A
    b: str
    a_path: Path
    b_path: Path


def choices_path(run_dir: Path) -> Path:
    return eval_dir(run_dir) / CHOICES_FILE


def read_choices(run_dir: Path) -> list[dict[str, Any]]:
    try:
        lines = choices_path(run_dir).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a torn last line of a crash: the others count
        if isinstance(row, dict) and row.get("choice") in CHOICES:
            found.append(row)
    return found


def _same_pair(row: dict[str, Any], first: str, second: str) -> bool:
    return {row.get("a"), row.get("b")} == {first, second}


def common_items(run_dir: Path, first: str, second: str) -> list[dict[str, Any]]:
    """The (sentence, voice) clips both models kept, in the first model's order, with both paths."""
    clips = clips_on_disk(run_dir)
    if first not in clips or second not in clips or first == second:
        return []
    other = {(c["sentence"], c["voice"]): c for c in clips[second]["clips"]}
    return [{**c, "other_path": other[(c["sentence"], c["voice"])]["path"]} for c in clips[first]["clips"]
            if (c["sentence"], c["voice"]) in other]


def next_trial(run_dir: Path, first: str, second: str) -> Trial | None:
    """A trial of ``first`` against ``second``: an item not judged yet for this pair (else any), sides at random;
    None when the two models share no clip."""
    items = common_items(run_dir, first, second)
    if not items:
        return None
    judged = {(r.get("sentence"), r.get("voice")) for r in read_choices(run_dir) if _same_pair(r, first, second)}
    fresh = [i for i in items if (i["sentence"], i["voice"]) not in judged]
    rng = random.Random()
    item = rng.choice(fresh or items)
    swap = rng.random() < 0.5
    a, b = (second, first) if swap else (first, second)
    a_path, b_path = (item["other_path"], item["path"]) if swap else (item["path"], item["other_path"])
    return Trial(first, second, item["sentence"], item["voice"], item["text"], a, b, Path(a_path), Path(b_path))


def record_choice(run_dir: Path, trial: dict[str, Any], choice: str) -> dict[str, Any]:
    """Append one choice (``trial``: the fields of a Trial as the page sent them back); the stored row."""
    if choice not in CHOICES:
        raise ValueError(f"a choice is one of {', '.join(CHOICES)}, got {choice!r}")
    known = set(clips_on_disk(run_dir))
    a, b = str(trial.get("a")), str(trial.get("b"))
    if a not in known or b not in known or a == b:
        raise ValueError(f"no kept clips of {a} and {b} in {run_dir}")
    preferred = {"A": a, "B": b}.get(choice)
    row = {"time": round(time.time(), 3), "first": str(trial.get("first") or a), "second": str(trial.get("second") or b),
           "sentence": trial.get("sentence"), "voice": trial.get("voice"), "a": a, "b": b, "choice": choice,
           "preferred": preferred}
    path = choices_path(run_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        os.write(fd, (json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))
    finally:
        os.close(fd)
    return row


def tally(run_dir: Path, first: str, second: str) -> tuple[int, int, int]:
    """(choices for ``first``, for ``second``, equal) over every stored trial of the two models."""
    wins = losses = ties = 0
    for row in read_choices(run_dir):
        if not _same_pair(row, first, second):
            continue
        if row["choice"] == "equal":
            ties += 1
        elif row.get("preferred") == first:
            wins += 1
        else:
            losses += 1
    return wins, losses, ties


def preference_line(run_dir: Path, first: str, second: str) -> str:
    """``model_step4 preferred over base: 62 % [41, 79] (8 choices: 5 for, 2 against, 1 equal)``."""
    wins, losses, ties = tally(run_dir, first, second)
    rate: Interval | None = preference_rate(wins, losses, ties)
    if rate is None:
        return f"{first} vs {second}: no choices yet"
    n = wins + losses + ties
    return (f"{first} preferred over {second}: {rate.value * 100:.0f} % [{rate.low * 100:.0f}, {rate.high * 100:.0f}] "
            f"({n} choice{'s' if n != 1 else ''}: {wins} for, {losses} against, {ties} equal)")
