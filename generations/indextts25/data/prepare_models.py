"""IndexTTS-2.5 preparation's networks and per-batch computation (``data_tools.prepare_v25`` runs them).

The networks loaded strictly once (w2v-BERT up to layer 17 + stats, the 2.5 codec, CAM++, the GPT's emotion
path, the 2.5 text table), the clip read as inference reads its speaker prompt, and one padded batch through
them (``networks.prep25``'s steps, each item's values independent of its batch).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools import paired_prep
from data_tools.paired_prep import PrepareError
from data_tools.shape_rules import DataLimits

SPEAKER_RATE = 22_050  # inference loads its speaker prompt at librosa's default rate
FEATURE_RATE = 16_000
PROMPT_SECONDS = 15  # inference cuts its prompts to 15 s


# ---------------------------------------------------------------------------------------------
# The networks


@dataclass
class PreparationModels:
    """Everything 2.5 preparation runs, loaded once (strictly) on one device."""

    extractor: Any  # SeamlessM4TFeatureExtractor
    semantic: Any  # networks.w2v_bert.SemanticFeatureModel (layers after 17 dropped)
    codec: Any  # networks.codec25.Codec25
    campplus: Any  # networks.campplus.CAMPPlus
    gpt: Any  # networks.gpt_v25.UnifiedVoiceV25 (its emotion path)
    tokenizer: Any  # generations.indextts25.data.text_table.TextTable
    device: Any
    limits: DataLimits  # max_text_tokens, max_codes

    def networks(self) -> Any:
        from networks.prep25 import Prep25Networks

        return Prep25Networks(extractor=self.extractor, features=self.semantic, codec=self.codec,
                              campplus=self.campplus, gpt=self.gpt)


def load_models(config: Mapping[str, Any], *, gpt: Path, codec: Path, campplus: Path, w2v_bert: str,
                w2v_stats: Path, table: Path, text_scheme: str, text_merges: Path | None,
                device: Any) -> PreparationModels:
    """Load every network strictly (a wrong file is refused in one line naming the first bad key)."""
    import torch

    from generations.indextts25.data.text_table import DEFAULT_MERGES, TextTable
    from networks.campplus import load_campplus
    from networks.codec25 import load_codec25
    from networks.gpt_config import ConfigError
    from networks.gpt_v25 import load_gpt_v25_file
    from networks.indextts2 import campplus_sizes
    from networks.loading import StateDictMismatchError

    for key in ("gpt", "semantic_codec"):
        if not isinstance(config.get(key), Mapping):
            raise PrepareError(f"the config has no '{key}:' section (an IndexTTS-2.5 config.yaml is needed)")
    try:
        gpt_model = load_gpt_v25_file(config, gpt)
    except (ConfigError, StateDictMismatchError, KeyError) as exc:
        raise paired_prep.refuse(f"base GPT {gpt}", exc) from None
    try:
        codec_model = load_codec25(codec, config["semantic_codec"])
    except (FileNotFoundError, ValueError) as exc:
        raise paired_prep.refuse("IndexTTS-2.5 codec", exc) from None
    try:
        style = load_campplus(campplus, **campplus_sizes(config))
    except (FileNotFoundError, ValueError, ConfigError) as exc:
        raise paired_prep.refuse("CAM++", exc) from None
    extractor, semantic = paired_prep.load_semantic_features(w2v_bert, w2v_stats)
    paired_prep.check_semantic_widths(semantic, codec_model, gpt_model)
    try:
        tokenizer = TextTable(table, scheme=text_scheme, merges=text_merges or DEFAULT_MERGES)
    except (OSError, ValueError) as exc:
        raise paired_prep.refuse(f"tokenizer {table}", exc) from None
    with torch.no_grad():
        for module in (semantic, codec_model, style, gpt_model):
            module.to(device).eval()
    limits = DataLimits(max_text_tokens=int(config["gpt"]["max_text_tokens"]),
                        max_codes=int(config["gpt"]["max_mel_tokens"]))
    return PreparationModels(extractor=extractor, semantic=semantic, codec=codec_model, campplus=style, gpt=gpt_model,
                             tokenizer=tokenizer, device=device, limits=limits)


@dataclass
class BatchOutputs:
    """The model outputs of one padded batch (on the CPU), for tests and the benchmark."""

    codes: Any  # (B, ceil(T / 2)) int64
    widths: Any  # (B,) each item's own feature width
    emo_vec: Any  # (B, D)
    spk_vec: Any  # (B, 192)


def load_audio_16k(path: Path) -> np.ndarray:
    """The 16 kHz copy of the clip as inference makes its speaker prompt's (22050 Hz soxr load, then sinc)."""
    import torch

    from data_tools.audio import AudioError
    from networks.frontends.resample import load_audio_like_librosa
    from networks.prep25 import speaker_audio_16k

    if not path.is_file():
        raise AudioError(f"{path}: audio file not found")
    try:
        wave = load_audio_like_librosa(path, sr=SPEAKER_RATE)
    except ValueError as exc:
        raise AudioError(f"{path}: unreadable audio ({' '.join(str(exc).split())})") from None
    if wave.size == 0:
        raise AudioError(f"{path}: audio has no samples")
    if not np.isfinite(wave).all():
        raise AudioError(f"{path}: audio contains NaN or infinite samples")
    return speaker_audio_16k(torch.from_numpy(wave)[None])[0].numpy()


