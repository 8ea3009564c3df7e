"""The IndexTTS-2.5 GPT: the IndexTTS2 network with a CAM++ speaker vector and a per-language table.

Facts from shared/reference/indextts25/README.md (what upstream's inference really runs, ``UnifiedVoice``
in campplus mode):

- Conditioning block, 3 vectors: ``[spk_emb_proj(CAM++ 192-d vector) + emo_vec, 0, 0]``. The two trailing
  slots are zeros with no parameters. The IndexTTS2 speaker conformer, its perceiver and ``speed_emb`` are
  not built (the real ``gpt.pth`` has none of their keys).
- The emotion path (emo conformer, emo perceiver, ``emovec_layer``, ``emo_layer``) is IndexTTS2's, unchanged.
- ``lang_embedding`` (107 rows: 106 language codes + 1 spare) is added to EVERY text position (start, tokens,
  stop padding, stop). Upstream's inference adds it; upstream's training forward forgets it. Here the
  training forward adds it exactly as inference does; ``language_row=False`` reproduces upstream's training
  forward and exists only to compare against it.
- Text table 60510 rows (number_text_tokens 60509, the tiktoken vocabulary).

Version detection: a config says 2.5 by ``version: 2.5`` (top level) or ``gpt.spk_cond_mode: campplus``.
The release may ship its gpt.pth beside a ``version: 2.0`` config, so the weights can say it too:
``spk_emb_proj.*`` / ``lang_embedding.weight`` exist only in a 2.5 GPT (``networks.generation_rule.describes_indextts25``).

Loading is strict (``networks.loading.load_strict``), and a checkpoint without a 2.5-only key is refused by
that key's name before anything else, never loaded with a random language table or speaker projection.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from networks.generation_rule import SPK_COND_MODE, V25_ONLY_KEYS
from networks.gpt_config import ConfigError
from networks.gpt_segments import LossMode
from networks.loading import StateDictMismatchError, load_strict
from networks.unified_voice import INFERENCE_ONLY_PREFIXES, ModelOutput, UnifiedVoiceV2

SPEAKER_VECTOR_DIM = 192  # CAMPPlus embedding width
LANGUAGE_ROWS = 107  # the tokenizer's 106 language codes + 1 spare row (never produced)
COND_VECTORS = 3  # [speaker + emotion, 0, 0]
# IndexTTS2 modules that the 2.5 network does not have.
V2_ONLY_MODULES = ("conditioning_encoder", "perceiver_encoder", "speed_emb")
# Upstream's module order, so our state dict lists keys exactly as the real gpt.pth does.
MODULE_ORDER = (
    "spk_emb_proj",
    "emo_conditioning_encoder",
    "emo_perceiver_encoder",
    "text_embedding",
    "lang_embedding",
    "emo_layer",
    "emovec_layer",
    "mel_embedding",
    "gpt",
    "mel_pos_embedding",
    "text_pos_embedding",
    "final_norm",
    "text_head",
    "mel_head",
)


class LanguageTextEmbedding(nn.Embedding):
    """The text table (key ``text_embedding.weight``) that adds each item's language row to every position.

    The rows are given for the span of one call through ``adding_language``; embedding text outside such a
    span raises, so no code path can silently drop the language signal inference relies on. (The rows travel
    this way because the IndexTTS2 sequence builder this network reuses embeds the text itself and takes no
    per-item offset.) One forward at a time per model instance: the span is not re-entrant or thread-shared.
    """

    def __init__(self, rows: int, dim: int) -> None:
        super().__init__(rows, dim)
        nn.init.normal_(self.weight, std=0.02)
        self._in_scope = False
        self._language_rows: Tensor | None = None

    @contextmanager
    def adding_language(self, rows: Tensor | None) -> Iterator[None]:
        """Within the block, ``forward`` adds ``rows`` (B, D) on every position (None: deliberately nothing)."""
        if self._in_scope:
            raise RuntimeError("text_embedding is already embedding with a language row (nested call)")
        self._in_scope, self._language_rows = True, rows
        try:
            yield
        finally:
            self._in_scope, self._language_rows = False, None

    def forward(self, ids: Tensor) -> Tensor:
        if not self._in_scope:
            raise RuntimeError(
                "IndexTTS-2.5 text must be embedded with its language row: go through the model's forward, "
                "forward_latent or generation_prefix (they take langs)"
            )
        tokens = super().forward(ids)
        if self._language_rows is None:
            return tokens
        return tokens + self._language_rows.unsqueeze(1).to(tokens.dtype)


@dataclass
class GenerationPrefix:
    """What generation starts from (upstream ``prepare_gpt_inputs``), per item left-padded to one width S.

    inputs_embeds: (B, S, D) ``[zero pad][conds][start, text ids without 0/1, stop]``, text positions carrying
        token + position + language row. The start-mel token is NOT embedded here: it is the first mel step.
    attention_mask: (B, S+1) int64, 0 on the pad, 1 on everything else including the start-mel slot.
    fake_input_ids: (B, S+1) int64, all 1 but the last, which is the start-mel token (HF generate's input_ids).
    """

    inputs_embeds: Tensor
    attention_mask: Tensor
    fake_input_ids: Tensor


class UnifiedVoiceV25(UnifiedVoiceV2):
    """IndexTTS-2.5 GPT (upstream ``UnifiedVoice`` with ``spk_cond_mode="campplus"``).

    Inputs beyond IndexTTS2's: ``spk_vec`` (B, 192) CAM++ speaker vectors, and ``langs`` (B,) int64 language
    indices (``lang_to_token``: the code's position in the tokenizer's LANGUAGES, e.g. en 0, am 75). Emotion
    as in IndexTTS2: ``emo_vec`` (B, D), or the emotion / speaker prompt's w2v-BERT features (B, 1024, frames).
    """

    version = "2.5"

    def __init__(self, gpt_config: Mapping[str, Any]) -> None:
        gpt = dict(gpt_config)
        # Kept out of self.gpt_config: upstream passes spk_cond_mode beside **gpt, so a config.yaml written
        # from gpt_config must not hold it (2.5 is marked there by the top-level ``version: 2.5``).
        mode = gpt.pop("spk_cond_mode", SPK_COND_MODE)
        if mode != SPK_COND_MODE:
            raise ConfigError(f"gpt.spk_cond_mode {mode!r}: an IndexTTS-2.5 GPT uses {SPK_COND_MODE!r}")
        super().__init__(gpt)
        # The IndexTTS2 constructor always builds its speaker conformer, perceiver and speed rows; 2.5 has
        # none of them (the real gpt.pth holds none of their keys). Cheap on meta, where real files load.
        for name in V2_ONLY_MODULES:
            delattr(self, name)
        dim = self.model_dim
        self.num_cond_latents = 1  # one projected speaker vector (gpt.condition_num_latent is unused in 2.5)
        self.spk_emb_proj = nn.Linear(SPEAKER_VECTOR_DIM, dim)
        self.text_embedding = LanguageTextEmbedding(self.text_vocab_size, dim)
        self.lang_embedding = nn.Embedding(LANGUAGE_ROWS, dim)
        nn.init.normal_(self.lang_embedding.weight, std=0.02)
        # Upstream's registration order, so state_dict() lists keys as the real gpt.pth does.
        if set(self._modules) != set(MODULE_ORDER):
            raise RuntimeError(f"IndexTTS-2.5 module set drifted from upstream's: {sorted(self._modules)}")
        self._modules = type(self._modules)((name, self._modules[name]) for name in MODULE_ORDER)

    # ----- conditioning -------------------------------------------------------------------------

    def get_conditioning(self, cond_mels: Tensor, cond_mel_lengths: Tensor | None = None) -> Tensor:
        raise TypeError("IndexTTS-2.5 has no speaker conformer: its speaker input is a CAM++ vector (spk_vec)")

    def speaker_latent(self, spk_vec: Tensor) -> Tensor:
        """CAM++ vectors (B, 192) -> projected speaker latents (B, 1, D)."""
        if spk_vec.dim() != 2 or spk_vec.size(1) != SPEAKER_VECTOR_DIM:
            raise ValueError(f"spk_vec must be (B, {SPEAKER_VECTOR_DIM}), got {tuple(spk_vec.shape)}")
        return self.spk_emb_proj(spk_vec).unsqueeze(1)

    def build_conds(self, condition: Tensor, emo_vec: Tensor) -> Tensor:
        """Speaker latent (B, 1, D) + emo_vec (B, D) -> the (B, 3, D) block ``[speaker + emotion, 0, 0]``."""
        if condition.dim() != 3 or condition.size(1) != 1:
            raise ValueError(f"the 2.5 speaker latent must be (B, 1, D), got {tuple(condition.shape)}")
        first = condition + emo_vec.unsqueeze(1)
        # The empty slots follow the first vector's dtype and device (bf16 under autocast, say).
        return torch.cat((first, first.new_zeros(first.size(0), COND_VECTORS - 1, first.size(2))), dim=1)

    def conds_of(  # type: ignore[override]
        self,
        cond_mels: Tensor | None,
        cond_mel_lengths: Tensor | None,
        *,
        spk_vec: Tensor | None = None,
        emo_vec: Tensor | None = None,
        emo_cond_mels: Tensor | None = None,
        emo_cond_mel_lengths: Tensor | None = None,
    ) -> Tensor:
        """The conditioning block from ``spk_vec`` (B, 192) and ``emo_vec`` (B, D), or emotion from features.

        ``cond_mels`` (B, 1024, frames) are the speaker prompt's w2v-BERT features; in 2.5 they only set the
        emotion when neither ``emo_vec`` nor ``emo_cond_mels`` is given (as upstream inference does).
        """
        if spk_vec is None:
            raise ValueError("spk_vec (B, 192), the CAM++ speaker vector, is required by IndexTTS-2.5")
        if emo_vec is None:
            if emo_cond_mels is None:
                emo_cond_mels, emo_cond_mel_lengths = cond_mels, cond_mel_lengths
            if emo_cond_mels is None:
                raise ValueError("pass emo_vec (B, D), emo_cond_mels or cond_mels (B, 1024, frames)")
            emo_vec = self.get_emovec(emo_cond_mels, emo_cond_mel_lengths)
        return self.build_conds(self.speaker_latent(spk_vec), emo_vec)

    # ----- language -----------------------------------------------------------------------------

    def language_rows(self, langs: Tensor, batch: int) -> Tensor:
        """``langs`` (B,) integer language indices -> their ``lang_embedding`` rows (B, D)."""
        if not isinstance(langs, Tensor) or langs.dim() != 1 or langs.size(0) != batch:
            shape = tuple(langs.shape) if isinstance(langs, Tensor) else type(langs).__name__
            raise ValueError(f"langs must be a ({batch},) integer tensor of language indices, got {shape}")
        if langs.dtype.is_floating_point or langs.dtype == torch.bool:
            raise ValueError(f"langs must hold integer language indices, got {langs.dtype}")
        if langs.device.type == "cpu":  # checked where it costs no device sync; loaders check GPU batches
            bad = [int(v) for v in langs.tolist() if not 0 <= int(v) < LANGUAGE_ROWS]
            if bad:
                raise ValueError(f"langs must lie in 0..{LANGUAGE_ROWS - 1} (lang_embedding rows), got {bad}")
        return self.lang_embedding(langs.to(self.lang_embedding.weight.device))

    @contextmanager
    def _language(self, langs: Tensor, batch: int, language_row: bool) -> Iterator[None]:
        rows = self.language_rows(langs, batch)
        with self.text_embedding.adding_language(rows if language_row else None):
            yield

    # ----- forward ------------------------------------------------------------------------------

    def forward(  # type: ignore[override]
        self,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        cond_mels: Tensor | None = None,
        cond_mel_lengths: Tensor | None = None,
        loss_mode: LossMode = "masked",
        *,
        langs: Tensor,
        language_row: bool = True,
        text_lengths_host: Sequence[int] | None = None,
        code_lengths_host: Sequence[int] | None = None,
        **conditioning: Tensor | None,
    ) -> ModelOutput:
        """Logits and losses with the language row on every text position (``language_row=False``: without,
        which is upstream's training forward, for comparison only). ``conditioning``: spk_vec, emo_vec, ..."""
        conds = self.conds_of(cond_mels, cond_mel_lengths, **conditioning)
        return self.forward_with_conds(
            conds, text_ids, text_lengths, codes, code_lengths, loss_mode=loss_mode, langs=langs,
            language_row=language_row, text_lengths_host=text_lengths_host, code_lengths_host=code_lengths_host,
        )

    def forward_latent(  # type: ignore[override]
        self,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        cond_mels: Tensor | None = None,
        cond_mel_lengths: Tensor | None = None,
        *,
        langs: Tensor,
        language_row: bool = True,
        **conditioning: Tensor | None,
    ) -> Tensor:
        """Final-normed mel hidden states minus the last two, (B, M, D), the latents s2mel reads."""
        conds = self.conds_of(cond_mels, cond_mel_lengths, **conditioning)
        return self.latent_with_conds(
            conds, text_ids, text_lengths, codes, code_lengths, langs=langs, language_row=language_row
        )

    def forward_with_conds(  # type: ignore[override]
        self,
        conds: Tensor,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        loss_mode: LossMode = "masked",
        *,
        langs: Tensor,
        language_row: bool = True,
        text_lengths_host: Sequence[int] | None = None,
        code_lengths_host: Sequence[int] | None = None,
    ) -> ModelOutput:
        with self._language(langs, text_ids.size(0), language_row):
            return super().forward_with_conds(
                conds, text_ids, text_lengths, codes, code_lengths, loss_mode=loss_mode,
                text_lengths_host=text_lengths_host, code_lengths_host=code_lengths_host,
            )

    def latent_with_conds(  # type: ignore[override]
        self,
        conds: Tensor,
        text_ids: Tensor,
        text_lengths: Tensor,
        codes: Tensor,
        code_lengths: Tensor,
        *,
        langs: Tensor,
        language_row: bool = True,
    ) -> Tensor:
        with self._language(langs, text_ids.size(0), language_row):
            return super().latent_with_conds(conds, text_ids, text_lengths, codes, code_lengths)

    # ----- generation ---------------------------------------------------------------------------

    def generation_prefix(self, conds: Tensor, text_tokens: Tensor, langs: Tensor) -> GenerationPrefix:
        """Upstream's inference prefix for a batch: ``conds`` (B, 3, D), ``text_tokens`` (B, T) int ids.

        Per item every id equal to the start or stop text token (0 ``!`` and 1 ``"`` in the 2.5 vocabulary)
        is dropped, as upstream does (so pad with 0 or 1), then one start and one stop are re-added. Every
        item is left-padded with zero vectors to width ``n_cond + T + 2``.
        """
        if text_tokens.dim() != 2 or conds.dim() != 3 or conds.size(0) != text_tokens.size(0):
            raise ValueError(
                f"conds must be (B, n, D) and text_tokens (B, T) with one batch size, "
                f"got {tuple(conds.shape)} and {tuple(text_tokens.shape)}"
            )
        batch, width = text_tokens.shape
        if width + 2 > self.text_pos_embedding.emb.num_embeddings:
            raise ValueError(f"text too long: {width} tokens, at most "
                             f"{self.text_pos_embedding.emb.num_embeddings - 2} fit (max_text_tokens)")
        rows = self.language_rows(langs, batch)
        device = self.text_embedding.weight.device
        total = conds.size(1) + width + 2
        start = torch.tensor([self.start_text_token], device=device)
        stop = torch.tensor([self.stop_text_token], device=device)
        items: list[Tensor] = []
        mask = torch.ones(batch, total + 1, dtype=torch.long, device=device)
        for index in range(batch):
            ids = text_tokens[index].to(device)
            kept = ids[(ids != self.start_text_token) & (ids != self.stop_text_token)]
            wrapped = torch.cat((start, kept, stop)).unsqueeze(0)
            with self.text_embedding.adding_language(rows[index : index + 1]):
                text = self.text_embedding(wrapped)[0] + self.text_pos_embedding(wrapped.size(1))
            item = torch.cat((conds[index].to(text.dtype), text), dim=0)
            pad = total - item.size(0)
            items.append(torch.cat((item.new_zeros(pad, item.size(1)), item), dim=0))
            mask[index, :pad] = 0
        fake_ids = torch.ones(batch, total + 1, dtype=torch.long, device=device)
        fake_ids[:, -1] = self.start_mel_token
        return GenerationPrefix(inputs_embeds=torch.stack(items), attention_mask=mask, fake_input_ids=fake_ids)


def build_gpt_v25(config: Mapping[str, Any]) -> UnifiedVoiceV25:
    """The 2.5 GPT from a ``gpt:`` section or a whole loaded config, freshly initialised.

    Build under ``torch.device("meta")`` to inspect keys and shapes only. Which generation a config (or its
    weights) is, is ``networks.generation_rule``'s decision, made by the caller.
    """
    gpt = config["gpt"] if "gpt" in config and "model_dim" not in config else config
    if not isinstance(gpt, Mapping):
        raise ConfigError("gpt section must be a mapping")
    return UnifiedVoiceV25(gpt)


def read_gpt_state_dict(path: str | Path) -> dict[str, Tensor]:
    """The state dict in a ``gpt.pth`` (``{"model": state_dict}`` or a bare state dict), weights_only."""
    path = Path(path)
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise StateDictMismatchError(f"GPT checkpoint not found: {path}") from None
    except Exception as exc:  # pickle / zip errors: one line naming the file
        raise StateDictMismatchError(f"{path} is not a readable torch checkpoint ({type(exc).__name__})") from None
    state = loaded.get("model", loaded) if isinstance(loaded, dict) else None
    if not isinstance(state, dict):
        raise StateDictMismatchError(f"{path} holds no state dict (expected {{'model': state_dict}})")
    return state


def load_gpt_v25(
    model: UnifiedVoiceV25, state_dict: Mapping[str, Any], source: str, *, assign: bool = False
) -> list[str]:
    """Load a 2.5 GPT state dict strictly; returns the dropped inference-only alias keys (sorted).

    Refuses (StateDictMismatchError, one line naming the key(s)) a state dict lacking a 2.5-only key
    (``spk_emb_proj.*``, ``lang_embedding``: e.g. an IndexTTS2 gpt.pth), then any missing, unexpected or
    mis-shaped key (``load_strict``); the model is untouched then. ``assign``: for a model built on meta.
    """
    lacking = [key for key in V25_ONLY_KEYS if key not in state_dict]
    if lacking:
        raise StateDictMismatchError(
            f"{source} lacks {', '.join(lacking)}: not an IndexTTS-2.5 GPT checkpoint "
            "(refusing to load it with a random speaker projection or language table)"
        )
    dropped = sorted(name for name in state_dict if name.startswith(INFERENCE_ONLY_PREFIXES))
    kept = {name: value for name, value in state_dict.items() if not name.startswith(INFERENCE_ONLY_PREFIXES)}
    load_strict(model, kept, source, assign=assign)
    return dropped


def load_gpt_v25_file(config: Mapping[str, Any], path: str | Path) -> UnifiedVoiceV25:
    """Build the 2.5 GPT from ``config`` and load ``path`` (a real or fine-tuned gpt.pth) into it strictly.

    Built on the meta device and the (float32) weights assigned: no time spent on a random init, and no
    global RNG state consumed. The model is in train mode on the CPU, like a freshly built one.
    """
    with torch.device("meta"):
        model = build_gpt_v25(config)
    state = {
        name: value.float() if isinstance(value, Tensor) and value.is_floating_point() else value
        for name, value in read_gpt_state_dict(path).items()
    }
    load_gpt_v25(model, state, str(path), assign=True)
    return model
