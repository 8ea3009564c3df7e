"""IndexTTS v1.5 synthesis in plain PyTorch: text + reference voice -> 24 kHz speech.

Entry points (details in each module's docstring):

- :class:`Synthesizer` (``pipeline``): ``Synthesizer.load(checkpoint, config, tokenizer, vocoder, device)``
  or ``Synthesizer(model, vocoder_model, tokenizer)`` for a live model; ``synthesize(texts, reference,
  DecodeSettings(...)) -> list[SynthResult]``.
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
