"""Speech from a checkpoint for evaluation, per generation (``trainer.evaluation.backend_choice`` picks one):

    backend = synthesis_backend(version, config_path, tokenizer_path, vocoder_path, device, language,
                                model_dir=..., w2v_bert=...)
    speaker = backend.for_checkpoint(checkpoint_path)       # loads that checkpoint's GPT
    clips = speaker.speak(texts, prompt_path, settings, language)  # float32 waveforms at backend.sample_rate

IndexTTS-1.5 speaks through ``trainer.synthesis`` (GPT + BigVGAN; the vocoder and tokenizer are loaded once
per backend, each checkpoint's GPT per call; the base model with its own tokenizer). IndexTTS2 speaks through
``trainer.synthesis.s2mel_pipeline``: the networks of an IndexTTS2 download folder (``--model-dir``, else the
folder of ``--config`` when it is one; w2v-BERT, semantic codec, CAMPPlus, S2Mel, BigVGAN v2) are loaded
once, each checkpoint's GPT per call; the emotion is the reference voice's own, the codes are decoded as the
eval set says (deterministic beam by default) and the S2Mel CFM takes ``EVAL_CFM_STEPS`` Euler steps from
noise seeded with the eval set's seed. IndexTTS-2.5 speaks through ``SynthesizerV25`` the same way: a 2.5
download folder's networks loaded once (``--model-dir``, else the folder of ``--config``; the run's
``--tokenizer`` table), each checkpoint's GPT with its LoRA adapters merged, in the text scheme it records,
with each sentence's language row and ``EVAL_DURATION_FACTOR``. A new generation adds a backend class with the same two methods and
its registry entry's ``evaluation_backend`` (trainer.generations); nothing else in evaluation knows the generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from trainer.evaluation.errors import EvaluationError

# S2Mel (CFM) Euler steps of evaluation speech: fewer than upstream's 25 (evaluation speaks many clips per
# save), enough for the recogniser; the same for every checkpoint, so scores compare.
EVAL_CFM_STEPS = 10
EVAL_DURATION_FACTOR = 1.0  # IndexTTS-2.5's S2Mel length factor in evaluation: upstream's default length
V2_FOLDER_HINT = ("IndexTTS2 speaks through the networks of an IndexTTS2 download folder (s2mel.pth, semantic_codec/, "
                  "campplus_cn_common.bin, bigvgan/, wav2vec2bert_stats.pt, w2v-bert-2.0/): give --model-dir")
V25_FOLDER_HINT = ("IndexTTS-2.5 speaks through the networks of an IndexTTS-2.5 download folder (codec, s2mel.pth, "
                   "CAMPPlus, bigvgan/, wav2vec2bert_stats.pt, w2v-bert-2.0/): give --model-dir")


class CheckpointSpeaker(Protocol):
    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]: ...


class SynthesisBackend(Protocol):
    sample_rate: int

    def for_checkpoint(self, checkpoint: Path, base: bool = False) -> CheckpointSpeaker: ...


class _V15Speaker:
    def __init__(self, synth: Any) -> None:
        self.synth = synth

    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]:
        """``language``: the text front-end's language of ``texts`` (None: by script)."""
        from trainer.synthesis.errors import SynthesisError

        self.synth.language = language
        try:
            reference = self.synth.prepare_reference(_prompt_input(prompt))
            return [self.synth.synthesize([text], reference, settings)[0].waveform for text in texts]
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


class V15Backend:
    """IndexTTS-1.5: GPT + BigVGAN from ``trainer.synthesis``."""

    def __init__(self, config_path: Path, tokenizer_path: Path, vocoder_path: Path, device: str,
                 language: str | None) -> None:
        from data_tools.config import load_config
        from data_tools.text_tokenizer import TextTokenizer
        from trainer.synthesis.errors import SynthesisError
        from trainer.synthesis.vocoder_loading import load_vocoder

        self.config_path, self.device = Path(config_path), device
        self.config = load_config(config_path)
        self.tokenizer = TextTokenizer(tokenizer_path, language or None)
        self.language = language or None
        try:
            self.vocoder = load_vocoder(vocoder_path, self.config, device, source=str(config_path))
        except (SynthesisError, ValueError, OSError) as exc:
            raise EvaluationError(f"vocoder {vocoder_path}: {' '.join(str(exc).split())}") from None
        self.sample_rate = int(self.vocoder.spec.sampling_rate)

    def for_checkpoint(self, checkpoint: Path, base: bool = False) -> CheckpointSpeaker:
        """``base``: the base model speaks through its own tokenizer (the config's dataset.bpe_model), since a
        grown vocabulary's pieces are rows it does not have."""
        from trainer.model_source import base_tokenizer_for
        from trainer.synthesis.errors import SynthesisError
        from trainer.synthesis.gpt_loading import load_gpt
        from trainer.synthesis.pipeline import Synthesizer

        tokenizer = (base_tokenizer_for(self.config, self.config_path) or self.tokenizer) if base else self.tokenizer
        try:
            model = load_gpt(checkpoint, self.config, self.config_path, self.device)
            return _V15Speaker(Synthesizer(model, self.vocoder, tokenizer, language=self.language))
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


