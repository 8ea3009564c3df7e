"""The judges of a clip: the data tools' CTC ASR (what was said) and x-vector speaker model (whose voice).

``ModelScorer`` loads each model once (lazily, on first use) and times its work, so the evaluation can say
where its seconds went. ``Scorer`` is the seam tests use to inject transcripts and similarities.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from trainer.evaluation.errors import EvaluationError


class Scorer(Protocol):
    seconds: dict[str, float]  # "asr", "speaker": time spent since made

    def transcribe(self, clips: Sequence[np.ndarray], sample_rate: int, language: str | None) -> list[str]: ...

    def similarity(self, clips: Sequence[np.ndarray], sample_rate: int, reference_audio: Path) -> list[float]: ...


class ModelScorer:
    """``asr``: a CTC model folder or id (``asr_lang`` / ``second_asr_lang``: its MMS adapter for the main /
    the second language, None for the model's own); ``speaker``: an x-vector model folder or id, or empty
    (no similarity)."""

    def __init__(self, asr: str, speaker: str = "", device: str = "cpu", asr_lang: str | None = None,
                 main_language: str | None = None, second_asr_lang: str | None = None) -> None:
        if not asr:
            raise EvaluationError("evaluation needs a speech recogniser: give --eval-asr (a CTC model folder or id, "
                                  "e.g. facebook/mms-1b-all with --eval-asr-lang amh)")
        self.asr_model, self.speaker_model, self.device = asr, speaker, device
        self.asr_lang, self.main_language = asr_lang or None, main_language
        self.second_asr_lang = second_asr_lang or None
        self._asr: dict[str | None, Any] = {}
        self._speaker: Any = None
        self._reference_embeddings: dict[str, Any] = {}
        self.seconds = {"asr": 0.0, "speaker": 0.0}

    def _asr_for(self, language: str | None) -> Any:
        from data_tools.asr import AsrError, load_ctc_asr

        adapter = self.asr_lang if language == self.main_language else self.second_asr_lang
        if adapter not in self._asr:
            try:
                self._asr[adapter] = load_ctc_asr(self.asr_model, target_lang=adapter, device=self.device)
            except AsrError as exc:
                raise EvaluationError(f"--eval-asr: {exc}") from None
        return self._asr[adapter]

    def transcribe(self, clips: Sequence[np.ndarray], sample_rate: int, language: str | None) -> list[str]:
        from data_tools.asr import AsrError

        started = time.perf_counter()
        try:
            asr = self._asr_for(language)
            # A clip of (almost) no audio is transcribed as nothing rather than refused by the model.
            texts = ["" for _ in clips]
            usable = [i for i, clip in enumerate(clips) if clip.size >= sample_rate // 10]
            for index, transcript in zip(usable, asr.transcribe([clips[i] for i in usable], sample_rate)):
                texts[index] = transcript.text
            return texts
        except AsrError as exc:
            raise EvaluationError(f"--eval-asr: {exc}") from None
        finally:
            self.seconds["asr"] += time.perf_counter() - started

    def _embedder(self) -> Any:
        from data_tools.speaker_similarity import SpeakerModelError, load_speaker_model

        if self._speaker is None:
            try:
                self._speaker = load_speaker_model(self.speaker_model, device=self.device)
            except SpeakerModelError as exc:
                raise EvaluationError(f"--eval-speaker-model: {exc}") from None
        return self._speaker

    def similarity(self, clips: Sequence[np.ndarray], sample_rate: int, reference_audio: Path) -> list[float]:
        """Cosine of each clip's x-vector with the reference's (nan for a clip too short to embed)."""
        import torch

        from data_tools.audio import AudioError, load_audio
        from data_tools.speaker_similarity import SpeakerModelError

        if not self.speaker_model:
            return [float("nan")] * len(clips)
        started = time.perf_counter()
        try:
            embedder = self._embedder()
            key = str(reference_audio)
            if key not in self._reference_embeddings:
                wave = load_audio(reference_audio, embedder.sample_rate)
                self._reference_embeddings[key] = embedder.embed([wave], embedder.sample_rate)[0]
            reference = self._reference_embeddings[key]
            scores = [float("nan")] * len(clips)
            usable = [i for i, clip in enumerate(clips) if clip.size >= sample_rate // 10]
            if usable:
                embeddings = embedder.embed([clips[i] for i in usable], sample_rate)
                for index, row in zip(usable, embeddings):
                    scores[index] = float(torch.nn.functional.cosine_similarity(row, reference, dim=0))
            return scores
        except (SpeakerModelError, AudioError) as exc:
            raise EvaluationError(f"speaker similarity: {exc}") from None
        finally:
            self.seconds["speaker"] += time.perf_counter() - started
