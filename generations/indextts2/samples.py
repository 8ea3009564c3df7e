"""IndexTTS2 samples at saves (``trainer.samples`` holds what every generation shares).

``--sample-model-dir`` names an IndexTTS2 download folder; the live GPT speaks through the folder's w2v-BERT,
semantic codec, CAMPPlus, S2Mel (``--sample-steps``) and BigVGAN v2, 22.05 kHz, in the voice (and emotion) of the
first validation pair's prompt audio. The folder's files are checked when the run is planned (cheap); its
networks load once, at the first sample, on the CPU with the global RNG forked, then move to the training device.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from generations.folders import folder_config
from trainer.sample_plan import SAMPLE_SEED, FolderKind, SamplePlan, folder_sample_plan


def sample_plan(opts: dict[str, Any], config: dict[str, Any], val_items: list[Any]) -> SamplePlan:
    """IndexTTS2: the download folder's files are checked here (cheap); its networks load at the first sample."""
    return folder_sample_plan(FOLDER_KIND, opts, config, val_items)


def width_mismatch(run_gpt: dict[str, Any], folder_gpt: dict[str, Any]) -> str | None:
    """Why the folder's S2Mel and codec cannot take this run's GPT (None: they fit)."""
    for key, default, what in (("model_dim", 1280, "its S2Mel takes GPT latents"),
                               ("semantic_dim", 1024, "its semantic codec gives features")):
        mine, theirs = int(run_gpt.get(key, default)), int(folder_gpt.get(key, default))
        if mine != theirs:
            return f"{what} {theirs} wide but this run's GPT has gpt.{key} {mine}: not the same IndexTTS2 model"
    return None


FOLDER_KIND = FolderKind(name="IndexTTS2", contents="S2Mel, BigVGAN v2, w2v-BERT...",
                         w2v_bert_places=("w2v-bert-2.0",), resolve=partial(folder_config, "networks.indextts2"),
                         width_mismatch=width_mismatch)


def speaker(plan: SamplePlan, model: torch.nn.Module, tokenizer: Any) -> Any:
    """text (raw or ids) -> S2MelSynthResult with the live GPT and the download folder's other networks."""
    from dataclasses import replace

    from trainer.synthesis.generation import DecodeSettings
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer
    from trainer.synthesis.s2mel_types import MelSettings

    device = next(model.parameters()).device
    if plan.nets is None:
        plan.nets = _load_folder(plan, device)
    synth = S2MelSynthesizer(replace(plan.nets, gpt=model), tokenizer)
    settings, mel = DecodeSettings(seed=SAMPLE_SEED), MelSettings(steps=plan.steps, seed=SAMPLE_SEED)
    assert plan.reference is not None
    voice = synth.prepare_voice(plan.reference)  # the live GPT's conditioning: recomputed at every save
    emotion = synth.emotion_vector(voice)

    def speak(text: list[int] | str) -> Any:
        if isinstance(text, str):
            return synth.synthesize(text, voice, None, settings, mel, emotion_vector=emotion)
        return synth.synthesize_ids([text], voice, None, settings, mel, emotion_vector=emotion)

    return speak


def _load_folder(plan: SamplePlan, device: torch.device) -> Any:
    """The download folder's networks (no GPT), built on the CPU with the global RNG forked, then moved."""
    from dataclasses import replace

    from networks.indextts2 import load_indextts2
    from trainer.synthesis.errors import SynthesisError

    assert plan.model_dir is not None
    try:
        with torch.random.fork_rng(devices=[]):
            nets = load_indextts2(plan.model_dir, w2v_bert=plan.w2v_bert, load_gpt_weights=False, device="cpu")
    except (ValueError, FileNotFoundError) as exc:  # the networks' one-line refusals
        raise SynthesisError(f"--sample-model-dir {plan.model_dir}: {' '.join(str(exc).split())}") from None
    if device.type == "cpu":
        return nets
    moved = {name: getattr(nets, name).to(device)
             for name in ("semantic", "codec", "campplus", "s2mel", "vocoder", "spk_matrix", "emo_matrix")}
    return replace(nets, **moved)
