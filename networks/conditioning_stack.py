"""The conditioning encoders of the IndexTTS GPTs: a conformer over prompt features and the perceiver that pools it.

Built from a ``gpt.condition_module`` / ``gpt.emo_condition_module`` section; only the keys upstream's
constructor reads are accepted, so a config that would not build upstream is refused here in one line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from networks.conformer import ConformerEncoder
from networks.gpt_config import ConfigError
from networks.perceiver import PerceiverResampler

CONDITION_MODULE_KEYS = (
    "output_size",
    "linear_units",
    "attention_heads",
    "num_blocks",
    "input_layer",
    "perceiver_mult",
)


def condition_module_args(gpt: Mapping[str, Any], key: str) -> dict[str, Any]:
    """The ``gpt.<key>`` section (``condition_module`` / ``emo_condition_module``), checked key by key."""
    module = gpt.get(key)
    if not isinstance(module, Mapping):
        raise ConfigError(f"gpt.{key} must be a mapping")
    missing = [name for name in CONDITION_MODULE_KEYS if name not in module]
    unknown = sorted(set(module) - set(CONDITION_MODULE_KEYS))
    if missing or unknown:
        problems = [f"lacks {', '.join(missing)}"] if missing else []
        problems += [f"has unsupported key(s) {', '.join(unknown)}"] if unknown else []
        raise ConfigError(f"gpt.{key} {' and '.join(problems)}")
    if module["input_layer"] != "conv2d2":
        raise ConfigError(
            f"gpt.{key}.input_layer {module['input_layer']!r} is not supported (only 'conv2d2')"
        )
    return dict(module)


def conditioning_stack(
    input_size: int, args: Mapping[str, Any], latent_dim: int, num_latents: int
) -> tuple[ConformerEncoder, PerceiverResampler]:
    """A conformer over the prompt features and the perceiver that pools it into ``num_latents`` latents."""
    encoder = ConformerEncoder(
        input_size=input_size,
        output_size=args["output_size"],
        attention_heads=args["attention_heads"],
        linear_units=args["linear_units"],
        num_blocks=args["num_blocks"],
    )
    perceiver = PerceiverResampler(
        latent_dim,
        context_dim=args["output_size"],
        num_latents=num_latents,
        heads=args["attention_heads"],
        ff_mult=args["perceiver_mult"],
    )
    return encoder, perceiver
