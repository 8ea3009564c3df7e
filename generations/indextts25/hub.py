"""What IndexTTS-2.5 needs from the Hugging Face Hub (its set of the catalogue, ``trainer.models.catalog``)."""

from __future__ import annotations

from generations.indextts25 import TABLE_NAME
from trainer.models.catalog import BIGVGAN_V2, CAMPPLUS, INDEXTTS_LICENCE, W2V_BERT, HubSource, ModelSet

MODEL_SET = ModelSet(
    "indextts-2.5", "IndexTTS-2.5", "IndexTTS-2.5", "generation",
    (HubSource("IndexTeam/IndexTTS-2.5", ("config.yaml", "gpt.pth", "codec.pth", "s2mel.pth", "wav2vec2bert_stats.pt",
                                          TABLE_NAME),
               optional=("feat1.pt", "feat2.pt"), licence=INDEXTTS_LICENCE, about_bytes=None),
     HubSource(CAMPPLUS.repo_id, CAMPPLUS.files, "hf_cache", CAMPPLUS.licence, about_bytes=CAMPPLUS.about_bytes),
     HubSource(BIGVGAN_V2.repo_id, BIGVGAN_V2.files, "hf_cache/bigvgan", BIGVGAN_V2.licence,
               about_bytes=BIGVGAN_V2.about_bytes),
     HubSource(W2V_BERT.repo_id, W2V_BERT.files, "hf_cache/w2v-bert-2.0", W2V_BERT.licence,
               about_bytes=W2V_BERT.about_bytes)),
    note="An IndexTTS-2.5 --model-dir: what upstream fetches at run time goes under hf_cache/, as upstream keeps "
         "it (2.5 never reads the MaskGCT codec, so it is not fetched).")


def model_set() -> ModelSet:
    return MODEL_SET
