"""``repair``: upgrade an older or foreign training checkpoint into the current format, honestly.

Inputs it understands:

- this project's format version 1 (``batch_idx`` instead of ``position``; no sampler state, no
  optimizer parameter names, no base vocabulary size);
- ``model_step<N>.pth`` of the community IndexTTS trainers, v1.5 and IndexTTS2 (keys ``model``,
  ``optimizer``, ``scheduler``, ``scaler``, ``epoch``, ``step``, ``batch_idx``, ``recent_checkpoints``,
  ``accumulation_counter``, ``extra``, ``last_losses``). Their AdamW is one group over every parameter,
  indexed in the upstream model's registration order (the order of the saved state dict, which is not
  this project's module order for v2) and with state only for parameters that got a gradient; repair
  moves each parameter's moments by name into this trainer's two groups (``trainer.steps``);
- their ``latest.pth``, which adds ``rng_state`` with a numpy array and a ``TorchVersion``. That file does
  not load with plain ``weights_only=True``. Decision: repair loads it still with ``weights_only=True``,
  allow-listing exactly the data-only numpy array/dtype reconstructors and ``TorchVersion`` (a str), and
  converts them to tensors/str. A file that needs anything else is refused: no ``weights_only=False``
  path exists, so no pickle can run code here.

A ``--tokenizer`` larger than the checkpoint's text vocabulary grows the text rows by meaning (the v1.5
rule, ``trainer.vocab.grow_text_vocab``) and resets optimizer, scheduler and grad scaler together; a
smaller one is refused. A file whose content digest does not match, or with NaN/Inf weights or moments,
is refused.

What cannot be recovered is left out and said ("RNG state missing: resume will not be bit-exact");
optimizer state is never invented: it is carried over (re-laid out by parameter name into this trainer's
parameter groups) or dropped together with the scheduler and grad scaler. The input is never written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from data_tools.text_tokenizer import TextTokenizer
from networks.gpt_config import text_tokens_of_rows
from trainer.checkpoints.community_load import (
    community_manifest_records,
    community_rng_state,
    load_for_repair,
)
from trainer.checkpoints.digest import (
    DAMAGED,
    MISMATCH,
    check_file_digest,
    integrity_problem,
)
from trainer.checkpoints.format import (
    FORMAT_NAME,
    FORMAT_VERSION,
    CheckpointError,
    bare_model_message,
    checkpoint_kind,
    now_iso,
    to_plain,
    tokenizer_record,
    versions_record,
)
from trainer.checkpoints.nonfinite import nonfinite_reason, nonfinite_tensors
from trainer.checkpoints.optimizer_layout import (
    community_param_order,
    relayout_optimizer,
    trainer_param_names,
)
from trainer.checkpoints.store import write_checkpoint_file
from trainer.checkpoints.verify import verify_checkpoint
from trainer.checkpoints.verify_report import VerifyReport

AMP_NAMES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "float32": "off", "off": "off"}
UPGRADABLE = ("studio-v1", "community")


@dataclass
class RepairReport:
    source: Path
    out: Path
    source_kind: str
    filled: list[str] = field(default_factory=list)  # what repair supplied, and from where
    costs: list[str] = field(default_factory=list)  # what is lost for resuming
    kept: list[str] = field(default_factory=list)  # carried over unchanged
    verify: VerifyReport | None = None

    def lines(self) -> list[str]:
        out = [f"repaired {self.source} ({self.source_kind}) -> {self.out}"]
        out += [f"  kept:   {line}" for line in self.kept]
        out += [f"  filled: {line}" for line in self.filled]
        out += [f"  cost:   {line}" for line in self.costs]
        if self.verify is not None:
            out.append(f"  verify: {self.verify.verdict}" + (f" ({self.verify.reason})" if self.verify.reason else ""))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"source": str(self.source), "out": str(self.out), "source_kind": self.source_kind,
                "kept": self.kept, "filled": self.filled, "costs": self.costs,
                "verdict": None if self.verify is None else self.verify.verdict}


# ----- pieces -----------------------------------------------------------------------------------------


def _clean_state(state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop inference-only aliases and store contiguous tensors (community saves channels_last convs)."""
    from networks.unified_voice import INFERENCE_ONLY_PREFIXES

    return {k: v.contiguous() for k, v in state.items()
            if not k.startswith(INFERENCE_ONLY_PREFIXES) and ".lora_" not in k}


