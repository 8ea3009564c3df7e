"""Text + reference voice (+ emotion) -> 22.05 kHz speech with IndexTTS2: ``S2MelSynthesizer``.

The order of upstream's ``IndexTTS2.infer()`` (shared/reference/README_indextts2_audio.md section 0):

1. speaker prompt: read like ``librosa.load`` (soxr_hq to 22050 Hz, cut to 15 s) -> ``audio_22k``; torchaudio's
   sinc ``Resample(22050, 16000)`` -> ``audio_16k``;
2. SeamlessM4T features of ``audio_16k`` -> w2v-BERT layer 17, normalised -> ``spk_cond_emb`` (1, T, W);
3. semantic codec ``quantize`` -> ``S_ref``; S2Mel log-mel of ``audio_22k`` -> ``ref_mel``; CAMPPlus of the
   Kaldi fbank of ``audio_16k`` -> ``style``; ``prompt_condition`` = length regulator of S_ref to T_ref frames;
4. emotion prompt (the speaker file itself unless another is given) read straight at 16 kHz (soxr) -> its own
   features ``emo_cond_emb``; emotion vector = ``merge_emovec`` (alpha 1 without an emotion reference), or the
   8-weight emotion matrix mix (``emo_vector``);
5. per text segment (:mod:`trainer.synthesis.segments`): codes from the GPT (``generation.generate_codes``,
   the same loop as v1.5, v2's 34-row conditioning block in front), cut at the first stop; the latent pass;
   S2Mel (gpt_layer + vq2emb -> length regulator to int(M * 1.72) -> CFM, ``steps`` Euler steps, CFG 0.7);
   BigVGAN v2 -> waveform in [-1, 1];
6. segments joined with 200 ms of silence; :func:`trainer.synthesis.wav.to_int16` gives upstream's int16.

Upstream's quirk kept on purpose: every conditioning call gets the feature *width* W as its length (mask =
frames < W, all true for prompts up to W frames; README 3.1). Feature tensors are (1, T, W) here as upstream
keeps them; the GPT takes channels-first (1, W, T), converted at the calls below.

Public API (the settings, voice and result types are in :mod:`trainer.synthesis.s2mel_types`):

    synth = S2MelSynthesizer.load(model_dir, w2v_bert=..., checkpoint=None, tokenizer=None, device="cpu")
    voice = synth.prepare_voice("prompt.wav")                 # reuse for many texts
    result = synth.synthesize("text", voice, EmotionControl(weights=[0, .3, 0, 0, 0, 0, .2, 0]),
                              DecodeSettings(...), MelSettings(steps=25))
    result.waveform  # float32 (N,) at result.sample_rate == 22050; write_wav gives upstream's int16
    synth.synthesize_ids([[ids...], ...], voice, ...)         # token ids given directly, one list per segment

Codes per segment: ``DecodeSettings.max_codes``, or infer_v2's default 1500 (capped by gpt.max_mel_tokens).

Randomness: GPT sampling draws from a private generator seeded with ``DecodeSettings.seed``; the CFM start
noise of segment i from a private generator seeded with ``MelSettings.seed + i`` (on CPU this is what
``torch.manual_seed(seed)`` followed by ``torch.randn`` gives, so a fixed seed reproduces upstream's run), or
from ``noise`` (a callable (segment index, shape) -> tensor), the seam tests use for stored noise.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from generations.model_facts import S2MEL
from generations.registry import generation_of_model
from networks.emotion_matrix import (
    mix_with_emotion_matrix,
    scale_emotion_weights,
    select_emotion_vector,
)
from networks.frontends.resample import load_audio_like_librosa, sinc_resample
from networks.frontends.s2mel_mel import S2MelMelSettings, s2mel_log_mel
from networks.frontends.seamless_features import extract_features
from networks.indextts2 import IndexTTS2Networks
from networks.s2mel import target_mel_frames
from trainer.synthesis.errors import SynthesisError
from trainer.synthesis.eval_mode import EvalMode
from trainer.synthesis.generation import DecodeSettings, generate_codes, max_codes_for
from trainer.synthesis.s2mel_types import (
    EmotionControl,
    MelSettings,
    NoiseSource,
    S2MelSynthResult,
    SegmentInfo,
    VoicePrompt,
    seeded_noise,
)
from trainer.synthesis.segments import DEFAULT_MAX_SEGMENT_TOKENS, TextSegment, split_segments
from trainer.synthesis.text_inputs import GptTextInputs, check_tokenizer_rows

PROMPT_SECONDS = 15.0  # upstream cuts both prompts to 15 s
EMOTION_RATE = 16000
SEGMENT_SILENCE_MS = 200  # infer_v2's interval_silence
DEFAULT_MAX_CODES = 1500  # infer_v2's max_mel_tokens default (the config's 1815 is the table size)

def conditioning_lengths(features: Tensor) -> Tensor:
    """Upstream's lengths for every conditioning call: the feature width W, not the frame count (README 3.1)."""
    return torch.tensor([features.shape[-1]], device=features.device)


