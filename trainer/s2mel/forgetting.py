"""The forgetting guard of an S2Mel run: other languages' voices must not get worse (``trainer.forgetting``'s rule).

With ``--forget-margin M`` (> 0), every ``--val-manifest PATH::lang`` whose language is not the run's own (the first
``--train-manifest``'s ``::lang``) is watched: its prepared clips' S2Mel validation loss (seeded draws, train mode
with dropout off: :meth:`~trainer.s2mel.loop.S2MelTrainer.validation_loss`, which leaves every RNG as it was) is
measured at every save. The first measurement is each language's reference; a later one more than ``M`` above it
fires the guard once per language: a ``warning: forgetting ...`` line and a ``forgetting`` event in metrics.jsonl,
naming the last checkpoint from before the rise; with ``--stop-on-forgetting`` the run stops there (exit 2, one
line). The guard's state rides in the run's checkpoints (``components``), so a resumed run judges against the first
values.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.forgetting import ForgettingGuard, ForgettingStop, checkpoint_before, watched_languages
from trainer.run_options import RunOptions, as_run_options


@dataclass(frozen=True)
class WatchedSet:
    """One watched language's validation clips: its prepared folder and their stems."""

    language: str
    folder: Path
    stems: list[str]


def watched_sets(opts: RunOptions | Mapping[str, Any]) -> list[WatchedSet]:
    """The validation manifests the guard watches (ValueError naming a manifest it cannot read)."""
    opts = as_run_options(opts)
    from data_tools.manifest import parse_manifest_spec
    from trainer.s2mel.dataset import manifest_stems

    train = list(opts.train_manifest or [])
    run_language = parse_manifest_spec(train[0]).language if train else None
    specs = [parse_manifest_spec(text) for text in opts.val_manifest or []]
    watched = set(watched_languages([s.language for s in specs if s.language], run_language))
    sets = []
    for spec in specs:
        if spec.language in watched:
            folder, stems = manifest_stems(spec.path)
            sets.append(WatchedSet(str(spec.language), folder, stems))
    return sets


def new_guard(sets: Sequence[WatchedSet], margin: float) -> ForgettingGuard:
    return ForgettingGuard(sorted({s.language for s in sets}), float(margin))


def watch(trainer: Any, guard: ForgettingGuard, clips: Mapping[str, Any], *, stop: bool) -> list[str]:
    """Measure every watched language now and judge it; the lines to print. Raises ForgettingStop (``stop``)."""
    losses = {language: trainer.validation_loss(language_clips) for language, language_clips in clips.items()}
    step = trainer.step_count
    alarms = guard.observe(step, losses)
    lines = [f"forgetting guard at step {step}: " + ", ".join(f"{k} {v:.5f}" for k, v in sorted(losses.items()))]
    metrics = Path(trainer.output_dir) / "metrics.jsonl"
    with open(metrics if trainer.is_main else os.devnull, "a", encoding="utf-8") as handle:  # rank 0 writes
        handle.write(json.dumps({"part": "s2mel", "event": "validation", "step": step, "languages": losses}) + "\n")
        if alarms:
            trainer.writer.wait()  # the checkpoint the alarm names is on disk
        for alarm in alarms:
            before = checkpoint_before(Path(trainer.output_dir), alarm.last_good_step)
            line = alarm.describe(before)
            handle.write(json.dumps({"part": "s2mel", "event": "forgetting", "step": step, "language": alarm.language,
                                     "first": alarm.first, "now": alarm.now, "checkpoint": before}) + "\n")
            lines.append(f"warning: {line}")
            if stop:
                handle.flush()
                raise ForgettingStop(f"{line} (--stop-on-forgetting)")
    return lines
