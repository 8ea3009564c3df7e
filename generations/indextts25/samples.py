"""IndexTTS-2.5 samples at saves (``trainer.samples`` holds what every generation shares).

``--sample-model-dir`` names a 2.5 download folder (``networks.indextts25``: codec, S2Mel without gpt_layer,
CAMPPlus, BigVGAN v2, w2v-BERT + stats); the live GPT speaks through the folder's other networks
(``SynthesizerV25``; the folder's own gpt.pth is not read) with ``--sample-steps`` flow-matching steps and
duration factor 1, at 22.05 kHz. The voice (CAM++ style, prompt mel, emotion) is the audio of the first
validation pair's prompt (``prompt_audio_path``); texts are spoken in their own language (the language row
and ``"<|lang|> "`` prefix of the run's ``--text-scheme`` tokenizer). The folder's networks load once, at the
first sample, on the CPU with the global RNG forked, then move to the training device; GPT sampling and the
CFM noise use private seeded generators, so the training run stays bitwise as without samples.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from generations.folders import folder_config
from trainer.sample_plan import SAMPLE_SEED, FolderKind, SamplePlan, folder_sample_plan


def width_mismatch(run_gpt: dict[str, Any], folder_gpt: dict[str, Any]) -> str | None:
    """Why the folder's w2v-BERT cannot feed this run's GPT (its emotion conformer), or None.

    2.5's S2Mel reads no GPT latent, so the GPT's model_dim need not match the folder's."""
    mine, theirs = int(run_gpt.get("semantic_dim", 1024)), int(folder_gpt.get("semantic_dim", 1024))
    if mine != theirs:
        return (f"its w2v-BERT features are {theirs} wide but this run's GPT reads gpt.semantic_dim {mine}: "
                "not the same IndexTTS-2.5 model")
    return None


FOLDER_KIND = FolderKind(name="IndexTTS-2.5", contents="codec, S2Mel, BigVGAN v2, w2v-BERT...",
                               w2v_bert_places=("w2v-bert-2.0", "hf_cache/w2v-bert-2.0"),
                               resolve=partial(folder_config, "networks.indextts25"),
                               width_mismatch=width_mismatch, carries_language=True)


def sample_plan(opts: dict[str, Any], config: dict[str, Any], val_items: list[Any]) -> SamplePlan:
    """IndexTTS-2.5's samples at saves (its registry entry's ``sample_plan``)."""
    return folder_sample_plan(FOLDER_KIND, opts, config, val_items)


def _load_networks(plan: SamplePlan, device: torch.device) -> Any:
    """The folder's networks (no GPT), built on the CPU with the global RNG forked, then moved."""
    from dataclasses import replace

    from networks.indextts25 import IndexTTS25FilesError, load_indextts25
    from trainer.synthesis.errors import SynthesisError

    assert plan.model_dir is not None
    try:
        with torch.random.fork_rng(devices=[]):
            nets = load_indextts25(plan.model_dir, w2v_bert=plan.w2v_bert, load_gpt_weights=False, device="cpu")
    except (IndexTTS25FilesError, ValueError, FileNotFoundError) as exc:
        raise SynthesisError(f"--sample-model-dir {plan.model_dir}: {' '.join(str(exc).split())}") from None
    if device.type == "cpu":
        return nets
    moved = {name: getattr(nets, name).to(device) for name in ("semantic", "codec", "campplus", "s2mel", "vocoder")}
    return replace(nets, **moved)


def speaker(plan: SamplePlan, model: torch.nn.Module, tokenizer: Any) -> Any:
    """text (raw or ids) -> S2MelSynthResult with the live 2.5 GPT and the download folder's other networks."""
    from dataclasses import replace

    from generations.indextts25.synthesis import MelSettings25, SynthesizerV25
    from trainer.synthesis.generation import DecodeSettings

    device = next(model.parameters()).device
    if plan.nets is None:
        plan.nets = _load_networks(plan, device)
    language = plan.language or None
    synth = SynthesizerV25(replace(plan.nets, gpt=model), tokenizer, language=language)
    settings = DecodeSettings(seed=SAMPLE_SEED)
    mel = MelSettings25(steps=plan.steps, seed=SAMPLE_SEED, duration_factor=1.0)
    assert plan.reference is not None
    voice = synth.prepare_voice(plan.reference)  # CAM++ style through the live spk_emb_proj: every save
    emotion = synth.emotion_vector(voice)

    def speak(text: list[int] | str) -> Any:
        with torch.no_grad():
            if isinstance(text, str):
                return synth.synthesize(text, voice, None, settings, mel, emotion_vector=emotion)
            return synth.synthesize_ids([text], voice, None, settings, mel, emotion_vector=emotion)

    return speak
