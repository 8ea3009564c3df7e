"""What an ingest run is given (``IngestSettings``), what it reports (``IngestSummary``) and how it refuses
(``IngestError``); ``data_tools.ingest.pipeline`` runs it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_tools.ingest.gates import GateSettings
from data_tools.ingest.slicing import SliceSettings

FORMAT = 1
Progress = Callable[[int, int], None]


class IngestError(ValueError):
    """The run cannot go on (bad settings, another run's folder, a full disk): one line."""


@dataclass(frozen=True)
class IngestSettings:
    input: Path | None
    out_dir: Path
    language: str | None = None
    speaker: str | None = None
    speaker_level: int = 1
    speaker_column: int | None = None
    slicing: SliceSettings = field(default_factory=SliceSettings)
    gates: GateSettings = field(default_factory=GateSettings)
    target_lufs: float | None = -20.0
    subtitle_encoding: str | None = None
    asr_model: str | None = None
    asr_language: str | None = None
    device: str = "auto"
    batch_size: int = 8
    tokenizer: Path | None = None  # counts text tokens against the model (default: the model's own)
    config: Path | None = None  # the base model: its folder or config.yaml; clips are cut to fit its limits
    urls: tuple[str, ...] = ()  # pages, direct media links, playlists: fetched into <out>/downloads first
    licence: str | None = None  # the licence of what the links hold, as the user states it
    subtitle_language: str | None = None  # the links' subtitles to fetch (None: the language, if any)
    speaker_model: str | None = None  # CAM++ weights file or x-vector model: clips get clustered speaker labels
    separate: str | None = None  # a demucs model (file, folder or name): slice the voice stem, not the mix
    loudness_scope: str = "clip"  # "clip": each clip to target_lufs; "dataset": one gain for all clips
    speaker_threshold: float = 0.3  # cosine similarity (centred) at which two groups of clips are one speaker

    def fixed(self) -> dict[str, Any]:
        """What the clips on disk depend on: a rerun into the same folder must use the same."""
        fixed = {"format": FORMAT, "slicing": self.slicing.as_dict(), "target_lufs": self.target_lufs}
        if self.separate:  # clips cut from voice stems differ from clips cut from the mixes
            fixed["separate"] = self.separate
        if self.loudness_scope != "clip":  # (absent when per clip, so folders made before the option still match)
            fixed["loudness_scope"] = self.loudness_scope
        return fixed


@dataclass
class IngestSummary:
    out_dir: str
    sources: int = 0
    sources_done_before: int = 0
    clips: int = 0
    rejected: int = 0
    transcribed: int = 0
    hours: float = 0.0
    left_out_fragments: int = 0
    problems: list[str] = field(default_factory=list)
    model: str = ""  # the base model's limits the clips were cut to ('' without a model)
    longest_clip: float = 0.0  # the slicer's longest clip (seconds)
    too_long: int = 0  # clips flagged as longer (audio or text) than the model takes
