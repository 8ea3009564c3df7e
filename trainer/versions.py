"""Which IndexTTS GPT a config describes, and whether this project trains it: one function decides.

``model_variant(config)`` is called by the run plan (so the pre-flight and the trainer refuse with the
same sentence), by the studio (to show the version and offer the options that apply) and by export.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SUPPORTED_CONDITION_TYPE = "conformer_perceiver"


@dataclass(frozen=True)
class ModelVariant:
    version: str  # "1.5" or "2"
    name: str  # what the studio shows, e.g. "IndexTTS-1.5"
    prompt: str  # what the speaker prompt is in the data
    refusal: str | None  # None: trainable here; else the one sentence that says why not

    @property
    def supported(self) -> bool:
        return self.refusal is None


def _gpt_section(config: Mapping[str, Any]) -> Mapping[str, Any]:
    gpt = config.get("gpt") if "gpt" in config else config
    return gpt if isinstance(gpt, Mapping) else {}


def model_variant(config: Mapping[str, Any], where: str = "--config") -> ModelVariant:
    """Tell v1.5 from v2 by the gpt section (an ``emo_condition_module`` means v2) and refuse what we cannot train."""
    gpt = _gpt_section(config)
    declared = str(config.get("version", "")).strip() if "gpt" in config else ""
    if "emo_condition_module" in gpt:
        variant = ModelVariant("2", "IndexTTS2", "precomputed speaker latents + emotion vector (paired manifest)",
                               None)
    else:
        variant = ModelVariant("1.5", "IndexTTS-1.5", "100-band log-mel of a prompt utterance (codes manifest)",
                               None)
    refusal = None
    if declared.startswith("2.5") or str(gpt.get("spk_cond_mode", "conformer")) == "campplus":
        refusal = (f"{where} describes an IndexTTS-2.5 GPT (CAM++ speaker embedding and language table, "
                   f"'version: {declared or '2.5'}'); this studio trains IndexTTS-1.5 and IndexTTS2 (2.0) GPTs")
    elif declared and not declared.startswith(("1.5", "2")) and variant.version == "1.5":
        refusal = (f"{where} declares 'version: {declared}'; this studio trains IndexTTS-1.5 and IndexTTS2 (2.0) "
                   "GPTs only")
    elif str(gpt.get("condition_type", SUPPORTED_CONDITION_TYPE)) != SUPPORTED_CONDITION_TYPE:
        refusal = (f"{where} uses gpt.condition_type '{gpt.get('condition_type')}'; this studio supports "
                   f"'{SUPPORTED_CONDITION_TYPE}' only (the IndexTTS-1.5 / IndexTTS2 release configs)")
    elif int(gpt.get("types", 1) or 1) != 1:
        refusal = f"{where} sets gpt.types {gpt.get('types')}; this studio supports types 1 only"
    elif bool(gpt.get("train_solo_embeddings", False)):
        refusal = f"{where} sets gpt.train_solo_embeddings true; this studio supports the release setting false only"
    elif gpt.get("use_mel_codes_as_input", True) is False:
        refusal = f"{where} sets gpt.use_mel_codes_as_input false; this studio supports the release setting true only"
    if refusal is None:
        return variant
    return ModelVariant(variant.version, variant.name, variant.prompt, refusal)


# Keys only an IndexTTS-2.5 GPT has: the CAM++ speaker projection and the language table.
V25_ONLY_KEYS = ("spk_emb_proj.weight", "lang_embedding.weight")


def weights_refusal(state_keys: Iterable[str], where: str) -> str | None:
    """The sentence that refuses a checkpoint whose weights are a GPT this project does not train, else None.

    IndexTTS-2.5 ships the v2.0 ``config.yaml`` beside its ``gpt.pth``, so only the weights tell it apart.
    """
    found = [key for key in V25_ONLY_KEYS if key in set(state_keys)]
    if not found:
        return None
    return (f"{where} holds an IndexTTS-2.5 GPT ({', '.join(found)}: CAM++ speaker embedding and language table); "
            "this studio trains IndexTTS-1.5 and IndexTTS2 (2.0) GPTs")
