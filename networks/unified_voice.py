"""The IndexTTS GPT model (UnifiedVoice), v1.5 and v2, built from the `gpt:` section of a config.yaml.

State-dict keys and shapes are exactly upstream's, so a real `gpt.pth` ({"model": state_dict}) loads
strictly. The maths follow shared/reference/ARCHITECTURE.md; the sequence layout and losses follow
README.md / README_indextts2.md there:

    [conditioning latents] [start, text..., stop-padding, stop] [start, codes..., stop-padding, stop]

run causally through GPT-2 with no padding mask. Targets are each segment shifted by one.

Differences from upstream, on purpose: inputs are never modified in place; the v1.5 and v2 forwards both
return logits and losses (`ModelOutput`); `loss_mode="masked"` (the default) averages only over real
tokens plus each item's first stop, like the community v2 trainer.

Optional gpt-config keys (not upstream constructor arguments, strip them before handing a config to
upstream IndexTTS): `gpt_dropout` (float, default 0.1 as upstream): the GPT-2 embedding, attention and
residual dropout, active in train mode only. The conformers and perceivers have no dropout upstream.
v2 only: `semantic_dim` and `emo_perceiver_dim` (default 1024, upstream's hard-coded widths; see
UnifiedVoiceV2), set only by shrunken test models.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

from networks.conditioning_stack import condition_module_args, conditioning_stack
from networks.conformer import ConformerEncoder
from networks.gpt2 import GPT2Backbone
from networks.gpt_config import ConfigError, effective_gpt_config, text_rows
from networks.gpt_segments import (
    LOSS_MODES,
    LearnedPositionEmbeddings,
    LossMode,
    WrappedSegment,
    check_lengths,
    pad_and_wrap,
    segment_cross_entropy,
)
from networks.loading import StateDictMismatchError, state_dict_mismatches

DEFAULT_GPT_DROPOUT = 0.1
DEFAULT_V2_WIDTH = 1024  # upstream's hard-coded semantic (w2v-BERT) and emotion perceiver widths
INFERENCE_ONLY_PREFIXES = ("inference_model.", "gpt.wte.")


@dataclass
class ModelOutput:
    loss_text: Tensor  # float32 scalar
    loss_mel: Tensor  # float32 scalar
    mel_top1: Tensor  # float32 scalar, argmax accuracy over counted mel positions, no grad
    text_logits: Tensor  # (B, text_vocab, T+2), float32
    mel_logits: Tensor  # (B, mel_vocab, M+2), float32
    conds: Tensor  # (B, n_cond, D): the conditioning block in front of the text
    text_tokens: int  # counted text positions (real tokens + first stop per item)
    mel_tokens: int  # counted mel positions (real codes + first stop per item)


@dataclass
class _SequenceRun:
    text: WrappedSegment
    mel: WrappedSegment
    text_hidden: Tensor  # (B, T+2, D), final-normed
    mel_hidden: Tensor  # (B, M+2, D), final-normed
    text_tokens: int
    mel_tokens: int


class UnifiedVoice(nn.Module):
    """IndexTTS-1.5 GPT: conformer+perceiver conditioning over a 100-band log-mel, GPT-2, two heads."""

    version = "1.5"
    cond_input_size = 100

    def __init__(self, gpt_config: Mapping[str, Any]) -> None:
        super().__init__()
        gpt = effective_gpt_config(dict(gpt_config))
        if gpt["condition_type"] != "conformer_perceiver":
            raise ConfigError(
                f"gpt.condition_type {gpt['condition_type']!r} is not supported (only conformer_perceiver)"
            )
        if not gpt["use_mel_codes_as_input"]:
            raise ConfigError("gpt.use_mel_codes_as_input false is not supported")
        if gpt["train_solo_embeddings"]:
            raise ConfigError("gpt.train_solo_embeddings true is not supported")
        dropout = float(gpt.get("gpt_dropout", DEFAULT_GPT_DROPOUT))
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(f"gpt.gpt_dropout must be in [0, 1), got {dropout}")
        cond = condition_module_args(gpt, "condition_module")
        self.gpt_config: dict[str, Any] = gpt
        self.model_dim = dim = int(gpt["model_dim"])
        self.text_vocab_size = text_rows(gpt)
        self.mel_vocab_size = int(gpt["number_mel_codes"])
        self.start_text_token = int(gpt["start_text_token"])
        self.stop_text_token = int(gpt["stop_text_token"])
        self.start_mel_token = int(gpt["start_mel_token"])
        self.stop_mel_token = int(gpt["stop_mel_token"])
        self.num_cond_latents = int(gpt["condition_num_latent"])

        self.conditioning_encoder, self.perceiver_encoder = conditioning_stack(
            self.cond_input_size, cond, dim, self.num_cond_latents
        )
        self.text_embedding = nn.Embedding(self.text_vocab_size, dim)
        self.mel_embedding = nn.Embedding(self.mel_vocab_size, dim)
        nn.init.normal_(self.text_embedding.weight, std=0.02)
        nn.init.normal_(self.mel_embedding.weight, std=0.02)
        self.gpt = GPT2Backbone(
            dim,
            int(gpt["layers"]),
            int(gpt["heads"]),
            activation=gpt.get("activation_function") or "gelu_new",
            dropout=dropout,
        )
        self.mel_pos_embedding = LearnedPositionEmbeddings(int(gpt["max_mel_tokens"]) + 3, dim)
        self.text_pos_embedding = LearnedPositionEmbeddings(int(gpt["max_text_tokens"]) + 2, dim)
        self.final_norm = nn.LayerNorm(dim, eps=1e-5)
        self.text_head = nn.Linear(dim, self.text_vocab_size)
        self.mel_head = nn.Linear(dim, self.mel_vocab_size)

    # ----- conditioning -------------------------------------------------------------------------

    def get_conditioning(self, cond_mels: Tensor, cond_mel_lengths: Tensor | None = None) -> Tensor:
        """(B, C, frames) features + (B,) valid frame counts -> (B, n_latent, D) latents."""
        hidden, mask = self.conditioning_encoder(cond_mels.transpose(1, 2), cond_mel_lengths)
        return self.perceiver_encoder(hidden, mask)

    def conds_of(self, cond_mels: Tensor | None, cond_mel_lengths: Tensor | None, **extra: Tensor | None) -> Tensor:
        """The conditioning block from the forward's conditioning inputs (v2 takes more: see its override)."""
        if extra:
            raise TypeError(f"{type(self).__name__} takes no conditioning input(s) {sorted(extra)}")
        if cond_mels is None:
            raise ValueError("cond_mels is required (B, 100, frames)")
        return self.get_conditioning(cond_mels, cond_mel_lengths)

    # ----- forward ------------------------------------------------------------------------------

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute each GPT-2 block and each conformer block (speaker and, in v2, emotion) in backward.

        torch.utils.checkpoint with use_reentrant=False; the perceivers are small and stay stored.
        """
        self.gpt.gradient_checkpointing = bool(enabled)
        for module in self.modules():
            if isinstance(module, ConformerEncoder):
                module.gradient_checkpointing = bool(enabled)

    def forward(
        self,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        cond_mels: Tensor | None = None,
        cond_mel_lengths: Tensor | None = None,
        loss_mode: LossMode = "masked",
        *,
        text_lengths_host: Sequence[int] | None = None,
        code_lengths_host: Sequence[int] | None = None,
        **conditioning: Tensor | None,
    ) -> ModelOutput:
        """Logits and losses; ``conditioning`` holds the version's extra inputs (v2: condition, emo_vec, ...)."""
        conds = self.conds_of(cond_mels, cond_mel_lengths, **conditioning)
        return self.forward_with_conds(
            conds, text_ids, text_lengths, codes, code_lengths, loss_mode=loss_mode,
            text_lengths_host=text_lengths_host, code_lengths_host=code_lengths_host,
        )

    def forward_latent(
        self,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        cond_mels: Tensor | None = None,
        cond_mel_lengths: Tensor | None = None,
        **conditioning: Tensor | None,
    ) -> Tensor:
        """Upstream's `return_latent=True`: final-normed mel hidden states minus the last two, (B, M, D)."""
        conds = self.conds_of(cond_mels, cond_mel_lengths, **conditioning)
        return self.latent_with_conds(conds, text_ids, text_lengths, codes, code_lengths)

    def forward_with_conds(
        self,
        conds: Tensor,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        loss_mode: LossMode = "masked",
        *,
        text_lengths_host: Sequence[int] | None = None,
        code_lengths_host: Sequence[int] | None = None,
    ) -> ModelOutput:
        """Logits and losses given a ready conditioning block (B, n_cond, D)."""
        if loss_mode not in LOSS_MODES:
            raise ValueError(f"loss_mode must be one of {LOSS_MODES}, got {loss_mode!r}")
        run = self._run(conds, text_ids, text_lengths, codes, code_lengths, text_lengths_host, code_lengths_host)
        text, mel = run.text, run.mel
        text_logits = self.text_head(run.text_hidden).float()  # (B, T+2, V): CE wants the class dim last
        mel_logits = self.mel_head(run.mel_hidden).float()
        loss_text = segment_cross_entropy(text_logits, text.targets, text.counted, loss_mode)
        loss_mel = segment_cross_entropy(mel_logits, mel.targets, mel.counted, loss_mode)
        with torch.no_grad():
            hits = (mel_logits.argmax(dim=-1) == mel.targets) & mel.counted
            mel_top1 = hits.sum().float() / mel.counted.sum().clamp(min=1).float()
        return ModelOutput(
            loss_text=loss_text,
            loss_mel=loss_mel,
            mel_top1=mel_top1,
            text_logits=text_logits.permute(0, 2, 1),
            mel_logits=mel_logits.permute(0, 2, 1),
            conds=conds,
            text_tokens=run.text_tokens,
            mel_tokens=run.mel_tokens,
        )

    def latent_with_conds(
        self, conds: Tensor, text_ids: Tensor, text_lengths: Tensor, codes: Tensor, code_lengths: Tensor
    ) -> Tensor:
        return self._run(conds, text_ids, text_lengths, codes, code_lengths).mel_hidden[:, :-2]

    def _run(
        self, conds: Tensor, text_ids: Tensor, text_lengths: Tensor, codes: Tensor, code_lengths: Tensor,
        text_lengths_host: Sequence[int] | None = None, code_lengths_host: Sequence[int] | None = None,
    ) -> _SequenceRun:
        batch = text_ids.size(0)
        if text_ids.dim() != 2 or codes.dim() != 2 or codes.size(0) != batch:
            raise ValueError(
                f"text_ids and codes must be (B, T) and (B, M) with one batch size, "
                f"got {tuple(text_ids.shape)} and {tuple(codes.shape)}"
            )
        if conds.dim() != 3 or conds.size(0) != batch or conds.size(2) != self.model_dim:
            raise ValueError(f"conds must be ({batch}, n, {self.model_dim}), got {tuple(conds.shape)}")
        text_counts = check_lengths("text_lengths", text_lengths, batch, text_ids.size(1), text_lengths_host)
        code_counts = check_lengths("code_lengths", code_lengths, batch, codes.size(1), code_lengths_host)
        text_rows = self.text_pos_embedding.emb.num_embeddings
        mel_rows = self.mel_pos_embedding.emb.num_embeddings
        if text_ids.size(1) + 2 > text_rows:
            raise ValueError(
                f"text too long: {text_ids.size(1)} tokens, at most {text_rows - 2} fit (max_text_tokens)"
            )
        if codes.size(1) + 2 > mel_rows:
            raise ValueError(
                f"codes too long: {codes.size(1)} codes, at most {mel_rows - 2} fit (max_mel_tokens)"
            )

        text = pad_and_wrap(text_ids, text_lengths, self.start_text_token, self.stop_text_token)
        mel = pad_and_wrap(codes, code_lengths, self.start_mel_token, self.stop_mel_token)
        text_emb = self.text_embedding(text.inputs) + self.text_pos_embedding(text.inputs.size(1))
        mel_emb = self.mel_embedding(mel.inputs) + self.mel_pos_embedding(mel.inputs.size(1))
        sequence = torch.cat((conds.to(text_emb.dtype), text_emb, mel_emb), dim=1)
        hidden = self.final_norm(self.gpt(sequence)[:, conds.size(1) :])
        text_len = text.inputs.size(1)
        return _SequenceRun(
            text=text,
            mel=mel,
            text_hidden=hidden[:, :text_len],
            mel_hidden=hidden[:, text_len:],
            text_tokens=sum(text_counts) + batch,
            mel_tokens=sum(code_counts) + batch,
        )


