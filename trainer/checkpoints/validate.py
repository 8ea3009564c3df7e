"""Validation before restore: the ONE check the trainer, pre-flight, the toolkit and the UI all use.

``validate_checkpoint(ckpt, expectation)`` returns errors (refuse), warnings (say, then go on with the
new values) and info lines. Without an expectation only the checkpoint's own soundness is checked.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoints.format import (
    FORMAT_VERSION,
    REQUIRED_KEYS,
    bare_model_message,
    checkpoint_kind,
    community_message,
)
from trainer.checkpoints.rng import check_rng_state

# gpt config keys that do not change the model's parameters (runtime switches).
NON_STRUCTURAL_GPT_KEYS = frozenset({"checkpointing"})

# Options whose change between runs is not worth a warning (paths are compared by content instead).
UNCOMPARED_HPARAMS = frozenset({
    "resume", "output_dir", "preflight", "preflight_json", "preflight_processes", "device", "num_workers",
    "log_interval", "val_interval", "save_interval", "keep_checkpoints", "train_manifest", "val_manifest",
    "tokenizer", "config", "base_checkpoint", "init_from", "max_val_batches", "text_merges", "sharding",
    # when to stop, never what is computed: a resume without them stays bitwise exact
    "stop_on_forgetting", "max_nonfinite_steps", "collective_timeout",
})


@dataclass
class Expectation:
    """What the run about to start expects of a checkpoint (every field optional).

    - ``gpt_config``: the effective gpt config of the model being built (after vocabulary growth)
    - ``tokenizer``: ``tokenizer_record(--tokenizer)``; ``base_vocab_size``: the base model's text vocab
    - ``manifests``: ``manifests_record(train, val)``; ``hparams``: the run's resolved options
    """

    gpt_config: Mapping[str, Any] | None = None
    tokenizer: Mapping[str, Any] | None = None
    base_vocab_size: int | None = None
    manifests: Mapping[str, Any] | None = None
    hparams: Mapping[str, Any] | None = None

    def expected_shapes(self) -> dict[str, tuple[int, ...]] | None:
        if self.gpt_config is None:
            return None
        return expected_state_shapes(self.gpt_config)


def expected_state_shapes(gpt_config: Mapping[str, Any]) -> dict[str, tuple[int, ...]]:
    """Keys and shapes of the model a gpt config builds (built on the meta device: no memory, fast)."""
    from generations.registry import build_gpt

    with torch.device("meta"):
        model = build_gpt(dict(gpt_config))
    return {name: tuple(t.shape) for name, t in model.state_dict().items()}


@dataclass
class ValidationReport:
    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def message(self) -> str:
        """The errors as one line (for ``error: ...``)."""
        return "; ".join(self.errors)


    def to_dict(self) -> dict[str, list[str]]:
        return {"errors": list(self.errors), "warnings": list(self.warnings), "info": list(self.info)}


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return repr(value) if isinstance(value, str) else str(value)


def _short_hash(value: Any) -> str:
    return f"{value[:8]}…" if isinstance(value, str) and value else "unknown"


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def check_structure(ckpt: Any, path: str | Path | None = None) -> ValidationReport:
    """The checkpoint's own soundness: ours, current format, required keys, well-formed state."""
    report = ValidationReport()
    where = path if path is not None else "this checkpoint"
    kind = checkpoint_kind(ckpt)
    if kind == "bare":
        report.errors.append(bare_model_message(where))
        return report
    if kind == "community":
        report.errors.append(community_message(where))
        return report
    if kind != "studio":
        keys = ", ".join(sorted(map(str, ckpt))[:8]) if isinstance(ckpt, dict) else type(ckpt).__name__
        report.errors.append(f"{where} is not a checkpoint of this trainer (top-level keys: {keys or 'none'})")
        return report
    version = ckpt.get("format_version")
    if not _is_count(version):
        report.errors.append(f"format version is {version!r}, not a number")
        return report
    if version < FORMAT_VERSION:
        report.errors.append(
            f"checkpoint format version {version} is older than this trainer's ({FORMAT_VERSION}): upgrade it with "
            f"`python -m trainer.checkpoints repair {where} --out NEW.pth` and resume from NEW.pth")
        return report
    if version > FORMAT_VERSION:
        report.errors.append(f"checkpoint format version {version} was written by a newer version of this "
                             f"project (this one reads {FORMAT_VERSION}): update the project")
        return report
    missing = [key for key in REQUIRED_KEYS if key not in ckpt]
    if missing:
        report.errors.append(f"checkpoint is incomplete: missing {', '.join(missing)}")
        return report
    model = ckpt["model"]
    if not isinstance(model, dict) or not model or not all(isinstance(v, torch.Tensor) for v in model.values()):
        report.errors.append("model weights are missing or not a state dict of tensors")
    for key in ("epoch", "position", "step"):
        if not _is_count(ckpt[key]):
            report.errors.append(f"{key} is {ckpt[key]!r}, not a non-negative integer")
    optimizer, scheduler, scaler = ckpt["optimizer"], ckpt["scheduler"], ckpt["scaler"]
    if optimizer is None:
        if scheduler is not None or scaler is not None:
            report.errors.append("scheduler/scaler state without optimizer state (they are restored as one set)")
        else:
            report.warnings.append("no optimizer state: optimizer, scheduler and grad scaler start fresh")
    else:
        if not (isinstance(optimizer, dict) and "state" in optimizer and "param_groups" in optimizer):
            report.errors.append("optimizer state is malformed (needs 'state' and 'param_groups')")
        if not isinstance(scheduler, dict):
            report.errors.append("optimizer state present but scheduler state missing (they are one set)")
        if scaler is not None and not isinstance(scaler, dict):
            report.errors.append("grad scaler state is malformed")
    if ckpt["rng"] is None:
        report.warnings.append("no RNG state: resume will not be bit-exact")
    else:
        problems = check_rng_state(ckpt["rng"])
        if problems:
            report.errors.append("RNG state is malformed: " + "; ".join(problems))
    if ckpt["sampler"] is None:
        report.warnings.append("no sampler state: the data order of the current epoch is not the original one")
    elif not isinstance(ckpt["sampler"], dict):
        report.errors.append("sampler state is malformed (expected a dict)")
    if not isinstance(ckpt["model_config"], dict):
        report.errors.append("model config is missing")
    if report.ok:
        report.info.append(f"step {ckpt['step']}, epoch {ckpt['epoch']}, position {ckpt['position']}")
    return report