def indextts2_folder(model_dir: str | Path | None, config_path: str | Path | None,
                     w2v_bert: str | None = None) -> Path:
    """The IndexTTS2 download folder evaluation speaks with: ``model_dir``, else the folder of ``config_path``
    when it is one. Checks that every file is there (nothing is loaded); EvaluationError in one line."""
    from networks.indextts2 import resolve_files

    return _download_folder(resolve_files, V2_FOLDER_HINT, model_dir, config_path, w2v_bert)


def indextts25_folder(model_dir: str | Path | None, config_path: str | Path | None, w2v_bert: str | None = None,
                      table: str | Path | None = None) -> Path:
    """The IndexTTS-2.5 download folder evaluation speaks with (as :func:`indextts2_folder`); ``table``: the
    run's .tiktoken table (None: the folder's)."""
    from functools import partial

    from networks.indextts25 import resolve_files

    return _download_folder(partial(resolve_files, table=table), V25_FOLDER_HINT, model_dir, config_path, w2v_bert)


def _download_folder(resolve_files: Any, hint: str, model_dir: str | Path | None, config_path: str | Path | None,
                     w2v_bert: str | None) -> Path:
    given = str(model_dir or "").strip()
    folder = Path(given).expanduser() if given else Path(config_path or ".").parent
    try:
        resolve_files(folder, w2v_bert=w2v_bert or None, need_gpt=False)
    except (ValueError, OSError) as exc:  # the FilesError names every missing file and key
        reason = " ".join(str(exc).split())
        if given:
            raise EvaluationError(f"--model-dir {folder}: {reason}") from None
        if not (folder / "s2mel.pth").is_file():  # a config kept apart from the download folder
            reason = f"the folder of --config, {folder}, is not one"
        raise EvaluationError(f"{hint} ({reason})") from None
    return folder


class _V2Speaker:
    """One checkpoint's IndexTTS2 synthesizer; each reference voice is prepared once (its GPT latents)."""

    name = "IndexTTS2"

    def __init__(self, synth: Any) -> None:
        self.synth = synth
        self.voices: dict[Path, Any] = {}

    def mel_settings(self, seed: int) -> Any:
        from trainer.synthesis.s2mel_pipeline import MelSettings

        return MelSettings(steps=EVAL_CFM_STEPS, seed=seed)

    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]:
        from trainer.synthesis.errors import SynthesisError

        prompt = Path(prompt)
        if prompt.suffix.lower() == ".npy":
            raise EvaluationError(f"reference voice {prompt}: {self.name} speaks from reference audio, not a prompt "
                                  "mel: give --eval-reference audio files")
        self.synth.language = language
        mel = self.mel_settings(int(settings.seed))
        try:
            if prompt not in self.voices:
                self.voices[prompt] = self.synth.prepare_voice(prompt)
            voice = self.voices[prompt]
            emotion = self.synth.emotion_vector(voice)
            return [self.synth.synthesize(text, voice, None, settings, mel, emotion_vector=emotion).waveform
                    for text in texts]
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


class V2Backend:
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
        folder = indextts2_folder(model_dir, config_path, w2v_bert)
        try:
            self.tokenizer = TextTokenizer(tokenizer_path, self.language)
            self.nets = load_indextts2(folder, w2v_bert=w2v_bert or None, load_gpt_weights=False, device=device)
        except (TokenizerError, ValueError, OSError) as exc:
            raise EvaluationError(f"IndexTTS2 folder {folder}: {' '.join(str(exc).split())}") from None
        self.sample_rate = int(self.nets.sample_rate)

    def for_checkpoint(self, checkpoint: Path, base: bool = False) -> CheckpointSpeaker:
        """``base``: the base model speaks through its own tokenizer (the config's dataset.bpe_model, else the
        folder's), since a grown vocabulary's pieces are rows it does not have."""
        from dataclasses import replace

        from trainer.errors import UsageError
        from trainer.model_source import base_tokenizer_for
        from trainer.synthesis.gpt_loading import load_gpt
        from trainer.synthesis.s2mel_pipeline import SynthesizerV2

        tokenizer = self.tokenizer
        if base:
            tokenizer = base_tokenizer_for(self.config, self.config_path) or self._folder_tokenizer() or tokenizer
        try:
            gpt = load_gpt(checkpoint, self.config, self.config_path, self.device, version="2")
            return _V2Speaker(SynthesizerV2(replace(self.nets, gpt=gpt), tokenizer, language=self.language))
        except (UsageError, ValueError) as exc:  # a checkpoint or GPT that does not fit the folder
            raise EvaluationError(f"{Path(checkpoint).name}: {' '.join(str(exc).split())}") from None

    def _folder_tokenizer(self) -> Any:
        from data_tools.text_tokenizer import TextTokenizer, TokenizerError

        path = self.nets.files.tokenizer
        try:
            return TextTokenizer(path, self.language) if path is not None else None
        except TokenizerError:
            return None


