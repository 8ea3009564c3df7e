"""What IndexTTS-1.5 needs from the Hugging Face Hub (its set of the catalogue, ``trainer.models.catalog``)."""

from __future__ import annotations

from trainer.models.catalog import INDEXTTS_LICENCE, MB, HubSource, ModelSet

MODEL_SET = ModelSet(
    "indextts-1.5", "IndexTTS-1.5", "IndexTTS-1.5", "generation",
    (HubSource("IndexTeam/IndexTTS-1.5", ("config.yaml", "gpt.pth", "dvae.pth", "bigvgan_generator.pth", "bpe.model"),
               licence=INDEXTTS_LICENCE, about_bytes=3_300 * MB),),
    note="GPT, DVAE (data preparation) and the 1.5 BigVGAN vocoder; --config/--base-checkpoint/--dvae/--vocoder "
         "point into this folder.")


def model_set() -> ModelSet:
    return MODEL_SET
