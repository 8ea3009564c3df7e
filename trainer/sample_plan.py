"""What a run's samples at saves are (``trainer.samples`` decides and speaks them; its per-version parts, such
as ``trainer.samples_v25``, build on this without importing it back)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_SAMPLE_COUNT = 3
SAMPLE_SEED = 1234
W2V_BERT_HUB_ID = "facebook/w2v-bert-2.0"  # used when the download folder has no w2v-bert-2.0/ (as upstream does)


@dataclass
class SamplePlan:
    enabled: bool
    message: str  # what the pre-flight shows: what will be spoken, or why there are no samples
    refusal: str | None = None  # the user asked for samples that cannot work: the run is refused
    texts: list[tuple[str, list[int] | str]] = field(default_factory=list)  # (name, text ids or raw text)
    reference: Path | None = None  # a prompt mel .npy or audio file from the validation set
    vocoder: Any = None  # the loaded BigVGAN (cpu)
    version: str = ""  # the generation id (trainer.generations) whose entry speaks the samples
    model_dir: Path | None = None  # IndexTTS2 / 2.5: the download folder
    w2v_bert: str | None = None  # IndexTTS2 / 2.5: None (the folder's w2v-bert-2.0/) or the hub model id
    steps: int = 10  # IndexTTS2 / 2.5: S2Mel flow-matching steps
    nets: Any = None  # IndexTTS2 / 2.5: the folder's networks, loaded at the first sample
    language: str = ""  # IndexTTS-2.5: the voice's language (the language row its texts are spoken with)
