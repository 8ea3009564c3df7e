"""Text + reference voice (+ emotion) -> 22.05 kHz speech with IndexTTS-2.5: ``SynthesizerV25``.

IndexTTS-2.5 is a variant of the IndexTTS2 pipeline (:mod:`trainer.synthesis.s2mel_pipeline`): the same prompt
reading, w2v-BERT features, emotion vector (``merge_emovec`` or the emotion-matrix mix), segment loop, 200 ms
joins and int16 rule, and the same generation loop (``generation.generate_codes``). What differs (shared
reference README_audio.md section 5), each in one override here:

- conditioning: CAM++ ``style`` -> ``spk_emb_proj`` (one vector) + emotion vector, the 3-row block;
- text: ``TextTable`` (the checkpoint's scheme: ``bytes`` for a bare upstream gpt.pth, ``merges`` or
  ``translit``) with the ``"<|code|> "`` prefix, and the language row (``langs``) on every text position;
  segments of at most ``min(120, max_text_tokens)`` tokens, the prefix included, cut at sentence, clause and
  word boundaries (Ethiopic ``።`` ``፣`` ``፤`` among them; upstream cuts Amharic mid-word);
- prompt condition: the length regulator of the continuous w2v features (no codec quantisation);
- no GPT latent pass: ``codec.decode(codes)`` (2M frames at 50 Hz) -> S2Mel without gpt_layer, target length
  ``int(2M * 1.72 * duration_factor)`` (:class:`MelSettings25`; the codes are unchanged by the factor);
- BigVGAN v2, 22050 Hz.

Public API:

    synth = SynthesizerV25.load(model_dir, w2v_bert=..., checkpoint=None, scheme=None, language="am")
    voice = synth.prepare_voice("prompt.wav")
    result = synth.synthesize("ሰላም ለዓለም።", voice, EmotionControl(), DecodeSettings(...),
                              MelSettings25(steps=25, duration_factor=1.1))
    synth.synthesize_ids([[ids...]], voice, ...)  # ids as the tokenizer gives them (prefix included)
    synth.vocalize(codes, voice, MelSettings25(...))  # 25 Hz codes (1, M) -> waveform (1, 1, N)

Randomness as in IndexTTS2: a private generator for GPT sampling (``DecodeSettings.seed``), segment i's CFM
noise from ``MelSettings.seed + i`` or a ``noise`` callable.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from networks.indextts25 import IndexTTS25Networks
from networks.prep25 import speaker_audio_16k
from networks.s2mel import target_mel_frames
from networks.synthesis25 import PromptCondition, segment_mel, speaker_prompt_condition
from trainer.synthesis.errors import SynthesisError
from trainer.synthesis.eval_mode import EvalMode
from trainer.synthesis.generation import DecodeSettings, generate_codes
from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer
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

BARE_CHECKPOINT_SCHEME = "bytes"  # a gpt.pth that records no scheme: upstream's own table, no added ids
TEXT_ROW_TENSORS = ("text_embedding.weight", "text_head.weight", "text_head.bias")


@dataclass(frozen=True)
class MelSettings25(MelSettings):
    """IndexTTS2's S2Mel settings plus 2.5's ``duration_factor`` (> 0; 1 = upstream's default length)."""

    duration_factor: float = 1.0

    def problems(self) -> list[str]:
        out = super().problems()
        if not 0 < self.duration_factor <= 10:
            out.append(f"duration_factor must be in (0, 10], got {self.duration_factor}")
        return out


@dataclass(frozen=True)
class LanguageSegment(TextSegment):
    """A segment with the language its prefix and language row belong to."""

    language: str = ""


def duration_factor_of(mel: MelSettings) -> float:
    return float(mel.duration_factor) if isinstance(mel, MelSettings25) else 1.0


@dataclass
class LoadedGPT25:
    model: Any  # networks.gpt_v25.UnifiedVoiceV25
    scheme: str | None  # the text scheme the checkpoint records (ours), None for a bare gpt.pth


def load_gpt25_checkpoint(path: str | Path, config: Mapping[str, Any], device: torch.device | str = "cpu", *,
                          adapter: bool = True, adapter_file: str | Path | None = None) -> LoadedGPT25:
    """Any 2.5 GPT checkpoint: ours (its ``model_config`` and recorded text scheme), an export's or a bare
    gpt.pth (the config's gpt section, ``number_text_tokens`` from the weights' text rows). Strict.

    A LoRA training checkpoint speaks with its own adapters merged (``adapter=False``: its base weights);
    ``adapter_file`` (an ``adapter.pth``) is merged on top of whatever weights the checkpoint gives."""
    from networks.gpt_v25 import build_gpt_v25, load_gpt_v25
    from networks.loading import StateDictMismatchError
    from trainer.checkpoints import CheckpointError, load_checkpoint, model_state_of

    path = Path(path)
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        raise SynthesisError(str(exc)) from None
    state = model_state_of(ckpt)
    if state is None or "text_embedding.weight" not in state:
        raise SynthesisError(f"{path} holds no IndexTTS GPT weights (top-level keys: {', '.join(sorted(ckpt)[:6])})")
    if adapter:
        from trainer.lora_setup import merge_checkpoint_adapter

        state = merge_checkpoint_adapter(ckpt, state)
    if adapter_file is not None:
        from trainer.synthesis.adapter_file import merge_adapter_file

        state = merge_adapter_file(state, adapter_file)
    recorded = ckpt.get("model_config")
    if isinstance(recorded, Mapping) and "model_dim" in recorded:
        gpt = dict(recorded)
    else:
        gpt = dict(config["gpt"])
        gpt["number_text_tokens"] = int(state["text_embedding.weight"].shape[0]) - 1
    with torch.device("meta"):
        model = build_gpt_v25(gpt)
    weights = {k: (v.float() if v.is_floating_point() else v) for k, v in state.items()}
    try:
        load_gpt_v25(model, weights, str(path), assign=True)
    except StateDictMismatchError as exc:
        raise SynthesisError(" ".join(str(exc).split())) from None
    tokenizer = ckpt.get("tokenizer")
    scheme_record = tokenizer.get("text_scheme") if isinstance(tokenizer, Mapping) else None
    scheme = str(scheme_record["scheme"]) if isinstance(scheme_record, Mapping) and scheme_record.get("scheme") else None
    return LoadedGPT25(model=model.to(device).eval(), scheme=scheme)


@torch.no_grad()
def rows_from_upstream_order(model: Any, tokenizer: Any) -> bool:
    """A ``merges`` gpt.pth that records no scheme is an export (or made for stock inference): its text rows are
    in upstream's id order (ranks, added ranks, specials, spare row). Put them back in this tokenizer's id order,
    in place; returns whether anything moved (nothing for schemes without added tokens)."""
    if not tokenizer.added_tokens:
        return False
    order = torch.tensor(tokenizer.tokenizer.upstream_id_order(), dtype=torch.long)
    state = model.state_dict()
    for key in TEXT_ROW_TENSORS:
        if state[key].shape[0] != order.numel():
            raise SynthesisError(f"{key} has {state[key].shape[0]} rows, the '{tokenizer.scheme}' scheme's table "
                                 f"{order.numel()}: use the scheme the model was trained with")
    for key in TEXT_ROW_TENSORS:
        upstream = state[key].clone()
        state[key].index_copy_(0, order.to(upstream.device), upstream)  # studio row order[j] = upstream row j
    return True


class SynthesizerV25(S2MelSynthesizer):
    """IndexTTS-2.5 inference over loaded networks (``IndexTTS25Networks``) and a ``TextTable``."""

    MEL_SETTINGS = MelSettings25

    def __init__(self, nets: IndexTTS25Networks, tokenizer: Any | None = None, *, language: str | None = None,
                 max_segment_tokens: int = DEFAULT_MAX_SEGMENT_TOKENS) -> None:
        from networks.frontends.s2mel_mel import S2MelMelSettings
        from networks.gpt_v25 import UnifiedVoiceV25

        model = nets.gpt
        if not isinstance(model, UnifiedVoiceV25):
            raise SynthesisError("IndexTTS-2.5 synthesis needs an IndexTTS-2.5 GPT")
        width = nets.codec.config.hidden_size
        if nets.s2mel.config.semantic_dim != width:
            raise SynthesisError(f"S2Mel reads {nets.s2mel.config.semantic_dim}-wide features but the codec decodes "
                                 f"to {width}: the config's s2mel and semantic_codec sections do not belong together")
        text_rows = int(model.text_vocab_size)
        if tokenizer is not None and tokenizer.vocab_size > text_rows:
            raise SynthesisError(f"the '{tokenizer.scheme}' text scheme uses ids up to {tokenizer.vocab_size - 1} but "
                                 f"the GPT has {text_rows} text rows: use the scheme the model was trained with")
        if int(max_segment_tokens) < 1:
            raise SynthesisError(f"max_segment_tokens must be >= 1, got {max_segment_tokens}")
        self.nets = nets  # type: ignore[assignment]
        self.bind_text(model, tokenizer, language)
        self.max_segment_tokens = min(int(max_segment_tokens), self.max_text_tokens)
        self.mel_settings = S2MelMelSettings.from_preprocess_params(nets.config["s2mel"]["preprocess_params"])

    @classmethod
    def load(cls, model_dir: str | Path, *, w2v_bert: str | Path | None = None,  # type: ignore[override]
             checkpoint: str | Path | None = None, table: str | Path | None = None, scheme: str | None = None,
             merges: str | Path | None = None, language: str | None = None, device: str | torch.device = "cpu",
             local_files_only: bool = False, max_segment_tokens: int = DEFAULT_MAX_SEGMENT_TOKENS,
             adapter: bool = True, adapter_file: str | Path | None = None) -> SynthesizerV25:
        """A 2.5 download folder (``networks.indextts25``); ``checkpoint`` replaces its gpt.pth with any 2.5 GPT
        checkpoint. The text scheme: ``scheme`` if given, else the checkpoint's record, else ``bytes`` (a bare
        upstream gpt.pth); ``table`` defaults to the folder's .tiktoken (the base table: an export's extended
        table is refused, use the base table with the merges). A gpt.pth recording no scheme has its text rows
        in upstream's order (an export), put back in the tokenizer's (:func:`rows_from_upstream_order`).
        ``adapter`` / ``adapter_file``: LoRA, as :func:`load_gpt25_checkpoint` (a file also applies to the
        folder's own gpt.pth). Raises SynthesisError (one line)."""
        from networks.indextts25 import IndexTTS25FilesError, load_indextts25

        own_gpt = checkpoint is None and adapter_file is None
        try:
            nets = load_indextts25(model_dir, w2v_bert=w2v_bert, table=table, load_gpt_weights=own_gpt,
                                   local_files_only=local_files_only, device=device)
        except (IndexTTS25FilesError, ValueError, OSError) as exc:
            raise SynthesisError(" ".join(str(exc).split())) from None
        if own_gpt:
            return cls.speaking(nets, None, scheme=scheme, merges=merges, language=language,
                                max_segment_tokens=max_segment_tokens)
        return cls.with_checkpoint(nets, checkpoint or nets.files.gpt, scheme=scheme, merges=merges,
                                   language=language, device=device, max_segment_tokens=max_segment_tokens,
                                   adapter=adapter, adapter_file=adapter_file)

    @classmethod
    def with_checkpoint(cls, nets: IndexTTS25Networks, checkpoint: str | Path, *, scheme: str | None = None,
                        merges: str | Path | None = None, language: str | None = None,
                        device: str | torch.device = "cpu", max_segment_tokens: int = DEFAULT_MAX_SEGMENT_TOKENS,
                        adapter: bool = True, adapter_file: str | Path | None = None) -> SynthesizerV25:
        """A folder's networks already loaded (``nets``; its own GPT, if any, is left as it is) speaking with
        any 2.5 GPT checkpoint (:func:`load_gpt25_checkpoint`: LoRA adapters merged), in the checkpoint's text
        scheme: how evaluation speaks each checkpoint of a run with networks loaded once. SynthesisError."""
        from dataclasses import replace

        loaded = load_gpt25_checkpoint(checkpoint, nets.config, device, adapter=adapter, adapter_file=adapter_file)
        return cls.speaking(replace(nets, gpt=loaded.model), loaded.scheme, scheme=scheme, merges=merges,
                            language=language, max_segment_tokens=max_segment_tokens)

    @classmethod
    def speaking(cls, nets: IndexTTS25Networks, recorded: str | None, *, scheme: str | None = None,
                 merges: str | Path | None = None, language: str | None = None,
                 max_segment_tokens: int = DEFAULT_MAX_SEGMENT_TOKENS) -> SynthesizerV25:
        """``nets`` with the tokenizer of ``scheme``, else of the scheme its GPT records (``recorded``), else of the
        one an export folder's files say (``generations.indextts25.exported_table``: an extended table holds its merges),
        else ``bytes``; a GPT recording none has its text rows in upstream's order, put back in the tokenizer's."""
        from generations.indextts25.data.text_table import DEFAULT_MERGES, TextTable
        from generations.indextts25.data.tiktoken_table import TableError
        from generations.indextts25.exported_table import exported_tokenizer, folder_scheme

        table = nets.files.table
        exported = folder_scheme(nets.files.folder, table) if recorded is None else None  # an export's own files
        chosen = scheme or recorded or exported or BARE_CHECKPOINT_SCHEME
        try:
            tokenizer = exported_tokenizer(table) if chosen == "merges" and merges is None else None
            if tokenizer is None:
                tokenizer = TextTable(table, scheme=chosen,
                                      merges=(merges or DEFAULT_MERGES) if chosen == "merges" else None)
        except (TableError, OSError) as exc:
            raise SynthesisError(" ".join(str(exc).split())) from None
        if recorded is None:  # an export's or a bare gpt.pth: upstream's row order
            rows_from_upstream_order(nets.gpt, tokenizer)
        return cls(nets, tokenizer, language=language, max_segment_tokens=max_segment_tokens)

    # ----- text --------------------------------------------------------------------------------------------

    def language_of(self, text: str = "") -> str:
        from data_tools.text import detect_language

        language = self.language or detect_language(text)
        if not language:
            raise SynthesisError("cannot tell the text's language from its script: give the language code")
        return language

    def segments(self, text: str, where: str = "text") -> list[TextSegment]:
        """The text through the studio's normalisation, cut into segments of at most ``max_segment_tokens``
        ids each, the ``"<|code|> "`` prefix included (upstream's budget: limit minus the prefix's ids)."""
        from data_tools.text import language_normalize

        if self.tokenizer is None:
            raise SynthesisError("no tokenizer: pass one to synthesize text (or use synthesize_ids)")
        if not text.strip():
            raise SynthesisError(f"{where} is empty")
        language = self.language_of(text)
        normalized = language_normalize(text, language)
        prefix = self.tokenizer.encode("", language)  # "<|am|> " -> [<|am|>, " "]
        budget = self.max_segment_tokens - len(prefix)
        if budget < 1:
            raise SynthesisError(f"segments of {self.max_segment_tokens} tokens leave no room after the language "
                                 f"prefix ({len(prefix)} tokens)")
        head = prefix[:-1] if len(prefix) > 1 else prefix  # the pieces' ids carry their own leading space
        found = split_segments(normalized, lambda piece: self.tokenizer.encode_text_only(piece, language), budget)
        if not found:
            raise SynthesisError(f"{where} is empty after text normalisation: {text!r}")
        segments = [LanguageSegment(piece.text, head + piece.ids, language) for piece in found]
        for segment in segments:
            self.check_text_ids(segment.ids, where)
        return segments  # type: ignore[return-value]

    def synthesize_ids(self, segments: Sequence[Sequence[int]], voice: VoicePrompt | str | Path,
                       emotion: EmotionControl | None = None, settings: DecodeSettings | None = None,
                       mel: MelSettings | None = None, *, noise: NoiseSource | None = None,
                       text: str = "", trace: list[dict[str, Any]] | None = None,
                       emotion_vector: Tensor | None = None, language: str | None = None) -> S2MelSynthResult:
        """Token ids per segment (prefix included, as ``TextTable.encode`` gives them) in ``language``
        (default: the synthesizer's). ``trace`` receives each segment's intermediates (see ``vocalize``)."""
        language = language or self.language_of(text)
        found = [LanguageSegment(text, [int(i) for i in ids], language) for ids in segments]
        if not found:
            raise SynthesisError("no text segment given")
        for segment in found:
            self.check_text_ids(segment.ids)
        return self._run(text, found, voice, emotion, settings, mel, noise, trace, emotion_vector)  # type: ignore[arg-type]

    def check_text_ids(self, ids: Sequence[int], where: str = "text") -> None:
        # The prefix drops every start/stop id (0 "!" and 1 '"' in this vocabulary), as upstream does.
        kept = [i for i in ids if int(i) not in (self.model.start_text_token, self.model.stop_text_token)]
        super().check_text_ids(kept or list(ids), where)

    # ----- prompts -----------------------------------------------------------------------------------------

    @torch.no_grad()
    def voice_from_audio(self, audio_22k: Tensor, emotion_16k: Tensor) -> VoicePrompt:
        """The prompt from audio already read: (1, N) at 22050 Hz and the emotion prompt (1, N') at 16 kHz."""
        import time

        started = time.perf_counter()
        nets = self.nets
        with EvalMode(self.model, nets.semantic, nets.campplus, nets.s2mel):
            audio_16k = speaker_audio_16k(audio_22k)
            features = self.semantic_features(audio_16k)
            style = nets.campplus.style_of(audio_16k)
            prompt = speaker_prompt_condition(nets.s2mel, audio_22k.to(self.device), features, style, self.mel_settings)
            emotion = self.semantic_features(emotion_16k)
            latent = self.model.speaker_latent(style)
        return VoicePrompt(
            audio_22k=audio_22k, audio_16k=audio_16k, features=features, semantic_ref=features.new_empty(0),
            ref_mel=prompt.ref_mel, style=style, prompt_condition=prompt.condition, speaker_latents=latent,
            emotion_features=emotion, seconds=time.perf_counter() - started,
        )

    def speaker_latents(self, features: Tensor) -> Tensor:
        raise SynthesisError("IndexTTS-2.5's speaker input is the CAM++ style vector: use model.speaker_latent(style)")

    def emotion_vector(self, voice: VoicePrompt, emotion: EmotionControl | None = None,
                       emotion_features: Tensor | None = None) -> Tensor:
        if emotion is not None and emotion.weights is not None and self.nets.spk_matrix is None:
            raise SynthesisError(f"emotion weights need the folder's feat1.pt / feat2.pt (spk_matrix, emo_matrix, "
                                 f"emo_num in config.yaml): not found in {self.nets.files.folder}")
        return super().emotion_vector(voice, emotion, emotion_features)

    # ----- synthesis ---------------------------------------------------------------------------------------

    def _segment(self, index: int, segment: TextSegment, voice: VoicePrompt, conds: Tensor,
                 settings: DecodeSettings, mel: MelSettings, noise: NoiseSource,
                 generator: torch.Generator | None,
                 trace: dict[str, Any] | None = None) -> tuple[np.ndarray, SegmentInfo]:
        from generations.indextts25.data.tiktoken_table import language_index

        model, device = self.model, self.device
        language = segment.language if isinstance(segment, LanguageSegment) and segment.language else self.language_of()
        # The prefix drops start/stop ids anyway; dropping them here keeps the width check to the kept ids.
        kept = [i for i in segment.ids if i not in (model.start_text_token, model.stop_text_token)]
        ids = torch.tensor([kept], dtype=torch.long, device=device)
        langs = torch.tensor([language_index(language)], dtype=torch.long, device=device)
        with EvalMode(model):
            raw = generate_codes(model, conds, ids, settings, generator=generator, langs=langs).codes
        stops = (raw[0] == model.stop_mel_token).nonzero()
        count = int(stops[0, 0]) if stops.numel() else raw.size(1)
        codes = raw[:, :count]
        info = SegmentInfo(text=segment.text, text_ids=list(segment.ids),
                           codes=codes[0].cpu().numpy().astype(np.int64), hit_stop=bool(stops.numel()),
                           mel_frames=target_mel_frames(2 * count, duration_factor_of(mel)))
        if trace is not None:
            trace.update(codes_raw=raw, codes=codes, langs=langs)
        if info.mel_frames < 1:
            return np.zeros(0, dtype=np.float32), info
        wav = self.vocalize(codes, voice, mel, noise=noise, index=index, trace=trace)
        return wav.reshape(-1).float().cpu().numpy(), info

    @torch.no_grad()
    def vocalize(self, codes: Tensor, voice: VoicePrompt, mel: MelSettings | None = None, *,
                 noise: NoiseSource | None = None, index: int = 0,
                 trace: dict[str, Any] | None = None) -> Tensor:
        """25 Hz codes (1, M) -> waveform (1, 1, frames * 256) in [-1, 1]: codec decode, S2Mel (duration
        factor, steps, CFG), BigVGAN v2. ``trace`` receives S_infer, cond, cat_condition, the CFM stages,
        ``noise``, ``mel`` and ``wav``."""
        nets = self.nets
        mel = mel or MelSettings25()
        problems = mel.problems()
        if problems:
            raise SynthesisError("; ".join(problems))
        factor = duration_factor_of(mel)
        frames = target_mel_frames(2 * codes.size(1), factor)
        shape = (1, voice.ref_mel.shape[1], voice.ref_mel.shape[-1] + frames)
        start = (noise or seeded_noise(mel.seed))(index, shape).to(device=self.device, dtype=torch.float32)
        prompt = PromptCondition(ref_mel=voice.ref_mel, condition=voice.prompt_condition, style=voice.style)
        with EvalMode(nets.codec, nets.s2mel, nets.vocoder):
            spectrogram = segment_mel(nets.codec, nets.s2mel, codes.to(self.device), prompt, duration_factor=factor,
                                      steps=mel.steps, cfg_rate=mel.cfg_rate, noise=start, trace=trace)
            wav = nets.vocoder(spectrogram.float())
        if trace is not None:
            trace.update(noise=start, mel=spectrogram, wav=wav)
        return wav
