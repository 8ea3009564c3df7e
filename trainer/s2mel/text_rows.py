"""IndexTTS2 S2Mel runs: the clips' text ids must have rows in the GPT that computes their latent.

The latent's GPT is the download folder's ``gpt.pth`` unless ``--base-checkpoint`` names another one. Data
tokenized with an extended tokenizer has ids past the base vocabulary; the base GPT has no rows for them (its
embedding would fail with an IndexError mid-run), so the run needs the GPT grown to that tokenizer: the GPT run's
checkpoint. One check, :func:`text_ids_refusal`, serves the pre-flight (rows read from the config or the
checkpoint's tensor shape) and the trainer (rows of the GPT it loaded), so they refuse the same folders.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from data_tools import item_files
from data_tools.shape_rules import RuleError
from trainer.run_options import RunOptions, as_run_options

TEXT_IDS_FOLDER = "text_ids"


def gpt_source(opts: RunOptions | Mapping[str, Any], folder: Path) -> str:
    """Where the latent's GPT comes from, as a refusal names it."""
    opts = as_run_options(opts)
    checkpoint = opts.base_checkpoint
    return f"--base-checkpoint {checkpoint}" if checkpoint else f"the download folder's {folder / 'gpt.pth'}"


def planned_text_rows(opts: RunOptions | Mapping[str, Any], folder: Path) -> int:
    """Text rows of the GPT an S2Mel run will load, without loading it: the folder's config (its ``gpt.pth`` is
    loaded strictly against it), or the shape of ``--base-checkpoint``'s text embedding (memory-mapped).
    Raises ValueError (one line) for a config or checkpoint that cannot say."""
    opts = as_run_options(opts)
    checkpoint = opts.base_checkpoint
    if not checkpoint:
        from data_tools.config import load_config
        from networks.gpt_config import text_rows

        return text_rows(load_config(folder / "config.yaml")["gpt"])
    from trainer.checkpoints import load_checkpoint, model_state_of

    state = model_state_of(load_checkpoint(Path(checkpoint), mmap=True))
    weight = state.get("text_embedding.weight") if state is not None else None
    if weight is None:
        raise ValueError(f"--base-checkpoint {checkpoint}: no text_embedding.weight (not an IndexTTS2 GPT)")
    return int(weight.shape[0])


def text_ids_refusal(folder: Path, stems: Sequence[str], rows: int, source: str) -> str | None:
    """One line naming the first clip whose ``text_ids/<stem>.npy`` the GPT of ``source`` (``rows`` text rows)
    cannot embed, or an unusable ids file; None when every clip fits."""
    for stem in stems:
        path = folder / TEXT_IDS_FOLDER / f"{stem}.npy"
        try:
            ids = item_files.read_text_ids(path, None, None)
        except RuleError as exc:
            return str(exc)
        if not ids.size:
            continue
        low, high = int(ids.min()), int(ids.max())
        if low < 0:
            return f"{path}: text id {low} is negative: a broken text ids file; rerun the preparation"
        if high >= rows:
            remedy = ("give the GPT checkpoint trained with this data's tokenizer" if source.startswith("--")
                      else "give it (the GPT run's latest.pth) via --base-checkpoint")
            return (f"{path}: text id {high} is beyond the {rows} text rows of {source}: text ids beyond the base "
                    f"vocabulary (data tokenized with an extended tokenizer) need the extended GPT checkpoint; "
                    f"{remedy}")
    return None
