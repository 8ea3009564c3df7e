"""Text + reference voice -> 24 kHz speech with an IndexTTS v1.5 GPT and its BigVGAN: ``Synthesizer``.

The path, as upstream's infer.py runs it per sentence (shared/reference/fixtures_indextts15_infer/FIXTURES.md):

1. text -> the training front-end and tokenizer (``TextTokenizer.encode``, the same call as the trainer);
2. reference audio -> mono 24 kHz -> the training mel features (``data_tools.features.mel_spectrogram``)
   -> conditioning latents (``model.get_conditioning``) and the ECAPA speaker embedding (vocoder);
3. codes generated with a KV cache (``generation.generate_codes``: greedy, beam search, sampling);
4. ``remove_long_silence``; the GPT latent of the codes (``model.latent_with_conds``);
5. BigVGAN -> waveform in [-1, 1]; :func:`trainer.synthesis.wav.write_wav` stores it as 16-bit PCM the way
   infer.py converts it.

Public API (the trainer's samples and the UI's Test tab call these):

    synth = Synthesizer.load(checkpoint, config, tokenizer, vocoder, device="cpu")
    synth = Synthesizer(model, vocoder_model, tokenizer)          # the live model itself, no reloading
    synth = Synthesizer.from_state(gpt_config, state_dict, vocoder_model, tokenizer, device)  # a private copy
    vocoder_model = load_vocoder(path, config, device)              # trainer.synthesis.vocoder_loading
    results = synth.synthesize(["text", ...], reference, DecodeSettings(mode="beam"))
    results[0].waveform  # float32 numpy (N,), results[0].sample_rate == 24000

``reference`` is an audio path (any format libsndfile reads, any rate) or a log-mel tensor (100, T) or
(1, 100, T). ``synthesize`` runs under ``torch.no_grad``, restores every module's train/eval flag
afterwards, and never touches the global RNG streams (python ``random``, numpy, torch's default
generators): sampling draws from a private ``torch.Generator`` seeded from ``settings.seed`` (one stream
per call, so the same call with the same seed gives the same audio). Bad input raises
:class:`SynthesisError` (one line).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from data_tools.features import N_MELS, mel_spectrogram
from data_tools.shape_rules import MAX_COND_FRAMES, MIN_COND_FRAMES
from networks.bigvgan import BigVGAN
from networks.indextts15 import VERSION
from networks.unified_voice import UnifiedVoice
from trainer.synthesis.errors import SynthesisError
from trainer.synthesis.eval_mode import EvalMode
from trainer.synthesis.generation import DecodeSettings, generate_codes, max_codes_for, remove_long_silence
from trainer.synthesis.text_inputs import GptTextInputs, check_tokenizer_rows

SAMPLE_RATE = 24_000


@dataclass
class SynthResult:
    text: str
    waveform: np.ndarray  # float32 (N,), in [-1, 1]
    sample_rate: int
    codes: np.ndarray  # int64 (M,): the codes the vocoder voiced (after remove_long_silence, no stop id)
    text_ids: list[int]
    hit_stop: bool  # False: generation ran into the code limit (the speech may be cut off)
    audio_seconds: float
    seconds: float  # wall time for this text (generation + latent + vocoder)
    notes: list[str] = field(default_factory=list)

    @property
    def real_time_factor(self) -> float | None:
        """Seconds taken per second of audio (< 1: faster than real time); None for empty audio."""
        return self.seconds / self.audio_seconds if self.audio_seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly summary (no waveform)."""
        return {
            "text": self.text, "text_tokens": len(self.text_ids), "codes": int(self.codes.size),
            "hit_stop": self.hit_stop, "audio_seconds": round(self.audio_seconds, 4),
            "seconds": round(self.seconds, 4),
            "real_time_factor": None if self.real_time_factor is None else round(self.real_time_factor, 4),
            "notes": list(self.notes),
        }


@dataclass
class PreparedReference:
    mel: Tensor  # (1, 100, T) on the device
    conds: Tensor  # (1, n_cond, D)
    speaker: Tensor  # (1, 1, S)
    seconds: float  # time spent preparing it


