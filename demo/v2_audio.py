"""What IndexTTS2 data preparation needs in the demo workspace: tiny random audio models and some audio.

Written under ``<workspace>/v2/`` (all random, built in well under a second, about 2 MB):

- ``checkpoints/w2v-bert-2.0/``: a w2v-BERT 2.0 of ``DEMO_SEMANTIC_DIM`` channels and 17 layers (IndexTTS2 reads
  layer 17), saved with ``save_pretrained`` beside the SeamlessM4T preprocessor settings, as a downloaded
  ``facebook/w2v-bert-2.0`` folder looks;
- ``checkpoints/wav2vec2bert_stats.pt`` (``{"mean", "var"}``) and ``checkpoints/semantic_codec/model.safetensors``
  (the file names of an IndexTTS2 download folder: ``demo.v2_synthesis`` adds the rest of one);
- ``audio/<speaker>/<utt>.wav`` + ``.txt``: a few seconds of synthetic voiced sound per speaker (a pitch and
  spectral tilt of its own, syllable-like bursts), with real Amharic transcripts: the input the Data tab's
  IndexTTS2 preparation turns into pairs.

The config's ``gpt.semantic_dim`` / ``emo_perceiver_dim`` and ``semantic_codec`` section carry the same small
width (``demo_audio_sections``), so the demo GPT's conditioning encoders read these features.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from data_tools.fileio import atomic_write_text, atomic_write_with
from demo.data import stable_int

DEMO_SEMANTIC_DIM = 32
SAMPLE_RATE = 24_000
UTTERANCES_PER_SPEAKER = 4
CODEC_SECTION = {"codebook_size": 8192, "hidden_size": DEMO_SEMANTIC_DIM, "codebook_dim": 8, "vocos_dim": 16,
                 "vocos_intermediate_dim": 32, "vocos_num_layers": 2}
W2V_BERT_SETTINGS = {"hidden_size": DEMO_SEMANTIC_DIM, "num_hidden_layers": 17, "num_attention_heads": 2,
                     "intermediate_size": 32, "feature_projection_input_dim": 160, "hidden_act": "swish",
                     "position_embeddings_type": "relative_key", "left_max_position_embeddings": 64,
                     "right_max_position_embeddings": 8, "conv_depthwise_kernel_size": 31, "hidden_dropout": 0.0,
                     "activation_dropout": 0.0, "attention_dropout": 0.0, "feat_proj_dropout": 0.0,
                     "layerdrop": 0.0, "add_adapter": False, "apply_spec_augment": False}


def demo_audio_sections() -> tuple[dict, dict]:
    """(keys added to the demo's gpt section, its semantic_codec section) for the tiny audio models."""
    return {"semantic_dim": DEMO_SEMANTIC_DIM, "emo_perceiver_dim": DEMO_SEMANTIC_DIM}, dict(CODEC_SECTION)


@dataclass(frozen=True)
class PrepKit:
    """The files ``python -m data_tools.prepare_v2`` takes besides the config, the GPT and the tokenizer."""

    w2v_bert: Path  # a save_pretrained folder
    w2v_stats: Path
    codec: Path

    @classmethod
    def under(cls, checkpoints: Path) -> PrepKit:
        # the names an IndexTTS2 download folder uses (networks.indextts2), so the same files serve synthesis
        return cls(w2v_bert=checkpoints / "w2v-bert-2.0", w2v_stats=checkpoints / "wav2vec2bert_stats.pt",
                   codec=checkpoints / "semantic_codec" / "model.safetensors")

    def exists(self) -> bool:
        return (self.w2v_bert / "config.json").is_file() and self.w2v_stats.is_file() and self.codec.is_file()


def write_prep_kit(checkpoints: Path, seed: int, semantic_dim: int = DEMO_SEMANTIC_DIM) -> PrepKit:
    """Random w2v-BERT folder, stats and semantic codec of width ``semantic_dim`` (tests use other widths)."""
    import torch
    from safetensors.torch import save as save_safetensors

    from networks.frontends.seamless_features import build_feature_extractor
    from networks.semantic_codec import SemanticCodec, SemanticCodecConfig
    from networks.w2v_bert import build_w2v_bert

    kit = PrepKit.under(checkpoints)
    torch.manual_seed(seed)
    w2v = build_w2v_bert({**W2V_BERT_SETTINGS, "hidden_size": semantic_dim})
    w2v.save_pretrained(kit.w2v_bert)
    build_feature_extractor().save_pretrained(kit.w2v_bert)
    generator = torch.Generator().manual_seed(seed + 1)
    stats = {"mean": 0.1 * torch.randn(semantic_dim, generator=generator),
             "var": 0.5 + torch.rand(semantic_dim, generator=generator)}
    atomic_write_with(kit.w2v_stats, lambda handle: torch.save(stats, handle))
    codec = SemanticCodec(SemanticCodecConfig.from_section({**CODEC_SECTION, "hidden_size": semantic_dim}))
    state = {key: value.detach().clone().contiguous() for key, value in codec.state_dict().items()}
    kit.codec.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_with(kit.codec, lambda handle: handle.write(save_safetensors(state)))
    return kit


def synthetic_voice(speaker: str, text: str, seconds: float) -> np.ndarray:
    """A voiced, speech-like float32 signal at 24 kHz: the speaker's pitch and tilt, one burst per word."""
    rng = np.random.default_rng(stable_int(f"{speaker}/{text}") % 2**32)
    pitch = 90.0 + stable_int(speaker) % 120
    tilt = 0.55 + (stable_int(speaker + "/tilt") % 30) / 100
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = pitch * (1.0 + 0.05 * np.sin(2 * np.pi * 1.5 * t + rng.uniform(0, np.pi)))
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    voiced = sum(tilt**k * np.sin(k * phase) for k in range(1, 12))
    words = max(1, len(text.split()))
    envelope = np.clip(np.sin(np.pi * words * t / seconds), 0.0, None) ** 0.6
    signal = 0.12 * voiced * envelope + 0.003 * rng.standard_normal(t.size)
    return signal.astype(np.float32)


def write_demo_audio(folder: Path, sentences: list[str], speakers: tuple[str, ...]) -> list[Path]:
    """``folder/<speaker>/<utt>.wav`` + ``.txt`` for ``UTTERANCES_PER_SPEAKER`` short sentences per speaker."""
    import soundfile

    short = sorted((s for s in sentences if 2 <= len(s.split()) <= 6), key=lambda s: (len(s), s))
    written = []
    for k, sentence in enumerate(short[: UTTERANCES_PER_SPEAKER * len(speakers)]):
        speaker = speakers[k % len(speakers)]
        wav = folder / speaker / f"{k:02d}.wav"
        wav.parent.mkdir(parents=True, exist_ok=True)
        seconds = min(2.2, 0.6 + 0.25 * len(sentence.split()))
        soundfile.write(str(wav), synthetic_voice(speaker, sentence, seconds), SAMPLE_RATE, subtype="PCM_16")
        atomic_write_text(wav.with_suffix(".txt"), sentence + "\n")
        written.append(wav)
    return written

def write_demo_wavs(folder: Path, utterances: list[dict]) -> None:
    """Short synthetic 24 kHz audio of the utterances (the demo's validation prompts and targets: IndexTTS2 and
    2.5 read audio prompts)."""
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    for utterance in utterances:
        seconds = min(2.0, max(0.8, float(utterance["duration"])))
        audio = synthetic_voice(utterance["speaker"], utterance["text"], seconds)
        soundfile.write(str(folder / f"{utterance['id']}.wav"), audio, SAMPLE_RATE, subtype="PCM_16")
