"""``export``: an inference folder IndexTTS (v1.5) and IndexTTS2 inference load unchanged (IndexTTS-2.5:
``generations.indextts25.export``, its own files and row order), with every other file of the base model folder
copied (or linked) in: ``trainer.checkpoints.export_base_files``.

- ``OUT/gpt.pth``: {"model": state_dict} in the IndexTTS layout (what stock inference loads as its gpt.pth);
  ``OUT/gpt.safetensors`` (optional): the same tensors;
- ``OUT/config.yaml``: the gpt section of the checkpoint's model, so ``number_text_tokens`` matches the
  grown vocabulary, the other sections from ``--config`` when given, and ``version`` (2.0 for an
  IndexTTS2 model, 1.5 otherwise) as the stock configs carry it;
- ``OUT/bpe.model``: the tokenizer the checkpoint was trained with (checked by sha256);
- ``OUT/LICENSE-NOTICE``: derivative weights of IndexTTS carry the base model's licence: the notice says
  so and points to the base model's licence file (no legal text of our own);
- ``OUT/MODEL_CARD.md``: base model, version, tokenizer hash and size, data items (and hours when
  recorded), steps, final losses, and how far the weights moved from the base model (weights that are bitwise
  the base's are refused: such an export would only sound like the base); when the run's checkpoints were
  measured (``python -m trainer.evaluate``: ``model_step<N>.eval.json`` beside them), the evaluation table
  (CER, WER, speaker similarity of the base model and every measured checkpoint, this one marked).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import yaml

from data_tools.fileio import (
    atomic_open,
    atomic_write_text,
    atomic_write_with,
    sha256_file,
)
from data_tools.text_tokenizer import TextTokenizer
from networks.gpt_config import text_tokens_of_rows
from networks.lora import merged_state_dict
from trainer.checkpoints.base_movement import BaseMovement, movement_for_export
from trainer.checkpoints.card_facts import LICENSE_NOTICE, _base_model, training_lines
from trainer.checkpoints.digest import (
    DAMAGED,
    MISMATCH,
    check_file_digest,
    integrity_problem,
)
from trainer.checkpoints.export_base_files import BASE_FILE_MODES, DEFAULT_BASE_FILES, carry_base_files
from trainer.checkpoints.export_weights import write_gpt_weights
from trainer.checkpoints.format import CheckpointError, checkpoint_kind, model_state_of
from trainer.checkpoints.loading import load_checkpoint
from trainer.checkpoints.nonfinite import nonfinite_reason, nonfinite_tensors
from trainer.lora_setup import checkpoint_adapter

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
BUNDLE_FILES = ("gpt.pth", "gpt.safetensors", "config.yaml", "bpe.model", "LICENSE-NOTICE", "MODEL_CARD.md")



@dataclass
class ExportReport:
    out_dir: Path
    files: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        out = [f"exported to {self.out_dir}:"]
        for path in self.files:
            out.append(f"  {path.name:<16} {path.stat().st_size:>14,} bytes")
        out += [f"  note: {note}" for note in self.notes]
        return out


def _gpt_config(ckpt: dict[str, Any], kind: str, state: Mapping[str, torch.Tensor],
                raw_config: dict[str, Any] | None, config: str | Path | None) -> dict[str, Any]:
    from networks.gpt_config import effective_gpt_config

    if kind == "studio" and isinstance(ckpt.get("model_config"), Mapping):
        return effective_gpt_config(dict(ckpt["model_config"]), source="the checkpoint's model config")
    if raw_config is None:
        raise CheckpointError(f"this {kind} checkpoint does not record its model config: pass --config with the "
                              "config.yaml it was trained from")
    gpt = effective_gpt_config(dict(raw_config["gpt"]), source=str(config))
    weight = state.get("text_embedding.weight")
    if weight is not None:
        gpt["number_text_tokens"] = text_tokens_of_rows(int(weight.shape[0]), gpt)
    return gpt


def _generation(gpt: Mapping[str, Any]) -> Any:
    """The registry entry of the GPT ``gpt`` describes (its export, names and config version)."""
    from generations.registry import generation_of_config

    return generation_of_config(gpt)


def _export_facts(generation: Any) -> Any:
    """``generation``'s export facet (``generations.export_facts.ExportFacts``); CheckpointError, its refusal, where
    it cannot export."""
    from generations.spec import Capability

    refusal = generation.refusal(Capability.EXPORT)
    if refusal is not None or generation.export is None:
        raise CheckpointError(refusal or f"{generation.name} cannot export")
    return generation.export


def _config_yaml(gpt: Mapping[str, Any], raw_config: dict[str, Any] | None, notes: list[str]) -> dict[str, Any]:
    """The base config with its gpt section made to describe the exported weights."""
    if raw_config is None:
        data: dict[str, Any] = {"gpt": dict(gpt)}
        notes.append("config.yaml holds only the gpt section (pass --config to carry the other sections over)")
    else:
        data = dict(raw_config)
        section = dict(data.get("gpt") or {})
        changed = [f"{k} {section.get(k)!r} -> {v!r}" for k, v in gpt.items()
                   if k in section and section[k] != v]
        section.update({k: v for k, v in gpt.items() if k in section or k == "number_text_tokens"})
        data["gpt"] = section
        if changed:
            notes.append("config.yaml gpt section updated from the checkpoint: " + ", ".join(changed))
    dataset = dict(data.get("dataset") or {})
    dataset["bpe_model"] = "bpe.model"
    data["dataset"] = dataset
    data["gpt_checkpoint"] = "gpt.pth"
    version = _export_facts(_generation(gpt)).version
    if data.get("version") != version:
        if data.get("version") is not None:
            notes.append(f"config.yaml version {data['version']!r} -> {version} (the exported model's version)")
        data["version"] = version
    return data


def _tokenizer_source(ckpt: dict[str, Any], tokenizer: str | Path | None, notes: list[str]) -> Path:
    record = ckpt.get("tokenizer") if isinstance(ckpt.get("tokenizer"), Mapping) else {}
    recorded_sha = record.get("sha256")
    if tokenizer is not None:
        path = Path(tokenizer)
        if not path.is_file():
            raise CheckpointError(f"tokenizer not found: {path}")
        sha = sha256_file(path)
        if recorded_sha and sha != recorded_sha:
            raise CheckpointError(f"--tokenizer {path} (sha256 {sha[:12]}…) is not the tokenizer the checkpoint was "
                                  f"trained with (sha256 {recorded_sha[:12]}…, {record.get('path')})")
        if not recorded_sha:
            notes.append(f"the checkpoint does not record its tokenizer hash: trusting --tokenizer {path}")
        return path
    recorded = Path(str(record.get("path") or ""))
    if record.get("path") and recorded.is_file():
        if recorded_sha and sha256_file(recorded) != recorded_sha:
            raise CheckpointError(f"the recorded tokenizer {recorded} has changed since training (sha256 differs): "
                                  "pass --tokenizer with the one the run used")
        return recorded
    raise CheckpointError("the checkpoint's tokenizer file is not available"
                          + (f" ({record.get('path')})" if record.get("path") else "")
                          + ": pass --tokenizer with the tokenizer the run was trained with")


def model_card(ckpt: Mapping[str, Any], gpt: Mapping[str, Any], tokenizer_path: Path, dtype: str,
               source: Path, movement: BaseMovement | None = None, evaluation: list[str] | None = None) -> str:
    """The MODEL_CARD.md text of an export (facts from the checkpoint; "not recorded" where it has none)."""
    generation = _generation(gpt)
    export = _export_facts(generation)
    name = export.name
    vocab = TextTokenizer(tokenizer_path).vocab_size
    base_vocab = ckpt.get("base_vocab_size")
    lines = [
        f"# {name} GPT fine-tune",
        "",
        f"- Base model: {name}, {_base_model(ckpt)}",
        f"- Model version: {generation.id} (config.yaml `version: {export.version}`)",
        f"- Architecture: {gpt.get('layers')} layers, model_dim {gpt.get('model_dim')}, "
        f"{gpt.get('number_text_tokens')} text tokens"
        + (f" (base vocabulary {base_vocab})" if isinstance(base_vocab, int) else ""),
        f"- Tokenizer: bpe.model, {vocab:,} pieces, sha256 {sha256_file(tokenizer_path)}",
        *training_lines(ckpt, dtype, source, movement),
        "",
        *(["## Evaluation", "", *evaluation, ""] if evaluation else []),
        "## Licence",
        "",
        "Derived from IndexTTS: subject to the bilibili IndexTTS model licence of the base model, which must",
        "accompany these weights. See LICENSE-NOTICE.",
        "",
    ]
    return "\n".join(lines)


ADAPTER_FILE = "adapter.pth"


def _export_adapter(path: Path, out_dir: Path, ckpt: Mapping[str, Any],
                    adapter: tuple[Any, dict[str, torch.Tensor]] | None, force: bool) -> ExportReport:
    """``--adapter-only``: ``OUT/adapter.pth`` = {"lora_config": {...}, "adapter": {name: tensor}, "step": N}."""
    if adapter is None:
        raise CheckpointError(f"{path} holds no LoRA adapters (it was not trained with --lora): export the whole "
                              "model instead")
    target = out_dir / ADAPTER_FILE
    if target.exists() and not force:
        raise CheckpointError(f"{out_dir} already holds {ADAPTER_FILE}: choose an empty --out folder (or --force)")
    config, tensors = adapter
    payload = {"lora_config": config.to_dict(), "adapter": {k: v.detach().float().contiguous().clone()
                                                            for k, v in tensors.items()},
               "step": int(ckpt.get("step") or 0)}
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_with(target, lambda handle: torch.save(payload, handle))
    report = ExportReport(out_dir=out_dir, files=[target])
    report.notes.append(f"LoRA adapter alone: {len(tensors)} tensors, rank {config.rank}, alpha {config.alpha:g} "
                        "(load it onto the base model with networks.lora.inject_lora + load_adapter_state)")
    return report


def _evaluation_lines(path: Path, ckpt: Mapping[str, Any]) -> list[str]:
    """The run's evaluation table (per-checkpoint ``*.eval.json`` beside the exported file), if it has one."""
    from trainer.evaluation.report import evaluation_lines

    step = ckpt.get("step")
    return evaluation_lines(path.parent, step if isinstance(step, int) else None)