# ----- upgrades -----------------------------------------------------------------------------------------


def _upgrade_v1(old: dict[str, Any], report: RepairReport, base_vocab_size: int | None) -> dict[str, Any]:
    ckpt = {k: v for k, v in old.items() if k != "batch_idx"}
    ckpt["format_version"] = FORMAT_VERSION
    ckpt["position"] = int(old.get("batch_idx", 0))
    report.filled.append(f"position {ckpt['position']} from batch_idx")
    ckpt.setdefault("recent_checkpoints", [])
    ckpt["sampler"] = None
    report.costs.append("sampler state missing: the current epoch's data order is not the original one "
                        "(the run continues at the same position of a freshly derived order)")
    ckpt["base_vocab_size"] = base_vocab_size
    if base_vocab_size is not None:
        report.filled.append(f"base vocabulary size {base_vocab_size} (from --base-vocab-size)")
    else:
        report.costs.append("base vocabulary size unknown (pass --base-vocab-size): base rows are not frozen "
                            "when resuming")
    ckpt["optimizer_param_names"] = None
    if ckpt.get("optimizer") is not None:
        try:
            saved = _saved_layout_v1(ckpt)
            opt, sched, names = relayout_optimizer(ckpt["optimizer"], ckpt.get("scheduler"), saved,
                                                   ckpt["model_config"])
        except (ValueError, KeyError, TypeError) as exc:
            _drop_optimizer(ckpt, report, f"it does not match this model's parameters ({exc})")
        else:
            ckpt["optimizer"], ckpt["scheduler"], ckpt["optimizer_param_names"] = opt, sched, names
            report.kept.append("optimizer + scheduler + grad scaler (parameter names recorded)")
    for name in ("rng", "tokenizer", "manifests", "model_config", "hparams"):
        if ckpt.get(name) is not None:
            report.kept.append(name)
    return ckpt


def _saved_layout_v1(ckpt: Mapping[str, Any]) -> list[list[str]]:
    """Version 1 used the same two AdamW groups as now; recompute their names from the model config."""
    wd = float((ckpt.get("hparams") or {}).get("weight_decay", 0.01))
    names = trainer_param_names(ckpt["model_config"], wd)
    sizes = [len(g.get("params", [])) for g in ckpt["optimizer"]["param_groups"]]
    if sizes != [len(g) for g in names]:
        raise ValueError(f"parameter group sizes {sizes} differ from this trainer's {[len(g) for g in names]}")
    return names


def _drop_optimizer(ckpt: dict[str, Any], report: RepairReport, why: str) -> None:
    ckpt["optimizer"] = ckpt["scheduler"] = ckpt["scaler"] = None
    ckpt["optimizer_param_names"] = None
    report.costs.append(f"optimizer state dropped ({why}): optimizer, scheduler and grad scaler start fresh")


def _community_config(state: Mapping[str, torch.Tensor], config: str | Path | None,
                      report: RepairReport) -> tuple[dict[str, Any], int]:
    from data_tools.config import load_config
    from trainer.checkpoints.validate import expected_state_shapes, shape_differences

    if config is None:
        raise CheckpointError("a community checkpoint does not record its model config: pass --config with the "
                              "config.yaml the run was started from")
    gpt = dict(load_config(config)["gpt"])
    weight = state.get("text_embedding.weight")
    if weight is None:
        raise CheckpointError("the weights have no text_embedding.weight: not an IndexTTS GPT")
    tokens = text_tokens_of_rows(int(weight.shape[0]), gpt)
    config_tokens = int(gpt["number_text_tokens"])
    gpt["number_text_tokens"] = tokens
    diffs = shape_differences(state, expected_state_shapes(gpt))
    if diffs:
        raise CheckpointError(f"the weights do not fit --config {config}: " + "; ".join(diffs))
    report.filled.append(f"model config from --config {config}"
                         + (f" (number_text_tokens {config_tokens} -> {tokens} from the weights)"
                            if tokens != config_tokens else ""))
    return gpt, config_tokens


