"""Tiny random w2v-BERT features and semantic codec for the paired demos (IndexTTS2 and 2.5 read both).

``write_feature_kit(checkpoints)`` writes, all random and built in well under a second (about 2 MB):

- ``w2v-bert-2.0/``: a w2v-BERT 2.0 of ``DEMO_SEMANTIC_DIM`` channels and 17 layers (the paired generations read
  layer 17), saved with ``save_pretrained`` beside the SeamlessM4T preprocessor settings, as a downloaded
  ``facebook/w2v-bert-2.0`` folder looks;
- ``wav2vec2bert_stats.pt`` (``{"mean", "var"}``) and ``semantic_codec/model.safetensors`` (the file names of an
  IndexTTS2 download folder, so the same files serve preparation and synthesis).

A demo config's ``gpt.semantic_dim`` / ``emo_perceiver_dim`` and ``semantic_codec`` section carry the same small
width, so the demo GPT's conditioning encoders read these features.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from data_tools.fileio import atomic_write_with

DEMO_SEMANTIC_DIM = 32
CODEC_SECTION = {"codebook_size": 8192, "hidden_size": DEMO_SEMANTIC_DIM, "codebook_dim": 8, "vocos_dim": 16,
                 "vocos_intermediate_dim": 32, "vocos_num_layers": 2}
W2V_BERT_SETTINGS = {"hidden_size": DEMO_SEMANTIC_DIM, "num_hidden_layers": 17, "num_attention_heads": 2,
                     "intermediate_size": 32, "feature_projection_input_dim": 160, "hidden_act": "swish",
                     "position_embeddings_type": "relative_key", "left_max_position_embeddings": 64,
                     "right_max_position_embeddings": 8, "conv_depthwise_kernel_size": 31, "hidden_dropout": 0.0,
                     "activation_dropout": 0.0, "attention_dropout": 0.0, "feat_proj_dropout": 0.0,
                     "layerdrop": 0.0, "add_adapter": False, "apply_spec_augment": False}


@dataclass(frozen=True)
class FeatureKit:
    """The files paired-data preparation takes besides the config, the GPT and the tokenizer."""

    w2v_bert: Path  # a save_pretrained folder
    w2v_stats: Path
    codec: Path

    @classmethod
    def under(cls, checkpoints: Path) -> FeatureKit:
        # the names an IndexTTS2 download folder uses (networks.indextts2), so the same files serve synthesis
        return cls(w2v_bert=checkpoints / "w2v-bert-2.0", w2v_stats=checkpoints / "wav2vec2bert_stats.pt",
                   codec=checkpoints / "semantic_codec" / "model.safetensors")

    def exists(self) -> bool:
        return (self.w2v_bert / "config.json").is_file() and self.w2v_stats.is_file() and self.codec.is_file()


def write_feature_kit(checkpoints: Path, seed: int, semantic_dim: int = DEMO_SEMANTIC_DIM) -> FeatureKit:
    """Random w2v-BERT folder, stats and semantic codec of width ``semantic_dim`` (tests use other widths)."""
    import torch
    from safetensors.torch import save as save_safetensors

    from networks.frontends.seamless_features import build_feature_extractor
    from networks.semantic_codec import SemanticCodec, SemanticCodecConfig
    from networks.w2v_bert import build_w2v_bert

    kit = FeatureKit.under(checkpoints)
    torch.manual_seed(seed)
    w2v = build_w2v_bert({**W2V_BERT_SETTINGS, "hidden_size": semantic_dim})
    w2v.save_pretrained(kit.w2v_bert)
    build_feature_extractor().save_pretrained(kit.w2v_bert)
    generator = torch.Generator().manual_seed(seed + 1)
    stats = {"mean": 0.1 * torch.randn(semantic_dim, generator=generator),
             "var": 0.5 + torch.rand(semantic_dim, generator=generator)}
    atomic_write_with(kit.w2v_stats, lambda handle: torch.save(stats, handle))
    codec = SemanticCodec(SemanticCodecConfig.from_section({**CODEC_SECTION, "hidden_size": semantic_dim}))
    state = {key: value.detach().clone().contiguous() for key, value in codec.state_dict().items()}
    kit.codec.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(kit.codec, lambda handle: handle.write(save_safetensors(state)))
    return kit
