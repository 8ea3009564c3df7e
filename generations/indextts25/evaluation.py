"""IndexTTS-2.5's evaluation speech: a 2.5 download folder's networks loaded once (``--model-dir``, else the
folder of ``--config``; the run's ``--tokenizer`` table), each checkpoint's GPT with its LoRA adapters merged, in
the text scheme it records, with each sentence's language row and ``EVAL_DURATION_FACTOR``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.synthesizers import (
    EVAL_CFM_STEPS,
    EVAL_DURATION_FACTOR,
    CheckpointSpeaker,
    S2MelSpeaker,
    download_folder,
)

FOLDER_HINT = ("IndexTTS-2.5 speaks through the networks of an IndexTTS-2.5 download folder (codec, s2mel.pth, "
               "CAMPPlus, bigvgan/, wav2vec2bert_stats.pt, w2v-bert-2.0/): give --model-dir")


def folder(model_dir: str | Path | None, config_path: str | Path | None, w2v_bert: str | None = None,
           table: str | Path | None = None) -> Path:
    """The IndexTTS-2.5 download folder evaluation speaks with (``model_dir``, else the folder of
    ``config_path`` when it is one); ``table``: the run's .tiktoken table (None: the folder's)."""
    from functools import partial

    from networks.indextts25 import resolve_files

    return download_folder(partial(resolve_files, table=table), FOLDER_HINT, model_dir, config_path, w2v_bert)


class _Speaker(S2MelSpeaker):
    """One checkpoint's IndexTTS-2.5 synthesizer: CAM++ style, language row and prefix per sentence group."""

    name = "IndexTTS-2.5"

    def mel_settings(self, seed: int) -> Any:
        from generations.indextts25.synthesis import MelSettings25

        return MelSettings25(steps=EVAL_CFM_STEPS, seed=seed, duration_factor=EVAL_DURATION_FACTOR)


class Backend:
    """IndexTTS-2.5: the download folder's networks (loaded once, with the run's table) and each checkpoint's
    GPT (``SynthesizerV25.with_checkpoint``: its LoRA adapters merged, its recorded text scheme)."""

    def __init__(self, config_path: Path, tokenizer_path: Path, vocoder_path: Path | None, device: str,
                 language: str | None, model_dir: str | Path | None = None, w2v_bert: str | None = None) -> None:
        from networks.indextts25 import IndexTTS25FilesError, load_indextts25

        del vocoder_path  # BigVGAN v2 comes from the folder
        self.device, self.language = device, language or None
        where = folder(model_dir, config_path, w2v_bert, tokenizer_path)
        try:
            self.nets = load_indextts25(where, w2v_bert=w2v_bert or None, table=tokenizer_path,
                                        load_gpt_weights=False, device=device)
        except (IndexTTS25FilesError, ValueError, OSError) as exc:
            raise EvaluationError(f"IndexTTS-2.5 folder {where}: {' '.join(str(exc).split())}") from None
        self.sample_rate = int(self.nets.sample_rate)

    def for_checkpoint(self, checkpoint: Path, base: bool = False, adapter: bool = True) -> CheckpointSpeaker:
        """``base`` needs nothing apart: a bare gpt.pth records no scheme and speaks with upstream's bytes.
        ``adapter=False``: a LoRA checkpoint without its adapter."""
        from generations.indextts25.synthesis import SynthesizerV25
        from trainer.synthesis.errors import SynthesisError

        del base
        try:
            synth = SynthesizerV25.with_checkpoint(self.nets, checkpoint, language=self.language, device=self.device,
                                                  adapter=adapter)
        except SynthesisError as exc:
            raise EvaluationError(f"{Path(checkpoint).name}: {exc}") from None
        return _Speaker(synth)


def speech(opts: dict[str, Any]) -> tuple[bool, str]:
    """(ok, note or refusal) of IndexTTS-2.5's speech for --eval-at-saves: its download folder and the run's table."""
    try:
        where = folder(opts.get("model_dir"), opts.get("config"), str(opts.get("w2v_bert") or ""),
                       str(opts.get("tokenizer") or "") or None)
    except EvaluationError as exc:
        return False, f"--eval-at-saves: {exc}"
    return True, (f"; speech through the IndexTTS-2.5 folder {where} ({EVAL_CFM_STEPS} CFM steps, duration "
                  f"factor {EVAL_DURATION_FACTOR:g}, each checkpoint's text scheme and LoRA adapters)")