def _config_differences(saved: Mapping[str, Any], wanted: Mapping[str, Any]) -> list[str]:
    diffs: list[str] = []
    for key in sorted(set(saved) | set(wanted)):
        if key in NON_STRUCTURAL_GPT_KEYS:
            continue
        a, b = saved.get(key, "<absent>"), wanted.get(key, "<absent>")
        if a != b:
            diffs.append(f"{key} {_fmt(a)} (checkpoint) vs {_fmt(b)} (now)")
    return diffs


def shape_differences(state: Mapping[str, Any], expected: Mapping[str, tuple[int, ...]], limit: int = 4) -> list[str]:
    from networks.unified_voice import INFERENCE_ONLY_PREFIXES

    present = {k: v for k, v in state.items() if not k.startswith(INFERENCE_ONLY_PREFIXES)}
    missing = sorted(set(expected) - set(present))
    unexpected = sorted(set(present) - set(expected))
    diffs: list[str] = []
    if missing:
        more = f" (+{len(missing) - limit} more)" if len(missing) > limit else ""
        diffs.append(f"missing {len(missing)} key(s): {', '.join(missing[:limit])}{more}")
    if unexpected:
        more = f" (+{len(unexpected) - limit} more)" if len(unexpected) > limit else ""
        diffs.append(f"{len(unexpected)} unexpected key(s): {', '.join(unexpected[:limit])}{more}")
    wrong = [f"{k} {list(present[k].shape)} (checkpoint) vs {list(expected[k])} (model)"
             for k in sorted(set(present) & set(expected))
             if isinstance(present[k], torch.Tensor) and tuple(present[k].shape) != tuple(expected[k])]
    if wrong:
        more = f" (+{len(wrong) - limit} more)" if len(wrong) > limit else ""
        diffs.append("; ".join(wrong[:limit]) + more)
    return diffs


