"""IndexTTS2's evaluation speech: the networks of an IndexTTS2 download folder (``--model-dir``, else the folder
of ``--config`` when it is one; w2v-BERT, semantic codec, CAMPPlus, S2Mel, BigVGAN v2) loaded once, each
checkpoint's GPT per call (``trainer.synthesis.s2mel_pipeline``); the emotion is the reference voice's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainer.evaluation.errors import EvaluationError
from trainer.evaluation.synthesizers import EVAL_CFM_STEPS, CheckpointSpeaker, S2MelSpeaker, download_folder

FOLDER_HINT = ("IndexTTS2 speaks through the networks of an IndexTTS2 download folder (s2mel.pth, semantic_codec/, "
               "campplus_cn_common.bin, bigvgan/, wav2vec2bert_stats.pt, w2v-bert-2.0/): give --model-dir")


def folder(model_dir: str | Path | None, config_path: str | Path | None, w2v_bert: str | None = None) -> Path:
    """The IndexTTS2 download folder evaluation speaks with: ``model_dir``, else the folder of ``config_path``
    when it is one. Checks that every file is there (nothing is loaded); EvaluationError in one line."""
    from networks.indextts2 import resolve_files

    return download_folder(resolve_files, FOLDER_HINT, model_dir, config_path, w2v_bert)


class _Speaker(S2MelSpeaker):
    """One checkpoint's IndexTTS2 synthesizer; each reference voice is prepared once (its GPT latents)."""

    name = "IndexTTS2"

    def mel_settings(self, seed: int) -> Any:
        from trainer.synthesis.s2mel_types import MelSettings

        return MelSettings(steps=EVAL_CFM_STEPS, seed=seed)


class Backend:
    """IndexTTS2: the download folder's networks (loaded once) with each checkpoint's GPT."""

    def __init__(self, config_path: Path, tokenizer_path: Path, vocoder_path: Path | None, device: str,
                 language: str | None, model_dir: str | Path | None = None, w2v_bert: str | None = None) -> None:
        from data_tools.config import load_config
        from data_tools.text_tokenizer import TextTokenizer, TokenizerError
        from networks.indextts2 import load_indextts2

        del vocoder_path  # BigVGAN v2 comes from the folder
        self.config_path, self.device = Path(config_path), device
        self.config = load_config(config_path)
        self.language = language or None
        where = folder(model_dir, config_path, w2v_bert)
        try:
            self.tokenizer = TextTokenizer(tokenizer_path, self.language)
            self.nets = load_indextts2(where, w2v_bert=w2v_bert or None, load_gpt_weights=False, device=device)
        except (TokenizerError, ValueError, OSError) as exc:
            raise EvaluationError(f"IndexTTS2 folder {where}: {' '.join(str(exc).split())}") from None
        self.sample_rate = int(self.nets.sample_rate)

    def for_checkpoint(self, checkpoint: Path, base: bool = False, adapter: bool = True) -> CheckpointSpeaker:
        """``base``: the base model speaks through its own tokenizer (the config's dataset.bpe_model, else the
        folder's), since a grown vocabulary's pieces are rows it does not have. ``adapter=False``: a LoRA
        checkpoint without its adapter."""
        from dataclasses import replace

        from trainer.errors import UsageError
        from trainer.model_source import base_tokenizer_for
        from trainer.synthesis.gpt_loading import load_gpt
        from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer

        tokenizer = self.tokenizer
        if base:
            tokenizer = base_tokenizer_for(self.config, self.config_path) or self._folder_tokenizer() or tokenizer
        try:
            gpt = load_gpt(checkpoint, self.config, self.config_path, self.device, version="2", adapter=adapter)
            return _Speaker(S2MelSynthesizer(replace(self.nets, gpt=gpt), tokenizer, language=self.language))
        except (UsageError, ValueError) as exc:  # a checkpoint or GPT that does not fit the folder
            raise EvaluationError(f"{Path(checkpoint).name}: {' '.join(str(exc).split())}") from None

    def _folder_tokenizer(self) -> Any:
        from data_tools.text_tokenizer import TextTokenizer, TokenizerError

        path = self.nets.files.tokenizer
        try:
            return TextTokenizer(path, self.language) if path is not None else None
        except TokenizerError:
            return None


def speech(opts: dict[str, Any]) -> tuple[bool, str]:
    """(ok, note or refusal) of IndexTTS2's speech for --eval-at-saves: its download folder."""
    try:
        where = folder(opts.get("model_dir"), opts.get("config"), str(opts.get("w2v_bert") or ""))
    except EvaluationError as exc:
        return False, f"--eval-at-saves: {exc}"
    return True, f"; speech through the IndexTTS2 folder {where} ({EVAL_CFM_STEPS} CFM steps)"