def _community_tokenizer_path(old: Mapping[str, Any], tokenizer: str | Path | None) -> Path | None:
    extra = old.get("extra") if isinstance(old.get("extra"), Mapping) else {}
    if tokenizer is not None:
        path = Path(tokenizer)
        if not path.is_file():
            raise CheckpointError(f"tokenizer not found: {tokenizer}")
        return path
    recorded = Path(str(extra["tokenizer"])) if extra.get("tokenizer") else None
    return recorded if recorded is not None and recorded.is_file() else None


def _recorded_tokenizer(old: Mapping[str, Any]) -> Path | None:
    """The tokenizer file the community run recorded (its ``extra.tokenizer``), when it is still there."""
    extra = old.get("extra") if isinstance(old.get("extra"), Mapping) else {}
    recorded = Path(str(extra["tokenizer"])) if extra.get("tokenizer") else None
    return recorded if recorded is not None and recorded.is_file() else None


def _grow_vocabulary(state: dict[str, torch.Tensor], gpt: dict[str, Any], tokenizer: Path, old: Mapping[str, Any],
                     report: RepairReport) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The v1.5 rule for a larger tokenizer: grow the text rows by meaning (``trainer.vocab``)."""
    from trainer.vocab import grow_text_vocab

    base_tokenizer = _recorded_tokenizer(old)
    if base_tokenizer is not None and base_tokenizer.resolve() == tokenizer.resolve():
        base_tokenizer = None
    grown = grow_text_vocab(state, gpt, tokenizer, base_tokenizer=base_tokenizer)
    report.filled.append("text vocabulary grown by meaning to --tokenizer: " + "; ".join(grown.report_lines)
                         + (f" (decompositions under the run's recorded tokenizer {base_tokenizer})"
                            if base_tokenizer is not None else ""))
    return dict(grown.state_dict), dict(grown.gpt_cfg)


def _community_tokenizer_record(candidate: Path | None, old: Mapping[str, Any], tokens: int,
                                report: RepairReport) -> dict[str, Any]:
    extra = old.get("extra") if isinstance(old.get("extra"), Mapping) else {}
    if candidate is not None:
        record = tokenizer_record(candidate)
        report.filled.append(f"tokenizer record from {candidate} (sha256 {record['sha256'][:12]}…)")
        return record
    report.costs.append("tokenizer hash unknown (pass --tokenizer): resume only checks the vocabulary size")
    return {"path": str(extra.get("tokenizer") or ""), "sha256": None, "vocab_size": tokens}


def _carry_optimizer(ckpt: dict[str, Any], old_keys: list[str], gpt: Mapping[str, Any], step: int,
                     report: RepairReport) -> None:
    """Re-lay the community AdamW (one group over every parameter) onto this trainer's groups, by name."""
    optimizer = ckpt["optimizer"]
    if optimizer is None:
        _drop_optimizer(ckpt, report, "not in the file")
        return
    if not isinstance(ckpt["scheduler"], Mapping):
        _drop_optimizer(ckpt, report, "the scheduler state is missing, and they are restored as one set")
        return
    try:
        groups = optimizer.get("param_groups") if isinstance(optimizer, Mapping) else None
        if not isinstance(groups, list) or len(groups) != 1:
            raise ValueError(f"expected the community trainer's single parameter group, found "
                             f"{len(groups) if isinstance(groups, list) else 'none'}")
        order, source = community_param_order(old_keys, gpt, len(groups[0].get("params", [])))
        opt, sched, names = relayout_optimizer(optimizer, ckpt["scheduler"], [order], gpt, foreign=True)
    except (ValueError, KeyError, TypeError) as exc:
        _drop_optimizer(ckpt, report, f"it does not match this model's parameters: {exc}")
        return
    ckpt["optimizer"], ckpt["scheduler"], ckpt["optimizer_param_names"] = opt, sched, names
    total = sum(len(group) for group in names)
    report.kept.append(f"AdamW moments of {len(opt['state'])} of {total} parameters (the others never got a "
                       f"gradient there), matched by name ({source}) into this trainer's two groups "
                       f"({len(names[0])} decayed, {len(names[1])} not) + scheduler position (step "
                       f"{sched.get('last_epoch') if sched else step})" + (" + grad scaler" if ckpt["scaler"] else ""))
    report.costs.append("learning-rate schedule: continues at step "
                        f"{sched.get('last_epoch') if sched else step} with this trainer's warm-up/cosine "
                        "shape and --learning-rate; weight decay now skips biases, norms and embeddings")