def code_count(width: int) -> int:
    """25 Hz codes of ``width`` 50 Hz feature rows (the codec's stride-2 convolution)."""
    return -(-width // 2)


def run_models(models: PreparationModels, features: Any, mask: Any, widths: Sequence[int],
               audio_16k: Sequence[np.ndarray]) -> BatchOutputs:
    """One padded batch through w2v-BERT + stats, the codec and the GPT's emotion path; CAM++ per item.

    An item's own width (its feature rows alone: the extractor pads an odd frame count by a masked row) is
    what inference reads: the codec codes every row of it, and the emotion path's length is the width
    (inference's length quirk, ``networks.prep25.emotion_vector``). The batch pads only the semantic model
    (masked); the codec and the emotion path then read each item alone, so no value depends on its batch.
    """
    import torch

    from networks.prep25 import codes_of, speaker_style

    with torch.inference_mode():
        features = features.to(models.device, non_blocking=True)
        mask = mask.to(models.device, non_blocking=True)
        lengths = torch.as_tensor(list(widths), dtype=torch.long, device=models.device)
        within = torch.arange(features.shape[1], device=models.device)[None, :] < lengths[:, None]
        feat = models.semantic(features, mask) * within.unsqueeze(-1).to(features.dtype)
        # The codec and the emotion path read each item's own rows alone: their convolutions would carry a
        # batch neighbour's padding into an item's last codes and its emotion vector.
        alone = [feat[row:row + 1, :width] for row, width in enumerate(widths)]
        codes = torch.nn.utils.rnn.pad_sequence([codes_of(models.codec, one)[0] for one in alone], batch_first=True)
        # = networks.prep25.emotion_vector(gpt, feat, spk_lengths=widths) without an emotion prompt
        # ((base - base) * 1 + base, bit for bit), computed once instead of twice
        emo_vec = torch.cat([models.gpt.get_emovec(one.transpose(1, 2), lengths[row:row + 1])
                             for row, one in enumerate(alone)])
        # CAM++ per item: padding would change its fbank mean and pooled statistics
        prompt = PROMPT_SECONDS * FEATURE_RATE
        spk_vec = torch.cat([speaker_style(models.campplus, torch.from_numpy(wave[:prompt])[None])
                             for wave in audio_16k])
        codes, lengths, emo_vec, spk_vec = (t.cpu() for t in (codes, lengths, emo_vec, spk_vec))
    return BatchOutputs(codes=codes, widths=lengths, emo_vec=emo_vec, spk_vec=spk_vec)
