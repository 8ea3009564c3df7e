"""IndexTTS synthesis in plain PyTorch: text + reference voice -> speech (v1.5: 24 kHz, IndexTTS2 and 2.5: 22.05 kHz).

Entry points (details in each module's docstring):

- :class:`Synthesizer` (``pipeline``): ``Synthesizer.load(checkpoint, config, tokenizer, vocoder, device)``
  or ``Synthesizer(model, vocoder_model, tokenizer)`` for a live model; ``synthesize(texts, reference,
  DecodeSettings(...)) -> list[SynthResult]``.
- ``s2mel_pipeline.S2MelSynthesizer`` (imported from its module, so that v1.5 users do not pay for transformers):
  IndexTTS2 from a download folder, ``S2MelSynthesizer.load(model_dir, w2v_bert=..., checkpoint=..., tokenizer=...)``;
  ``prepare_voice(path)``, ``synthesize(text, voice, EmotionControl(...), DecodeSettings(...), MelSettings(...))``
  -> ``S2MelSynthResult`` (segments from ``segments.split_segments`` joined with 200 ms of silence); those values
  live in ``s2mel_types``.
- ``generations.indextts25.synthesis.SynthesizerV25`` (from its module): IndexTTS-2.5, a variant;
  ``SynthesizerV25.load(model_dir, w2v_bert=..., checkpoint=..., scheme=..., language=...)``, the same calls,
  ``MelSettings25(steps, cfg_rate, seed, duration_factor)``, ``vocalize(codes, voice, mel)``.
- :class:`DecodeSettings`, ``generate_codes``, ``remove_long_silence`` (``generation``): KV-cached decoding.
- ``load_vocoder`` (``vocoder_loading``): a BigVGAN v1.5 file -> ``networks.bigvgan.BigVGAN``.
- ``write_demo_vocoder`` (``demo_vocoder``): a tiny random BigVGAN for the demo workspace.
- ``write_wav`` / ``to_int16`` (``wav``). CLI: ``python -m trainer.synthesize``.
"""

from trainer.synthesis.errors import SynthesisError
from trainer.synthesis.generation import DecodeSettings, Generated, generate_codes, remove_long_silence
from trainer.synthesis.gpt_loading import load_gpt
from trainer.synthesis.pipeline import PreparedReference, Synthesizer, SynthResult
from trainer.synthesis.vocoder_loading import load_vocoder
from trainer.synthesis.wav import to_int16, write_wav

__all__ = [
    "DecodeSettings",
    "Generated",
    "PreparedReference",
    "SynthResult",
    "SynthesisError",
    "Synthesizer",
    "generate_codes",
    "load_gpt",
    "load_vocoder",
    "remove_long_silence",
    "to_int16",
    "write_wav",
]
