"""A tiny random-init BigVGAN v1.5 for the demo workspace: the Test tab works on a CPU at once.

It speaks noise (the weights are random) but runs the real path: ECAPA speaker embedding, anti-aliased
SnakeBeta stages, 1024 samples per GPT latent frame at 24 kHz. The file has the real layout
(``{"generator": state_dict}``, weight-normed convs), so it loads through ``load_vocoder`` like
``bigvgan_generator.pth``. Deterministic for a seed, and it never touches the global RNG streams.

The demo's config.yaml needs the ``bigvgan:`` section of :func:`demo_bigvgan_config` and
``bigvgan_checkpoint: bigvgan_generator.pth`` (the CLI's default ``--vocoder``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from data_tools.fileio import atomic_write_with
from networks.bigvgan import BigVGAN, VocoderSpec, WeightNormConv
from networks.ecapa import EcapaSpec, spec_values

POST_GAIN = 0.01
DEMO_VOCODER_FILE = "bigvgan_generator.pth"
DEMO_SPEAKER_ENCODER = EcapaSpec(channels=(32, 32, 32, 32, 96), attention_channels=16, se_channels=16)


def demo_bigvgan_config(gpt_dim: int = 64) -> dict[str, Any]:
    """The ``bigvgan:`` section of the demo config (real layout, shrunk; 1024 samples per latent frame)."""
    return {
        "resblock": "1",
        "upsample_rates": [8, 8, 16],
        "upsample_kernel_sizes": [16, 16, 32],
        "upsample_initial_channel": 32,
        "resblock_kernel_sizes": [3, 7, 11],
        "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
        "feat_upsample": False,
        "speaker_embedding_dim": 32,
        "cond_d_vector_in_each_upsampling_layer": True,
        "gpt_dim": int(gpt_dim),
        "activation": "snakebeta",
        "snake_logscale": True,
        "num_mels": 100,
        "sampling_rate": 24000,
        "speaker_encoder": spec_values(DEMO_SPEAKER_ENCODER),
    }


def build_demo_vocoder(section: dict[str, Any], seed: int = 0) -> BigVGAN:
    """A random generator for ``section``: convs scaled to unit gain so the output is audible noise."""
    spec = VocoderSpec.from_config({"bigvgan": section}, "demo config")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = BigVGAN(spec)
        with torch.no_grad():
            for module in model.modules():
                if isinstance(module, WeightNormConv):
                    fan_in = module.weight_v[0].numel() if not module.transposed else module.weight_v.size(0)
                    module.weight_g.fill_((1.0 / fan_in) ** 0.5 * module.weight_v[0].numel() ** 0.5)
            model.conv_post.weight_g.mul_(POST_GAIN)  # keep the noise well below full scale
    return model.eval()


def write_demo_vocoder(path: str | Path, section: dict[str, Any] | None = None, seed: int = 0) -> Path:
    """Write ``{"generator": state_dict}`` for ``section`` (default :func:`demo_bigvgan_config`) to ``path``."""
    model = build_demo_vocoder(section or demo_bigvgan_config(), seed)
    state = {key: value.detach().clone().contiguous() for key, value in model.state_dict().items()}
    path = Path(path)
    atomic_write_with(path, lambda handle: torch.save({"generator": state}, handle))
    return path
