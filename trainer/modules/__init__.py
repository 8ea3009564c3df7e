"""Building blocks of the IndexTTS GPT (UnifiedVoice): conformer, perceiver resampler, GPT-2 backbone."""

from trainer.modules.conformer import ConformerEncoder
from trainer.modules.gpt2 import GPT2Backbone
from trainer.modules.perceiver import PerceiverResampler

__all__ = ["ConformerEncoder", "GPT2Backbone", "PerceiverResampler"]
