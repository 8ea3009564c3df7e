"""The paired-data preparation engine every generation with a paired manifest shares.

IndexTTS2 (``data_tools.prepare_v2``) and IndexTTS-2.5 (``data_tools.prepare_v25``) prepare the same way and
differ only in their networks and in the arrays an utterance gets. This module owns the rest, once:

- the w2v-BERT semantic features both read (``load_semantic_features``, layers after 17 dropped), per-item
  SeamlessM4T features and their padding into a batch (``features_of``, ``pad_features``), the silence check;
- ``PairedPreparer``: the part of a ``data_tools.batch_prep.Preparer`` that is the same for both (its output
  folders, the duration screen, the writing of an item's arrays);
- the report (``PrepareReport``); the manifests' lines (the pairing, ``draw_pairs``, and ``pair_lines``) are
  ``data_tools.paired_lines``;
- the run (``run_paired``): read the inputs, run the batches, write ``utterances.jsonl``, ``pairs.jsonl`` and
  ``prepare_report.json``; under torchrun every process computes its share (``data_tools.batch_prep``) and its
  share of the S2Mel files, and the first one writes the manifests, byte for byte those of one process.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from data_tools.batch_prep import SkipCounts, Skipped, iter_in_input_order, run_batches, write_npy
from data_tools.fileio import atomic_write_text
from data_tools.paired_lines import write_pairs_manifest
from data_tools.preprocess_inputs import InputError, SourceItem, read_inputs
from data_tools.ranks import Ranks, barrier, join, leave, own_device

SILENCE_DBFS = -60.0
DEFAULT_PAIRS_PER_TARGET = 2  # the community pair builder's defaults
DEFAULT_SEED = 2025
DEFAULT_W2V_BERT = "facebook/w2v-bert-2.0"


class PrepareError(ValueError):
    """Inputs preparation cannot start on (one-line message)."""


def refuse(what: str, exc: Exception) -> PrepareError:
    return PrepareError(f"{what}: {' '.join(str(exc).split())}")


# ---------------------------------------------------------------------------------------------
# Settings and files


def resolve_device(name: str) -> Any:
    import torch

    chosen = own_device(name)  # under torchrun: this process's own GPU
    try:
        device = torch.device(("cuda" if torch.cuda.is_available() else "cpu") if chosen == "auto" else chosen)
    except RuntimeError as exc:
        raise PrepareError(f"--device {name}: {exc}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise PrepareError(f"--device {name}: no CUDA GPU is available here (use cpu or auto)")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise PrepareError(f"--device {name}: there is no GPU {device.index or 0} here ({torch.cuda.device_count()} "
                           "GPU(s)); under torchrun start at most one process per GPU")
    return device


@dataclass(frozen=True)
class RunOptions:
    """The options every paired generation's preparation takes (keyword arguments of the generations'
    ``data.prepare.prepare``; their CLIs' shared flags, ``data_tools.prepare_cli``)."""

    w2v_bert: str = DEFAULT_W2V_BERT
    w2v_stats: str | Path | None = None
    language: str | None = None
    speaker: str | None = None
    pairs_per_target: int = DEFAULT_PAIRS_PER_TARGET
    seed: int = DEFAULT_SEED
    device: str = "auto"
    batch_seconds: float = 240.0
    max_batch_items: int = 64
    loaders: int = 2
    min_duration: float = 0.5
    max_duration: float | None = None
    progress: Callable[[int, int], None] | None = None
    on_skip: Callable[[Skipped], None] | None = None

    def durations(self, model_limit: float) -> dict[str, float]:
        """The preparer's duration screen: ``--min-duration``, and ``--max-duration`` never over what the
        GPT's codes fit (``model_limit`` seconds, the rule the ingest slicer cuts clips to)."""
        longest = min(float(self.max_duration), model_limit) if self.max_duration else model_limit
        return {"min_duration": float(self.min_duration), "max_duration": longest}


def load_prepare_config(config_path: Path, opts: RunOptions) -> dict[str, Any]:
    """The config, after the option checks every generation makes (a PrepareError names the first problem)."""
    from data_tools.config import ConfigError, load_config

    try:
        cfg = load_config(config_path)
    except ConfigError as exc:
        raise PrepareError(str(exc)) from None
    if opts.pairs_per_target < 1:
        raise PrepareError("--pairs-per-target must be >= 1")
    if opts.min_duration < 0 or (opts.max_duration is not None and opts.max_duration <= opts.min_duration):
        raise PrepareError("need 0 <= --min-duration < --max-duration")
    return cfg


