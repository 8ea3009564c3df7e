"""Pre-flight: every check the trainer makes before its first step, without training.

``run_preflight(values)`` takes the trainer's option values (``trainer.options.parse_argv``) and returns a
``PreflightReport``; ``python -m trainer.train --preflight <flags>`` prints it (exit 0 or 2) and the UI
shows the same structure. Checks that depend on a failed one (e.g. the resume target needs a valid
tokenizer and config) are left out rather than reported as extra failures. Nothing here writes to the
output directory or takes its lock.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CHECKPOINTS_OF_HEADROOM = 3


@dataclass
class Check:
    name: str
    ok: bool
    message: str


@dataclass
class PreflightReport:
    checks: list[Check] = field(default_factory=list)
    resume_step: int | None = None
    resume_epoch: int | None = None
    resume_position: int | None = None
    resume_path: Path | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    def add(self, name: str, ok: bool, message: str) -> bool:
        self.checks.append(Check(name, ok, message))
        return ok

    def lines(self) -> list[str]:
        return [f"[{'ok' if c.ok else 'FAIL'}] {c.name}: {c.message}" for c in self.checks]

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], "resume_step": self.resume_step,
                "resume_epoch": self.resume_epoch, "resume_position": self.resume_position,
                "resume_path": None if self.resume_path is None else str(self.resume_path)}


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _gib(count: float) -> str:
    return f"{count / (1 << 30):.2f} GiB" if count >= (1 << 27) else f"{count / (1 << 20):.1f} MiB"


def _check_manifests(values: dict[str, Any], report: PreflightReport) -> dict[str, list[Any]] | None:
    from data_tools.manifest import ManifestError, read_manifest

    train, val = list(values.get("train_manifest") or []), list(values.get("val_manifest") or [])
    if not train:
        report.add("manifests", False, "no --train-manifest given")
        return None
    counts: list[str] = []
    entries: dict[str, list[Any]] = {"train": [], "val": []}
    try:
        for split, paths in (("train", train), ("val", val)):
            seen: dict[str, str] = {}
            for path in paths:
                for entry in read_manifest(path):
                    if entry.id in seen:
                        raise ManifestError(entry.manifest, entry.line,
                                            f"duplicate id '{entry.id}' (also at {seen[entry.id]})")
                    seen[entry.id] = entry.where
                    for what, file in (("codes", entry.codes), ("cond_mel", entry.cond_mel),
                                       ("cond_audio", entry.cond_audio)):
                        if file is not None and not file.is_file():
                            raise ManifestError(entry.manifest, entry.line, f"{what} file not found: {file}")
                    entries[split].append(entry)
            if paths:
                counts.append(f"{split} {len(entries[split]):,} items in {len(paths)} file(s)")
    except ManifestError as exc:
        report.add("manifests", False, str(exc))
        return None
    if not val:
        counts.append("no validation manifest (no validation, best.pth never written)")
    report.add("manifests", True, "; ".join(counts))
    return entries


def _check_tokenizer(values: dict[str, Any], report: PreflightReport) -> Any:
    from data_tools.text_tokenizer import TextTokenizer, TokenizerError

    if not values.get("tokenizer"):
        report.add("tokenizer", False, "no --tokenizer given")
        return None
    try:
        tokenizer = TextTokenizer(values["tokenizer"])
        tokenizer.encode("preflight")
    except (TokenizerError, OSError, RuntimeError) as exc:
        report.add("tokenizer", False, _one_line(exc))
        return None
    report.add("tokenizer", True, f"{values['tokenizer']}: {tokenizer.vocab_size:,} pieces, sha256 "
                                  f"{tokenizer.sha256[:12]}…")
    return tokenizer


def _check_config(values: dict[str, Any], report: PreflightReport) -> dict[str, Any] | None:
    from data_tools.config import ConfigError, load_config
    from trainer.checkpoints import expected_state_shapes

    if not values.get("config"):
        report.add("config", False, "no --config given")
        return None
    try:
        config = load_config(values["config"])
        expected_state_shapes(config["gpt"])  # the model constructor accepts it
    except ConfigError as exc:
        report.add("config", False, _one_line(exc))
        return None
    except (KeyError, TypeError, ValueError) as exc:
        report.add("config", False, f"{values['config']}: the gpt section does not build a model ({_one_line(exc)})")
        return None
    gpt = config["gpt"]
    report.add("config", True, f"{values['config']}: {gpt['layers']} layers, dim {gpt['model_dim']}, "
                               f"{gpt['number_text_tokens']:,} text tokens")
    return config


def _check_data(values: dict[str, Any], gpt: dict[str, Any], tokenizer: Any, report: PreflightReport) -> None:
    """The trainer's own item loading: tokenize, length limits, what would be dropped."""
    from data_tools.manifest import ManifestError
    from trainer.data import load_items

    limits = (int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]))
    parts: list[str] = []
    try:
        for split in ("train", "val"):
            paths = values.get(f"{split}_manifest") or []
            if not paths:
                continue
            items, dropped = load_items(paths, tokenizer, *limits, name=split)
            if split == "train" and not items:
                report.add("data", False, "no training items left after dropping the ones beyond the model's "
                                          "limits: " + " ".join(dropped.lines(split, *limits)))
                return
            extra = f" ({dropped.dropped:,} dropped: beyond the model's limits or empty)" if dropped.dropped else ""
            parts.append(f"{split} {len(items):,} items usable{extra}")
    except (ManifestError, OSError, ValueError) as exc:
        report.add("data", False, _one_line(exc))
        return
    report.add("data", True, "; ".join(parts))


