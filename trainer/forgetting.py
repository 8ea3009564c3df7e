"""The forgetting guard: a replayed language's validation loss must not rise too far (issue 23 item 6).

With ``--forget-margin M`` (> 0) and validation manifests that name languages (``PATH::lang``), the guard
watches the validation loss of every such language but the run's own (the first ``--train-manifest``'s
``::lang``; with none, every validated language). The first validation sets each language's reference; when a
later one is more than ``M`` (absolute, in loss units) above it, the guard fires once per language: a
``warning: forgetting ...`` line and a ``forgetting`` event in metrics.jsonl, naming the last checkpoint saved
at or before the newest validation where every watched language was still within the margin. With
``--stop-on-forgetting`` the run then stops: exit 2 with one ``error:`` line naming that checkpoint (as the
non-finite-loss guard does: the run did not finish what it was asked, and the line says what to use instead).

Its state (references, the last good validation step, the languages that fired) is a checkpoint component
(``extra["state"]["forgetting guard"]``), so a resumed run keeps judging against the first values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

COMPONENT = "forgetting guard"
STEP_FILE = re.compile(r"^model_step(\d+)\.pth$")


class ForgettingStop(Exception):
    """--stop-on-forgetting and the guard fired: exit 2, the line names the checkpoint from before the rise."""


@dataclass
class Alarm:
    language: str
    first: float
    now: float
    margin: float
    step: int
    last_good_step: int | None

    def describe(self, checkpoint: str) -> str:
        return (f"forgetting {self.language}: validation loss {self.now:.4f} at step {self.step} is "
                f"{self.now - self.first:.4f} above its first value {self.first:.4f} (--forget-margin "
                f"{self.margin:g}); last checkpoint before the rise: {checkpoint}")


@dataclass
class ForgettingGuard:
    watched: list[str]
    margin: float
    name: str = COMPONENT
    core: bool = False
    first: dict[str, float] = field(default_factory=dict)
    fired: list[str] = field(default_factory=list)
    last_good_step: int | None = None  # newest validation step with every watched language within the margin

    def observe(self, step: int, losses: Mapping[str, float]) -> list[Alarm]:
        """Judge one validation's per-language losses; the alarms raised now (each language fires once)."""
        alarms = []
        rising = False
        for language in self.watched:
            loss = losses.get(language)
            if loss is None or loss != loss:  # not validated this time, or NaN (the non-finite guard's job)
                continue
            first = self.first.setdefault(language, float(loss))
            if loss - first > self.margin:
                rising = True
                if language not in self.fired:
                    self.fired.append(language)
                    alarms.append(Alarm(language, first, float(loss), self.margin, step, self.last_good_step))
        if not rising:
            self.last_good_step = step
        return alarms

    def state_dict(self) -> dict[str, Any]:
        return {"first": dict(self.first), "fired": list(self.fired), "last_good_step": self.last_good_step}

    def load_state_dict(self, saved: dict[str, Any], notes: list[str]) -> None:
        self.first = {str(k): float(v) for k, v in (saved.get("first") or {}).items()}
        self.fired = [str(language) for language in saved.get("fired") or []]
        self.last_good_step = saved.get("last_good_step")
        notes.append("forgetting guard (first losses of " + (", ".join(sorted(self.first)) or "none yet") + ")")


def watched_languages(val_languages: Iterable[str], run_language: str | None) -> list[str]:
    return sorted(language for language in val_languages if language != run_language)


def checkpoint_before(out_dir: Path, step: int | None) -> str:
    """The newest ``model_step<N>.pth`` kept in ``out_dir`` with ``N <= step`` (a sentence when there is none)."""
    if step is None:
        return "none (the rise came at the first validations)"
    steps = sorted(int(m.group(1)) for p in out_dir.glob("model_step*.pth") if (m := STEP_FILE.match(p.name)))
    kept = [s for s in steps if s <= step]
    if not kept:
        return f"none kept from step {step} or before (raise --keep-checkpoints)"
    return str(out_dir / f"model_step{kept[-1]}.pth")
