"""Which IndexTTS GPT a config describes, and whether this project trains it: one function decides.

``model_variant(config)`` is called by the run plan (so the pre-flight and the trainer refuse with the
same sentence), by the studio (to show the version and offer the options that apply) and by export.
``weights_refusal(state_keys, where, version)`` says when a checkpoint's weights are another generation's
than the config's (IndexTTS-2.5 ships the v2.0 ``config.yaml`` beside its ``gpt.pth``, so the weights can tell
what the config does not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from networks.gpt_v25 import SPK_COND_MODE
from networks.gpt_v25 import V25_ONLY_KEYS as V25_KEYS

SUPPORTED_CONDITION_TYPE = "conformer_perceiver"
V25_PROMPT = ("CAM++ speaker vector + emotion vector of a prompt utterance, and the item's language "
              "(IndexTTS-2.5 paired manifest)")


@dataclass(frozen=True)
class ModelVariant:
    version: str  # "1.5", "2" or "2.5"
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
    """Tell v1.5, v2 and 2.5 apart by the config and refuse what we cannot train.

    2.5: ``version: 2.5`` (top level) or ``gpt.spk_cond_mode: campplus``; v2: an ``emo_condition_module``.
    """
    gpt = _gpt_section(config)
    declared = str(config.get("version", "")).strip() if "gpt" in config else ""
    if declared.startswith("2.5") or str(gpt.get("spk_cond_mode", "")) == SPK_COND_MODE:
        variant = ModelVariant("2.5", "IndexTTS-2.5", V25_PROMPT, None)
    elif "emo_condition_module" in gpt:
        variant = ModelVariant("2", "IndexTTS2", "precomputed speaker latents + emotion vector (paired manifest)",
                               None)
    else:
        variant = ModelVariant("1.5", "IndexTTS-1.5", "100-band log-mel of a prompt utterance (codes manifest)",
                               None)
    refusal = None
    if variant.version == "2.5" and "emo_condition_module" not in gpt:
        refusal = (f"{where} declares IndexTTS-2.5 but its gpt section has no emo_condition_module (an "
                   "IndexTTS-2.5 GPT keeps IndexTTS2's emotion path): use the config.yaml of the 2.5 release")
    elif declared and not declared.startswith(("1.5", "2")) and variant.version == "1.5":
        refusal = (f"{where} declares 'version: {declared}'; this studio trains IndexTTS-1.5, IndexTTS2 (2.0) "
                   "and IndexTTS-2.5 GPTs only")
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
V25_ONLY_KEYS = V25_KEYS


def weights_refusal(state_keys: Iterable[str], where: str, version: str | None = None) -> str | None:
    """The sentence that refuses weights of another generation than ``version`` (the config's), else None.

    A 2.5 config needs every 2.5-only key (the first one missing is named); a v1.5/v2 config refuses weights
    that hold any (IndexTTS-2.5 ships the v2.0 ``config.yaml`` beside its ``gpt.pth``: only the weights tell).
    """
    keys = set(state_keys)
    if version == "2.5":
        lacking = [key for key in V25_ONLY_KEYS if key not in keys]
        if not lacking:
            return None
        return (f"{where} lacks {lacking[0]}: not an IndexTTS-2.5 GPT checkpoint, but the config describes "
                "IndexTTS-2.5 (refusing to train a random speaker projection or language table); give the 2.5 "
                "gpt.pth, or the config.yaml of the checkpoint's own version")
    found = [key for key in V25_ONLY_KEYS if key in keys]
    if not found:
        return None
    return (f"{where} holds an IndexTTS-2.5 GPT ({', '.join(found)}: CAM++ speaker embedding and language table) "
            "but the config describes an IndexTTS-1.5/IndexTTS2 GPT; the 2.5 release ships a 'version: 2.0' "
            "config.yaml: set 'version: 2.5' at its top level")
