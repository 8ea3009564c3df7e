"""Speech from a checkpoint for evaluation: what every generation's backend shares. Each generation's backend
lives in its package (``generations.<generation>.evaluation``; its registry entry's
``speech.evaluation_backend``, which ``trainer.evaluation.backend_choice`` picks):

    backend = synthesis_backend(version, config_path, tokenizer_path, vocoder_path, device, language,
                                model_dir=..., w2v_bert=...)
    speaker = backend.for_checkpoint(checkpoint_path)       # loads that checkpoint's GPT
    clips = speaker.speak(texts, prompt_path, settings, language)  # float32 waveforms at backend.sample_rate
    speaker.generated                                       # that call's (codes, hit_stop) per text, for health
    backend.for_checkpoint(checkpoint_path, adapter=False)  # a LoRA checkpoint without its adapter (health)

A backend that speaks through a download folder (S2Mel, BigVGAN v2, w2v-BERT...) loads the folder's networks
once and each checkpoint's GPT per call (``download_folder`` finds and checks the folder); its speaker
(``S2MelSpeaker``) prepares each reference voice once, keeps the voice's own emotion, decodes the codes as the
eval set says (deterministic beam by default) and runs the S2Mel CFM for ``EVAL_CFM_STEPS`` Euler steps from
noise seeded with the eval set's seed. A new generation adds a backend class with the same two methods and its
registry entry's ``speech.evaluation_backend`` (generations); nothing else in evaluation knows the generation.
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
EVAL_DURATION_FACTOR = 1.0  # the S2Mel length factor in evaluation (where a generation has one): upstream's default


class CheckpointSpeaker(Protocol):
    def speak(self, texts: Sequence[str], prompt: Path, settings: Any, language: str | None = None
              ) -> list[np.ndarray]: ...


class SynthesisBackend(Protocol):
    sample_rate: int

    def for_checkpoint(self, checkpoint: Path, base: bool = False, adapter: bool = True) -> CheckpointSpeaker: ...


def download_folder(resolve_files: Any, hint: str, model_dir: str | Path | None, config_path: str | Path | None,
                    w2v_bert: str | None) -> Path:
    """The download folder evaluation speaks with: ``model_dir``, else the folder of ``config_path`` when it is
    one. ``resolve_files`` (the folder's networks module's) checks that every file is there (nothing is loaded);
    EvaluationError in one line (``hint`` says which folder is wanted)."""
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


class S2MelSpeaker:
    """One checkpoint's S2Mel synthesizer (a download folder's networks and the checkpoint's GPT); each reference
    voice is prepared once (its GPT conditioning). A generation names itself and its mel settings."""

    name = ""

    def __init__(self, synth: Any) -> None:
        self.synth = synth
        self.voices: dict[Path, Any] = {}
        self.generated: list[tuple[np.ndarray, bool]] = []  # the last speak's (codes, hit_stop) per text

    def mel_settings(self, seed: int) -> Any:
        raise NotImplementedError

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
            results = [self.synth.synthesize(text, voice, None, settings, mel, emotion_vector=emotion)
                       for text in texts]
            self.generated = [(r.codes, r.hit_stop) for r in results]
            return [r.waveform for r in results]
        except SynthesisError as exc:
            raise EvaluationError(str(exc)) from None


def prompt_input(path: Path) -> Any:
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
