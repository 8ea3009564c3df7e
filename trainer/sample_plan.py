"""What a run's samples at saves are (``trainer.samples`` decides and speaks them; its per-version parts, such
as ``generations.indextts25.samples``, build on this without importing it back)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.run_options import RunOptions, as_run_options

DEFAULT_SAMPLE_COUNT = 3
DEFAULT_SAMPLE_STEPS = 10  # S2Mel flow-matching steps of samples through a download folder
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
    version: str = ""  # the generation id (generations) whose entry speaks the samples
    model_dir: Path | None = None  # IndexTTS2 / 2.5: the download folder
    w2v_bert: str | None = None  # IndexTTS2 / 2.5: None (the folder's w2v-bert-2.0/) or the hub model id
    steps: int = 10  # IndexTTS2 / 2.5: S2Mel flow-matching steps
    nets: Any = None  # IndexTTS2 / 2.5: the folder's networks, loaded at the first sample
    language: str = ""  # IndexTTS-2.5: the voice's language (the language row its texts are spoken with)


def read_texts(path: Path) -> list[str]:
    from data_tools.fileio import open_regular

    with open_regular(path) as handle:
        raw = handle.read()
    return [line.strip() for line in raw.decode("utf-8", errors="replace").splitlines() if line.strip()]


def samples_when(opts: RunOptions | Mapping[str, Any]) -> str:
    opts = as_run_options(opts)
    every = int(opts.sample_every or 0)
    return "every save" if every == 0 else f"saves at multiples of {every} steps"


def sample_texts(opts: RunOptions | Mapping[str, Any], val_items: list[Any]
                  ) -> tuple[str, list[tuple[str, list[int] | str]]] | SamplePlan:
    """(where the texts come from, the texts), or a refusing plan when ``--sample-texts`` cannot be used."""
    opts = as_run_options(opts)
    if str(opts.sample_texts or "").strip():
        path = Path(opts.sample_texts)
        try:
            lines = read_texts(path)
        except (OSError, ValueError) as exc:
            return SamplePlan(False, "", refusal=f"--sample-texts {path}: {' '.join(str(exc).split())}")
        if not lines:
            return SamplePlan(False, "", refusal=f"--sample-texts {path}: no text in the file")
        return f"{len(lines)} text(s) of {path}", [(f"text{index + 1}", line) for index, line in enumerate(lines)]
    texts: list[tuple[str, list[int] | str]] = [(item.id, [int(i) for i in item.text_ids])
                                                for item in val_items[:DEFAULT_SAMPLE_COUNT]]
    return f"the first {len(texts)} validation transcript(s)", texts


@dataclass(frozen=True)
class FolderKind:
    """A generation whose samples speak through a download folder (IndexTTS2, IndexTTS-2.5)."""

    name: str  # e.g. "IndexTTS2"
    contents: str  # what the folder holds, for the sentence that asks for it
    w2v_bert_places: tuple[str, ...]  # where in the folder its w2v-BERT may sit
    resolve: Callable[[Path, str | None], dict[str, Any]]  # (folder, w2v-BERT) -> its config; ValueError (one line)
    width_mismatch: Callable[[dict[str, Any], dict[str, Any]], str | None]  # (run gpt, folder gpt) -> why not
    carries_language: bool = False  # the voice's language is spoken with (its language row)


def folder_sample_plan(kind: FolderKind, opts: RunOptions | Mapping[str, Any], config: dict[str, Any],
                       val_items: list[Any]) -> SamplePlan:
    """Samples through a download folder: its files are checked here (cheap); its networks load at the first
    sample."""
    opts = as_run_options(opts)
    folder_text = str(opts.sample_model_dir or "").strip()
    if not folder_text:
        ignored = "; --vocoder is IndexTTS-1.5's, ignored here" if str(opts.vocoder or "").strip() else ""
        return SamplePlan(False, f"no samples: give --sample-model-dir (an {kind.name} download folder: "
                                 f"{kind.contents}) to hear the model at every save{ignored}")
    folder = Path(folder_text)
    w2v_bert = None if any((folder / place).is_dir() for place in kind.w2v_bert_places) else W2V_BERT_HUB_ID
    try:
        folder_config = kind.resolve(folder, w2v_bert)
    except ValueError as exc:
        return SamplePlan(False, "", refusal=f"--sample-model-dir {folder}: {' '.join(str(exc).split())}")
    mismatch = kind.width_mismatch(config.get("gpt") or {}, folder_config.get("gpt") or {})
    if mismatch:
        return SamplePlan(False, "", refusal=f"--sample-model-dir {folder}: {mismatch}")
    references = [item for item in val_items
                  if getattr(item, "prompt_audio", None) is not None and Path(item.prompt_audio).is_file()]
    if not references:
        return SamplePlan(False, f"no samples: {kind.name} samples need a validation manifest whose prompts have "
                                 "audio (prompt_audio_path; the first one is the voice)")
    texts = sample_texts(opts, val_items)
    if isinstance(texts, SamplePlan):
        return texts
    source, chosen = texts
    steps = int(opts.sample_steps or DEFAULT_SAMPLE_STEPS)
    hub = f", w2v-BERT {W2V_BERT_HUB_ID} (downloaded once)" if w2v_bert else ""
    language = str(getattr(references[0], "language", "") or "") if kind.carries_language else ""
    return SamplePlan(True, f"samples at {samples_when(opts)}: {source}, voice of {references[0].id}, {kind.name} "
                            f"{folder} ({steps} S2Mel steps{hub})",
                      texts=chosen, reference=Path(references[0].prompt_audio), model_dir=folder,
                      w2v_bert=w2v_bert, steps=steps, language=language)