def beside_config(config_path: Path, value: Any, what: str, flag: str) -> Path:
    if not value:
        raise PrepareError(f"no {flag} given and the config names no {what}")
    return config_path.parent / str(value)


def base_files(config_path: Path, cfg: Mapping[str, Any], gpt: str | Path | None,
               w2v_stats: str | Path | None) -> tuple[Path, Path]:
    """(base GPT, w2v-BERT stats): as given, else the config's ``gpt_checkpoint`` / ``w2v_stat`` beside it."""
    return (Path(gpt) if gpt else beside_config(config_path, cfg.get("gpt_checkpoint"), "gpt_checkpoint", "--gpt"),
            Path(w2v_stats) if w2v_stats else beside_config(config_path, cfg.get("w2v_stat"), "w2v_stat",
                                                            "--w2v-stats"))


def file_signature(path: Path) -> list[Any]:
    stat = path.stat()
    return [str(path.resolve()), stat.st_size, stat.st_mtime_ns]


def w2v_signature(w2v_bert: str) -> Any:
    """A local w2v-BERT folder's files (path, size, mtime), or the model id as given."""
    local = Path(w2v_bert).expanduser()
    if local.is_dir():
        return sorted(file_signature(p) for p in local.rglob("*") if p.is_file())
    return w2v_bert


def short_hash(data: Mapping[str, Any]) -> str:
    """A settings fingerprint: 16 hex digits of the sorted JSON."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


# ---------------------------------------------------------------------------------------------
# The semantic features both generations read


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
    """Keep the first ``layer`` conformer layers: both generations read ``hidden_states[layer]`` and the encoder
    adds nothing after its last layer, so the features are bitwise the same, with 7 of w2v-BERT 2.0's 24 layers
    (29 % of its time and 700 MB of float32 weights) saved. The strictly loaded checkpoint is checked before this."""
    layers = getattr(getattr(w2v, "encoder", None), "layers", None)
    if layers is not None and len(layers) > layer:
        w2v.encoder.layers = layers[:layer]


def check_semantic_widths(semantic: Any, codec: Any, gpt: Any) -> None:
    """w2v-BERT, the codec and the GPT's conditioning must read features of one width."""
    widths = {"w2v-BERT hidden size": semantic.model.config.hidden_size,
              "semantic_codec.hidden_size": codec.config.hidden_size, "gpt.semantic_dim": gpt.cond_input_size}
    if len(set(widths.values())) != 1:
        raise PrepareError("the semantic widths disagree: " + ", ".join(f"{k} {v}" for k, v in widths.items()))


def silence_reason(wave: np.ndarray) -> str | None:
    """``"silent audio: RMS -72 dBFS"`` for audio at or below SILENCE_DBFS, else None."""
    rms = float(np.sqrt(np.mean(np.square(wave, dtype=np.float64))))
    if rms > 10 ** (SILENCE_DBFS / 20):
        return None
    level = 20 * math.log10(rms) if rms > 0 else -math.inf
    return f"silent audio: RMS {level:.0f} dBFS"


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


# ---------------------------------------------------------------------------------------------
# The preparer's shared part


@dataclass(kw_only=True)
class PairedPreparer:
    """What every generation's ``Preparer`` does alike; a generation adds ``models``, ``load`` and ``compute``."""

    FOLDERS: ClassVar[tuple[str, ...]] = ()  # one array per folder and item: ``<folder>/<stem>.npy``
    fingerprint: str
    min_duration: float
    max_duration: float
    state_dir: str

    def outputs(self, item: SourceItem) -> list[Path]:
        return [Path(folder) / f"{item.stem}.npy" for folder in self.FOLDERS]

    def screen_duration(self, seconds: float, why_longest: str = "") -> str | None:
        if seconds < self.min_duration:
            return f"too short: {seconds:.2f} s < --min-duration {self.min_duration:g} s"
        if seconds > self.max_duration:
            return f"too long: {seconds:.2f} s > {self.max_duration:.2f} s{why_longest}"
        return None

    def write_arrays(self, out_dir: Path, item: SourceItem, arrays: Sequence[np.ndarray]) -> None:
        for folder, array in zip(self.FOLDERS, arrays, strict=True):
            write_npy(out_dir, Path(folder) / f"{item.stem}.npy", np.ascontiguousarray(array))