def _check_weights_file(name: str, flag: str, path: Path, config: dict[str, Any], config_path: str,
                        tokenizer: Any, report: PreflightReport) -> None:
    """--base-checkpoint / --init-from: loads safely and fits --config (a grown vocabulary is fine).

    As in ``trainer.model_source``: a base checkpoint must match --config exactly; --init-from of one of
    our checkpoints is checked against the model config it records.
    """
    from trainer.checkpoints import (
        CheckpointError,
        checkpoint_kind,
        expected_state_shapes,
        load_checkpoint,
        model_state_of,
    )
    from trainer.checkpoints.validate import shape_differences

    try:
        ckpt = load_checkpoint(path, mmap=True)
    except CheckpointError as exc:
        report.add(name, False, f"{flag}: {_one_line(exc)}")
        return
    state = model_state_of(ckpt)
    kind = checkpoint_kind(ckpt)
    if state is None:
        report.add(name, False, f"{flag} {path} holds no model weights")
        return
    gpt = dict(config["gpt"])
    weight = state.get("text_embedding.weight")
    own_config = flag == "--init-from" and kind == "studio" and isinstance(ckpt.get("model_config"), dict)
    if own_config:
        gpt = dict(ckpt["model_config"])
    if weight is None:
        report.add(name, False, f"{flag} {path} has no text_embedding.weight: not an IndexTTS GPT checkpoint")
        return
    rows = int(weight.shape[0])
    expected_rows = int(gpt["number_text_tokens"]) * int(gpt.get("types", 1)) + 1
    if not own_config and rows != expected_rows:
        report.add(name, False, f"--config {config_path} does not match {flag} {path}: gpt.number_text_tokens "
                                f"{gpt['number_text_tokens']} means {expected_rows} text rows, the checkpoint has "
                                f"{rows}; use the config.yaml that came with the checkpoint")
        return
    diffs = shape_differences(state, expected_state_shapes(gpt))
    if diffs:
        report.add(name, False, f"{flag} {path} does not fit the model of --config: " + "; ".join(diffs))
        return
    tokens = rows - 1
    grow = ""
    if tokenizer is not None and tokenizer.vocab_size > tokens:
        grow = f"; the text vocabulary grows {tokens:,} -> {tokenizer.vocab_size:,} for --tokenizer"
    report.add(name, True, f"{flag} {path}: {kind} weights fit --config ({len(state)} tensors){grow}")


def expectation_for_run(values: dict[str, Any], config: dict[str, Any], tokenizer: Any) -> Any:
    """The Expectation the trainer validates a resume target against (same inputs as trainer.train)."""
    from trainer.checkpoints import Expectation, manifests_record, tokenizer_record
    from trainer.model_source import target_gpt_config
    from trainer.options import resolved_config

    return Expectation(
        gpt_config=target_gpt_config(config["gpt"], tokenizer),
        tokenizer=tokenizer_record(values["tokenizer"], tokenizer.sha256, tokenizer.vocab_size),
        base_vocab_size=int(config["gpt"]["number_text_tokens"]) if values.get("base_checkpoint") else None,
        manifests=manifests_record(values.get("train_manifest") or [], values.get("val_manifest") or []),
        hparams=resolved_config(values))


def _check_resume(values: dict[str, Any], config: dict[str, Any], tokenizer: Any, report: PreflightReport) -> None:
    from trainer.checkpoints import CheckpointError, checkpoint_files_exist, select_resume

    out_dir = Path(values["output_dir"])
    resume = str(values.get("resume") or "").strip()
    if not resume:
        if checkpoint_files_exist(out_dir):
            report.add("resume", False, f"output dir {out_dir} already holds checkpoints of a run: continue it with "
                                        "--resume auto, or start a new run in a new --output-dir")
        else:
            report.add("resume", True, "fresh start at step 0 (no --resume)")
        return
    try:
        choice = select_resume(out_dir, resume, expectation_for_run(values, config, tokenizer), mmap=True)
    except CheckpointError as exc:
        report.add("resume", False, _one_line(exc))
        return
    if choice is None:
        report.add("resume", True, f"--resume auto: no checkpoint in {out_dir} yet: fresh start at step 0")
        return
    ckpt = choice.checkpoint
    report.resume_step, report.resume_epoch = int(ckpt["step"]), int(ckpt["epoch"])
    report.resume_position, report.resume_path = int(ckpt["position"]), choice.path
    message = (f"will resume from step {report.resume_step}, epoch {report.resume_epoch}, position "
               f"{report.resume_position} ({choice.path})")
    if choice.notes:
        message += "; " + "; ".join(f"warning: {note}" for note in choice.notes)
    report.add("resume", True, message)


