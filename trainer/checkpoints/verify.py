"""``verify``: is a checkpoint whole, what would resuming from it lose, and does it fit a tokenizer/config?

Verdicts: COMPLETE (exact resume possible), PARTIAL (weights usable, exact resume not: ``lost`` says
what is lost), INVALID (not loadable, or not a model: ``reason`` says why). Exit codes of the CLI:
0 COMPLETE, 1 PARTIAL, 2 INVALID or incompatible with the given --tokenizer/--config.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from networks.gpt_config import text_tokens_of_rows
from trainer.checkpoints.community_load import load_for_repair
from trainer.checkpoints.digest import (
    ABSENT,
    ALGORITHM,
    DigestCheck,
    check_file_digest,
    declares_digest,
    integrity_problem,
    nonfinite_tensors,
)
from trainer.checkpoints.format import FORMAT_VERSION, CheckpointError, checkpoint_kind, model_state_of
from trainer.checkpoints.loading import load_checkpoint
from trainer.checkpoints.rng import check_rng_state
from trainer.checkpoints.validate import (
    Expectation,
    ValidationReport,
    expected_state_shapes,
    shape_differences,
    validate_checkpoint,
)

COMPLETE, PARTIAL, INVALID = "COMPLETE", "PARTIAL", "INVALID"
OK, MISSING, WRONG = "ok", "missing", "wrong"

COMPONENTS = ("model weights", "model config", "tokenizer record", "training counters", "optimizer",
              "scheduler", "grad scaler", "RNG", "sampler position", "content digest")

# What resuming loses when a component is missing or wrong.
COSTS = {
    "model config": "model config not recorded: resume cannot check --config against it",
    "tokenizer record": "tokenizer not recorded: resume cannot check --tokenizer against it",
    "training counters": "step/epoch unknown: the schedule and epoch count restart at 0",
    "optimizer": "optimizer state missing: AdamW moments restart from zero (optimizer, scheduler and grad "
                 "scaler are reset together)",
    "scheduler": "scheduler state missing: the learning-rate schedule cannot continue where it was",
    "grad scaler": "grad scaler state missing: the fp16 loss scale re-calibrates",
    "RNG": "RNG state missing: resume will not be bit-exact",
    "sampler position": "sampler state missing: the current epoch's data order cannot be reproduced",
}


@dataclass
class Component:
    name: str
    status: str  # ok | missing | wrong
    detail: str = ""


@dataclass
class VerifyReport:
    path: Path
    kind: str  # studio | community | bare | unknown | unloadable
    verdict: str
    reason: str = ""
    components: list[Component] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    usable_as: list[str] = field(default_factory=list)
    compatibility: ValidationReport | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def compatible(self) -> bool | None:
        return None if self.compatibility is None else self.compatibility.ok

    @property
    def exit_code(self) -> int:
        if self.verdict == INVALID or self.compatible is False:
            return 2
        return 0 if self.verdict == COMPLETE else 1

    def component(self, name: str) -> Component:
        return next(c for c in self.components if c.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path), "kind": self.kind, "verdict": self.verdict, "reason": self.reason,
            "components": [{"name": c.name, "status": c.status, "detail": c.detail} for c in self.components],
            "lost": list(self.lost), "usable_as": list(self.usable_as),
            "compatible": self.compatible,
            "compatibility": None if self.compatibility is None else self.compatibility.to_dict(),
            "exit_code": self.exit_code,
        }

    def lines(self, verbose: bool = False) -> list[str]:
        marks = {OK: "ok     ", MISSING: "MISSING", WRONG: "WRONG  "}
        out = [f"{self.path}: {self.kind} checkpoint"] if self.kind not in ("unloadable",) else [str(self.path)]
        for comp in self.components:
            detail = f"  {comp.detail}" if (comp.detail and (verbose or comp.status != OK)) else ""
            out.append(f"  {marks[comp.status]} {comp.name}{detail}")
        for cost in self.lost:
            out.append(f"  lost: {cost}")
        if self.usable_as:
            out.append(f"  usable as: {', '.join(self.usable_as)}")
        if self.compatibility is not None:
            if self.compatibility.ok:
                out.append("  compatible with the given --tokenizer/--config")
            for error in self.compatibility.errors:
                out.append(f"  INCOMPATIBLE: {error}")
            for warning in self.compatibility.warnings:
                out.append(f"  warning: {warning}")
            if verbose:
                out += [f"  {line}" for line in self.compatibility.info]
        verdict = f"verdict: {self.verdict}"
        if self.reason:
            verdict += f" ({self.reason})"
        out.append(verdict)
        return out


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_weights(state: Mapping[str, torch.Tensor] | None) -> Component:
    if not state:
        return Component("model weights", MISSING, "no state dict of tensors")
    bad = [name for name, t in state.items()
           if t.is_floating_point() and t.numel() and not bool(torch.isfinite(t).all())]
    params = sum(t.numel() for t in state.values())
    dtypes = sorted({str(t.dtype).removeprefix("torch.") for t in state.values()})
    if bad:
        more = f" (+{len(bad) - 3} more)" if len(bad) > 3 else ""
        return Component("model weights", WRONG, f"NaN/Inf in {', '.join(bad[:3])}{more}")
    return Component("model weights", OK, f"{len(state)} tensors, {params:,} values, {'/'.join(dtypes)}")


def _check_config(cfg: Any, state: Mapping[str, torch.Tensor] | None) -> tuple[Component, dict | None]:
    if not isinstance(cfg, Mapping):
        return Component("model config", MISSING, "not recorded"), None
    from networks.gpt_config import ConfigError, effective_gpt_config

    try:
        effective = effective_gpt_config(dict(cfg), source="recorded model config")
        shapes = expected_state_shapes(effective)
    except (ConfigError, KeyError, TypeError, ValueError) as exc:
        return Component("model config", WRONG, str(exc)), None
    if state is not None:
        diffs = shape_differences(state, shapes)
        if diffs:
            return Component("model config", WRONG, "weights do not fit it: " + "; ".join(diffs)), effective
    return Component("model config", OK, f"{effective['layers']} layers, dim {effective['model_dim']}, "
                                          f"{effective['number_text_tokens']} text tokens"), effective


def _check_tokenizer(record: Any, cfg: Mapping[str, Any] | None) -> Component:
    if not isinstance(record, Mapping):
        return Component("tokenizer record", MISSING, "not recorded")
    sha, vocab = record.get("sha256"), record.get("vocab_size")
    if not (isinstance(sha, str) and len(sha) == 64):
        return Component("tokenizer record", MISSING, f"no sha256 recorded (path {record.get('path')})")
    if not (_is_count(vocab) and vocab > 0):
        return Component("tokenizer record", WRONG, f"vocab_size {vocab!r}")
    scheme = record.get("text_scheme")
    if isinstance(scheme, Mapping):  # IndexTTS-2.5: the scheme's table must be the model's text table
        wanted = scheme.get("number_text_tokens")
        if cfg is not None and wanted != int(cfg["number_text_tokens"]):
            return Component("tokenizer record", WRONG, f"the '{scheme.get('scheme')}' text scheme's table has "
                                                        f"{wanted} text tokens, the model "
                                                        f"{int(cfg['number_text_tokens']):,}")
        return Component("tokenizer record", OK, f"{record.get('path')} sha256 {sha[:12]}…, IndexTTS-2.5 "
                                                 f"'{scheme.get('scheme')}' text scheme, vocab {vocab:,}")
    if cfg is not None and vocab > int(cfg["number_text_tokens"]):
        return Component("tokenizer record", WRONG, f"vocab {vocab:,} exceeds the model's "
                                                    f"{int(cfg['number_text_tokens']):,} text tokens")
    return Component("tokenizer record", OK, f"{record.get('path')} sha256 {sha[:12]}… vocab {vocab:,}")


def _optimizer_shape_problem(optimizer: Mapping[str, Any], names: list[list[str]] | None,
                             state: Mapping[str, torch.Tensor] | None) -> str | None:
    if not names or state is None:
        return None
    flat = [name for group in names for name in group]
    for index, entry in (optimizer.get("state") or {}).items():
        if not isinstance(index, int) or index >= len(flat):
            return f"state for parameter #{index}, but only {len(flat)} parameters are named"
        param = state.get(flat[index])
        moment = entry.get("exp_avg") if isinstance(entry, Mapping) else None
        if param is not None and isinstance(moment, torch.Tensor) and tuple(moment.shape) != tuple(param.shape):
            return f"moments of {flat[index]} are {list(moment.shape)}, the weight is {list(param.shape)}"
    return None


def _param_names_from_model(cfg: Mapping[str, Any] | None) -> list[list[str]] | None:
    """Parameter order of a single-group optimizer over model.parameters() (the community trainers' layout)."""
    if cfg is None:
        return None
    from networks.gpt_build import build_any_gpt

    with torch.device("meta"):
        model = build_any_gpt(dict(cfg))
    return [[name for name, _ in model.named_parameters()]]


def _check_optimizer_set(ckpt: Mapping[str, Any], state: Mapping[str, torch.Tensor] | None,
                         cfg: Mapping[str, Any] | None, amp: Any) -> list[Component]:
    optimizer, scheduler, scaler = ckpt.get("optimizer"), ckpt.get("scheduler"), ckpt.get("scaler")
    out: list[Component] = []
    if optimizer is None:
        out.append(Component("optimizer", MISSING, "not recorded"))
    elif not (isinstance(optimizer, Mapping) and isinstance(optimizer.get("state"), Mapping)
              and isinstance(optimizer.get("param_groups"), list)):
        out.append(Component("optimizer", WRONG, "malformed (needs state and param_groups)"))
    else:
        names = ckpt.get("optimizer_param_names")
        if names is None and len(optimizer["param_groups"]) == 1:
            names = _param_names_from_model(cfg)
        problem = _optimizer_shape_problem(optimizer, names, state)
        if problem is None:
            bad = nonfinite_tensors({"optimizer": optimizer, "optimizer_param_names": names})
            problem = f"NaN/Inf in {', '.join(bad)}" if bad else None
        groups = optimizer["param_groups"]
        n_params = sum(len(g.get("params", [])) for g in groups)
        if problem:
            out.append(Component("optimizer", WRONG, problem))
        elif not optimizer["state"] and _is_count(ckpt.get("step")) and ckpt.get("step", 0) > 0:
            out.append(Component("optimizer", WRONG, "no per-parameter state after training steps"))
        else:
            lr = groups[0].get("lr") if groups else None
            out.append(Component("optimizer", OK, f"{len(optimizer['state'])}/{n_params} parameters with state, "
                                                  f"{len(groups)} group(s), lr {lr}"))
    if scheduler is None:
        out.append(Component("scheduler", MISSING, "not recorded"))
    elif not (isinstance(scheduler, Mapping) and "last_epoch" in scheduler):
        out.append(Component("scheduler", WRONG, "malformed (no last_epoch)"))
    else:
        out.append(Component("scheduler", OK, f"at step {scheduler['last_epoch']}"))
    if scaler is None:
        if amp == "fp16" and optimizer is not None:
            out.append(Component("grad scaler", MISSING, "fp16 training without a saved grad scaler"))
        else:
            out.append(Component("grad scaler", OK, "not used (no fp16 grad scaling)"))
    elif not (isinstance(scaler, Mapping) and "scale" in scaler):
        out.append(Component("grad scaler", WRONG, "malformed (no scale)"))
    else:
        out.append(Component("grad scaler", OK, f"scale {scaler['scale']}"))
    return out


def _studio_components(ckpt: dict[str, Any], state: Mapping[str, torch.Tensor] | None) -> tuple[list[Component], dict | None]:
    config_comp, cfg = _check_config(ckpt.get("model_config"), state)
    comps = [_check_weights(state), config_comp, _check_tokenizer(ckpt.get("tokenizer"), cfg)]
    counters = [k for k in ("step", "epoch", "position") if not _is_count(ckpt.get(k))]
    if counters:
        status = MISSING if all(k not in ckpt for k in counters) else WRONG
        comps.append(Component("training counters", status, f"{', '.join(counters)} not recorded as counts"))
    else:
        comps.append(Component("training counters", OK,
                               f"step {ckpt['step']}, epoch {ckpt['epoch']}, position {ckpt['position']}"))
    amp = (ckpt.get("hparams") or {}).get("amp") if isinstance(ckpt.get("hparams"), Mapping) else None
    comps += _check_optimizer_set(ckpt, state, cfg, amp)
    rng = ckpt.get("rng")
    if rng is None:
        comps.append(Component("RNG", MISSING, "not recorded"))
    else:
        problems = check_rng_state(rng)
        comps.append(Component("RNG", WRONG, "; ".join(problems)) if problems else
                     Component("RNG", OK, f"python, numpy, torch CPU, {len(rng.get('torch_cuda') or [])} CUDA"))
    sampler = ckpt.get("sampler")
    if sampler is None:
        comps.append(Component("sampler position", MISSING, f"order not recorded (position {ckpt.get('position')})"))
    elif not isinstance(sampler, Mapping) or not _is_count(ckpt.get("position")):
        comps.append(Component("sampler position", WRONG, "malformed"))
    else:
        comps.append(Component("sampler position", OK, f"epoch {ckpt.get('epoch')}, batch {ckpt.get('position')}"))
    return comps, cfg


def _community_components(ckpt: dict[str, Any], state: Mapping[str, torch.Tensor] | None) -> list[Component]:
    comps = [_check_weights(state), Component("model config", MISSING, "community checkpoints do not record it")]
    extra = ckpt.get("extra") if isinstance(ckpt.get("extra"), Mapping) else {}
    tok = extra.get("tokenizer")
    comps.append(Component("tokenizer record", MISSING, f"path only ({tok}), no sha256" if tok else "not recorded"))
    step, epoch, batch = ckpt.get("step"), ckpt.get("epoch"), ckpt.get("batch_idx")
    if _is_count(step) and _is_count(epoch):
        comps.append(Component("training counters", OK, f"step {step}, next epoch {epoch}"
                                                        + (f", next batch {batch}" if _is_count(batch) else "")))
    else:
        comps.append(Component("training counters", WRONG, "step/epoch not counts"))
    amp = extra.get("amp_dtype")
    comps += _check_optimizer_set(ckpt, state, None, "fp16" if amp in ("float16", "fp16") else amp)
    comps.append(Component("RNG", MISSING, "not recorded" if "rng_state" not in ckpt else "not in this format"))
    comps.append(Component("sampler position", MISSING,
                           f"batch {batch} known, the data order is not" if _is_count(batch) else "not recorded"))
    return comps


def _bare_components(state: Mapping[str, torch.Tensor] | None) -> list[Component]:
    comps = [_check_weights(state)]
    comps += [Component(name, MISSING, "weights-only file") for name in COMPONENTS[1:]]
    return comps


def _target_config(config: str | Path, tokenizer_vocab: int | None, ckpt_cfg: Mapping[str, Any] | None) -> dict:
    from data_tools.config import load_config

    gpt = dict(load_config(config)["gpt"])
    wanted = tokenizer_vocab
    if wanted is None and ckpt_cfg is not None:
        wanted = int(ckpt_cfg.get("number_text_tokens", 0))  # without --tokenizer, allow a grown vocabulary
    if wanted is not None and wanted > int(gpt["number_text_tokens"]):
        gpt["number_text_tokens"] = int(wanted)
    return gpt


def _compatibility(ckpt: dict[str, Any], kind: str, state: Mapping[str, torch.Tensor] | None,
                   tokenizer: str | Path | None, config: str | Path | None,
                   path: Path) -> ValidationReport:
    from trainer.checkpoints.format import tokenizer_record

    report = ValidationReport()
    tok_record = tokenizer_record(tokenizer) if tokenizer is not None else None
    ckpt_cfg = ckpt.get("model_config") if kind == "studio" else None
    gpt = _target_config(config, tok_record["vocab_size"] if tok_record else None, ckpt_cfg) if config else None
    if kind == "studio" and ckpt.get("format_version") == FORMAT_VERSION:
        full = validate_checkpoint(ckpt, Expectation(gpt_config=gpt, tokenizer=tok_record), path)
        report.errors += full.errors
        report.warnings += [w for w in full.warnings if "no optimizer" not in w and "RNG" not in w
                            and "sampler" not in w]
        report.info += full.info
        return report
    if config and state is not None:
        # Weights only: they are a starting point, grown to a larger tokenizer by the trainer, so compare them
        # with the config as written, not with the grown model.
        diffs = shape_differences(state, expected_state_shapes(_target_config(config, None, ckpt_cfg)))
        if diffs:
            report.errors.append(f"weights do not fit --config {config}: " + "; ".join(diffs))
    if tok_record is not None and state is not None and "text_embedding.weight" in state:
        tokens = text_tokens_of_rows(int(state["text_embedding.weight"].shape[0]), gpt or ckpt_cfg)
        if tok_record["vocab_size"] > tokens:
            report.info.append(f"--tokenizer has {tok_record['vocab_size']:,} pieces, the weights "
                               f"{tokens:,} text tokens: the trainer grows the vocabulary when starting from them")
    return report


def verify_checkpoint(path: str | Path, tokenizer: str | Path | None = None,
                      config: str | Path | None = None) -> VerifyReport:
    """Check every component of the checkpoint at ``path`` (and its fit to a tokenizer/config if given)."""
    path = Path(path)
    try:
        digest = check_file_digest(path) if path.is_file() else None
    except OSError:
        digest = None  # load_checkpoint below says why it cannot be read
    if digest is not None and digest.status not in ("ok", ABSENT):
        return VerifyReport(path, "unloadable", INVALID, digest.reason(),
                            components=[_digest_component(digest, {})])
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError as exc:
        reason = str(exc).split(" is not a loadable checkpoint: ", 1)[-1]
        if "could run code" in reason and is_community_latest(path):
            reason = ("a community trainer's latest.pth: it holds numpy/TorchVersion objects that weights-only "
                      "loading refuses; `python -m trainer.checkpoints repair` converts it (still weights-only, "
                      "with a data-only allow-list)")
        return VerifyReport(path, "unloadable", INVALID, reason)
    kind = checkpoint_kind(ckpt)
    state = model_state_of(ckpt)
    report = VerifyReport(path, kind, PARTIAL)
    if kind == "unknown":
        keys = ", ".join(sorted(map(str, ckpt))[:8]) or "none"
        report.verdict = INVALID
        report.reason = f"not a checkpoint of this trainer nor an IndexTTS model (top-level keys: {keys})"
        return report
    if kind == "s2mel":
        return _verify_s2mel(report, ckpt, digest)
    if kind == "studio":
        version = ckpt.get("format_version")
        if _is_count(version) and version > FORMAT_VERSION:
            report.verdict = INVALID
            report.reason = (f"format version {version} is newer than this project reads ({FORMAT_VERSION}): "
                             "update the project")
            return report
        if version == 1 and "position" not in ckpt:  # format 1 called the position batch_idx
            ckpt = {**ckpt, "position": ckpt.get("batch_idx")}
        report.components, _ = _studio_components(ckpt, state)
    elif kind == "community":
        report.components = _community_components(ckpt, state)
    else:
        report.components = _bare_components(state)
    if kind != "bare":
        report.components.append(_digest_component(digest, ckpt))
    lost_digest = integrity_problem(digest, ckpt) if digest is not None else None
    if lost_digest:
        report.verdict = INVALID
        report.reason = lost_digest
        return report
    weights = report.component("model weights")
    if weights.status != OK:
        report.verdict = INVALID
        report.reason = f"model weights {weights.status}: {weights.detail}"
        return report
    report.lost = [COSTS[c.name] if c.status == MISSING else f"{c.name} wrong ({c.detail})"
                   for c in report.components if c.status != OK and c.name in COSTS]
    report.usable_as = ["--base-checkpoint", "--init-from"]
    if kind == "bare":
        report.reason = "a bare model (weights only): usable as --base-checkpoint or --init-from, not resumable"
        report.lost = ["everything but the weights: not resumable (use --base-checkpoint or --init-from)"]
    elif kind == "community":
        report.reason = ("written by a community IndexTTS trainer: run `python -m trainer.checkpoints repair` "
                         "to resume from it")
    else:
        structural = validate_checkpoint(ckpt, None, path)
        version = ckpt.get("format_version")
        if version != FORMAT_VERSION:
            report.reason = f"older format version {version}: run `python -m trainer.checkpoints repair` to upgrade"
        elif not report.lost and structural.ok:
            report.verdict = COMPLETE
            report.usable_as.insert(0, "--resume")
        elif structural.ok:
            report.usable_as.insert(0, "--resume (not bit-exact)")
            report.reason = "resumable, not exactly"
        else:
            report.reason = structural.message()
    if tokenizer is not None or config is not None:
        report.compatibility = _compatibility(ckpt, kind, state, tokenizer, config, path)
    report.details = {"step": ckpt.get("step"), "epoch": ckpt.get("epoch"),
                      "val_loss": _float_or_none(ckpt.get("last_val_loss"))}
    return report


def _verify_s2mel(report: VerifyReport, ckpt: dict[str, Any], digest: DigestCheck | None) -> VerifyReport:
    """An S2Mel run's checkpoint: its digest and finite weights; resumable by its run, exportable."""
    from trainer.checkpoints.digest import nonfinite_reason, nonfinite_tensors

    report.components = [_digest_component(digest, ckpt)]
    problem = (integrity_problem(digest, ckpt) if digest is not None else None) or (
        nonfinite_reason(bad) if (bad := nonfinite_tensors(ckpt)) else None)
    if problem:
        report.verdict, report.reason = INVALID, problem
        return report
    part = "net" if ckpt.get("mode") == "full" else "adapter"
    report.components.append(Component("S2Mel weights", OK if ckpt.get(part) else MISSING,
                                       f"{ckpt.get('mode')} fine-tune, step {ckpt.get('step')}"))
    report.verdict = COMPLETE if ckpt.get(part) else INVALID
    report.reason = ("an S2Mel run checkpoint: resumes with --train s2mel in its --output-dir; export writes "
                     "s2mel.pth (or the adapter)") if ckpt.get(part) else f"S2Mel checkpoint without its {part}"
    report.usable_as = ["--train s2mel (resume)", "trainer.synthesize --s2mel"] if ckpt.get(part) else []
    report.details = {"step": ckpt.get("step"), "epoch": ckpt.get("epoch"), "val_loss": None}
    return report


def _digest_component(digest: DigestCheck | None, ckpt: Mapping[str, Any]) -> Component:
    if digest is None:
        return Component("content digest", MISSING, "file not checked")
    if digest.status == "ok":
        speed = f", {digest.mb_per_s:,.0f} MB/s" if digest.mb_per_s else ""
        return Component("content digest", OK, f"{ALGORITHM} {digest.recorded[:12]}… matches "
                                               f"({digest.bytes_hashed:,} bytes{speed})")
    if digest.status == ABSENT:
        if declares_digest(ckpt):
            return Component("content digest", WRONG, "recorded at save, missing from the file (torn)")
        return Component("content digest", MISSING, "written before content digests: integrity cannot be proven")
    return Component("content digest", WRONG, digest.reason())


def is_community_latest(path: Path) -> bool:
    """``path`` is a community trainer's latest.pth (loads only with the numpy/TorchVersion allow-list)."""

    try:
        ckpt, allow_listed = load_for_repair(path)
    except CheckpointError:
        return False
    return allow_listed and checkpoint_kind(ckpt) == "community"


def _float_or_none(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(float(value)):
        return float(value)
    return None