# ---------------------------------------------------------------------------------------------
# The run


@dataclass
class PrepareReport(SkipCounts):
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


def read_items(input_path: str | Path, opts: RunOptions) -> tuple[list[SourceItem], list[Skipped]]:
    """The input's items and its bad lines (as skipped items); a PrepareError when it cannot be read at all."""
    try:
        items, problems = read_inputs(Path(input_path), speaker=opts.speaker, language=opts.language)
    except InputError as exc:
        raise PrepareError(str(exc)) from None
    return items, [Skipped("", p.where, f"bad input: {p.reason}") for p in problems]


@dataclass(frozen=True)
class Manifests:
    """What a generation writes around its arrays."""

    utterance_entry: Callable[[SourceItem, Mapping[str, Any]], dict[str, Any]]
    build_pairs: Callable[[Sequence[Mapping[str, Any]], int, int], tuple[list[dict[str, Any]], list[str]]]
    add_s2mel_files: Callable[[Path, Mapping[str, Path]], None]  # (out dir, audio of each finished stem)


def run_paired(items: Sequence[SourceItem], skipped: list[Skipped], preparer: Any, out: Path, manifests: Manifests,
               opts: RunOptions, *, device: Any, started: float) -> PrepareReport:
    """Run the batches and write the manifests and ``prepare_report.json`` (``started``: ``time.perf_counter``
    when the preparation began, so the report's time includes the model loading)."""
    ranks = join()
    ended_together = False
    try:
        report = _run_and_write(items, skipped, preparer, out, manifests, opts, device, started, ranks)
        ended_together = True
    finally:
        leave(ranks, together=ended_together)  # the first process has written the manifests when the others leave
    return report


def _run_and_write(items: Sequence[SourceItem], skipped: list[Skipped], preparer: Any, out: Path,
                   manifests: Manifests, opts: RunOptions, device: Any, started: float, ranks: Ranks) -> PrepareReport:
    if opts.on_skip is not None and ranks.is_main:
        for entry in skipped:
            opts.on_skip(entry)
    run = run_batches(items, preparer, out, batch_seconds=opts.batch_seconds, max_batch_items=opts.max_batch_items,
                      load_threads=opts.loaders, progress=opts.progress, on_skip=opts.on_skip, ranks=ranks)
    finished = list(iter_in_input_order(items, run.finished))
    manifests.add_s2mel_files(out, {item.stem: item.audio for item, _ in ranks.share(finished)})
    barrier(ranks)
    utterances = [manifests.utterance_entry(item, record) for item, record in finished]
    pairs, lonely = manifests.build_pairs(utterances, opts.pairs_per_target, opts.seed)
    utterances_path, pairs_path = out / "utterances.jsonl", out / "pairs.jsonl"
    if ranks.is_main:
        atomic_write_text(utterances_path, "".join(json.dumps(u, ensure_ascii=False) + "\n" for u in utterances))
    pairs_manifest = (write_pairs_manifest(pairs_path, pairs) if ranks.is_main else
                      str(pairs_path) if pairs else "")
    report = PrepareReport(
        utterances_manifest=str(utterances_path), pairs_manifest=pairs_manifest,
        utterances=len(utterances), pairs=len(pairs), new=run.new, resumed=run.resumed, redone=run.redone,
        batches=run.batches, device=_devices(device, ranks), skipped=skipped + run.skipped, lonely_speakers=lonely,
        hours=round(sum(u["duration"] for u in utterances) / 3600, 4),
        elapsed_s=round(time.perf_counter() - started, 2),
        utterances_per_s=round(run.new / run.elapsed_s, 3) if run.new and run.elapsed_s > 0 else 0.0,
        model_s=round(run.compute_s, 3))
    if ranks.is_main:
        atomic_write_text(out / "prepare_report.json",
                          json.dumps(report.to_json(), ensure_ascii=False, indent=1) + "\n")
    return report


def _devices(device: Any, ranks: Ranks) -> str:
    """``cpu``, or ``cuda (2 processes)`` under torchrun (each on its own GPU)."""
    return f"{getattr(device, 'type', device)} ({ranks.world_size} processes)" if ranks.enabled else str(device)
