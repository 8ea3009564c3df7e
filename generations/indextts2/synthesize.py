"""IndexTTS2's part of ``python -m trainer.synthesize``: a download folder's networks (``--model-dir``) with the
run's GPT, emotion control and S2Mel settings (``trainer.synthesis.s2mel_pipeline``)."""

from __future__ import annotations

import argparse
from typing import Any

from trainer.synthesize import emotion_report, emotion_weights, speak_all, vars_of, where, with_trained_s2mel


def synthesize(args: argparse.Namespace, texts: list[str], settings: Any) -> int:
    from trainer.steps import resolve_device
    from trainer.synthesis import SynthesisError
    from trainer.synthesis.s2mel_pipeline import S2MelSynthesizer
    from trainer.synthesis.s2mel_types import EmotionControl, MelSettings

    emotion = EmotionControl(reference=args.emotion_reference, alpha=args.emotion_alpha,
                             weights=emotion_weights(args.emotion_vector))
    mel = MelSettings(steps=args.steps, cfg_rate=args.cfg_rate, seed=args.seed)
    problems = emotion.problems() + mel.problems()
    if args.emotion_reference is not None and not args.emotion_reference.is_file():
        problems.insert(0, f"--emotion-reference {args.emotion_reference}: file not found")
    if args.segment_tokens < 1:
        problems.append(f"--segment-tokens must be >= 1, got {args.segment_tokens}")
    if problems:
        raise SynthesisError("; ".join(problems))
    if args.tokenizer is None:
        from networks.indextts2 import IndexTTS2FilesError, resolve_files

        try:
            files, _ = resolve_files(args.model_dir, w2v_bert=args.w2v_bert, need_gpt=args.checkpoint is None)
        except IndexTTS2FilesError as exc:
            raise SynthesisError(str(exc)) from None
        if files.tokenizer is None:
            raise SynthesisError(f"--model-dir {args.model_dir} has no bpe.model (dataset.bpe_model): pass --tokenizer")
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()  # w2v-BERT's loading bar: noise on the CLI's stderr
    device = resolve_device(args.device)
    synth = S2MelSynthesizer.load(args.model_dir, w2v_bert=args.w2v_bert, checkpoint=args.checkpoint,
                               tokenizer=args.tokenizer, language=args.language, device=device,
                               max_segment_tokens=args.segment_tokens, adapter=args.adapter)
    with_trained_s2mel(args, synth, device, gpt_dim=synth.nets.config["gpt"]["model_dim"])
    synth.check_settings(settings, mel)
    for index, text in enumerate(texts):  # every text is checked before any audio is made
        synth.segments(text, where(args, index))
    voice = synth.prepare_voice(args.reference)
    if args.emotion_reference is not None:  # read once, not per text
        features = synth.emotion_features(args.emotion_reference)
        emotion_vector = synth.emotion_vector(voice, emotion, emotion_features=features)
    else:
        emotion_vector = synth.emotion_vector(voice, emotion)
    speak = lambda text: synth.synthesize(text, voice, emotion, settings, mel, emotion_vector=emotion_vector)  # noqa: E731
    return speak_all(args, texts, speak, {"device": str(device), "settings": vars_of(settings),
                                          "s2mel": vars_of(mel), "emotion": emotion_report(emotion),
                                          "reference_seconds": round(voice.seconds, 4)})
