"""An S2Mel run folder on a demo download's ``s2mel.pth``, made in seconds: the real trainer on generated clips.

``make_s2mel_run`` trains the demo S2Mel (full or LoRA) for a few steps on clips drawn from a seed (nothing is
prepared or downloaded) and writes what ``python -m trainer.train --train s2mel`` leaves: ``latest.pth`` /
``model_step<N>.pth`` (digests, rotation) and ``train_config.yaml``. ``mel_level`` and ``mel_tilt`` set the target mels'
level and slope over frequency: a strong rising slope (unlike any voice) and a large learning rate give a decoder
that makes the pipeline's voice worse.
"""

from __future__ import annotations

from pathlib import Path

import torch
import yaml

from data_tools.config import load_config
from generations.registry import generation_of_folder
from networks.s2mel import load_s2mel
from trainer.s2mel.batches import S2MelClip
from trainer.s2mel.export import base_record
from trainer.s2mel.loop import S2MelTrainer
from trainer.s2mel.lora import S2MelLoRASettings
from trainer.s2mel.train_settings import S2MelTrainSettings


def make_s2mel_run(model_dir: Path, out_dir: Path, *, mode: str = "full", steps: int = 2, seed: int = 0,
                   learning_rate: float = 1e-3, mel_level: float = -6.0, mel_tilt: float = 0.0,
                   clips: int = 4) -> Path:
    """Train and save; returns ``out_dir / "latest.pth"``. IndexTTS2 folders get a GPT latent per clip."""
    config = load_config(model_dir / "config.yaml")
    generation = generation_of_folder(model_dir)
    assert generation is not None, model_dir
    assert generation.s2mel is not None, model_dir
    with_gpt = generation.s2mel.gpt_latent  # IndexTTS2 feeds the GPT latent, 2.5 does not
    kwargs = {"gpt_dim": config["gpt"]["model_dim"]} if with_gpt else {"with_gpt_layer": False}
    model = load_s2mel(model_dir / "s2mel.pth", config["s2mel"], **kwargs)
    sizes = model.config
    g = torch.Generator().manual_seed(seed)
    tilt = torch.linspace(-1.0, 1.0, sizes.n_mels)[:, None]  # > 0: energy rising with frequency
    made = []
    for index in range(clips):
        frames = 40 + 8 * index
        semantic = max(4, int(frames / 1.72))
        made.append(S2MelClip(
            mel=mel_level + mel_tilt * tilt + 0.5 * torch.randn(sizes.n_mels, frames, generator=g),
            style=torch.randn(sizes.style_dim, generator=g),
            code_embedding=torch.randn(semantic, sizes.semantic_dim, generator=g),
            gpt_latent=torch.randn(semantic, sizes.gpt_dim, generator=g) if with_gpt else None,
            name=f"clip{index}"))
    settings = S2MelTrainSettings(mode=mode, batch_size=2, max_steps=steps, save_interval=steps,
                                  learning_rate=learning_rate, seed=seed, class_dropout_prob=0.0,
                                  lora=S2MelLoRASettings(rank=4, alpha=8))
    trainer = S2MelTrainer(model, made, settings, out_dir, base=base_record(model_dir / "s2mel.pth"))
    trainer.run()
    trainer.writer.wait()
    options = {"train": "s2mel", "model_dir": str(model_dir), "lora": mode == "lora", "max_steps": steps}
    (out_dir / "train_config.yaml").write_text(yaml.safe_dump(options), encoding="utf-8")
    return out_dir / "latest.pth"
