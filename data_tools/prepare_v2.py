"""IndexTTS2 data preparation: audio + transcripts -> per-utterance features and a paired manifest.

CLI::

    python -m data_tools.prepare_v2 --input X --out-dir D --config config.yaml --codec semantic_codec.safetensors
        [--gpt gpt.pth] [--w2v-bert facebook/w2v-bert-2.0 | FOLDER] [--w2v-stats wav2vec2bert_stats.pt]
        [--tokenizer bpe.model] [--language am] [--speaker NAME] [--pairs-per-target 2] [--seed 2025]
        [--device auto] [--batch-seconds 240] [--max-batch-items 64] [--loaders 2]
        [--min-duration 0.5] [--max-duration S] [--quiet]

``X`` is what ``data_tools.preprocess`` reads (a JSONL list, an LJSpeech ``metadata.csv`` or a folder of
audio + ``.txt``; see ``data_tools.preprocess_inputs``). Per utterance, the community recipe
(``tools/preprocess_data.py`` of the IndexTTS2 fine-tuning community, see the reference notes): audio -> mono ->
24 kHz -> 16 kHz (torchaudio's functional sinc resampler, twice) -> SeamlessM4T features -> w2v-BERT 2.0
``hidden_states[17]`` normalised by the stats file -> semantic codes (the codec loaded strictly); the base
GPT's conditioning latents ``get_conditioning`` and emotion vector ``get_emovec`` with the true frame counts
(the attention-mask sums); the transcript through our text front-end and tokenizer. Batches are padded as
the community does (padding value 1.0, so a padded item differs slightly from the item alone), but every
file keeps the item's TRUE length: codes are cut to its frame count, never the batch's. The lengths given to
the conditioning encoders are the real frame counts (the community recipe), not inference's feature-width
quirk. w2v-BERT runs only up to layer 17 (the rest never reaches the features). Float32 throughout.

Output in ``D`` (paths inside the manifests are relative to ``D``, POSIX separators):

- ``text_ids/<id>.npy`` int32 [L], ``codes/<id>.npy`` int32 [M] (50 Hz), ``condition/<id>.npy`` float32
  [32, model_dim], ``emo_vec/<id>.npy`` float32 [model_dim]: the community layout;
- ``utterances.jsonl``: the community's per-utterance manifest (``id, audio_path, text, speaker, language,
  duration, text_ids_path, text_len, codes_path, code_len, condition_path, condition_len, emo_vec_path``);
- ``pairs.jsonl``: the paired manifest both trainers read: each target with ``--pairs-per-target`` prompts
  drawn from the other utterances of its speaker (seeded per target); a speaker with one utterance has none;
- ``prepare_report.json``; ``.prepare_v2/done.jsonl`` (resume state).

Batching, resume and bad items: ``data_tools.batch_prep``. Exit codes: 0 manifests written, 1 nothing could be
prepared, 2 usage (one ``error: ...`` line), 130 interrupted (rerun the same command to resume).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from data_tools.batch_prep import ItemProblem, Skipped, iter_in_input_order, run_batches, write_npy
from data_tools.cli import OneLineErrorParser
from data_tools.fileio import atomic_write_text
from data_tools.model_limits import longest_seconds
from data_tools.prepare_cli import prepare_main, shared_options
from data_tools.preprocess_inputs import InputError, SourceItem, read_inputs
from networks.generation_rule import ID_2

COMMUNITY_RATE = 24_000  # the community recipe resamples everything to 24 kHz first
FEATURE_RATE = 16_000
CODES_PER_SECOND = 50
SILENCE_DBFS = -60.0
STATE_DIR = ".prepare_v2"
FOLDERS = ("text_ids", "codes", "condition", "emo_vec")
DEFAULT_PAIRS_PER_TARGET = 2  # the community pair builder's defaults
DEFAULT_SEED = 2025
DEFAULT_W2V_BERT = "facebook/w2v-bert-2.0"


class PrepareError(ValueError):
    """Inputs preparation cannot start on (one-line message)."""


# ---------------------------------------------------------------------------------------------
# Audio, the community way


def load_community_audio(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(24 kHz, 16 kHz) mono float32: channels averaged, then torchaudio's functional sinc resampler twice."""
    import soundfile
    import torch

    from data_tools.audio import AudioError
    from networks.frontends.resample import sinc_resample

    if not path.is_file():
        raise AudioError(f"{path}: audio file not found")
    try:
        data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    except (RuntimeError, OSError, ValueError) as exc:  # libsndfile errors are RuntimeErrors
        raise AudioError(f"{path}: unreadable audio ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
                         ) from None
    if data.size == 0:
        raise AudioError(f"{path}: audio has no samples")
    wave = torch.from_numpy(np.ascontiguousarray(data.T)).mean(dim=0)
    if not bool(torch.isfinite(wave).all()):
        raise AudioError(f"{path}: audio contains NaN or infinite samples")
    wave_24k = sinc_resample(wave, int(rate), COMMUNITY_RATE)
    wave_16k = sinc_resample(wave_24k, COMMUNITY_RATE, FEATURE_RATE)
    return wave_24k.numpy(), wave_16k.numpy()