def _manifest_changes(saved: Any, wanted: Mapping[str, Any]) -> list[str]:
    changes: list[str] = []
    if not isinstance(saved, Mapping):
        return ["the checkpoint does not record its manifests: cannot tell whether the data changed"]
    for split in ("train", "val"):
        old = {str(r.get("path")): r for r in saved.get(split) or [] if isinstance(r, Mapping)}
        new = {str(r.get("path")): r for r in wanted.get(split) or [] if isinstance(r, Mapping)}
        old_hashes = sorted(str(r.get("sha256")) for r in old.values())
        new_hashes = sorted(str(r.get("sha256")) for r in new.values())
        if set(old) == set(new) and old_hashes == new_hashes and None not in (r.get("sha256") for r in old.values()):
            continue
        if old_hashes == new_hashes and all(r.get("sha256") for r in old.values()):
            continue  # same content, moved: not a change
        parts: list[str] = []
        for name in sorted(set(old) | set(new)):
            a, b = old.get(name), new.get(name)
            if a is None:
                parts.append(f"{name} added")
            elif b is None:
                parts.append(f"{name} removed")
            elif a.get("sha256") is None:
                if a.get("lines") != b.get("lines"):
                    parts.append(f"{name} {_fmt(a.get('lines'))} -> {_fmt(b.get('lines'))} lines")
            elif a.get("sha256") != b.get("sha256"):
                detail = (f"{_fmt(a.get('lines'))} -> {_fmt(b.get('lines'))} lines"
                          if a.get("lines") != b.get("lines") else "content differs")
                parts.append(f"{name} ({detail})")
        if parts:
            changes.append(f"{split} manifests changed since the checkpoint: {'; '.join(parts)}")
    if changes:
        changes[-1] += " (the epoch position refers to the old data; training goes on with the new data)"
    return changes


def _hparam_changes(saved: Any, wanted: Mapping[str, Any]) -> list[str]:
    if not isinstance(saved, Mapping):
        return []
    diffs = []
    for key in sorted(set(saved) & set(wanted)):
        if key in UNCOMPARED_HPARAMS:
            continue
        a, b = saved[key], wanted[key]
        if isinstance(a, float) and isinstance(b, (int, float)) and math.isclose(a, float(b), rel_tol=1e-12):
            continue
        if isinstance(a, tuple):
            a = list(a)
        if isinstance(b, tuple):
            b = list(b)
        if a != b:
            diffs.append(f"{key} {_fmt(a)} -> {_fmt(b)}")
    if not diffs:
        return []
    return ["hyper-parameters changed since the checkpoint (new values are used): " + ", ".join(diffs)
            + "; the run goes on from the same samples, but bitwise exactness with an uninterrupted run is lost"]