class Synthesizer(GptTextInputs):
    """An IndexTTS v1.5 GPT + BigVGAN (+ tokenizer for text input); see the module docstring."""

    def __init__(self, model: UnifiedVoice, vocoder: BigVGAN, tokenizer: Any | None = None, *,
                 language: str | None = None) -> None:
        if getattr(model, "version", None) != VERSION:
            raise SynthesisError(f"this synthesizer speaks the IndexTTS-1.5 GPT only, got version {model.version}")
        if vocoder.spec.gpt_dim != model.model_dim:
            raise SynthesisError(f"the vocoder expects GPT latents of width {vocoder.spec.gpt_dim} (bigvgan.gpt_dim) "
                                 f"but the GPT's model_dim is {model.model_dim}: they do not belong together")
        if vocoder.spec.num_mels != N_MELS:
            raise SynthesisError(f"the vocoder's speaker encoder reads {vocoder.spec.num_mels} mel bands, "
                                 f"the features have {N_MELS}")
        gpt_device = next(model.parameters()).device
        vocoder_device = next(vocoder.parameters()).device
        if gpt_device != vocoder_device:
            raise SynthesisError(f"the GPT is on {gpt_device} but the vocoder on {vocoder_device}: load the vocoder "
                                 "on the GPT's device")
        check_tokenizer_rows(model, tokenizer)
        self.bind_text(model, tokenizer, language)
        self.vocoder = vocoder

    @classmethod
    def load(cls, checkpoint: str | Path, config: str | Path, tokenizer: str | Path | None,
             vocoder: str | Path, device: str | torch.device = "cpu", *, language: str | None = None,
             adapter: bool = True) -> Synthesizer:
        """Load a GPT checkpoint (ours, an export or a bare gpt.pth), a config.yaml, the tokenizer model and
        a BigVGAN generator file (``bigvgan_generator.pth``). Raises SynthesisError / ConfigError /
        TokenizerError / CheckpointError, each one line."""
        from data_tools.config import load_config
        from data_tools.text_tokenizer import TextTokenizer
        from trainer.synthesis.gpt_loading import load_gpt
        from trainer.synthesis.vocoder_loading import load_vocoder

        loaded = load_config(config)
        text_tokenizer = TextTokenizer(tokenizer, language) if tokenizer is not None else None
        model = load_gpt(checkpoint, loaded, config, device, adapter=adapter)  # adapter: a LoRA checkpoint's
        voc = load_vocoder(vocoder, loaded, device, source=str(config))
        return cls(model, voc, text_tokenizer, language=language)

    @classmethod
    def from_state(cls, gpt_config: dict[str, Any], state_dict: dict[str, Tensor], vocoder: BigVGAN,
                   tokenizer: Any | None = None, device: str | torch.device = "cpu", *,
                   language: str | None = None) -> Synthesizer:
        """A private copy of a GPT from an in-memory state dict (e.g. a checkpoint dict's ``model``), built
        from its effective ``gpt:`` config; the caller's tensors are not shared with training."""
        from trainer.synthesis.gpt_loading import model_from_state

        state = {k: v.detach().clone() for k, v in state_dict.items()}
        return cls(model_from_state(gpt_config, state, "the given state dict", device), vocoder, tokenizer,
                   language=language)

    @property
    def sample_rate(self) -> int:
        return self.vocoder.spec.sampling_rate

    # ----- inputs ---------------------------------------------------------------------------------------

    def text_ids(self, text: str, where: str = "text") -> list[int]:
        """Token ids of ``text`` (front-end + tokenizer), refused when empty or beyond max_text_tokens."""
        self.require_text(text, where)
        ids = self.tokenizer.encode(text, self.language)
        if not ids:
            raise SynthesisError(f"{where} is empty after text normalisation: {text!r}")
        self.check_text_ids(ids, where)
        return ids

    def check_text_ids(self, ids: Sequence[int], where: str = "text") -> None:
        if len(ids) > self.max_text_tokens:
            raise SynthesisError(f"{where} is too long: {len(ids)} tokens, the model takes at most "
                                 f"{self.max_text_tokens} (gpt.max_text_tokens); split it into shorter sentences")
        self.check_vocabulary(ids, where)

    def reference_mel(self, reference: str | Path | Tensor | np.ndarray) -> Tensor:
        """(1, 100, T) log-mel of an audio file, or a given mel (100, T) / (1, 100, T)."""
        if isinstance(reference, (str, Path)):
            from data_tools.audio import AudioError, load_audio

            try:
                samples = load_audio(reference, SAMPLE_RATE)
                mel = mel_spectrogram(torch.from_numpy(samples)).unsqueeze(0)
            except AudioError as exc:
                raise SynthesisError(f"reference audio: {exc}") from None
            except ValueError as exc:
                raise SynthesisError(f"reference audio {reference}: {exc}") from None
        else:
            mel = torch.as_tensor(reference, dtype=torch.float32)
            if mel.dim() == 2:
                mel = mel.unsqueeze(0)
            if mel.dim() != 3 or mel.size(0) != 1 or mel.size(1) != N_MELS:
                raise SynthesisError(f"reference mel must be ({N_MELS}, frames) or (1, {N_MELS}, frames), "
                                     f"got {tuple(mel.shape)}")
        frames = mel.size(-1)
        if frames > MAX_COND_FRAMES:
            raise SynthesisError(f"reference is too long: {frames} mel frames ({frames * 256 / SAMPLE_RATE:.0f} s), "
                                 f"at most {MAX_COND_FRAMES} fit the conditioning encoder; use a shorter clip")
        # The conditioning encoder's rule (as for training), and the vocoder's speaker encoder's own.
        minimum = max(MIN_COND_FRAMES, self.vocoder.speaker_encoder.min_frames)
        if frames < minimum:
            raise SynthesisError(f"reference is too short: {frames} mel frames, at least {minimum} needed (the "
                                 "conditioning encoder and the vocoder's speaker encoder)")
        if not bool(torch.isfinite(mel).all()):
            raise SynthesisError("reference mel holds NaN or infinite values")
        return mel.to(self.device)

    @torch.no_grad()
    def prepare_reference(self, reference: str | Path | Tensor | np.ndarray) -> PreparedReference:
        """Conditioning latents and speaker embedding of a reference (reuse it for many texts)."""
        started = time.perf_counter()
        mel = self.reference_mel(reference)
        with EvalMode(self.model, self.vocoder):
            lengths = torch.tensor([mel.size(-1)], device=mel.device)
            conds = self.model.get_conditioning(mel.to(self._dtype), lengths)
            speaker = self.vocoder.speaker_embedding(mel.transpose(1, 2))
        return PreparedReference(mel=mel, conds=conds, speaker=speaker, seconds=time.perf_counter() - started)

    @property
    def _dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    # ----- synthesis ------------------------------------------------------------------------------------

    def check_settings(self, settings: DecodeSettings) -> None:
        self.check_decode(settings)

    def synthesize(self, texts: Sequence[str], reference: str | Path | Tensor | np.ndarray | PreparedReference,
                   settings: DecodeSettings | None = None,
                   progress: Callable[[int, int], None] | None = None) -> list[SynthResult]:
        """One result per text, each voiced with ``reference``. All texts are checked before any work."""
        settings = settings or DecodeSettings()
        self.check_settings(settings)
        if isinstance(texts, str):
            texts = [texts]
        if not texts:
            raise SynthesisError("no text to synthesize")
        ids = [self.text_ids(text, f"text {i + 1}" if len(texts) > 1 else "text") for i, text in enumerate(texts)]
        prepared = reference if isinstance(reference, PreparedReference) else self.prepare_reference(reference)
        results = []
        for index, (text, text_ids) in enumerate(zip(texts, ids)):
            results.append(self._synthesize_one(text, text_ids, prepared, settings))
            if progress is not None:
                progress(index + 1, len(texts))
        return results

    def synthesize_ids(self, text_ids: Sequence[int], reference: str | Path | Tensor | np.ndarray | PreparedReference,
                       settings: DecodeSettings | None = None, text: str = "") -> SynthResult:
        """Like ``synthesize`` for one text given as token ids (no tokenizer needed)."""
        settings = settings or DecodeSettings()
        self.check_settings(settings)
        ids = [int(i) for i in text_ids]
        if not ids:
            raise SynthesisError("text is empty")
        self.check_text_ids(ids)
        prepared = reference if isinstance(reference, PreparedReference) else self.prepare_reference(reference)
        return self._synthesize_one(text, ids, prepared, settings)

    @torch.no_grad()
    def _synthesize_one(self, text: str, text_ids: list[int], ref: PreparedReference,
                        settings: DecodeSettings) -> SynthResult:
        started = time.perf_counter()
        device = self.device
        generator = None
        if settings.mode == "sample":
            generator = torch.Generator(device=device).manual_seed(int(settings.seed))
        ids = torch.tensor([text_ids], dtype=torch.long, device=device)
        notes: list[str] = []
        with EvalMode(self.model, self.vocoder):
            generated = generate_codes(self.model, ref.conds, ids, settings, generator=generator)
            raw = generated.codes
            hit_stop = bool((raw == self.model.stop_mel_token).any())
            if not hit_stop:
                notes.append(f"no stop code within {max_codes_for(self.model, settings)} codes: the speech may be "
                             "cut off (raise max_codes or shorten the text)")
            codes, lengths = remove_long_silence(raw, stop=self.model.stop_mel_token)
            count = int(lengths[0])
            if count == 0:
                notes.append("the model produced no codes (stop at once): empty audio")
                wav = np.zeros(0, dtype=np.float32)
            else:
                codes = codes[:, :count]
                latent = self.model.latent_with_conds(
                    ref.conds, ids, torch.tensor([ids.size(1)], device=device), codes,
                    torch.tensor([count], device=device))
                audio = self.vocoder.decode(latent.float(), ref.speaker)
                wav = audio.squeeze(0).squeeze(0).float().cpu().numpy()
        seconds = time.perf_counter() - started
        return SynthResult(
            text=text, waveform=wav, sample_rate=self.sample_rate,
            codes=codes[0, :count].cpu().numpy().astype(np.int64), text_ids=list(text_ids), hit_stop=hit_stop,
            audio_seconds=wav.size / self.sample_rate, seconds=seconds, notes=notes,
        )
