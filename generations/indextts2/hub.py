"""What IndexTTS2 needs from the Hugging Face Hub (its set of the catalogue, ``trainer.models.catalog``)."""

from __future__ import annotations

from trainer.models.catalog import (
    BIGVGAN_V2,
    CAMPPLUS,
    INDEXTTS_LICENCE,
    MB,
    SEMANTIC_CODEC,
    W2V_BERT,
    HubSource,
    ModelSet,
)

MODEL_SET = ModelSet(
    "indextts-2", "IndexTTS2", "IndexTTS-2", "generation",
    (HubSource("IndexTeam/IndexTTS-2", ("config.yaml", "gpt.pth", "s2mel.pth", "feat1.pt", "feat2.pt",
                                        "wav2vec2bert_stats.pt", "bpe.model"),
               licence=INDEXTTS_LICENCE, about_bytes=4_700 * MB),
     SEMANTIC_CODEC, CAMPPLUS, BIGVGAN_V2, W2V_BERT),
    note="An IndexTTS2 --model-dir / --sample-model-dir: semantic_codec/, campplus_cn_common.bin, bigvgan/ and "
         "w2v-bert-2.0/ inside it.")


def model_set() -> ModelSet:
    return MODEL_SET