def _positive_width(gpt: Mapping[str, Any], key: str) -> int:
    value = gpt.get(key, DEFAULT_V2_WIDTH)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"gpt.{key} must be a positive integer, got {value!r}")
    return value


class UnifiedVoiceV2(UnifiedVoice):
    """IndexTTS2 GPT: w2v-BERT (W-dim) speaker conditioning, emotion vector, two speed rows.

    The conditioning block is 34 vectors: the speaker latents each plus emo_vec, then speed_emb[1],
    speed_emb[0]. All feature inputs are channels-first (B, W, frames), like `cond_mels` in v1.5
    (upstream's `get_emovec` takes (B, frames, W); ours does not).

    Upstream hard-codes two widths to 1024; here they are optional gpt-config keys (absent = 1024, the real
    model; never written into a config that lacks them): `semantic_dim` W, the w2v-BERT feature width both
    conformers read, and `emo_perceiver_dim` P, the emotion perceiver's width (`emovec_layer`: P -> model_dim).
    """

    version = "2"

    def __init__(self, gpt_config: Mapping[str, Any]) -> None:
        gpt = dict(gpt_config)
        self.cond_input_size = _positive_width(gpt, "semantic_dim")
        self.emo_dim = _positive_width(gpt, "emo_perceiver_dim")
        super().__init__(gpt)
        emo = condition_module_args(self.gpt_config, "emo_condition_module")
        self.emo_conditioning_encoder, self.emo_perceiver_encoder = conditioning_stack(
            self.cond_input_size, emo, self.emo_dim, 1
        )
        self.emovec_layer = nn.Linear(self.emo_dim, self.model_dim)
        self.emo_layer = nn.Linear(self.model_dim, self.model_dim)
        self.speed_emb = nn.Embedding(2, self.model_dim)
        nn.init.zeros_(self.speed_emb.weight)

    def get_emo_conditioning(
        self, emo_cond_mels: Tensor, emo_cond_mel_lengths: Tensor | None = None
    ) -> Tensor:
        """(B, W, frames) -> (B, P): the emotion perceiver's single latent."""
        hidden, mask = self.emo_conditioning_encoder(emo_cond_mels.transpose(1, 2), emo_cond_mel_lengths)
        return self.emo_perceiver_encoder(hidden, mask).squeeze(1)

    def get_emovec(self, emo_cond_mels: Tensor, emo_cond_mel_lengths: Tensor | None = None) -> Tensor:
        """(B, W, frames) -> emo_vec (B, D) = emo_layer(emovec_layer(emotion latent))."""
        return self.emo_layer(
            self.emovec_layer(self.get_emo_conditioning(emo_cond_mels, emo_cond_mel_lengths))
        )

    def merge_emovec(
        self,
        speaker_mels: Tensor,
        emotion_mels: Tensor,
        speaker_lengths: Tensor | None = None,
        emotion_lengths: Tensor | None = None,
        alpha: float = 1.0,
    ) -> Tensor:
        """Upstream's ``merge_emovec``: base + alpha (emo - base), base = get_emovec(speaker features),
        emo = get_emovec(emotion features); both (B, W, frames) -> (B, D)."""
        base = self.get_emovec(speaker_mels, speaker_lengths)
        emotion = self.get_emovec(emotion_mels, emotion_lengths)
        return base + alpha * (emotion - base)

    def build_conds(self, condition: Tensor, emo_vec: Tensor) -> Tensor:
        """Speaker latents (B, n, D) + emo_vec (B, D) -> the (B, n+2, D) conditioning block."""
        batch = condition.size(0)
        speed = (
            self.speed_emb(torch.tensor([1, 0], device=condition.device)).unsqueeze(0).expand(batch, -1, -1)
        )
        latents = condition + emo_vec.unsqueeze(1)
        return torch.cat((latents, speed.to(latents.dtype)), dim=1)

    def conds_of(  # type: ignore[override]
        self,
        cond_mels: Tensor | None,
        cond_mel_lengths: Tensor | None,
        *,
        condition: Tensor | None = None,
        emo_vec: Tensor | None = None,
        emo_cond_mels: Tensor | None = None,
        emo_cond_mel_lengths: Tensor | None = None,
    ) -> Tensor:
        """Precomputed ``condition`` (B, 32, D) / ``emo_vec`` (B, D), or computed from the prompt mels."""
        if condition is None:
            if cond_mels is None:
                raise ValueError("pass either condition (B, 32, D) or cond_mels (B, 1024, frames)")
            condition = self.get_conditioning(cond_mels, cond_mel_lengths)
        if emo_vec is None:
            if emo_cond_mels is None:
                # Like upstream inference without an emotion prompt: the speaker prompt sets the emotion.
                emo_cond_mels, emo_cond_mel_lengths = cond_mels, cond_mel_lengths
            if emo_cond_mels is None:
                raise ValueError("pass emo_vec (B, D), emo_cond_mels or cond_mels (B, 1024, frames)")
            emo_vec = self.get_emovec(emo_cond_mels, emo_cond_mel_lengths)
        return self.build_conds(condition, emo_vec)


