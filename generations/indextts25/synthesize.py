"""IndexTTS-2.5's part of ``python -m trainer.synthesize``: a 2.5 download folder's networks with the run's GPT,
its text scheme, adapters, duration factor and S2Mel settings (``generations.indextts25.synthesis``)."""

from __future__ import annotations

import argparse
from typing import Any

from trainer.synthesize import emotion_report, emotion_weights, speak_all, vars_of, where, with_trained_s2mel


def synthesize(args: argparse.Namespace, texts: list[str], settings: Any) -> int:
    from generations.indextts25.synthesis import MelSettings25, SynthesizerV25
    from trainer.steps import resolve_device
    from trainer.synthesis import SynthesisError
    from trainer.synthesis.s2mel_types import EmotionControl

    emotion = EmotionControl(reference=args.emotion_reference, alpha=args.emotion_alpha,
                             weights=emotion_weights(args.emotion_vector))
    mel = MelSettings25(steps=args.steps, cfg_rate=args.cfg_rate, seed=args.seed,
                        duration_factor=args.duration_factor)
    problems = emotion.problems() + mel.problems()
    if args.emotion_reference is not None and not args.emotion_reference.is_file():
        problems.insert(0, f"--emotion-reference {args.emotion_reference}: file not found")
    if args.segment_tokens < 1:
        problems.append(f"--segment-tokens must be >= 1, got {args.segment_tokens}")
    if args.checkpoint is not None and not args.checkpoint.is_file():
        problems.insert(0, f"--checkpoint {args.checkpoint}: file not found")
    if args.adapter_file is not None and not args.adapter:
        problems.append("--adapter and --no-adapter contradict each other")
    elif args.adapter_file is not None and not args.adapter_file.is_file():
        problems.insert(0, f"--adapter {args.adapter_file}: file not found")
    if problems:
        raise SynthesisError("; ".join(problems))
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()
    device = resolve_device(args.device)
    synth = SynthesizerV25.load(args.model_dir, w2v_bert=args.w2v_bert, checkpoint=args.checkpoint,
                                table=args.tokenizer, scheme=args.text_scheme, language=args.language,
                                device=device, max_segment_tokens=args.segment_tokens, adapter=args.adapter,
                                adapter_file=args.adapter_file)
    with_trained_s2mel(args, synth, device, with_gpt_layer=False)
    synth.check_settings(settings, mel)
    for index, text in enumerate(texts):  # every text is checked before any audio is made
        synth.segments(text, where(args, index))
    voice = synth.prepare_voice(args.reference)
    features = synth.emotion_features(args.emotion_reference) if args.emotion_reference is not None else None
    emotion_vector = synth.emotion_vector(voice, emotion, emotion_features=features)
    speak = lambda text: synth.synthesize(text, voice, emotion, settings, mel, emotion_vector=emotion_vector)  # noqa: E731
    return speak_all(args, texts, speak, {"device": str(device), "settings": vars_of(settings),
                                          "s2mel": vars_of(mel), "emotion": emotion_report(emotion),
                                          "text_scheme": synth.tokenizer.scheme,
                                          "reference_seconds": round(voice.seconds, 4)})