def _upgrade_community(old: dict[str, Any], report: RepairReport, *, tokenizer: str | Path | None,
                       config: str | Path | None, base_vocab_size: int | None) -> dict[str, Any]:
    old_keys = [str(k) for k in old["model"]]
    state = _clean_state(old["model"])
    gpt, config_tokens = _community_config(state, config, report)
    from generations.registry import generation_of_config

    version = generation_of_config(gpt).name
    report.kept.append(f"model weights ({len(state)} tensors, {version} layout; channels_last convs stored "
                       "contiguous)")
    tokens = int(gpt["number_text_tokens"])
    if base_vocab_size is None:
        base_vocab_size = min(config_tokens, tokens)
        report.filled.append(f"base vocabulary size {base_vocab_size} (the --config's number_text_tokens)")
    extra = old.get("extra") if isinstance(old.get("extra"), Mapping) else {}
    step, epoch, batch = int(old.get("step", 0)), int(old.get("epoch", 0)), int(old.get("batch_idx") or 0)
    ckpt: dict[str, Any] = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "saved_at": now_iso(), "model": state,
        "optimizer": old.get("optimizer"), "scheduler": old.get("scheduler"), "scaler": old.get("scaler"),
        "optimizer_param_names": None, "epoch": epoch, "position": batch, "step": step, "sampler": None,
        "rng": None, "recent_checkpoints": [], "manifests": None, "tokenizer": None,
        "base_vocab_size": int(base_vocab_size), "model_config": gpt, "hparams": {}, "last_losses": None,
        "last_val_loss": None, "best_val_loss": None, "versions": versions_record(),
    }
    report.kept.append(f"step {step}, epoch {epoch}, position {batch} (the community trainer's next epoch/batch)")
    report.costs.append("data position: the sampler's order is not recorded, so the epoch continues at batch "
                        f"{batch} of this trainer's own order (some items of that epoch may repeat or be skipped)")
    accumulated = old.get("accumulation_counter")
    if isinstance(accumulated, int) and accumulated > 0:
        report.costs.append(f"{accumulated} micro-batch(es) of gradient accumulated toward the next step are lost")

    candidate = _community_tokenizer_path(old, tokenizer)
    pieces = TextTokenizer(candidate).vocab_size if candidate is not None else tokens
    if pieces < tokens:
        raise CheckpointError(f"tokenizer {candidate} has {pieces:,} pieces, the weights {tokens:,} text tokens: "
                              "shrinking the vocabulary would drop trained rows; pass the tokenizer the run used")
    if pieces > tokens:
        assert candidate is not None
        state, gpt = _grow_vocabulary(state, gpt, candidate, old, report)
        ckpt["model"], ckpt["model_config"] = state, gpt
        _drop_optimizer(ckpt, report, f"the text vocabulary grew {tokens:,} -> {pieces:,}, so the text rows' "
                                      "moments and the schedule no longer describe this model")
        tokens = pieces
    else:
        _carry_optimizer(ckpt, old_keys, gpt, step, report)
    rng = community_rng_state(old.get("rng_state"))
    if rng is not None:
        ckpt["rng"] = rng
        report.kept.append("RNG state (python, numpy, torch CPU"
                           + (", CUDA" if rng["torch_cuda"] else "") + ") from the community latest.pth")
    else:
        report.costs.append("RNG state missing: resume will not be bit-exact (a community model_step file has no "
                            "RNG streams; its latest.pth does)")
    ckpt["tokenizer"] = _community_tokenizer_record(candidate, old, tokens, report)
    manifests = community_manifest_records(old.get("manifests") or extra.get("manifests"))
    if manifests is not None:
        ckpt["manifests"] = manifests
        report.filled.append("manifest records (paths and line counts; no content hashes)")
    else:
        ckpt["manifests"] = {"train": [], "val": []}
        report.costs.append("manifests not recorded: resume cannot tell whether the data changed")
    hparams: dict[str, Any] = {}
    for key in ("batch_size", "grad_accumulation"):
        if isinstance(old.get(key), int):
            hparams[key] = old[key]
    amp = AMP_NAMES.get(str(extra.get("amp_dtype") or old.get("amp_dtype") or ""))
    if amp:
        hparams["amp"] = amp
    ckpt["hparams"] = hparams
    if isinstance(old.get("last_losses"), Mapping):
        ckpt["last_losses"] = {k: float(v) for k, v in old["last_losses"].items() if isinstance(v, (int, float))}
    if isinstance(old.get("recent_checkpoints"), list):
        ckpt["recent_checkpoints"] = [Path(str(p)).name for p in old["recent_checkpoints"]]
    return ckpt