def _nearest_existing(path: Path) -> Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_output_dir(values: dict[str, Any], report: PreflightReport) -> bool:
    from trainer.checkpoints import lock_holder

    if not values.get("output_dir"):
        return report.add("output directory", False, "no --output-dir given")
    out_dir = Path(values["output_dir"])
    if out_dir.exists() and not out_dir.is_dir():
        return report.add("output directory", False, f"--output-dir {out_dir} exists and is not a directory")
    probe_dir = out_dir if out_dir.is_dir() else _nearest_existing(out_dir)
    if not probe_dir.is_dir():
        return report.add("output directory", False, f"--output-dir {out_dir}: {probe_dir} is not a directory")
    try:
        with tempfile.NamedTemporaryFile(dir=probe_dir, prefix=".preflight-", delete=True):
            pass
    except OSError as exc:
        return report.add("output directory", False, f"--output-dir {out_dir} is not writable "
                                                     f"({exc.strerror or exc} in {probe_dir})")
    holder = lock_holder(out_dir)
    if holder is not None:
        who = f"PID {holder}" if holder else "another process"
        return report.add("output directory", False, f"output dir {out_dir} is in use by {who} (a trainer is "
                                                     "running there)")
    state = "exists" if out_dir.is_dir() else f"will be created under {probe_dir}"
    return report.add("output directory", True, f"{out_dir} {state}, writable, not in use")


def checkpoint_size_estimate(parameters: int) -> int:
    """Bytes of one training checkpoint: fp32 weights + AdamW's two fp32 moments, plus a little metadata."""
    return parameters * 4 * 3 + (1 << 20)


def _check_disk(values: dict[str, Any], gpt: dict[str, Any], report: PreflightReport) -> None:
    from trainer.checkpoints import expected_state_shapes

    shapes = expected_state_shapes(gpt)
    parameters = sum(int(_numel(shape)) for shape in shapes.values())
    per_checkpoint = checkpoint_size_estimate(parameters)
    needed = per_checkpoint * CHECKPOINTS_OF_HEADROOM
    where = _nearest_existing(Path(values["output_dir"]))
    free = shutil.disk_usage(where).free
    message = (f"{_gib(free)} free at {where}; {CHECKPOINTS_OF_HEADROOM} checkpoints need ~{_gib(needed)} "
               f"(~{_gib(per_checkpoint)} each: {parameters:,} parameters, weights + 2 AdamW moments)")
    report.add("disk space", free >= needed, message if free >= needed else "not enough disk: " + message)


def _numel(shape: tuple[int, ...]) -> int:
    total = 1
    for size in shape:
        total *= int(size)
    return total


def _check_device(values: dict[str, Any], report: PreflightReport) -> None:
    from trainer import loop
    from trainer.errors import UsageError

    try:
        device = loop.resolve_device(str(values.get("device") or "auto"))
        loop.check_amp(str(values.get("amp") or "off"), device)
    except UsageError as exc:
        report.add("device", False, _one_line(exc))
        return
    report.add("device", True, f"{device}, amp {values.get('amp') or 'off'}")


def run_preflight(values: dict[str, Any]) -> PreflightReport:
    """Run every pre-start check on the trainer's option ``values`` (never raises for bad input)."""
    report = PreflightReport()
    entries = _check_manifests(values, report)
    tokenizer = _check_tokenizer(values, report)
    config = _check_config(values, report)
    _check_device(values, report)
    if config is not None and tokenizer is not None and entries is not None:
        from trainer.model_source import target_gpt_config

        _check_data(values, target_gpt_config(config["gpt"], tokenizer), tokenizer, report)
    if config is not None:
        for name, flag in (("base checkpoint", "base_checkpoint"), ("init from", "init_from")):
            if values.get(flag):
                path = Path(values[flag])
                _check_weights_file(name, "--" + flag.replace("_", "-"), path, config, str(values["config"]),
                                    tokenizer, report)
    dir_ok = _check_output_dir(values, report)
    if config is not None and tokenizer is not None and values.get("output_dir"):
        _check_resume(values, config, tokenizer, report)
    if config is not None and dir_ok:
        from trainer.model_source import target_gpt_config

        gpt = target_gpt_config(config["gpt"], tokenizer) if tokenizer is not None else config["gpt"]
        _check_disk(values, gpt, report)
    return report
