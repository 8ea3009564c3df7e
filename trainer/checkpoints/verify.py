"""``verify``: is a checkpoint whole, what would resuming from it lose, and does it fit a tokenizer/config?

Verdicts: COMPLETE (exact resume possible), PARTIAL (weights usable, exact resume not: ``lost`` says
what is lost), INVALID (not loadable, or not a model: ``reason`` says why). Exit codes of the CLI:
0 COMPLETE, 1 PARTIAL, 2 INVALID or incompatible with the given --tokenizer/--config. The report's shape is
``trainer.checkpoints.verify_report``; the per-component checks are ``trainer.checkpoints.verify_components``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from networks.gpt_config import text_tokens_of_rows
from trainer.checkpoints.community_load import load_for_repair
from trainer.checkpoints.digest import (
    ABSENT,
    DigestCheck,
    check_file_digest,
    integrity_problem,
)
from trainer.checkpoints.format import FORMAT_VERSION, CheckpointError, checkpoint_kind, model_state_of
from trainer.checkpoints.loading import load_checkpoint
from trainer.checkpoints.nonfinite import nonfinite_tensors
from trainer.checkpoints.validate import (
    Expectation,
    ValidationReport,
    expected_state_shapes,
    shape_differences,
    validate_checkpoint,
)
from trainer.checkpoints.verify_components import (
    bare_components,
    community_components,
    digest_component,
    is_count,
    studio_components,
)
from trainer.checkpoints.verify_report import (
    COMPLETE,
    COSTS,
    INVALID,
    MISSING,
    OK,
    PARTIAL,
    Component,
    VerifyReport,
)


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
                            components=[digest_component(digest, {})])
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
        if is_count(version) and version > FORMAT_VERSION:
            report.verdict = INVALID
            report.reason = (f"format version {version} is newer than this project reads ({FORMAT_VERSION}): "
                             "update the project")
            return report
        if version == 1 and "position" not in ckpt:  # format 1 called the position batch_idx
            ckpt = {**ckpt, "position": ckpt.get("batch_idx")}
        report.components, _ = studio_components(ckpt, state)
    elif kind == "community":
        report.components = community_components(ckpt, state)
    else:
        report.components = bare_components(state)
    if kind != "bare":
        report.components.append(digest_component(digest, ckpt))
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
    from trainer.checkpoints.nonfinite import nonfinite_reason

    report.components = [digest_component(digest, ckpt)]
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
