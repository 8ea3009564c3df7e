"""The tiny random networks every S2Mel demo folder holds (IndexTTS2 and 2.5 speak through them on a CPU).

An S2Mel section of upstream's layout (22050 Hz, 80 mels, hop 256), a CAMPPlus of few channels and a BigVGAN v2
of 32 initial channels and one resblock kernel (3 upsampling stages of 8 x 8 x 4 = 256 samples per frame at
22050 Hz), under the real file names (``networks.indextts2``); each generation's demo sizes and writes its own
folder from these (``generations/<name>/demo/synthesis.py``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from data_tools.fileio import atomic_write_text, atomic_write_with
from demo.feature_kit import DEMO_SEMANTIC_DIM

if TYPE_CHECKING:  # torch is imported where weights are made: the studio page reads the demos' paths without it
    import torch

CAMPPLUS_SIZES = {"embedding_size": 24, "growth_rate": 8, "bn_size": 2, "init_channels": 16}
S2MEL_FILE = "s2mel.pth"
CAMPPLUS_FILE = "campplus_cn_common.bin"
BIGVGAN_DIR = "bigvgan"
VOCODER_POST_GAIN = 1e-3
BIGVGAN_CONFIG = {
    "resblock": "1", "upsample_rates": [8, 8, 4], "upsample_kernel_sizes": [16, 16, 8],
    "upsample_initial_channel": 32, "resblock_kernel_sizes": [3], "resblock_dilation_sizes": [[1, 3, 5]],
    "use_tanh_at_final": False, "use_bias_at_final": False, "activation": "snakebeta", "snake_logscale": True,
    "num_mels": 80, "n_fft": 1024, "hop_size": 256, "win_size": 1024, "sampling_rate": 22050, "fmin": 0,
    "fmax": None,
}


def s2mel_section() -> dict[str, Any]:
    """A small ``s2mel:`` section of upstream's layout (22050 Hz, 80 mels, hop 256)."""
    return {
        "preprocess_params": {"sr": 22050, "spect_params": {"n_fft": 1024, "win_length": 1024, "hop_length": 256,
                                                            "n_mels": 80, "fmin": 0, "fmax": "None"}},
        "dit_type": "DiT", "reg_loss_type": "l1",
        "style_encoder": {"dim": CAMPPLUS_SIZES["embedding_size"]},
        "length_regulator": {"channels": 32, "is_discrete": False, "in_channels": DEMO_SEMANTIC_DIM,
                             "content_codebook_size": 64, "sampling_ratios": [1, 1], "vector_quantize": False,
                             "n_codebooks": 1, "quantizer_dropout": 0.0, "f0_condition": False, "n_f0_bins": 512},
        "DiT": {"hidden_dim": 32, "num_heads": 2, "depth": 3, "class_dropout_prob": 0.1, "block_size": 8192,
                "in_channels": 80, "style_condition": True, "final_layer_type": "wavenet", "target": "mel",
                "content_dim": 32, "content_codebook_size": 64, "content_type": "discrete", "f0_condition": False,
                "n_f0_bins": 512, "content_codebooks": 1, "is_causal": False, "long_skip_connection": True,
                "zero_prompt_speech_token": False, "time_as_token": False, "style_as_token": False,
                "uvit_skip_connection": True, "add_resblock_in_transformer": False},
        "wavenet": {"hidden_dim": 32, "num_layers": 2, "kernel_size": 5, "dilation_rate": 1, "p_dropout": 0.2,
                    "style_condition": True},
    }


def save_weights(path: Path, payload: Any) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(path, lambda handle: torch.save(payload, handle))


def plain_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {key: value.detach().clone().contiguous() for key, value in module.state_dict().items()}


def audible(vocoder: torch.nn.Module, post_gain: float = VOCODER_POST_GAIN) -> torch.nn.Module:
    """Scale a random vocoder's weight-normed convs to unit gain (as the v1.5 demo vocoder does), so it speaks
    audible noise instead of near silence; ``post_gain`` keeps the noise well below full scale."""
    import torch

    from networks.bigvgan import WeightNormConv

    with torch.no_grad():
        for module in vocoder.modules():
            if isinstance(module, WeightNormConv):
                fan_in = module.weight_v[0].numel() if not module.transposed else module.weight_v.size(0)
                module.weight_g.fill_((1.0 / fan_in) ** 0.5 * module.weight_v[0].numel() ** 0.5)
        vocoder.conv_post.weight_g.mul_(post_gain)
    return vocoder


def write_bigvgan(checkpoints: Path) -> None:
    """A random, audible BigVGAN v2 of ``BIGVGAN_CONFIG`` as ``bigvgan/`` (from torch's current random state)."""
    from networks.bigvgan_v2 import BigVGANV2Spec, build_bigvgan_v2

    vocoder = audible(build_bigvgan_v2(BigVGANV2Spec.from_config(BIGVGAN_CONFIG, "demo bigvgan config")))
    save_weights(checkpoints / BIGVGAN_DIR / "bigvgan_generator.pt", {"generator": plain_state(vocoder)})
    atomic_write_text(checkpoints / BIGVGAN_DIR / "config.json", json.dumps(BIGVGAN_CONFIG, indent=2) + "\n")
