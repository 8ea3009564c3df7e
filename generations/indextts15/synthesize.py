"""IndexTTS-1.5's part of ``python -m trainer.synthesize``: GPT + BigVGAN, the reference a prompt mel or audio."""

from __future__ import annotations

import argparse
from typing import Any

from trainer.synthesize import reference_input, speak_all, vars_of, vocoder_path, where


def synthesize(args: argparse.Namespace, texts: list[str], settings: Any) -> int:
    from data_tools.config import load_config
    from trainer.steps import resolve_device
    from trainer.synthesis import Synthesizer

    device = resolve_device(args.device)
    config = load_config(args.config)
    synth = Synthesizer.load(args.checkpoint, args.config, args.tokenizer, vocoder_path(args, config), device,
                             language=args.language, adapter=args.adapter)
    synth.check_settings(settings)
    for index, text in enumerate(texts):  # every text is checked before any audio is made
        synth.text_ids(text, where(args, index))
    reference = synth.prepare_reference(reference_input(args.reference))
    speak = lambda text: synth.synthesize([text], reference, settings)[0]  # noqa: E731
    return speak_all(args, texts, speak, {"device": str(device), "settings": vars_of(settings),
                                          "reference_seconds": round(reference.seconds, 4)})
