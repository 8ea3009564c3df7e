"""A demo S2Mel run on the IndexTTS2 demo download and its data: preparation's S2Mel files, clips with the GPT's
teacher-forced latent, full and LoRA training lower the loss, and the export loads strictly and synthesises."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from data_tools.s2mel_clip import add_missing_s2mel_files
from data_tools.text_tokenizer import TextTokenizer
from generations.indextts2.demo.build import DemoPaths as DemoV2Paths
from generations.indextts2.s2mel import latent_fn as v2_latent_fn
from generations.indextts2.s2mel import semantic_fn as v2_semantic_fn
from generations.indextts25.demo.build import DemoPaths as DemoV25Paths
from generations.indextts25.s2mel import semantic_fn as v25_semantic_fn
from networks.frontends.s2mel_mel import S2MelMelSettings
from networks.indextts2 import build_gpt, load_gpt, load_indextts2
from networks.indextts25 import load_indextts25
from networks.s2mel import load_s2mel
from trainer.s2mel.dataset import load_clips
from trainer.s2mel.export import base_record, export_stock_s2mel
from trainer.s2mel.loop import S2MelTrainer
from trainer.s2mel.lora import S2MelLoRASettings
from trainer.s2mel.samples import sample_hook
from trainer.s2mel.sources import audio_loader
from trainer.s2mel.train_settings import S2MelTrainSettings
from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer
from trainer.synthesis.s2mel_types import seeded_noise
from trainer.vocab import grow_text_vocab


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_demo_v2_s2mel_run(demo_workspace, tmp_path: Path, mode: str) -> None:
    paths = DemoV2Paths.under(demo_workspace.root)
    checkpoints = paths.config.parent
    nets = load_indextts2(checkpoints, local_files_only=True)
    config = nets.config
    data = paths.train_manifest.parent
    stems = sorted(p.stem for p in (data / "wavs").glob("*.wav"))
    assert len(stems) >= 2
    folder = tmp_path / "data"
    for sub in ("codes", "text_ids", "condition", "emo_vec"):
        (folder / sub).mkdir(parents=True)
        for stem in stems:
            shutil.copy(data / sub / f"{stem}.npy", folder / sub / f"{stem}.npy")
    settings = S2MelMelSettings.from_preprocess_params(config["s2mel"]["preprocess_params"])
    written = add_missing_s2mel_files(
        folder, stems, audio_loader(data / "wavs", settings.sample_rate), nets.campplus, settings
    )
    assert written == stems
    # The demo data's text ids use the extended tokenizer: the latent comes from the GPT a run fine-tunes, i.e.
    # the base GPT grown to that tokenizer (as the GPT trainer starts it).
    grown = grow_text_vocab(
        nets.gpt.state_dict(), config["gpt"], paths.extended_tokenizer, paths.base_tokenizer
    )
    gpt = build_gpt(grown.gpt_cfg)
    load_gpt(gpt, grown.state_dict)
    clips = load_clips(folder, stems, v2_semantic_fn(nets.codec), v2_latent_fn(gpt.eval(), folder))
    assert (
        clips[0].gpt_latent is not None and clips[0].gpt_latent.shape[0] == clips[0].code_embedding.shape[0]
    )

    base = nets.files.s2mel
    model_kwargs = {"gpt_dim": config["gpt"]["model_dim"]}
    model = load_s2mel(base, config["s2mel"], **model_kwargs)
    run = S2MelTrainSettings(
        mode=mode,
        batch_size=2,
        max_steps=16,
        save_interval=8,
        learning_rate=3e-3 if mode == "full" else 1e-2,
        class_dropout_prob=0.0,
        lora=S2MelLoRASettings(rank=4, alpha=8, targets=("attention", "feed_forward", "norms", "io")),
    )
    trainer = S2MelTrainer(model, clips, run, tmp_path / "run", base=base_record(base))
    before = trainer.validation_loss(clips)
    synth = S2MelSynthesizer(
        dataclasses.replace(nets, gpt=gpt), TextTokenizer(paths.extended_tokenizer), language="am"
    )
    speak = sample_hook(
        synth,
        ["ሰላም"],
        data / "wavs" / f"{stems[0]}.wav",
        tmp_path / "run",
        noise_for=lambda i: seeded_noise(i),
    )
    trainer.run(on_save=speak)
    after = trainer.validation_loss(clips)
    assert after < before, (before, after)
    samples = sorted(p.name for p in (tmp_path / "run" / "samples").glob("*.wav"))
    assert samples == ["s2mel_step16_0.wav", "s2mel_step8_0.wav"]
    assert synth.nets.s2mel is nets.s2mel  # the synthesizer's own S2Mel is back

    out = export_stock_s2mel(
        tmp_path / "run" / "latest.pth", base, config["s2mel"], tmp_path / "s2mel.pth", **model_kwargs
    )
    exported = load_s2mel(out, config["s2mel"], **model_kwargs)
    clip = clips[0]
    mel = exported.infer(
        prompt_condition=exported.prompt_condition(clip.code_embedding[None, :10], 17),
        ref_mel=clip.mel[None, :, :17],
        style=clip.style[None],
        gpt_latent=clip.gpt_latent[None],
        code_embedding=clip.code_embedding.T[None],
        steps=2,
        generator=torch.Generator().manual_seed(0),
    )
    assert mel.shape[-1] > 0 and bool(torch.isfinite(mel).all())


def test_demo_v25_s2mel_lora_run(demo_workspace, tmp_path: Path) -> None:
    paths = DemoV25Paths.under(demo_workspace.root)
    nets = load_indextts25(paths.config.parent, local_files_only=True)
    config = nets.config
    data = paths.train_manifest.parent
    stems = sorted(p.stem for p in (data / "wavs").glob("*.wav"))[:6]
    folder = tmp_path / "data"
    (folder / "codes").mkdir(parents=True)
    for stem in stems:
        shutil.copy(data / "codes" / f"{stem}.npy", folder / "codes" / f"{stem}.npy")
    settings = S2MelMelSettings.from_preprocess_params(config["s2mel"]["preprocess_params"])
    add_missing_s2mel_files(
        folder, stems, audio_loader(data / "wavs", settings.sample_rate), nets.campplus, settings
    )
    clips = load_clips(folder, stems, v25_semantic_fn(nets.codec))
    assert clips[0].gpt_latent is None and clips[0].code_embedding.shape[0] % 2 == 0

    base = nets.files.s2mel
    model = load_s2mel(base, config["s2mel"], with_gpt_layer=False)
    lora = S2MelLoRASettings(rank=4, alpha=8, targets=("attention", "feed_forward", "norms", "io"))
    run = S2MelTrainSettings(
        mode="lora",
        batch_size=2,
        max_steps=12,
        save_interval=6,
        learning_rate=1e-2,
        class_dropout_prob=0.0,
        lora=lora,
    )
    trainer = S2MelTrainer(model, clips, run, tmp_path / "run", base=base_record(base))
    before = trainer.validation_loss(clips)
    trainer.run()
    assert trainer.validation_loss(clips) < before
    out = export_stock_s2mel(
        tmp_path / "run" / "latest.pth", base, config["s2mel"], tmp_path / "s2mel.pth", with_gpt_layer=False
    )
    load_s2mel(out, config["s2mel"], with_gpt_layer=False)  # strict, stock layout