# ---------------------------------------------------------------------------------------------
# The models


@dataclass
class V2Models:
    """Everything the per-batch computation needs, loaded once (strictly) on one device."""

    extractor: Any  # SeamlessM4TFeatureExtractor
    semantic: Any  # networks.w2v_bert.SemanticFeatureModel
    codec: Any  # networks.semantic_codec.SemanticCodec
    gpt: Any  # networks.unified_voice.UnifiedVoiceV2
    tokenizer: Any  # data_tools.text_tokenizer.TextTokenizer
    device: Any  # torch.device
    max_text_tokens: int
    max_codes: int


def resolve_device(name: str) -> Any:
    import torch

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as exc:
        raise PrepareError(f"--device {name}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise PrepareError(f"--device {name}: no CUDA GPU is available here (use cpu or auto)")
    return device


def gpt_state_dict(path: Path) -> Mapping[str, Any]:
    """A ``gpt.pth``: a plain state dict (the release) or ``{"model": ...}`` (trainer checkpoints, fixtures)."""
    import torch

    if not path.is_file():
        raise PrepareError(f"base GPT not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for a damaged or foreign file
        raise PrepareError(f"{path}: cannot load the base GPT ({type(exc).__name__}: {exc})".splitlines()[0]) from None
    if isinstance(payload, Mapping) and isinstance(payload.get("model"), Mapping):
        payload = payload["model"]
    if not isinstance(payload, Mapping):
        raise PrepareError(f"{path}: not a state dict")
    return payload


def load_v2_models(config: Mapping[str, Any], *, gpt: Path, codec: Path, w2v_bert: str, w2v_stats: Path,
                   tokenizer: Path, device: Any) -> V2Models:
    """Load every network strictly (a wrong file is refused in one line naming the first bad key)."""
    import torch

    from data_tools.text_tokenizer import TextTokenizer
    from networks import indextts2
    from networks.gpt_config import ConfigError
    from networks.loading import StateDictMismatchError
    from networks.semantic_codec import load_semantic_codec

    try:
        gpt_model = indextts2.build_gpt(config["gpt"])
        indextts2.load_gpt(gpt_model, gpt_state_dict(gpt))
    except (ConfigError, StateDictMismatchError) as exc:
        raise refuse(f"base GPT {gpt}", exc) from None
    if "semantic_codec" not in config or not isinstance(config["semantic_codec"], Mapping):
        raise PrepareError("the config has no 'semantic_codec:' section (an IndexTTS2 config.yaml is needed)")
    try:
        codec_model = load_semantic_codec(codec, config["semantic_codec"])
    except (FileNotFoundError, ValueError) as exc:
        raise refuse("semantic codec", exc) from None
    extractor, semantic = load_semantic_features(w2v_bert, w2v_stats)
    w2v = semantic.model
    widths = {"w2v-BERT hidden size": w2v.config.hidden_size, "semantic_codec.hidden_size":
              codec_model.config.hidden_size, "gpt.semantic_dim": gpt_model.cond_input_size}
    if len(set(widths.values())) != 1:
        raise PrepareError("the semantic widths disagree: " + ", ".join(f"{k} {v}" for k, v in widths.items()))
    if not tokenizer.is_file():
        raise PrepareError(f"tokenizer not found: {tokenizer}")
    try:
        text_tokenizer = TextTokenizer(tokenizer)
    except (OSError, RuntimeError, ValueError) as exc:
        raise refuse(f"tokenizer {tokenizer}", exc) from None
    with torch.no_grad():
        for module in (semantic, codec_model, gpt_model):
            module.to(device).eval()
    return V2Models(extractor=extractor, semantic=semantic, codec=codec_model, gpt=gpt_model,
                    tokenizer=text_tokenizer, device=device, max_text_tokens=int(config["gpt"]["max_text_tokens"]),
                    max_codes=int(config["gpt"]["max_mel_tokens"]))


def refuse(what: str, exc: Exception) -> PrepareError:
    return PrepareError(f"{what}: {' '.join(str(exc).split())}")


def load_semantic_features(w2v_bert: str, w2v_stats: Path) -> tuple[Any, Any]:
    """(SeamlessM4T feature extractor, w2v-BERT up to layer 17 + stats) from a local folder or a model id.

    IndexTTS2 and IndexTTS-2.5 read the same features; the extractor comes from the folder when it has a
    ``preprocessor_config.json``, else w2v-BERT 2.0's settings are used."""
    from networks.frontends.seamless_features import build_feature_extractor, load_feature_extractor
    from networks.w2v_bert import (
        SEMANTIC_LAYER,
        SemanticFeatureModel,
        SemanticStats,
        load_w2v_bert_pretrained,
    )

    local = Path(w2v_bert).expanduser()
    try:
        w2v = load_w2v_bert_pretrained(local if local.is_dir() else w2v_bert)
        semantic = SemanticFeatureModel(w2v, SemanticStats.from_file(w2v_stats))
    except (FileNotFoundError, ValueError) as exc:
        raise refuse("w2v-BERT", exc) from None
    drop_layers_after(w2v, SEMANTIC_LAYER)
    try:
        extractor = (load_feature_extractor(local, local_files_only=True)
                     if (local / "preprocessor_config.json").is_file() else build_feature_extractor())
    except FileNotFoundError as exc:
        raise refuse("feature extractor", exc) from None
    return extractor, semantic


def drop_layers_after(w2v: Any, layer: int) -> None:
    """Keep the first ``layer`` conformer layers: IndexTTS2 reads ``hidden_states[layer]`` and the encoder adds
    nothing after its last layer, so the features are bitwise the same, with 7 of w2v-BERT 2.0's 24 layers (29 %
    of its time and 700 MB of float32 weights) saved. The strictly loaded checkpoint is checked before this."""
    layers = getattr(getattr(w2v, "encoder", None), "layers", None)
    if layers is not None and len(layers) > layer:
        w2v.encoder.layers = layers[:layer]


# ---------------------------------------------------------------------------------------------
# The preparer (what batch_prep runs)


def silence_reason(wave: np.ndarray) -> str | None:
    """``"silent audio: RMS -72 dBFS"`` for audio at or below SILENCE_DBFS, else None."""
    rms = float(np.sqrt(np.mean(np.square(wave, dtype=np.float64))))
    if rms > 10 ** (SILENCE_DBFS / 20):
        return None
    level = 20 * math.log10(rms) if rms > 0 else -math.inf
    return f"silent audio: RMS {level:.0f} dBFS"


@dataclass
class LoadedV2:
    features: np.ndarray  # [T, 160] SeamlessM4T features of the item alone
    frames: int  # valid frames (the attention-mask sum)
    text_ids: np.ndarray  # int32 [L]


@dataclass
class ResultV2:
    text_ids: np.ndarray  # int32 [L]
    codes: np.ndarray  # int32 [frames]
    condition: np.ndarray  # float32 [32, model_dim]
    emo_vec: np.ndarray  # float32 [model_dim]


@dataclass
class BatchOutputs:
    """The model outputs of one padded batch (on the CPU), for tests and the benchmark."""

    feat: Any  # (B, T, W) normalised w2v-BERT features
    codes: Any  # (B, T) int64
    lengths: Any  # (B,) valid frames
    conditioning: Any  # (B, 32, D)
    emo_perceiver_out: Any  # (B, P)
    emovec_layer_out: Any  # (B, D)
    emo_vec: Any  # (B, D)


def features_of(extractor: Any, wave_16k: np.ndarray) -> tuple[np.ndarray, int]:
    """SeamlessM4T features of one 16 kHz item alone and its valid frame count."""
    from networks.frontends.seamless_features import extract_features

    features, mask = extract_features(extractor, wave_16k)
    return features[0].numpy(), int(mask[0].sum())


def pad_features(extractor: Any, items: Sequence[tuple[np.ndarray, int]]) -> tuple[Any, Any]:
    """Pad per-item features to the longest (the extractor's padding value, mask 0): what the extractor
    gives for the batch (each item is normalised over its own frames, so only the padding differs)."""
    import torch

    width = max(features.shape[0] for features, _ in items)
    batch = np.full((len(items), width, items[0][0].shape[1]), extractor.padding_value, dtype=np.float32)
    mask = np.zeros((len(items), width), dtype=np.int64)
    for row, (features, frames) in enumerate(items):
        batch[row, : features.shape[0]] = features
        mask[row, :frames] = 1
    return torch.from_numpy(batch), torch.from_numpy(mask)


def run_models(models: V2Models, features: Any, mask: Any) -> BatchOutputs:
    """One padded batch through w2v-BERT, the stats, the codec and the base GPT's conditioning (community recipe)."""
    import torch

    with torch.inference_mode():
        features = features.to(models.device, non_blocking=True)
        mask = mask.to(models.device, non_blocking=True)
        feat = models.semantic(features, mask)
        codes, _ = models.codec.quantize(feat)
        lengths = mask.sum(1)
        channels_first = feat.transpose(1, 2)
        conditioning = models.gpt.get_conditioning(channels_first, lengths)
        emo_latent = models.gpt.get_emo_conditioning(channels_first, lengths)
        emovec_layer_out = models.gpt.emovec_layer(emo_latent)
        emo_vec = models.gpt.emo_layer(emovec_layer_out)  # = get_emovec, its stages kept for the tests
        outputs = (feat, codes, lengths, conditioning, emo_latent, emovec_layer_out, emo_vec)
        feat, codes, lengths, conditioning, emo_latent, emovec_layer_out, emo_vec = (t.cpu() for t in outputs)
    return BatchOutputs(feat=feat, codes=codes, lengths=lengths, conditioning=conditioning,
                        emo_perceiver_out=emo_latent, emovec_layer_out=emovec_layer_out, emo_vec=emo_vec)


@dataclass
class V2Preparer:
    """IndexTTS2's part of batched preparation (``data_tools.batch_prep.Preparer``)."""

    models: V2Models
    fingerprint: str
    min_duration: float
    max_duration: float
    state_dir: str = STATE_DIR

    def outputs(self, item: SourceItem) -> list[Path]:
        return [Path(folder) / f"{item.stem}.npy" for folder in FOLDERS]

    def screen(self, item: SourceItem, seconds: float) -> str | None:
        if seconds < self.min_duration:
            return f"too short: {seconds:.2f} s < --min-duration {self.min_duration:g} s"
        if seconds > self.max_duration:
            return f"too long: {seconds:.2f} s > {self.max_duration:.2f} s"
        return None

    def load(self, item: SourceItem) -> LoadedV2:
        ids = np.asarray(self.models.tokenizer.encode(item.text, item.language), dtype=np.int32)
        if ids.size == 0:
            raise ItemProblem("empty text: nothing left after the text front-end")
        if ids.size > self.models.max_text_tokens:
            raise ItemProblem(f"text too long: {ids.size} tokens > gpt.max_text_tokens {self.models.max_text_tokens}")
        wave_24k, wave_16k = load_community_audio(item.audio)
        reason = silence_reason(wave_24k)
        if reason:
            raise ItemProblem(reason)
        features, frames = features_of(self.models.extractor, wave_16k)
        if frames == 0:
            raise ItemProblem("too short: no feature frame")
        return LoadedV2(features=features, frames=frames, text_ids=ids)

    def compute(self, batch: Sequence[tuple[SourceItem, LoadedV2]]) -> list[ResultV2 | ItemProblem]:
        """Each item through the models alone: in a padded batch its conditioning and emotion vector would
        depend on its companions (the conformer's convolutions read the padding), so no value does here."""
        results: list[ResultV2 | ItemProblem] = []
        for _item, loaded in batch:
            frames = loaded.frames
            if frames > self.models.max_codes:
                results.append(ItemProblem(f"too long: {frames} codes > gpt.max_mel_tokens {self.models.max_codes}"))
                continue
            out = run_models(self.models, *pad_features(self.models.extractor, [(loaded.features, frames)]))
            results.append(ResultV2(text_ids=loaded.text_ids, codes=out.codes[0, :frames].numpy().astype(np.int32),
                                    condition=out.conditioning[0].numpy().astype(np.float32),
                                    emo_vec=out.emo_vec[0].numpy().astype(np.float32)))
        return results

    def write(self, out_dir: Path, item: SourceItem, result: ResultV2) -> dict[str, Any]:
        arrays = (result.text_ids, result.codes, result.condition, result.emo_vec)
        for folder, array in zip(FOLDERS, arrays, strict=True):
            write_npy(out_dir, Path(folder) / f"{item.stem}.npy", np.ascontiguousarray(array))
        return {"text_len": int(result.text_ids.size), "code_len": int(result.codes.size),
                "condition_len": int(result.condition.shape[0])}


# ---------------------------------------------------------------------------------------------
# Manifests


def utterance_entry(item: SourceItem, record: Mapping[str, Any]) -> dict[str, Any]:
    """One line of the community's per-utterance manifest."""
    stem = item.stem
    return {"id": item.id, "audio_path": str(item.audio), "text": item.text, "speaker": item.speaker,
            "language": item.language or "", "duration": round(float(record["seconds"]), 3),
            "text_ids_path": f"text_ids/{stem}.npy", "text_len": int(record["text_len"]),
            "codes_path": f"codes/{stem}.npy", "code_len": int(record["code_len"]),
            "condition_path": f"condition/{stem}.npy", "condition_len": int(record["condition_len"]),
            "emo_vec_path": f"emo_vec/{stem}.npy", **({"source": item.source} if item.source else {})}


def build_pairs(utterances: Sequence[Mapping[str, Any]], pairs_per_target: int, seed: int
                ) -> tuple[list[dict[str, Any]], list[str]]:
    """Paired lines (input order of targets) and the speakers with a single utterance (no pair possible);
    the prompts are drawn by :func:`draw_pairs`."""
    drawn, lonely = draw_pairs(utterances, pairs_per_target, seed)
    lines = []
    for target, prompt in drawn:
        line = {"id": f"{target['id']}__{prompt['id']}", "speaker": target["speaker"],
                "prompt_id": prompt["id"], "prompt_audio_path": prompt["audio_path"],
                "prompt_condition_path": prompt["condition_path"],
                "prompt_condition_len": prompt["condition_len"], "prompt_emo_vec_path": prompt["emo_vec_path"],
                "prompt_duration": prompt["duration"],
                "target_id": target["id"], "target_audio_path": target["audio_path"],
                "target_text": target["text"], "target_text_ids_path": target["text_ids_path"],
                "target_text_len": target["text_len"], "target_codes_path": target["codes_path"],
                "target_code_len": target["code_len"], "target_emo_vec_path": target["emo_vec_path"],
                "target_duration": target["duration"]}
        if target["language"]:
            line["language"] = target["language"]
        if target.get("source"):  # the target's recording: a split keeps every clip of it on one side
            line["source"] = target["source"]
        lines.append(line)
    return lines, lonely


def draw_pairs(utterances: Sequence[Mapping[str, Any]], pairs_per_target: int, seed: int
               ) -> tuple[list[tuple[Mapping[str, Any], Mapping[str, Any]]], list[str]]:
    """(target, prompt) in input order of targets, and the speakers with a single utterance.

    Each target's prompts are ``pairs_per_target`` (at most) distinct other utterances of its speaker, drawn
    with a generator seeded by ``seed`` and the target's id, so a target's pairs do not depend on the rest.
    Both generations pair this way (IndexTTS2's and IndexTTS-2.5's manifests differ only in the fields).
    """
    by_speaker: dict[str, list[Mapping[str, Any]]] = {}
    for utt in utterances:
        by_speaker.setdefault(utt["speaker"], []).append(utt)
    drawn = []
    for target in utterances:
        others = [u for u in by_speaker[target["speaker"]] if u["id"] != target["id"]]
        if not others:
            continue
        rng = random.Random(f"{seed}/{target['id']}")
        drawn += [(target, prompt) for prompt in rng.sample(others, min(pairs_per_target, len(others)))]
    lonely = sorted(speaker for speaker, group in by_speaker.items() if len(group) == 1)
    return drawn, lonely


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class PrepareReport:
    utterances_manifest: str
    pairs_manifest: str
    utterances: int
    pairs: int
    new: int  # prepared in this run
    resumed: int  # finished in an earlier run
    redone: int  # finished in an earlier run with other models or settings: prepared again
    batches: int
    device: str
    skipped: list[Skipped] = field(default_factory=list)
    lonely_speakers: list[str] = field(default_factory=list)  # one utterance: no pair
    hours: float = 0.0
    elapsed_s: float = 0.0
    utterances_per_s: float = 0.0  # prepared in this run / wall time of the batches
    model_s: float = 0.0  # of that wall time, inside the model calls (Preparer.compute)

    @property
    def skipped_by_reason(self) -> dict[str, int]:
        return dict(Counter(s.reason.split(":")[0] for s in self.skipped))

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["skipped_by_reason"] = self.skipped_by_reason
        return data

    def summary(self) -> str:
        pairs = (f"pairs: {self.pairs_manifest} ({self.pairs} pairs)" if self.pairs_manifest else
                 "pairs: none, so no pairs.jsonl was written: a pair needs two utterances of one speaker")
        lines = [pairs,
                 f"utterances: {self.utterances_manifest} ({self.utterances} utterances, {self.hours:.2f} h; "
                 f"{self.new} prepared now in {self.batches} batches on {self.device}, {self.resumed} from an "
                 f"earlier run) in {self.elapsed_s:.1f} s"]
        if self.redone:
            lines.append(f"note: {self.redone} item(s) prepared earlier with other models or settings were "
                         "prepared again")
        if self.skipped:
            counts = ", ".join(f"{reason} {count}" for reason, count in
                               sorted(self.skipped_by_reason.items(), key=lambda kv: -kv[1]))
            lines.append(f"skipped {len(self.skipped)} ({counts}); each is listed above and in prepare_report.json")
        if self.lonely_speakers:
            lines.append(f"note: {len(self.lonely_speakers)} speaker(s) with a single utterance have no pair: "
                         f"{', '.join(self.lonely_speakers[:5])}")
        return "\n".join(lines)


def write_pairs_manifest(path: Path, pairs: Sequence[Mapping[str, Any]]) -> str:
    """Write the paired manifest atomically; with no pair, write none (and remove an earlier one): a 0-byte
    manifest is no result. Returns the path written, or "" when there was nothing to write."""
    if not pairs:
        path.unlink(missing_ok=True)
        return ""
    atomic_write_text(path, "".join(json.dumps(p, ensure_ascii=False) + "\n" for p in pairs))
    return str(path)


def file_signature(path: Path) -> list[Any]:
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


def settings_fingerprint(config: Mapping[str, Any], gpt: Path, codec: Path, w2v_bert: str, w2v_stats: Path,
                         tokenizer: Path) -> str:
    """What shapes the files: the model sections, the weight files (path, size, mtime), the tokenizer's bytes."""
    local = Path(w2v_bert).expanduser()
    w2v: Any = w2v_bert
    if local.is_dir():
        w2v = sorted(file_signature(p) for p in local.rglob("*") if p.is_file())
    data = {"recipe": "community preprocess_data, true lengths", "gpt_section": config.get("gpt"),
            "codec_section": config.get("semantic_codec"), "gpt": file_signature(gpt),
            "codec": file_signature(codec), "w2v_bert": w2v, "stats": file_signature(w2v_stats),
            "tokenizer": hashlib.sha256(tokenizer.read_bytes()).hexdigest()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def beside_config(config_path: Path, value: Any, what: str, flag: str) -> Path:
    if not value:
        raise PrepareError(f"no {flag} given and the config names no {what}")
    return config_path.parent / str(value)


def add_s2mel_files(out: Path, cfg: Mapping[str, Any], config_path: Path, audio_of_stem: Mapping[str, Path]) -> None:
    """What S2Mel training reads, for a config with an s2mel section whose folder holds campplus_cn_common.bin
    (a rerun adds only the missing files)."""
    campplus_path = config_path.parent / "campplus_cn_common.bin"
    if not isinstance(cfg.get("s2mel"), dict) or not campplus_path.is_file():
        return
    from data_tools.s2mel_clip import add_s2mel_files_of
    from networks.campplus import load_campplus
    from networks.indextts2 import campplus_sizes

    add_s2mel_files_of(out, audio_of_stem, load_campplus(campplus_path, **campplus_sizes(cfg)), cfg)


def prepare_v2(
    input_path: str | Path,
    out_dir: str | Path,
    config: str | Path,
    *,
    codec: str | Path,
    gpt: str | Path | None = None,
    w2v_bert: str = DEFAULT_W2V_BERT,
    w2v_stats: str | Path | None = None,
    tokenizer: str | Path | None = None,
    language: str | None = None,
    speaker: str | None = None,
    pairs_per_target: int = DEFAULT_PAIRS_PER_TARGET,
    seed: int = DEFAULT_SEED,
    device: str = "auto",
    batch_seconds: float = 240.0,
    max_batch_items: int = 64,
    loaders: int = 2,
    min_duration: float = 0.5,
    max_duration: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    on_skip: Callable[[Skipped], None] | None = None,
) -> PrepareReport:
    """Prepare ``input_path`` into ``out_dir`` (see the module docstring); raises PrepareError on bad inputs."""
    from data_tools.config import ConfigError, load_config

    started = time.perf_counter()
    out = Path(out_dir).absolute()
    config_path = Path(config)
    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        raise PrepareError(str(exc)) from None
    if pairs_per_target < 1:
        raise PrepareError("--pairs-per-target must be >= 1")
    if min_duration < 0 or (max_duration is not None and max_duration <= min_duration):
        raise PrepareError("need 0 <= --min-duration < --max-duration")
    gpt_path = Path(gpt) if gpt else beside_config(config_path, cfg.get("gpt_checkpoint"), "gpt_checkpoint", "--gpt")
    stats_path = Path(w2v_stats) if w2v_stats else beside_config(config_path, cfg.get("w2v_stat"), "w2v_stat",
                                                           "--w2v-stats")
    bpe = (cfg.get("dataset") or {}).get("bpe_model") if isinstance(cfg.get("dataset"), dict) else None
    tokenizer_path = Path(tokenizer) if tokenizer else beside_config(config_path, bpe, "dataset.bpe_model", "--tokenizer")
    codec_path = Path(codec)
    for path, what in ((gpt_path, "base GPT"), (codec_path, "semantic codec"), (stats_path, "w2v-BERT stats"),
                       (tokenizer_path, "tokenizer")):
        if not path.is_file():
            raise PrepareError(f"{what} not found: {path}")
    try:
        items, problems = read_inputs(Path(input_path), speaker=speaker, language=language)
    except InputError as exc:
        raise PrepareError(str(exc)) from None
    torch_device = resolve_device(device)
    models = load_v2_models(cfg, gpt=gpt_path, codec=codec_path, w2v_bert=w2v_bert, w2v_stats=stats_path,
                            tokenizer=tokenizer_path, device=torch_device)
    model_limit = longest_seconds(models.max_codes, ID_2)  # the rule the ingest slicer cuts clips to
    preparer = V2Preparer(models=models, min_duration=float(min_duration),
                          max_duration=min(float(max_duration), model_limit) if max_duration else model_limit,
                          fingerprint=settings_fingerprint(cfg, gpt_path, codec_path, w2v_bert, stats_path,
                                                           tokenizer_path))
    skipped = [Skipped("", p.where, f"bad input: {p.reason}") for p in problems]
    if on_skip is not None:
        for entry in skipped:
            on_skip(entry)
    run = run_batches(items, preparer, out, batch_seconds=batch_seconds, max_batch_items=max_batch_items,
                      load_threads=loaders, progress=progress, on_skip=on_skip)
    finished = list(iter_in_input_order(items, run.finished))
    add_s2mel_files(out, cfg, config_path, {item.stem: item.audio for item, _ in finished})
    utterances = [utterance_entry(item, record) for item, record in finished]
    pairs, lonely = build_pairs(utterances, pairs_per_target, seed)
    utterances_path, pairs_path = out / "utterances.jsonl", out / "pairs.jsonl"
    atomic_write_text(utterances_path, "".join(json.dumps(u, ensure_ascii=False) + "\n" for u in utterances))
    report = PrepareReport(
        utterances_manifest=str(utterances_path), pairs_manifest=write_pairs_manifest(pairs_path, pairs),
        utterances=len(utterances),
        pairs=len(pairs), new=run.new, resumed=run.resumed, redone=run.redone, batches=run.batches,
        device=str(torch_device),
        skipped=skipped + run.skipped, lonely_speakers=lonely,
        hours=round(sum(u["duration"] for u in utterances) / 3600, 4),
        elapsed_s=round(time.perf_counter() - started, 2),
        utterances_per_s=round(run.new / run.elapsed_s, 3) if run.new and run.elapsed_s > 0 else 0.0,
        model_s=round(run.compute_s, 3))
    atomic_write_text(out / "prepare_report.json", json.dumps(report.to_json(), ensure_ascii=False, indent=1) + "\n")
    return report


# ---------------------------------------------------------------------------------------------
# CLI


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m data_tools.prepare_v2",
                                description="IndexTTS2: audio + transcripts -> per-utterance features and a "
                                            "paired manifest (the community layout).")
    parser.add_argument("--input", required=True, type=Path,
                        help="JSONL list ({audio, text, speaker?, id?}), metadata.csv, or a folder of audio + .txt")
    parser.add_argument("--out-dir", required=True, type=Path, help="output folder (resumable)")
    parser.add_argument("--config", required=True, type=Path, help="IndexTTS2 config.yaml (gpt, semantic_codec)")
    parser.add_argument("--codec", required=True, type=Path,
                        help="semantic codec weights (MaskGCT semantic_codec/model.safetensors or a .pth)")
    parser.add_argument("--gpt", type=Path, help="base gpt.pth (default: the config's gpt_checkpoint beside it)")
    parser.add_argument("--w2v-bert", default=DEFAULT_W2V_BERT,
                        help=f"w2v-BERT 2.0: a local folder or a model id ({DEFAULT_W2V_BERT})")
    parser.add_argument("--w2v-stats", type=Path,
                        help="wav2vec2bert_stats.pt (default: the config's w2v_stat beside it)")
    parser.add_argument("--tokenizer", type=Path,
                        help="SentencePiece model for the text ids (default: the config's dataset.bpe_model)")
    parser.add_argument("--language", help="language of the transcripts, e.g. am (text front-end, manifests)")
    parser.add_argument("--speaker", help="speaker name for entries that name none (default: the input's name)")
    parser.add_argument("--pairs-per-target", type=int, default=DEFAULT_PAIRS_PER_TARGET,
                        help=f"prompts per target utterance ({DEFAULT_PAIRS_PER_TARGET})")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"seed of the pairing ({DEFAULT_SEED})")
    parser.add_argument("--device", default="auto", help="auto (a GPU when there is one), cpu, cuda, cuda:1")
    parser.add_argument("--batch-seconds", type=float, default=240.0,
                        help="padded audio seconds per batch (items x longest; 240)")
    parser.add_argument("--max-batch-items", type=int, default=64, help="items per batch at most (64)")
    parser.add_argument("--loaders", type=int, default=2, help="threads that decode and featurise audio (2)")
    parser.add_argument("--min-duration", type=float, default=0.5, help="skip shorter audio (seconds, 0.5)")
    parser.add_argument("--max-duration", type=float, default=None,
                        help="skip longer audio (seconds; default and upper bound: what gpt.max_mel_tokens fits)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def prepare(progress: Any, on_skip: Any) -> Any:
        return prepare_v2(args.input, args.out_dir, args.config, **shared_options(args), progress=progress,
                           on_skip=on_skip)

    return prepare_main(args, prepare, (PrepareError,))


if __name__ == "__main__":
    raise SystemExit(main())
