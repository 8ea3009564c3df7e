"""The training samples of a run: the ``sample`` events of ``<output-dir>/metrics.jsonl``, without Gradio.

The trainer speaks a few wavs at each save and records them as a ``sample`` event (``trainer.samples``).
:class:`SampleEvents` reads those events incrementally, newest step first; :func:`samples_gallery` turns
them into the players of one save. The Training tab's panel (``webui.training.samples_view``) only lays them out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webui.testing.listen import one_line

METRICS_FILE = "metrics.jsonl"


@dataclass(frozen=True)
class SampleFile:
    path: Path
    name: str
    audio_seconds: float | None
    hit_stop: bool | None


@dataclass(frozen=True)
class SampleSave:
    """One ``sample`` event: the wavs spoken at a save (or the error that stopped them)."""

    step: int
    files: tuple[SampleFile, ...] = ()
    error: str | None = None
    seconds: float | None = None


def _sample_save(event: Mapping[str, Any], output_dir: Path) -> SampleSave | None:
    step = event.get("step")
    if not isinstance(step, int) or isinstance(step, bool):
        return None
    files = []
    for item in event.get("files") or []:
        if not isinstance(item, Mapping) or not str(item.get("path") or "").strip():
            continue
        path = Path(str(item["path"]))
        if not path.is_absolute():
            path = output_dir / path
        seconds = item.get("audio_seconds")
        files.append(SampleFile(path, str(item.get("name") or path.stem),
                                float(seconds) if isinstance(seconds, (int, float)) else None,
                                item.get("hit_stop") if isinstance(item.get("hit_stop"), bool) else None))
    error = event.get("error")
    seconds = event.get("seconds")
    return SampleSave(step, tuple(files), one_line(error) if error else None,
                      float(seconds) if isinstance(seconds, (int, float)) else None)


class SampleEvents:
    """The ``sample`` events of ``<output-dir>/metrics.jsonl``, read incrementally (bounded work per refresh).

    A resumed run may save the same step twice: the later event wins. A replaced file is read anew.
    """

    def __init__(self, output_dir: Path | str) -> None:
        self.output_dir = Path(output_dir)
        self.path = self.output_dir / METRICS_FILE
        self._reset()

    def _reset(self) -> None:
        self.offset = 0
        self.identity: tuple[int, int] | None = None
        self.saves: dict[int, SampleSave] = {}

    def refresh(self) -> list[SampleSave]:
        """Read what was appended since the last call; returns every save, newest step first."""
        try:
            info = self.path.stat()
        except OSError:
            self._reset()
            return []
        identity = (info.st_dev, info.st_ino)
        if identity != self.identity or info.st_size < self.offset:
            self._reset()
            self.identity = identity
        if info.st_size > self.offset:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                chunk = handle.read(info.st_size - self.offset)
            end = chunk.rfind(b"\n") + 1  # a line still being written is read next time
            self.offset += end
            for raw in chunk[:end].splitlines():
                if b'"sample"' not in raw:
                    continue
                try:
                    event = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue
                if isinstance(event, dict) and event.get("event") == "sample":
                    save = _sample_save(event, self.output_dir)
                    if save is not None:
                        self.saves[save.step] = save
        return [self.saves[step] for step in sorted(self.saves, reverse=True)]


@dataclass
class Gallery:
    """What the samples view shows for one save."""

    steps: list[int]  # every step with a sample event, newest first
    step: int | None  # the one shown
    players: list[tuple[str, Path]] = field(default_factory=list)  # (label, wav) of the files on disk
    note: str = ""  # missing files, an error, or why there is nothing


def samples_gallery(saves: Sequence[SampleSave], step: int | None = None) -> Gallery:
    """The players for ``step`` (None: the newest save); missing files are skipped and named in the note."""
    steps = [save.step for save in saves]
    if not saves:
        return Gallery([], None, note="no samples yet: they are spoken at each save when the run has a --vocoder "
                                               "(IndexTTS-1.5) or a --sample-model-dir (IndexTTS2)")
    chosen = next((save for save in saves if save.step == step), saves[0])
    if chosen.error:
        return Gallery(steps, chosen.step, note=f"samples at step {chosen.step} failed: {chosen.error}")
    players, missing = [], []
    for item in chosen.files:
        if item.path.is_file():
            length = f", {item.audio_seconds:.2f} s" if item.audio_seconds is not None else ""
            cut = ", no stop code" if item.hit_stop is False else ""
            players.append((f"step {chosen.step} · {item.name}{length}{cut}", item.path))
        else:
            missing.append(item.path.name)
    note = f"step {chosen.step}: {len(players)} sample(s)"
    if missing:
        note += f"; {len(missing)} file(s) missing, skipped: {', '.join(missing)}"
    return Gallery(steps, chosen.step, players, note)