class _V25Speaker(_V2Speaker):
    """One checkpoint's IndexTTS-2.5 synthesizer: CAM++ style, language row and prefix per sentence group."""

    name = "IndexTTS-2.5"

    def mel_settings(self, seed: int) -> Any:
        from trainer.generations.indextts25.synthesis import MelSettings25

        return MelSettings25(steps=EVAL_CFM_STEPS, seed=seed, duration_factor=EVAL_DURATION_FACTOR)


class V25Backend:
    """IndexTTS-2.5: the download folder's networks (loaded once, with the run's table) and each checkpoint's
    GPT (``SynthesizerV25.with_checkpoint``: its LoRA adapters merged, its recorded text scheme)."""

    def __init__(self, config_path: Path, tokenizer_path: Path, vocoder_path: Path | None, device: str,
                 language: str | None, model_dir: str | Path | None = None, w2v_bert: str | None = None) -> None:
        from networks.indextts25 import IndexTTS25FilesError, load_indextts25

        del vocoder_path  # BigVGAN v2 comes from the folder
        self.device, self.language = device, language or None
        folder = indextts25_folder(model_dir, config_path, w2v_bert, tokenizer_path)
        try:
            self.nets = load_indextts25(folder, w2v_bert=w2v_bert or None, table=tokenizer_path,
                                        load_gpt_weights=False, device=device)
        except (IndexTTS25FilesError, ValueError, OSError) as exc:
            raise EvaluationError(f"IndexTTS-2.5 folder {folder}: {' '.join(str(exc).split())}") from None
        self.sample_rate = int(self.nets.sample_rate)

    def for_checkpoint(self, checkpoint: Path, base: bool = False) -> CheckpointSpeaker:
        """``base`` needs nothing apart: a bare gpt.pth records no scheme and speaks with upstream's bytes."""
        from trainer.generations.indextts25.synthesis import SynthesizerV25
        from trainer.synthesis.errors import SynthesisError

        del base
        try:
            synth = SynthesizerV25.with_checkpoint(self.nets, checkpoint, language=self.language, device=self.device)
        except SynthesisError as exc:
            raise EvaluationError(f"{Path(checkpoint).name}: {exc}") from None
        return _V25Speaker(synth)


def v15_speech(opts: dict[str, Any]) -> tuple[bool, str]:
    """(ok, note or refusal) of IndexTTS-1.5's speech for --eval-at-saves: its BigVGAN (--vocoder)."""
    if not str(opts.get("vocoder") or "").strip():
        return False, "--eval-at-saves speaks with the IndexTTS-1.5 BigVGAN: give --vocoder (bigvgan_generator.pth)"
    return True, ""


def v15_backend(config_path: Path, tokenizer_path: Path, vocoder_path: Path | None, device: str,
                language: str | None, **_folder: Any) -> SynthesisBackend:
    if vocoder_path is None:
        raise EvaluationError("evaluation speaks with the IndexTTS-1.5 BigVGAN: give --vocoder (bigvgan_generator.pth)")
    return V15Backend(config_path, tokenizer_path, vocoder_path, device, language)


def v2_speech(opts: dict[str, Any]) -> tuple[bool, str]:
    """(ok, note or refusal) of IndexTTS2's speech for --eval-at-saves: its download folder."""
    try:
        folder = indextts2_folder(opts.get("model_dir"), opts.get("config"), str(opts.get("w2v_bert") or ""))
    except EvaluationError as exc:
        return False, f"--eval-at-saves: {exc}"
    return True, f"; speech through the IndexTTS2 folder {folder} ({EVAL_CFM_STEPS} CFM steps)"


def v25_speech(opts: dict[str, Any]) -> tuple[bool, str]:
    """(ok, note or refusal) of IndexTTS-2.5's speech for --eval-at-saves: its download folder and the run's table."""
    try:
        folder = indextts25_folder(opts.get("model_dir"), opts.get("config"), str(opts.get("w2v_bert") or ""),
                                   str(opts.get("tokenizer") or "") or None)
    except EvaluationError as exc:
        return False, f"--eval-at-saves: {exc}"
    return True, (f"; speech through the IndexTTS-2.5 folder {folder} ({EVAL_CFM_STEPS} CFM steps, duration "
                  f"factor {EVAL_DURATION_FACTOR:g}, each checkpoint's text scheme and LoRA adapters)")


def _prompt_input(path: Path) -> Any:
    """A prompt mel ``.npy`` is used as features (as in training); anything else is read as audio."""
    if Path(path).suffix.lower() != ".npy":
        return Path(path)
    import torch

    from data_tools.npy import read_npy

    try:
        mel = read_npy(path)
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"reference voice {path}: {' '.join(str(exc).split())}") from None
    return torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32))