def build_model(config: Mapping[str, Any]) -> UnifiedVoice:
    """Build the v1.5 or v2 GPT from a `gpt:` section (raw or effective) or a whole loaded config.

    v2 is chosen when the section has `emo_condition_module`. Weights are freshly initialised; build
    under `torch.device("meta")` to only inspect keys and shapes.
    """
    gpt = config["gpt"] if "gpt" in config and "model_dim" not in config else config
    if not isinstance(gpt, Mapping):
        raise ConfigError("gpt section must be a mapping")
    model_class = UnifiedVoiceV2 if "emo_condition_module" in gpt else UnifiedVoice
    return model_class(gpt)


def load_gpt_state_dict(model: nn.Module, state_dict: Mapping[str, Any]) -> list[str]:
    """Strict load after dropping inference-only aliases (`gpt.wte.*`, `inference_model.*`).

    Returns the sorted dropped key names. Raises StateDictMismatchError (a ValueError) naming every
    missing / unexpected key and shape mismatch; the model is left untouched in that case.
    """
    dropped = sorted(name for name in state_dict if name.startswith(INFERENCE_ONLY_PREFIXES))
    kept = {name: value for name, value in state_dict.items() if not name.startswith(INFERENCE_ONLY_PREFIXES)}
    problems = state_dict_mismatches(model, kept)
    if problems:
        raise StateDictMismatchError("state dict does not fit the model: " + "; ".join(problems))
    model.load_state_dict(kept, strict=True)
    return dropped
