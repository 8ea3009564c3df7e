"""Which synthesis an evaluation speaks with: the run's generation's registry entry decides."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from generations.registry import by_id
from generations.spec import Capability
from trainer.evaluation.errors import EvaluationError


def synthesis_backend(version: str, config_path: Path, tokenizer_path: Path, vocoder_path: Path | None,
                      device: str = "cpu", language: str | None = None, *, model_dir: str | Path | None = None,
                      w2v_bert: str | None = None) -> Any:
    """The synthesis of generation ``version`` (its registry entry's evaluation backend); EvaluationError (one
    line, naming the generation) where it has none.

    ``model_dir`` / ``w2v_bert``: the download folder and w2v-BERT of a generation that speaks through one
    (``trainer.evaluation.synthesizers.download_folder``)."""
    try:
        generation = by_id(str(version))
    except KeyError as exc:
        raise EvaluationError(f"no synthesis for {exc.args[0]}") from None
    if generation.speech.evaluation_backend is None:
        raise EvaluationError(generation.refusal(Capability.EVALUATE) or f"no synthesis for {generation.name}")
    return generation.speech.evaluation_backend(config_path, tokenizer_path, vocoder_path, device, language,
                                         model_dir=model_dir, w2v_bert=w2v_bert)