def _tokenizer_problems(saved: Any, wanted: Mapping[str, Any], where: str) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    warnings: list[str] = []
    if not isinstance(saved, Mapping):
        warnings.append("the checkpoint does not record its tokenizer: it cannot be checked against --tokenizer")
        return errors, warnings
    scheme_error = _text_scheme_problem(saved.get("text_scheme"), wanted.get("text_scheme"), where)
    if scheme_error and saved.get("sha256") == wanted.get("sha256"):  # same 2.5 table, another scheme
        return [scheme_error], warnings
    saved_sha, saved_vocab = saved.get("sha256"), saved.get("vocab_size")
    new_sha, new_vocab = wanted.get("sha256"), wanted.get("vocab_size")
    differs = (saved_sha is not None and new_sha is not None and saved_sha != new_sha) or (
        saved_vocab is not None and new_vocab is not None and saved_vocab != new_vocab)
    if differs:
        errors.append(
            f"tokenizer differs: checkpoint sha256 {_short_hash(saved_sha)} (vocab {_fmt(saved_vocab)}) vs "
            f"--tokenizer {_short_hash(new_sha)} (vocab {_fmt(new_vocab)}); resume with the tokenizer the run "
            f"was trained with ({saved.get('path', 'path not recorded')}), or to continue from these weights "
            f"with the new tokenizer use --init-from {where}")
    elif saved_sha is None:
        warnings.append("the checkpoint does not record the tokenizer's sha256: only its vocabulary size was checked")
    if scheme_error and not differs:
        errors.append(scheme_error)
    return errors, warnings


def _text_scheme_problem(saved: Any, wanted: Any, where: str) -> str | None:
    """IndexTTS-2.5: the text scheme (and its merges) must be the one the run was trained with."""
    if not isinstance(wanted, Mapping):
        return None
    if not isinstance(saved, Mapping):
        return (f"the checkpoint does not record an IndexTTS-2.5 text scheme, this run uses '{wanted.get('scheme')}'; "
                f"to continue from these weights use --init-from {where}")
    keys = ("scheme", "merges_sha256", "added_tokens")
    if all(saved.get(key) == wanted.get(key) for key in keys):
        return None
    return (f"text scheme differs: the checkpoint was trained with the '{saved.get('scheme')}' scheme "
            f"({saved.get('added_tokens')} added tokens, merges sha256 {_short_hash(saved.get('merges_sha256') or None)}), "
            f"this run uses '{wanted.get('scheme')}' ({wanted.get('added_tokens')} added tokens, merges sha256 "
            f"{_short_hash(wanted.get('merges_sha256') or None)}): resume with --text-scheme {saved.get('scheme')}")


def validate_checkpoint(ckpt: Any, expectation: Expectation | None = None,
                        path: str | Path | None = None) -> ValidationReport:
    """Check ``ckpt`` (a loaded dict) before restoring it; ``path`` only names it in messages."""
    report = check_structure(ckpt, path)
    if not report.ok or expectation is None:
        return report
    where = str(path) if path is not None else "<checkpoint>"
    if expectation.gpt_config is not None and isinstance(ckpt.get("model_config"), Mapping):
        diffs = _config_differences(ckpt["model_config"], expectation.gpt_config)
        if diffs:
            report.errors.append(
                "model config differs from the model being built: " + ", ".join(diffs[:6])
                + ("…" if len(diffs) > 6 else "")
                + f"; use the --config the run was trained with, or start a new run from these weights with "
                  f"--init-from {where}")
    shapes = expectation.expected_shapes()
    if shapes is not None:
        diffs = shape_differences(ckpt["model"], shapes)
        if diffs:
            report.errors.append("model weights do not fit the model being built: " + "; ".join(diffs))
    if expectation.tokenizer is not None:
        errors, warnings = _tokenizer_problems(ckpt.get("tokenizer"), expectation.tokenizer, where)
        report.errors.extend(errors)
        report.warnings.extend(warnings)
    saved_base = ckpt.get("base_vocab_size")
    if expectation.base_vocab_size is not None and saved_base is not None \
            and int(saved_base) != int(expectation.base_vocab_size):
        report.errors.append(f"base vocabulary size differs: {_fmt(saved_base)} (checkpoint) vs "
                             f"{_fmt(expectation.base_vocab_size)} (base checkpoint/config now)")
    if expectation.manifests is not None:
        report.warnings.extend(_manifest_changes(ckpt.get("manifests"), expectation.manifests))
    if expectation.hparams is not None:
        report.warnings.extend(_hparam_changes(ckpt.get("hparams"), expectation.hparams))
    return report