def _source_kind(old: dict[str, Any], path: Path) -> str:
    kind = checkpoint_kind(old)
    if kind == "studio":
        version = old.get("format_version")
        if version == FORMAT_VERSION:
            raise CheckpointError(f"{path} is already in the current format (version {FORMAT_VERSION}): nothing to "
                                  "repair; check it with `python -m trainer.checkpoints verify`")
        if isinstance(version, int) and version == 1:
            return "studio-v1"
        raise CheckpointError(f"{path} has format version {version!r}, which this project cannot upgrade")
    if kind == "community":
        return "community"
    if kind == "bare":
        raise CheckpointError(bare_model_message(path) + "; a weights-only file has no training state to repair")
    raise CheckpointError(f"{path} is neither an older checkpoint of this project nor a community trainer's "
                          f"(top-level keys: {', '.join(sorted(map(str, old))[:8])})")


def repair_checkpoint(path: str | Path, out: str | Path, *, tokenizer: str | Path | None = None,
                      config: str | Path | None = None, base_vocab_size: int | None = None) -> RepairReport:
    """Write the current-format upgrade of ``path`` to the NEW file ``out`` (never over the input)."""
    path, out = Path(path), Path(out)
    if out.exists() or out.resolve() == path.resolve():
        raise CheckpointError(f"--out {out} already exists: repair never overwrites a file; choose a new path")
    digest = check_file_digest(path) if path.is_file() else None
    if digest is not None and digest.status in (MISMATCH, DAMAGED):
        raise CheckpointError(f"{path} cannot be repaired: {digest.reason()}")
    old, allow_listed = load_for_repair(path)
    if digest is not None and (problem := integrity_problem(digest, old)):
        raise CheckpointError(f"{path} cannot be repaired: {problem}")
    nonfinite = nonfinite_tensors(old)
    if nonfinite:
        raise CheckpointError(f"{path} cannot be repaired: {nonfinite_reason(nonfinite)}")
    kind = _source_kind(old, path)
    report = RepairReport(source=path, out=out, source_kind=kind)
    if allow_listed:
        report.source_kind = "community-latest"
        report.filled.append("loaded with weights_only=True plus the numpy-array/TorchVersion allow-list that the "
                             "community latest.pth needs (data only; converted to tensors/str)")
    if kind == "studio-v1":
        ckpt = _upgrade_v1(old, report, base_vocab_size)
    else:
        ckpt = _upgrade_community(old, report, tokenizer=tokenizer, config=config, base_vocab_size=base_vocab_size)
    ckpt["repaired_from"] = {"path": str(path), "kind": report.source_kind, "at": now_iso(),
                             "filled": list(report.filled), "costs": list(report.costs)}
    write_checkpoint_file(to_plain(ckpt), out)
    report.verify = verify_checkpoint(out)
    return report
