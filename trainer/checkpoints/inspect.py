"""``inspect``: what a checkpoint holds (counters, losses, hyper-parameters, sizes, versions, time)."""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from trainer.checkpoints.digest import ALGORITHM, declares_digest, read_trailer
from trainer.checkpoints.format import checkpoint_kind, model_state_of
from trainer.checkpoints.loading import load_checkpoint


def _tensor_bytes(value: Any) -> int:
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, Mapping):
        return sum(_tensor_bytes(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(_tensor_bytes(v) for v in value)
    return 0


def inspect_checkpoint(path: str | Path) -> dict[str, Any]:
    """A plain dict describing the checkpoint at ``path`` (raises CheckpointError if it does not load)."""
    path = Path(path)
    ckpt = load_checkpoint(path)
    stat = path.stat()
    kind = checkpoint_kind(ckpt)
    state = model_state_of(ckpt) or {}
    extra = ckpt.get("extra") if isinstance(ckpt.get("extra"), Mapping) else {}
    optimizer = ckpt.get("optimizer") if isinstance(ckpt.get("optimizer"), Mapping) else None
    trailer = read_trailer(path)
    info: dict[str, Any] = {
        "path": str(path),
        "kind": kind,
        "format_version": ckpt.get("format_version"),
        "file_bytes": stat.st_size,
        "modified": _dt.datetime.fromtimestamp(stat.st_mtime, _dt.UTC).isoformat(timespec="seconds"),
        "saved_at": ckpt.get("saved_at"),
        "step": ckpt.get("step"),
        "epoch": ckpt.get("epoch"),
        "position": ckpt.get("position", ckpt.get("batch_idx")),
        "last_losses": ckpt.get("last_losses"),
        "last_val_loss": ckpt.get("last_val_loss"),
        "best_val_loss": ckpt.get("best_val_loss"),
        "hparams": ckpt.get("hparams"),
        "tokenizer": ckpt.get("tokenizer") or extra.get("tokenizer"),
        "base_vocab_size": ckpt.get("base_vocab_size"),
        "model_config": ckpt.get("model_config"),
        "manifests": ckpt.get("manifests") or extra.get("manifests"),
        "versions": ckpt.get("versions") or ({"torch": str(ckpt["pytorch_version"])} if "pytorch_version" in ckpt
                                              else None),
        "recent_checkpoints": ckpt.get("recent_checkpoints"),
        "repaired_from": ckpt.get("repaired_from"),
        "content_digest": {
            "algorithm": ALGORITHM,
            "recorded": None if trailer is None or isinstance(trailer, str) else trailer.digest,
            "declared": declares_digest(ckpt),
            "problem": trailer if isinstance(trailer, str) else None,
        },
        "model": {
            "tensors": len(state),
            "values": sum(t.numel() for t in state.values()),
            "bytes": _tensor_bytes(state),
            "dtypes": sorted({str(t.dtype).removeprefix("torch.") for t in state.values()}),
            "text_vocab_rows": int(state["text_embedding.weight"].shape[0]) if "text_embedding.weight" in state
            else None,
        },
        "optimizer": None if optimizer is None else {
            "param_groups": len(optimizer.get("param_groups") or []),
            "parameters_with_state": len(optimizer.get("state") or {}),
            "bytes": _tensor_bytes(optimizer.get("state")),
            "lr": [g.get("lr") for g in optimizer.get("param_groups") or []],
        },
        "scheduler_step": (ckpt.get("scheduler") or {}).get("last_epoch") if isinstance(ckpt.get("scheduler"),
                                                                                       Mapping) else None,
        "grad_scaler": ckpt.get("scaler") is not None,
        "rng": ckpt.get("rng") is not None or ckpt.get("rng_state") is not None,
        "sampler": ckpt.get("sampler"),
        "lora": _lora_summary(ckpt),
        "s2mel": _s2mel_lines(ckpt) if kind == "s2mel" else None,
        "other_keys": sorted(str(k) for k in ckpt if k not in {
            "format", "format_version", "saved_at", "model", "optimizer", "scheduler", "scaler", "step", "epoch",
            "position", "batch_idx", "last_losses", "last_val_loss", "best_val_loss", "hparams", "tokenizer",
            "base_vocab_size", "model_config", "manifests", "versions", "recent_checkpoints", "repaired_from",
            "rng", "rng_state", "sampler", "extra", "optimizer_param_names", "pytorch_version", "integrity"}),
    }
    return info


def _fmt_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:,.1f} {unit}" if unit != "B" else f"{count:,} B"
        value /= 1024
    return f"{count} B"


def _lora_summary(ckpt: Mapping[str, Any]) -> dict[str, Any] | None:
    """A LoRA run's adapters (``trainer.lora_setup``): their layout and size; None for a plain checkpoint."""
    from trainer.lora_setup import checkpoint_adapter

    found = checkpoint_adapter(ckpt)
    if found is None:
        return None
    config, tensors = found
    return {**config.to_dict(), "tensors": len(tensors), "values": sum(t.numel() for t in tensors.values())}


def _s2mel_lines(ckpt: dict[str, Any]) -> list[str]:
    from trainer.s2mel.checkpoint import describe_s2mel_checkpoint

    return describe_s2mel_checkpoint(ckpt)


def inspect_lines(info: Mapping[str, Any]) -> list[str]:
    """Human-readable lines for ``inspect_checkpoint``'s dict."""
    if info.get("s2mel"):  # an S2Mel run's checkpoint: its own description (no GPT fields)
        return [f"file:        {info['path']} ({_fmt_bytes(info['file_bytes'])}, modified {info['modified']})",
                f"kind:        s2mel, format version {info['format_version']}",
                *(f"s2mel:       {line}" for line in info["s2mel"])]
    model = info["model"]
    lines = [
        f"file:        {info['path']} ({_fmt_bytes(info['file_bytes'])}, modified {info['modified']})",
        f"kind:        {info['kind']}" + (f", format version {info['format_version']}" if info["format_version"] else ""),
        f"saved at:    {info['saved_at'] or 'not recorded'}",
        f"step:        {info['step']}   epoch: {info['epoch']}   position: {info['position']}",
    ]
    losses = info.get("last_losses") or {}
    if losses:
        lines.append("last train:  " + ", ".join(f"{k} {v:.4f}" if isinstance(v, float) else f"{k} {v}"
                                                 for k, v in losses.items()))
    lines.append(f"val loss:    last {info['last_val_loss']}, best {info['best_val_loss']}")
    lines.append(f"model:       {model['tensors']} tensors, {model['values']:,} values, {_fmt_bytes(model['bytes'])}, "
                 f"{'/'.join(model['dtypes'])}, text rows {model['text_vocab_rows']}")
    lora = info.get("lora")
    if lora:
        layers = "every block" if lora["layers"] is None else "blocks " + ",".join(map(str, lora["layers"]))
        dora = ", DoRA" if lora.get("dora") else ""
        lines.append(f"LoRA:        rank {lora['rank']}, alpha {lora['alpha']:g}{dora}, {', '.join(lora['targets'])} on "
                     f"{layers}: {lora['tensors']} tensors, {lora['values']:,} values (export merges them)")
    opt = info.get("optimizer")
    lines.append("optimizer:   " + ("none" if opt is None else
                                    f"{opt['param_groups']} group(s), {opt['parameters_with_state']} parameters with "
                                    f"state, {_fmt_bytes(opt['bytes'])}, lr {opt['lr']}"))
    lines.append(f"scheduler:   step {info['scheduler_step']}   grad scaler: {'yes' if info['grad_scaler'] else 'no'}"
                 f"   RNG: {'yes' if info['rng'] else 'no'}   sampler: {'yes' if info['sampler'] else 'no'}")
    tok = info.get("tokenizer")
    if isinstance(tok, Mapping):
        sha = tok.get("sha256")
        lines.append(f"tokenizer:   {tok.get('path')} (vocab {tok.get('vocab_size')}, sha256 "
                     f"{sha[:12] + '…' if sha else 'unknown'}), base vocab {info.get('base_vocab_size')}")
    elif tok:
        lines.append(f"tokenizer:   {tok} (path only)")
    hparams = info.get("hparams") or {}
    if hparams:
        shown = {k: v for k, v in hparams.items() if k in (
            "learning_rate", "weight_decay", "warmup_steps", "batch_size", "grad_accumulation", "epochs",
            "max_steps", "text_loss_weight", "mel_loss_weight", "grad_clip", "amp", "seed", "loss_mode")}
        lines.append("hparams:     " + ", ".join(f"{k}={v}" for k, v in shown.items()))
    digest = info.get("content_digest") or {}
    if digest.get("recorded"):
        lines.append(f"digest:      {digest['algorithm']} {digest['recorded'][:16]}… (recorded; `verify` checks it)")
    elif digest.get("problem") or digest.get("declared"):
        lines.append(f"digest:      DAMAGED OR LOST ({digest.get('problem') or 'recorded at save, missing from the file'})")
    else:
        lines.append("digest:      none (written before content digests)")
    versions = info.get("versions") or {}
    if versions:
        lines.append("versions:    " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    if info.get("repaired_from"):
        rep = info["repaired_from"]
        lines.append(f"repaired:    from {rep.get('path')} ({rep.get('kind')}) at {rep.get('at')}")
    if info.get("other_keys"):
        lines.append("other keys:  " + ", ".join(info["other_keys"]))
    return lines
