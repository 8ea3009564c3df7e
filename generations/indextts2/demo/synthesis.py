"""The rest of a tiny IndexTTS2 download folder in the demo workspace, so IndexTTS2 speaks on a CPU at once.

``demo.feature_kit`` writes the w2v-BERT folder, its stats and the semantic codec (data preparation needs
them too); this module adds what only synthesis needs, all random and tiny, under the real file names
(``networks.indextts2``), built in well under a second:

- ``s2mel.pth`` (``{"net": ...}``: CFM/DiT, length regulator, gpt_layer) from ``demo.s2mel_kit.s2mel_section``;
- ``campplus_cn_common.bin`` (CAMPPlus of ``CAMPPLUS_SIZES``), ``feat1.pt`` / ``feat2.pt`` (speaker and emotion
  matrices, ``sum(EMO_NUM)`` rows);
- ``bigvgan/config.json`` + ``bigvgan/bigvgan_generator.pt``: the demos' BigVGAN v2 (``demo.s2mel_kit``).

``synthesis_sections()`` gives the config.yaml keys that name and size them. ``networks.indextts2.
load_indextts2(<workspace>/v2/checkpoints)`` then loads the whole folder; it speaks noise through the real path.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from demo.s2mel_kit import (
    BIGVGAN_DIR,
    CAMPPLUS_FILE,
    CAMPPLUS_SIZES,
    S2MEL_FILE,
    plain_state,
    s2mel_section,
    save_weights,
    write_bigvgan,
)

EMO_NUM = [2, 3, 1, 2, 1, 2, 2, 3]  # rows per emotion in feat1/feat2 (upstream: 3, 17, 2, 8, 4, 5, 10, 24)
SPK_MATRIX_FILE = "feat1.pt"
EMO_MATRIX_FILE = "feat2.pt"


def synthesis_sections() -> dict[str, Any]:
    """The config.yaml keys of the synthesis networks (file names relative to the config's folder)."""
    return {"s2mel": s2mel_section(), "campplus": dict(CAMPPLUS_SIZES), "emo_num": list(EMO_NUM),
            "s2mel_checkpoint": S2MEL_FILE, "spk_matrix": SPK_MATRIX_FILE, "emo_matrix": EMO_MATRIX_FILE}


def write_synthesis_kit(checkpoints: Path, gpt_dim: int, seed: int) -> list[Path]:
    """Random S2Mel, CAMPPlus, emotion matrices and BigVGAN v2 into ``checkpoints`` (the download folder)."""
    import torch

    from networks.campplus import CAMPPlus
    from networks.s2mel import S2Mel

    torch.manual_seed(seed)
    s2mel = S2Mel.from_config(s2mel_section(), gpt_dim=gpt_dim)
    save_weights(checkpoints / S2MEL_FILE, {"net": {part: plain_state(getattr(s2mel, part)) for part in s2mel.net_parts}})
    save_weights(checkpoints / CAMPPLUS_FILE, plain_state(CAMPPlus(**CAMPPLUS_SIZES)))
    rows = sum(EMO_NUM)
    generator = torch.Generator().manual_seed(seed + 2)
    save_weights(checkpoints / SPK_MATRIX_FILE,
                 torch.randn(rows, CAMPPLUS_SIZES["embedding_size"], generator=generator))
    save_weights(checkpoints / EMO_MATRIX_FILE, 0.1 * torch.randn(rows, gpt_dim, generator=generator))
    write_bigvgan(checkpoints)
    return [checkpoints / name for name in (S2MEL_FILE, CAMPPLUS_FILE, SPK_MATRIX_FILE, EMO_MATRIX_FILE, BIGVGAN_DIR)]