class S2MelSynthesizer(GptTextInputs):
    """GPT -> S2Mel -> BigVGAN v2 inference: IndexTTS2's over loaded networks (``IndexTTS2Networks``) and an
    optional tokenizer; a generation whose pipeline is a variant of it subclasses it (IndexTTS-2.5)."""

    MEL_SETTINGS: type[MelSettings] = MelSettings  # the S2Mel settings this synthesizer takes

    def __init__(self, nets: IndexTTS2Networks, tokenizer: Any | None = None, *, language: str | None = None,
                 max_segment_tokens: int = DEFAULT_MAX_SEGMENT_TOKENS) -> None:
        model = nets.gpt
        try:
            held = generation_of_model(model)
        except LookupError:
            raise SynthesisError(f"IndexTTS2 synthesis needs an IndexTTS GPT, got {type(model).__name__}") from None
        if held.model.latent_decoder != S2MEL:  # its entry says what speaks its latents
            raise SynthesisError(f"IndexTTS2 synthesis needs a GPT whose latents an S2Mel decodes; an {held.name} "
                                 f"GPT's are spoken by {held.model.latent_decoder}")
        width = nets.s2mel.config.gpt_dim
        if width != model.model_dim:
            raise SynthesisError(f"the S2Mel gpt_layer takes GPT latents of width {width} but the GPT's model_dim "
                                 f"is {model.model_dim}: they do not belong together")
        if nets.codec.config.hidden_size != model.cond_input_size:
            raise SynthesisError(f"the GPT reads {model.cond_input_size}-wide semantic features but the codec's "
                                 f"are {nets.codec.config.hidden_size} wide")
        check_tokenizer_rows(model, tokenizer)
        self.nets = nets
        self.bind_text(model, tokenizer, language)
        if int(max_segment_tokens) < 1:
            raise SynthesisError(f"max_segment_tokens must be >= 1, got {max_segment_tokens}")
        self.max_segment_tokens = min(int(max_segment_tokens), self.max_text_tokens)
        self.mel_settings = S2MelMelSettings.from_preprocess_params(nets.config["s2mel"]["preprocess_params"])

    @classmethod
    def load(cls, model_dir: str | Path, *, w2v_bert: str | Path | None = None, checkpoint: str | Path | None = None,
             tokenizer: str | Path | None = None, language: str | None = None, device: str | torch.device = "cpu",
             local_files_only: bool = False, max_segment_tokens: int = DEFAULT_MAX_SEGMENT_TOKENS,
             adapter: bool = True) -> S2MelSynthesizer:
        """An IndexTTS2 download folder (see ``networks.indextts2``); ``checkpoint`` replaces its ``gpt.pth``
        with any v2 GPT checkpoint (ours, an export, a bare gpt.pth); ``tokenizer`` defaults to the folder's
        ``bpe.model``. Raises SynthesisError (one line) for missing or unfitting files."""
        from networks.indextts2 import load_indextts2
        from trainer.synthesis.gpt_loading import load_gpt

        try:
            nets = load_indextts2(model_dir, w2v_bert=w2v_bert, load_gpt_weights=checkpoint is None,
                                  local_files_only=local_files_only, device=device)
            if checkpoint is not None:
                nets.gpt = load_gpt(checkpoint, nets.config, nets.files.config_path, device, version="2",
                                    adapter=adapter)  # a LoRA checkpoint: merged adapters, or its base (False)
        except (ValueError, FileNotFoundError) as exc:
            # the networks' refusals (missing files/keys, strict-loading mismatches, bad config sections) are
            # ValueErrors with one-line messages
            raise SynthesisError(" ".join(str(exc).split())) from None
        text_tokenizer = None
        path = Path(tokenizer) if tokenizer is not None else nets.files.tokenizer
        if path is not None:
            from data_tools.text_tokenizer import TextTokenizer, TokenizerError

            try:
                text_tokenizer = TextTokenizer(path, language)
            except TokenizerError as exc:
                raise SynthesisError(str(exc)) from None
        return cls(nets, text_tokenizer, language=language, max_segment_tokens=max_segment_tokens)

    @property
    def sample_rate(self) -> int:
        return self.nets.sample_rate

    # ----- text --------------------------------------------------------------------------------------------

    def segments(self, text: str, where: str = "text") -> list[TextSegment]:
        """The text through the front-end and tokenizer, cut into segments of at most 120 (or max_text_tokens)."""
        self.require_text(text, where)
        normalized = self.tokenizer.normalize(text, self.language)
        found = split_segments(normalized, self.tokenizer.encode_normalized, self.max_segment_tokens)
        if not found:
            raise SynthesisError(f"{where} is empty after text normalisation: {text!r}")
        for segment in found:
            self.check_text_ids(segment.ids, where)
        return found

    def check_text_ids(self, ids: Sequence[int], where: str = "text") -> None:
        if not ids:
            raise SynthesisError(f"{where} is empty")
        if len(ids) > self.max_text_tokens:
            raise SynthesisError(f"{where} has a segment of {len(ids)} tokens, the model takes at most "
                                 f"{self.max_text_tokens} (gpt.max_text_tokens)")
        self.check_vocabulary(ids, where)

    # ----- prompts -----------------------------------------------------------------------------------------

    def _read(self, path: str | Path, rate: int, what: str) -> Tensor:
        path = Path(path)
        if not path.is_file():
            raise SynthesisError(f"{what} {path}: file not found")
        try:
            samples = load_audio_like_librosa(path, sr=rate, max_seconds=PROMPT_SECONDS)
        except ValueError as exc:
            raise SynthesisError(f"{what}: {' '.join(str(exc).split())}") from None
        if samples.size < rate // 10:
            raise SynthesisError(f"{what} {path} is too short: {samples.size / rate:.2f} s, at least 0.1 s needed")
        return torch.from_numpy(np.ascontiguousarray(samples)).unsqueeze(0)

    @torch.no_grad()
    def semantic_features(self, audio_16k: Tensor) -> Tensor:
        """(1, N) 16 kHz audio -> normalised w2v-BERT layer-17 features (1, T, W)."""
        features, mask = extract_features(self.nets.extractor, audio_16k.cpu())
        with EvalMode(self.nets.semantic):
            return self.nets.semantic(features.to(self.device), mask.to(self.device))

    def emotion_features(self, path: str | Path, what: str = "emotion reference") -> Tensor:
        """An emotion prompt file read straight at 16 kHz -> its features (1, T, W)."""
        return self.semantic_features(self._read(path, EMOTION_RATE, what))

    def prepare_voice(self, path: str | Path) -> VoicePrompt:
        """Everything the speaker prompt file gives (the default emotion prompt is the same file at 16 kHz)."""
        audio_22k = self._read(path, self.mel_settings.sample_rate, "reference audio")
        return self.voice_from_audio(audio_22k, self._read(path, EMOTION_RATE, "reference audio"))

    @torch.no_grad()
    def voice_from_audio(self, audio_22k: Tensor, emotion_16k: Tensor) -> VoicePrompt:
        """The prompt from audio already read: (1, N) at 22050 Hz and the emotion prompt (1, N') at 16 kHz."""
        started = time.perf_counter()
        nets = self.nets
        with EvalMode(self.model, nets.semantic, nets.codec, nets.campplus, nets.s2mel):
            audio_16k = sinc_resample(audio_22k, self.mel_settings.sample_rate, EMOTION_RATE, kernel_dtype="float64")
            features = self.semantic_features(audio_16k)
            _, semantic_ref = nets.codec.quantize(features)
            ref_mel = s2mel_log_mel(audio_22k, self.mel_settings).to(self.device)
            style = nets.campplus.style_of(audio_16k)
            prompt_condition = nets.s2mel.prompt_condition(semantic_ref, ref_mel.shape[-1])
            latents = self.speaker_latents(features)
            emotion = self.semantic_features(emotion_16k)
        return VoicePrompt(
            audio_22k=audio_22k, audio_16k=audio_16k, features=features, semantic_ref=semantic_ref, ref_mel=ref_mel,
            style=style, prompt_condition=prompt_condition, speaker_latents=latents, emotion_features=emotion,
            seconds=time.perf_counter() - started,
        )

    @torch.no_grad()
    def speaker_latents(self, features: Tensor) -> Tensor:
        """(1, T, W) speaker features -> the GPT's (1, 32, D) conditioning latents (speech_conditioning_latent)."""
        with EvalMode(self.model):
            return self.model.get_conditioning(features.transpose(1, 2), conditioning_lengths(features))

    @torch.no_grad()
    def emotion_vector(self, voice: VoicePrompt, emotion: EmotionControl | None = None,
                       emotion_features: Tensor | None = None) -> Tensor:
        """The (1, D) emotion vector infer adds to every speaker latent.

        ``emotion_features`` (1, T, W) stands for ``emotion.reference`` when already computed.
        """
        emotion = emotion or EmotionControl()
        problems = emotion.problems()
        if problems:
            raise SynthesisError("; ".join(problems))
        alpha = 1.0
        reference = voice.emotion_features
        if emotion.weights is None and (emotion.reference is not None or emotion_features is not None):
            reference = emotion_features if emotion_features is not None else self.emotion_features(emotion.reference)
            alpha = float(emotion.alpha)
        with EvalMode(self.model):
            emovec = self.model.merge_emovec(
                voice.features.transpose(1, 2), reference.transpose(1, 2), conditioning_lengths(voice.features),
                conditioning_lengths(reference), alpha=alpha)
        if emotion.weights is None:
            return emovec
        weights = scale_emotion_weights(emotion.weights, emotion.alpha)
        _, matrix_vector = select_emotion_vector(voice.style, weights, self.nets.spk_matrix, self.nets.emo_matrix,
                                                 self.nets.emo_num)
        return mix_with_emotion_matrix(matrix_vector, weights, emovec)

    # ----- synthesis ---------------------------------------------------------------------------------------

    def check_settings(self, settings: DecodeSettings, mel: MelSettings) -> None:
        self.check_decode(settings, *mel.problems())

    def synthesize(self, text: str, voice: VoicePrompt | str | Path, emotion: EmotionControl | None = None,
                   settings: DecodeSettings | None = None, mel: MelSettings | None = None, *,
                   noise: NoiseSource | None = None, emotion_vector: Tensor | None = None) -> S2MelSynthResult:
        """One text (cut into segments) voiced with ``voice`` -> the joined waveform.

        ``emotion_vector`` (from :meth:`emotion_vector`) skips recomputing it (and re-reading an emotion file).
        """
        found = self.segments(text)
        return self._run(text, found, voice, emotion, settings, mel, noise, emotion_vector=emotion_vector)

    def synthesize_ids(self, segments: Sequence[Sequence[int]], voice: VoicePrompt | str | Path,
                       emotion: EmotionControl | None = None, settings: DecodeSettings | None = None,
                       mel: MelSettings | None = None, *, noise: NoiseSource | None = None,
                       text: str = "", trace: list[dict[str, Any]] | None = None,
                       emotion_vector: Tensor | None = None) -> S2MelSynthResult:
        """Like ``synthesize`` with the token ids of each segment given (no tokenizer needed).

        ``trace`` (a list) receives one dict per segment with every intermediate: ``codes_raw``, ``latent``,
        the S2Mel stages (``gpt_layer_out``, ``S_infer``, ``cond``, ``cat_condition``, ``x_steps``, ...),
        ``mel`` and ``wav``.
        """
        found = [TextSegment(text, [int(i) for i in ids]) for ids in segments]
        if not found:
            raise SynthesisError("no text segment given")
        for segment in found:
            self.check_text_ids(segment.ids)
        return self._run(text, found, voice, emotion, settings, mel, noise, trace, emotion_vector)

    @torch.no_grad()
    def _run(self, text: str, segments: list[TextSegment], voice: VoicePrompt | str | Path,
             emotion: EmotionControl | None, settings: DecodeSettings | None, mel: MelSettings | None,
             noise: NoiseSource | None, trace: list[dict[str, Any]] | None = None,
             emotion_vector: Tensor | None = None) -> S2MelSynthResult:
        settings = settings or DecodeSettings()
        if settings.max_codes is None:
            settings = replace(settings, max_codes=min(DEFAULT_MAX_CODES, max_codes_for(self.model, settings)))
        mel = mel or MelSettings()
        self.check_settings(settings, mel)
        if emotion is not None and emotion.problems():
            raise SynthesisError("; ".join(emotion.problems()))
        started = time.perf_counter()
        if not isinstance(voice, VoicePrompt):
            voice = self.prepare_voice(voice)
        emovec = emotion_vector if emotion_vector is not None else self.emotion_vector(voice, emotion)
        conds = self.model.build_conds(voice.speaker_latents, emovec)
        generator = None
        if settings.mode == "sample":
            generator = torch.Generator(device=self.device).manual_seed(int(settings.seed))
        noise = noise or seeded_noise(mel.seed)
        silence = np.zeros(self.sample_rate * SEGMENT_SILENCE_MS // 1000, dtype=np.float32)
        pieces: list[np.ndarray] = []
        infos: list[SegmentInfo] = []
        notes: list[str] = []
        for index, segment in enumerate(segments):
            taps: dict[str, Any] | None = {"emovec": emovec} if trace is not None else None
            wav, info = self._segment(index, segment, voice, conds, settings, mel, noise, generator, taps)
            if trace is not None and taps is not None:
                trace.append(taps)
            if not info.hit_stop:
                notes.append(f"segment {index + 1}: no stop code within {max_codes_for(self.model, settings)} "
                             "codes: the speech may be cut off")
            if wav.size == 0:
                notes.append(f"segment {index + 1}: the model produced no codes (stop at once)")
            if pieces:
                pieces.append(silence)
            pieces.append(wav)
            infos.append(info)
        waveform = np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
        return S2MelSynthResult(
            text=text, waveform=waveform, sample_rate=self.sample_rate,
            codes=np.concatenate([info.codes for info in infos]), text_ids=[i for s in segments for i in s.ids],
            hit_stop=all(info.hit_stop for info in infos), audio_seconds=waveform.size / self.sample_rate,
            seconds=time.perf_counter() - started, notes=notes, segments=infos,
        )

    def _segment(self, index: int, segment: TextSegment, voice: VoicePrompt, conds: Tensor,
                 settings: DecodeSettings, mel: MelSettings, noise: NoiseSource,
                 generator: torch.Generator | None,
                 trace: dict[str, Any] | None = None) -> tuple[np.ndarray, SegmentInfo]:
        nets, model, device = self.nets, self.model, self.device
        ids = torch.tensor([segment.ids], dtype=torch.long, device=device)
        with EvalMode(model, nets.codec, nets.s2mel, nets.vocoder):
            raw = generate_codes(model, conds, ids, settings, generator=generator).codes
            stops = (raw[0] == model.stop_mel_token).nonzero()
            count = int(stops[0, 0]) if stops.numel() else raw.size(1)
            codes = raw[:, :count]
            info = SegmentInfo(text=segment.text, text_ids=list(segment.ids),
                               codes=codes[0].cpu().numpy().astype(np.int64), hit_stop=bool(stops.numel()),
                               mel_frames=target_mel_frames(count))
            if info.mel_frames < 1:
                return np.zeros(0, dtype=np.float32), info
            latent = model.latent_with_conds(conds, ids, torch.tensor([ids.size(1)], device=device), codes,
                                             torch.tensor([count], device=device))
            shape = (1, voice.ref_mel.shape[1], voice.ref_mel.shape[-1] + info.mel_frames)
            start = noise(index, shape).to(device=device, dtype=torch.float32)
            spectrogram = nets.s2mel.infer(
                prompt_condition=voice.prompt_condition, ref_mel=voice.ref_mel, style=voice.style,
                gpt_latent=latent.float(), code_embedding=nets.codec.vq2emb(codes), steps=mel.steps,
                cfg_rate=mel.cfg_rate, noise=start, trace=trace)
            wav = nets.vocoder(spectrogram.float())
        if trace is not None:
            trace.update(codes_raw=raw, codes=codes, latent=latent, noise=start, mel=spectrogram, wav=wav)
        return wav.reshape(-1).float().cpu().numpy(), info
