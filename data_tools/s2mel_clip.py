"""What S2Mel training reads per clip, written by preparation (IndexTTS2 and 2.5) beside the GPT's files.

Per clip ``<stem>``:
- ``s2mel_mel/<stem>.npy`` float32 (80, T): the S2Mel log-mel of the clip at 22.05 kHz, exactly as inference
  computes its prompt mel (the training target x1);
- ``s2mel_style/<stem>.npy`` float32 (S,): the CAM++ style of the 16 kHz copy resampled from that 22.05 kHz
  audio (sinc, float64 kernel), as inference's prompt front-end does.

- 2.5 only, optional: ``s2mel_prompt/<stem>.npy`` float16 (T, 1024): the clip's normalised continuous w2v-BERT
  features (2.5 preparation computes them anyway), from which the prompt region is regulated as inference does
  (``bench/s2mel_conditioning.py`` measures how far decode(codes) is from them). About 100 kB per second.

The semantic input is not stored again: it comes from the clip's ``codes/<stem>.npy`` that preparation already
writes (v2: ``vq2emb(codes)`` plus the GPT's teacher-forced latent; 2.5: ``codec.decode(codes)``), computed when
an S2Mel run starts: a 1024-wide float input at 50 Hz would take ~200 kB per second of audio.

:func:`add_missing_s2mel_files` is what a rerun over an existing prepared folder does: it writes these files
only for clips that lack them and touches nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from data_tools.audio import load_audio
from data_tools.batch_prep import write_npy
from networks.campplus import CAMPPlus
from networks.frontends.resample import sinc_resample
from networks.frontends.s2mel_mel import S2MelMelSettings, s2mel_log_mel

MEL_FOLDER = "s2mel_mel"
STYLE_FOLDER = "s2mel_style"
PROMPT_FOLDER = "s2mel_prompt"
FOLDERS = (MEL_FOLDER, STYLE_FOLDER)
STYLE_RATE = 16000


@dataclass(frozen=True)
class S2MelClipFeatures:
    mel: np.ndarray  # (80, T) float32
    style: np.ndarray  # (S,) float32


@torch.no_grad()
def s2mel_clip_features(
    audio_22k: Tensor, campplus: CAMPPlus, mel_settings: S2MelMelSettings
) -> S2MelClipFeatures:
    """(1, N) or (N,) audio at the S2Mel rate -> its S2Mel mel and CAM++ style."""
    audio = audio_22k.reshape(1, -1).float()
    mel = s2mel_log_mel(audio, mel_settings)[0]
    audio_16k = sinc_resample(audio, mel_settings.sample_rate, STYLE_RATE, kernel_dtype="float64")
    style = campplus.eval().style_of(audio_16k)[0]
    return S2MelClipFeatures(
        mel=mel.cpu().numpy().astype(np.float32), style=style.cpu().numpy().astype(np.float32)
    )


def s2mel_paths(stem: str) -> tuple[Path, Path]:
    return Path(MEL_FOLDER) / f"{stem}.npy", Path(STYLE_FOLDER) / f"{stem}.npy"


def write_s2mel_clip(out_dir: Path, stem: str, features: S2MelClipFeatures) -> None:
    mel_path, style_path = s2mel_paths(stem)
    write_npy(out_dir, mel_path, np.ascontiguousarray(features.mel))
    write_npy(out_dir, style_path, np.ascontiguousarray(features.style))


def prompt_feature_path(stem: str) -> Path:
    return Path(PROMPT_FOLDER) / f"{stem}.npy"


def write_prompt_features(out_dir: Path, stem: str, features: Tensor) -> None:
    """2.5: the clip's continuous features (T, W) (or (1, T, W)) as float16."""
    array = features.reshape(-1, features.shape[-1]).detach().cpu().to(torch.float16).numpy()
    write_npy(out_dir, prompt_feature_path(stem), np.ascontiguousarray(array))


def missing_s2mel_stems(out_dir: Path, stems: Iterable[str]) -> list[str]:
    return [stem for stem in stems if not all((out_dir / p).is_file() for p in s2mel_paths(stem))]


def add_missing_s2mel_files(
    out_dir: Path,
    stems: Iterable[str],
    load_audio_22k: Callable[[str], Tensor],
    campplus: CAMPPlus,
    mel_settings: S2MelMelSettings,
) -> list[str]:
    """Write the S2Mel files of every clip that lacks one (``load_audio_22k(stem)`` reads its audio); the stems done."""
    done = []
    for stem in missing_s2mel_stems(out_dir, stems):
        write_s2mel_clip(out_dir, stem, s2mel_clip_features(load_audio_22k(stem), campplus, mel_settings))
        done.append(stem)
    return done


def add_s2mel_files_of(
    out_dir: Path, audio_of_stem: Mapping[str, Path], campplus: CAMPPlus, config: Mapping[str, object]
) -> list[str]:
    """Preparation's pass: the S2Mel files of every prepared clip (stem -> its source audio) that lacks them,
    with the mel settings of ``config``'s s2mel section; the stems done."""
    s2mel = config["s2mel"]
    assert isinstance(s2mel, Mapping)
    settings = S2MelMelSettings.from_preprocess_params(s2mel["preprocess_params"])

    def load(stem: str) -> Tensor:
        return torch.from_numpy(np.asarray(load_audio(audio_of_stem[stem], settings.sample_rate)))[None]

    return add_missing_s2mel_files(out_dir, list(audio_of_stem), load, campplus, settings)
