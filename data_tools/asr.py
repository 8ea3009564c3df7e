"""Speech recognition for raw recordings and checkpoint scoring: transformers CTC models, greedy decoding.

    asr = load_ctc_asr("facebook/mms-1b-all", target_lang="amh")     # or a local model folder
    transcripts = asr.transcribe([samples, ...], sample_rate=24_000)  # -> [Transcript(text, confidence)]

Any ``AutoModelForCTC`` model works (wav2vec2, MMS, HuBERT, WavLM, data2vec-audio, ...) with its
``AutoProcessor``. MMS models carry one small adapter (and one vocabulary) per language: ``target_lang``
selects it the way transformers documents for MMS (``processor.tokenizer.set_target_lang`` +
``model.load_adapter``, which reads ``adapter.<lang>.safetensors`` beside the weights). Weights are never
bundled: a model id is fetched by transformers (Hub cache) when the user names one.

Clips are resampled to the processor's rate (soxr), sorted by length and run in batches of similar
length with the feature extractor's attention mask; on the GPU when there is one. A clip's transcript does
not depend on the clips batched with it: models that cannot ignore padding (no attention mask from their
feature extractor, or a first convolution that normalises over time, ``feat_extract_norm="group"``, as in
wav2vec2-base-960h) transcribe one clip at a time. MMS and the large wav2vec2/XLS-R models batch.
Decoding is greedy CTC: the most likely token per frame, repeats merged, blanks dropped.

Confidence: the mean, over the frames that emit a character (the greedy token is not the blank), of the
most likely token's softmax probability. Blank frames are left out because they are most frames of any
clip and nearly always certain, so a measure over every frame (for example exp of the mean log-probability
of the greedy path) sits close to 1 for good and bad transcripts alike; the emitting frames are where the
text is decided. An arithmetic mean of probabilities stays in [0, 1] and one unsure frame lowers it
without sinking it. A clip with no emitted character (silence, or too short for the model) has text ""
and confidence 0.0.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.speech_models import (
    feature_frame_lengths,
    first_line,
    length_batches,
    load_model_strictly,
    model_config,
    prepare_waves,
    require_head,
    resolve_device,
)


class AsrError(ValueError):
    """A model or input the transcriber cannot use (one line: what and where)."""


@dataclass(frozen=True)
class Transcript:
    text: str
    confidence: float  # mean top-token probability over emitting frames, 0..1 (see the module doc)


@dataclass(frozen=True)
class SuggestedModel:
    model: str  # Hub model id
    target_lang: str | None  # MMS adapter language, None for a single-language model
    licence: str
    note: str
    verified: bool  # False: licence / contents from memory, not checked against the model card


# Shown by the studio. Check the model card before relying on a licence; none of these is bundled.
SUGGESTED_AMHARIC_MODELS: tuple[SuggestedModel, ...] = (
    SuggestedModel("facebook/mms-1b-all", "amh", "CC-BY-NC-4.0 (non-commercial)",
                   "Meta MMS, 1B parameters (about 4 GB), one adapter per language for 1,162 languages; "
                   "Amharic is 'amh'.", True),
    SuggestedModel("facebook/mms-1b-fl102", "amh", "CC-BY-NC-4.0 (non-commercial)",
                   "MMS adapters trained on FLEURS (102 languages, Amharic among them); same size as "
                   "mms-1b-all.", False),
    SuggestedModel("agkphysics/wav2vec2-large-xlsr-53-amharic", None, "Apache-2.0 (unverified)",
                   "Community XLSR-53 fine-tune on the ALFFA Amharic corpus, about 300M parameters; "
                   "licence and quality not verified.", False),
)

_CTC_WHAT = "CTC speech recogniser"


def load_ctc_asr(model: str, target_lang: str | None = None, device: str = "auto") -> CtcAsr:
    """A CTC transcriber from a local model folder or a model id; ``target_lang`` picks an MMS adapter."""
    source, config = model_config(model, AsrError)
    from transformers.models.auto.modeling_auto import MODEL_FOR_CTC_MAPPING_NAMES

    require_head(source, config, "ForCTC", tuple(MODEL_FOR_CTC_MAPPING_NAMES), _CTC_WHAT, AsrError)
    torch_device = resolve_device(device, AsrError)
    lang = (target_lang or "").strip() or None
    if lang is not None and config.get("adapter_attn_dim") is None:
        raise AsrError(f"{source}: this model has no language adapters, so target_lang {lang!r} does not apply "
                       "(leave it empty)")
    folder = Path(source)
    if folder.is_dir() and not any((folder / name).is_file() for name in ("vocab.json", "tokenizer.json")):
        raise AsrError(f"{source}: no tokenizer (vocab.json) beside the model, so its outputs cannot be turned "
                       "into text")
    from transformers import AutoModelForCTC, AutoProcessor

    languages = _vocabulary_languages(source)
    if languages is not None:
        lang = _check_language(source, languages, lang)
    try:
        processor = AutoProcessor.from_pretrained(source, **({"target_lang": lang} if languages else {}))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AsrError(f"{source}: its processor (feature extractor + tokenizer) does not load "
                       f"({first_line(exc)})") from None
    tokenizer = getattr(processor, "tokenizer", None)
    feature_extractor = getattr(processor, "feature_extractor", None)
    if tokenizer is None or feature_extractor is None:
        raise AsrError(f"{source}: needs both a feature extractor and a CTC tokenizer (vocab.json); "
                       f"found only a {type(processor).__name__}")
    network = load_model_strictly(AutoModelForCTC, source, _CTC_WHAT, AsrError)
    if lang is not None:
        try:
            network.load_adapter(lang)
        except OSError:
            raise AsrError(f"{source}: no adapter for language {lang!r} "
                           f"(adapter.{lang}.safetensors or adapter.{lang}.bin)") from None
        except ValueError as exc:
            raise AsrError(f"{source}: the {lang!r} adapter does not fit the model ({first_line(exc)})") from None
    network.eval().to(torch_device)
    return CtcAsr(network, processor, torch_device, source, lang)


def _vocabulary_languages(source: str) -> list[str] | None:
    """Languages of a vocab.json that holds one vocabulary per language (MMS), else None."""
    from transformers.utils import cached_file

    try:
        path = cached_file(source, "vocab.json", _raise_exceptions_for_missing_entries=False)
        vocab = json.loads(Path(path).read_text(encoding="utf-8")) if path else None
    except (OSError, ValueError):
        return None  # no readable vocab.json: the processor load below says what is wrong
    if isinstance(vocab, dict) and vocab and all(isinstance(v, dict) for v in vocab.values()):
        return sorted(vocab)
    return None


def _check_language(source: str, languages: list[str], lang: str | None) -> str:
    if lang is None:
        raise AsrError(f"{source}: a multilingual model ({len(languages)} languages): choose target_lang "
                       f"(e.g. {_examples(languages)})")
    if lang not in languages:
        raise AsrError(f"{source}: no vocabulary for language {lang!r} ({len(languages)} languages, "
                       f"e.g. {_examples(languages)})")
    return lang


def _examples(languages: list[str]) -> str:
    preferred = [name for name in ("amh", "eng") if name in languages]
    return ", ".join((preferred + [name for name in languages if name not in preferred])[:3])


class CtcAsr:
    """A loaded CTC model and its processor; ``transcribe`` is the only thing callers need."""

    def __init__(self, model: Any, processor: Any, device: Any, source: str, target_lang: str | None) -> None:
        self.model = model
        self.processor = processor
        self.device = device
        self.source = source
        self.target_lang = target_lang
        self.sample_rate = int(processor.feature_extractor.sampling_rate)
        self.blank_id = _blank_id(model, processor.tokenizer)
        delimiter = getattr(processor.tokenizer, "word_delimiter_token_id", None)
        self.dropped_ids = {i for i in processor.tokenizer.all_special_ids if i != delimiter}
        self.batches_exactly = (bool(getattr(processor.feature_extractor, "return_attention_mask", False))
                                and getattr(model.config, "feat_extract_norm", "layer") != "group")

    def transcribe(self, waves: Sequence[np.ndarray], sample_rate: int, batch_size: int = 8) -> list[Transcript]:
        """One transcript per clip, in the order given (clips: 1-D samples at ``sample_rate``)."""
        clips = prepare_waves(waves, sample_rate, self.sample_rate, AsrError)
        results: list[Transcript | None] = [None] * len(clips)
        frames = self._frames([len(clip) for clip in clips])
        runnable = [i for i, clip in enumerate(clips) if clip.size and (frames is None or frames[i] > 0)]
        for i in set(range(len(clips))) - set(runnable):
            results[i] = Transcript("", 0.0)  # empty, or shorter than one frame of the model
        lengths = [len(clips[i]) for i in runnable]
        for batch in length_batches(lengths, batch_size if self.batches_exactly else 1, AsrError):
            indices = [runnable[j] for j in batch]
            for index, transcript in zip(indices, self._transcribe_batch([clips[i] for i in indices]), strict=True):
                results[index] = transcript
        return [result for result in results if result is not None]

    def emissions(self, wave: np.ndarray, sample_rate: int) -> tuple[np.ndarray, float]:
        """One clip's CTC log-probabilities (frames x tokens) and the seconds each frame stands for (for
        forced alignment, ``data_tools.ingest.align``)."""
        import torch

        clip = prepare_waves([wave], sample_rate, self.sample_rate, AsrError)[0]
        inputs = self.processor.feature_extractor([clip], sampling_rate=self.sample_rate, return_tensors="pt")
        with torch.inference_mode():
            logits = self.model(**{name: tensor.to(self.device) for name, tensor in inputs.items()}).logits.float()
        frames = self._valid_frames([len(clip)], logits.shape[1])[0]
        return logits[0, :frames].log_softmax(dim=-1).cpu().numpy(), len(clip) / self.sample_rate / frames

    def word_tokens(self, text: str) -> tuple[list[list[int]], int | None]:
        """Each word's token ids (letters the vocabulary lacks, in either case, are left out) and the word
        delimiter's id (None when the vocabulary has none)."""
        vocab = self.processor.tokenizer.get_vocab()
        words = []
        for word in text.split():
            ids = [vocab.get(ch, vocab.get(ch.lower(), vocab.get(ch.upper()))) for ch in word]
            words.append([i for i in ids if i is not None and i != self.blank_id and i not in self.dropped_ids])
        delimiter = getattr(self.processor.tokenizer, "word_delimiter_token_id", None)
        return words, delimiter if isinstance(delimiter, int) and delimiter != self.blank_id else None

    def _transcribe_batch(self, clips: list[np.ndarray]) -> list[Transcript]:
        import torch

        inputs = self.processor.feature_extractor(clips, sampling_rate=self.sample_rate, padding=True,
                                                  return_tensors="pt")  # its own attention-mask setting
        inputs = {name: tensor.to(self.device) for name, tensor in inputs.items()}
        with torch.inference_mode():
            logits = self.model(**inputs).logits.float()
        probabilities = logits.softmax(dim=-1)
        top_probability, top_id = probabilities.max(dim=-1)
        valid = self._valid_frames([len(clip) for clip in clips], logits.shape[1])
        ids: list[list[int]] = []
        confidences: list[float] = []
        for row, frames in enumerate(valid):
            path = top_id[row, :frames]
            emitting = path != self.blank_id
            ids.append(self._collapse(path))
            confidences.append(float(top_probability[row, :frames][emitting].mean()) if emitting.any() else 0.0)
        # The CTC collapse is done above (repeats merged, then blanks and <s> </s> <unk> dropped), because the
        # tokenizer's own grouping would merge a doubled letter across the blank once special tokens are
        # skipped; its batch_decode then only maps ids to text (word delimiter -> space). An LM processor's
        # batch_decode would want logits, so the tokenizer's is called directly.
        texts = self.processor.tokenizer.batch_decode(ids, group_tokens=False)
        return [Transcript(text.strip(), confidence if text.strip() else 0.0)
                for text, confidence in zip(texts, confidences, strict=True)]

    def _frames(self, sample_lengths: list[int]) -> list[int] | None:
        """Output frames per clip by the model's own formula, for models that read raw samples."""
        if self.processor.feature_extractor.model_input_names[0] != "input_values":
            return None  # spectrogram front-ends (e.g. w2v-BERT): their formula counts feature frames
        return feature_frame_lengths(self.model, sample_lengths)

    def _valid_frames(self, sample_lengths: list[int], padded_frames: int) -> list[int]:
        """Output frames that come from real samples (the rest of each row is padding)."""
        frames = self._frames(sample_lengths)
        if frames is None:  # no formula: scale by the share of real samples
            longest = max(sample_lengths)
            frames = [int(np.ceil(padded_frames * n / longest)) for n in sample_lengths]
        return [max(1, min(padded_frames, n)) for n in frames]

    def _collapse(self, path: Any) -> list[int]:
        import torch

        merged = torch.unique_consecutive(path).tolist()
        return [token for token in merged if token != self.blank_id and token not in self.dropped_ids]


def _blank_id(model: Any, tokenizer: Any) -> int:
    """CTC blank: the pad token (wav2vec2 convention) of the active vocabulary, else the model's."""
    for candidate in (getattr(tokenizer, "pad_token_id", None), getattr(model.config, "pad_token_id", None)):
        if isinstance(candidate, int):
            return candidate
    raise AsrError("the model and tokenizer name no pad token, which CTC uses as its blank")
