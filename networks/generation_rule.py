"""Which IndexTTS generation a config or a checkpoint's weights describe: the shipped generations' facts.

The one recognition rule of the studio. ``generations`` (the registry) asks it through each entry's
``recognises``; data tools that must know a generation (code rates for the ingest gates, seconds of codes)
ask it here, because they sit below the trainer. Each generation is told by what its network has:

- IndexTTS-2.5: ``version: 2.5`` at the config's top level, ``gpt.spk_cond_mode: campplus``, or any 2.5-only
  weight (the release ships a ``version: 2.0`` config beside its ``gpt.pth``, so the weights can say it);
- IndexTTS2: an ``emo_condition_module`` in the gpt section, or emotion-conditioning weights;
- IndexTTS-1.5: anything else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

ID_15, ID_2, ID_25 = "1.5", "2", "2.5"
SPK_COND_MODE = "campplus"  # an IndexTTS-2.5 GPT's gpt.spk_cond_mode (networks.gpt_v25 builds it)
# Keys only an IndexTTS-2.5 GPT has; a checkpoint lacking any of them is refused by name (networks.gpt_v25).
# Here, not in gpt_v25, so that the rule (and the registry that asks it) imports no torch.
V25_ONLY_KEYS = ("spk_emb_proj.weight", "spk_emb_proj.bias", "lang_embedding.weight")
V2_WEIGHT_PREFIXES = ("emo_conditioning_encoder.", "emo_perceiver_encoder.")
# Codes per second of audio: v1.5's DVAE (one code per 1024 samples at 24 kHz), IndexTTS2's MaskGCT semantic
# codes (one per 20 ms), IndexTTS-2.5's codec (one per 40 ms).
CODES_PER_SECOND: dict[str, float] = {ID_15: 24_000 / 1024, ID_2: 50.0, ID_25: 25.0}


def gpt_section(config: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The gpt section of a whole config, or the mapping itself when it is one."""
    config = config or {}
    gpt = config.get("gpt") if isinstance(config.get("gpt"), Mapping) else config
    return gpt if isinstance(gpt, Mapping) else {}


def describes_indextts25(config: Mapping[str, Any] | None = None, state_keys: Iterable[str] = ()) -> bool:
    """Whether a config (whole file or its ``gpt`` section) or a state dict's keys describe an IndexTTS-2.5 GPT.

    The config says so by ``version: 2.5`` or ``gpt.spk_cond_mode: campplus``; the weights by any 2.5-only key.
    """
    config = config or {}
    whole_file = isinstance(config.get("gpt"), Mapping)
    gpt = config["gpt"] if whole_file else config
    declared = str(config.get("version", "")).strip() if whole_file else ""
    if declared.startswith(ID_25) or str(gpt.get("spk_cond_mode", "")) == SPK_COND_MODE:
        return True
    keys = set(state_keys)
    return any(key in keys for key in V25_ONLY_KEYS)


def describes_indextts2(config: Mapping[str, Any] | None = None, state_keys: Iterable[str] = ()) -> bool:
    """An IndexTTS2-family GPT: an emotion conditioning module in the config, or its weights."""
    if "emo_condition_module" in gpt_section(config):
        return True
    return any(key.startswith(V2_WEIGHT_PREFIXES) for key in state_keys)


def describes_anything(config: Mapping[str, Any] | None = None, state_keys: Iterable[str] = ()) -> bool:
    """IndexTTS-1.5: the generation a config is when it is no later one."""
    return True


Recogniser = Callable[..., bool]
# Most specific first: a 2.5 GPT also has IndexTTS2's emotion module.
SHIPPED: tuple[tuple[str, Recogniser], ...] = (
    (ID_25, describes_indextts25), (ID_2, describes_indextts2), (ID_15, describes_anything))


def generation_id(config: Mapping[str, Any] | None = None, state_keys: Iterable[str] = ()) -> str:
    """The id ("1.5", "2", "2.5") of the shipped generation a config (whole or gpt section) or weights describe."""
    keys = list(state_keys)
    return next(ident for ident, recognises in SHIPPED if recognises(config, keys))


def recogniser_of(ident: str) -> Recogniser:
    """The rule that recognises shipped generation ``ident`` (the registry entries hold it)."""
    return dict(SHIPPED)[ident]