def export_checkpoint(path: str | Path, out_dir: str | Path, dtype: str = "fp32", safetensors: bool = False,
                      *, config: str | Path | None = None, tokenizer: str | Path | None = None,
                      force: bool = False, base: str | Path | None = None, adapter_only: bool = False,
                      base_files: str = DEFAULT_BASE_FILES, model_dir: str | Path | None = None) -> ExportReport:
    """Write the inference folder of checkpoint ``path`` into ``out_dir`` (see the module docstring); a LoRA
    checkpoint's adapters are merged into ``gpt.pth``, or written alone with ``adapter_only``. The base model
    folder's other files are copied in (``base_files="link"``: linked; ``trainer.checkpoints.export_base_files``)."""
    from generations.registry import GENERATIONS
    from networks.unified_voice import INFERENCE_ONLY_PREFIXES
    from trainer.checkpoints.validate import expected_state_shapes, shape_differences

    if dtype not in DTYPES:
        raise CheckpointError(f"--dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if base_files not in BASE_FILE_MODES:
        raise CheckpointError(f"--base-files must be one of {', '.join(BASE_FILE_MODES)}, got {base_files!r}")
    path, out_dir = Path(path), Path(out_dir)
    written = (name for entry in GENERATIONS if entry.export is not None for name in entry.export.bundle_files)
    existing = [name for name in dict.fromkeys((*BUNDLE_FILES, *written)) if (out_dir / name).exists()]
    if existing and not force:
        raise CheckpointError(f"{out_dir} already holds {', '.join(existing)}: choose an empty --out folder "
                              "(or pass --force to replace an earlier export)")
    digest = check_file_digest(path) if path.is_file() else None
    if digest is not None and digest.status in (MISMATCH, DAMAGED):
        raise CheckpointError(f"{path} cannot be exported: {digest.reason()}")
    ckpt = load_checkpoint(path)
    if digest is not None and (problem := integrity_problem(digest, ckpt)):
        raise CheckpointError(f"{path} cannot be exported: {problem}")
    kind = checkpoint_kind(ckpt)
    state = model_state_of(ckpt)
    if kind == "unknown" or state is None:
        raise CheckpointError(f"{path} holds no IndexTTS model weights to export")
    raw_config = None
    if config is not None:
        from data_tools.config import load_config

        load_config(config)  # validates it (raises ConfigError with a one-line reason)
        raw_config = yaml.safe_load(Path(config).read_text(encoding="utf-8"))
    report = ExportReport(out_dir=out_dir)
    gpt = _gpt_config(ckpt, kind, state, raw_config, config)
    weights = {k: v for k, v in state.items() if not k.startswith(INFERENCE_ONLY_PREFIXES)}
    adapter = checkpoint_adapter(ckpt)
    if adapter_only:
        return _export_adapter(path, out_dir, ckpt, adapter, force)
    if adapter is not None:  # a LoRA run: its adapters folded into the stock weights
        weights = merged_state_dict(weights, adapter[1], adapter[0])
        report.notes.append(f"LoRA adapters merged ({len(adapter[1]) // 2} projections, rank {adapter[0].rank})")
    diffs = shape_differences(weights, expected_state_shapes(gpt))
    if diffs:
        raise CheckpointError("the weights do not fit their model config: " + "; ".join(diffs))
    nonfinite = nonfinite_tensors({"model": weights})
    if nonfinite:
        raise CheckpointError(f"{path} cannot be exported: {nonfinite_reason(nonfinite)}")
    movement = movement_for_export(ckpt, weights, base, report.notes)
    target = DTYPES[dtype]
    weights = {k: (v.to(target) if v.is_floating_point() else v).detach().clone().contiguous()
               for k, v in weights.items()}
    generation = _generation(gpt)
    report = _export_facts(generation).build(ckpt, path, out_dir, gpt, weights, raw_config, dtype, safetensors,
                                             movement, tokenizer, report)
    carry_base_files(generation, ckpt, out_dir, config=config, model_dir=model_dir, mode=base_files, force=force,
                     report=report)
    return report


def export_sentencepiece(ckpt: dict[str, Any], path: Path, out_dir: Path, gpt: Mapping[str, Any],
                         weights: dict[str, torch.Tensor], raw_config: dict[str, Any] | None, dtype: str,
                         safetensors: bool, movement: BaseMovement | None, tokenizer: str | Path | None,
                         report: ExportReport) -> ExportReport:
    """The upstream folder of a GPT with a SentencePiece tokenizer (IndexTTS-1.5, IndexTTS2): gpt.pth,
    bpe.model, config.yaml, LICENSE-NOTICE and MODEL_CARD.md."""
    tokenizer_path = _tokenizer_source(ckpt, tokenizer, report.notes)

    write_gpt_weights(out_dir, weights, safetensors, report)
    bpe_path = out_dir / "bpe.model"
    with atomic_open(bpe_path, "wb") as handle, open(tokenizer_path, "rb") as source:
        handle.write(source.read())
    report.files.append(bpe_path)
    config_path = out_dir / "config.yaml"
    atomic_write_text(config_path, yaml.safe_dump(_config_yaml(gpt, raw_config, report.notes), sort_keys=False,
                                                  allow_unicode=True))
    report.files.append(config_path)
    export = _export_facts(_generation(gpt))
    notice_path = out_dir / "LICENSE-NOTICE"
    atomic_write_text(notice_path, LICENSE_NOTICE.format(model_name=export.name, base=_base_model(ckpt)))
    report.files.append(notice_path)
    card_path = out_dir / "MODEL_CARD.md"
    atomic_write_text(card_path, model_card(ckpt, gpt, tokenizer_path, dtype, path, movement,
                                            _evaluation_lines(path, ckpt)))
    report.files.append(card_path)
    report.notes.insert(0, f"{len(weights)} tensors as {dtype}, {export.name} "
                           f"(config version {export.version}), number_text_tokens "
                           f"{gpt['number_text_tokens']}")
    return report
