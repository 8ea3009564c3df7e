"""Builders for the checkpoint tests: a tiny real GPT with a stepped AdamW, and checkpoints of every kind."""

from __future__ import annotations

import copy
import io
import os
import pickle
from pathlib import Path
from typing import Any

import torch

from networks.gpt_config import effective_gpt_config
from trainer.checkpoints import build_checkpoint, capture_rng_state, optimizer_param_names

TOKENIZER = {"path": "tokenizers/tok.model", "sha256": "ab12" * 16, "vocab_size": 40}


def tiny_gpt_config(number_text_tokens: int = 40, layers: int = 1) -> dict[str, Any]:
    return effective_gpt_config({
        "model_dim": 32, "layers": layers, "heads": 2, "max_text_tokens": 16, "max_mel_tokens": 24,
        "number_text_tokens": number_text_tokens, "condition_num_latent": 4,
        "condition_module": {"output_size": 16, "linear_units": 32, "attention_heads": 2, "num_blocks": 1,
                             "input_layer": "conv2d2", "perceiver_mult": 2},
    })


def trained_state(gpt: dict[str, Any] | None = None, steps: int = 1, seed: int = 0, trainer_layout: bool = False):
    """(model, optimizer, scheduler) after ``steps`` AdamW steps on random gradients.

    ``trainer_layout``: this trainer's own two-group AdamW and scheduler (``trainer.steps.build_optimizer``),
    whose state a resume restores; otherwise one group of every parameter (a foreign layout).
    """
    from networks.unified_voice import build_model
    from trainer.schedule import build_scheduler
    from trainer.steps import build_optimizer

    torch.manual_seed(seed)
    model = build_model(gpt or tiny_gpt_config())
    if trainer_layout:
        optimizer = build_optimizer(model, 1e-3, 0.01, torch.device("cpu"))
        scheduler = build_scheduler(optimizer, 2, 10)
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 10))
    for _ in range(steps):
        for param in model.parameters():
            param.grad = torch.randn_like(param) * 0.01
        optimizer.step()
        scheduler.step()
    return model, optimizer, scheduler


HPARAMS = {"learning_rate": 1e-3, "weight_decay": 0.01, "batch_size": 8, "grad_accumulation": 1,
           "text_loss_weight": 0.2, "mel_loss_weight": 0.8, "amp": "off", "seed": 1234}
MANIFESTS = {"train": [{"path": "data/train.jsonl", "lines": 100, "sha256": "11" * 32}],
             "val": [{"path": "data/val.jsonl", "lines": 10, "sha256": "22" * 32}]}


def make_checkpoint(step: int = 1, *, gpt: dict[str, Any] | None = None, state=None, **overrides: Any) -> dict:
    """A complete current-format checkpoint of the tiny model (``overrides`` replace build arguments)."""
    gpt = gpt or tiny_gpt_config()
    model, optimizer, scheduler = state or trained_state(gpt)
    kwargs: dict[str, Any] = dict(
        model_state=model.state_dict(), optimizer_state=optimizer.state_dict(),
        scheduler_state=scheduler.state_dict(), scaler_state=None, epoch=0, position=step, step=step,
        sampler_state={"epoch": 0, "position": step, "seed": 1234, "batch_size": 8, "world_size": 1,
                       "num_items": 100, "fingerprint": "f" * 16},
        rng_state=capture_rng_state(), manifests=copy.deepcopy(MANIFESTS), tokenizer=dict(TOKENIZER),
        base_vocab_size=30, model_config=dict(gpt), hparams=dict(HPARAMS),
        optimizer_param_names=optimizer_param_names(model, optimizer),
        last_losses={"text_loss": 2.0, "mel_loss": 3.0, "mel_top1": 0.1}, last_val_loss=3.1, best_val_loss=3.0,
    )
    kwargs.update(overrides)
    return build_checkpoint(**kwargs)


def community_checkpoint(gpt: dict[str, Any] | None = None, *, step: int = 40, with_optimizer: bool = True,
                         state=None) -> dict[str, Any]:
    """A model_step file as the community IndexTTS trainer writes it (README_indextts2.md, "Checkpoints")."""
    model, optimizer, scheduler = state or trained_state(gpt or tiny_gpt_config())
    return {
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": optimizer.state_dict() if with_optimizer else None,
        "scheduler": scheduler.state_dict() if with_optimizer else None,
        "scaler": None,
        "epoch": 2,
        "step": step,
        "batch_idx": 5,
        "recent_checkpoints": [f"/abs/run/model_step{step}.pth"],
        "accumulation_counter": 0,
        "extra": {"type": "step", "tokenizer": "/abs/tokenizers/am.model", "amp_dtype": "bfloat16",
                  "manifests": {"train": [{"path": "/abs/train_pairs.jsonl", "count": 100, "languages": ["am"]}],
                                "val": [{"path": "/abs/val_pairs.jsonl", "count": 10, "languages": ["am"]}]}},
        "last_losses": {"text_loss": 1.5, "mel_loss": 4.0, "mel_top1": 0.2},
    }


def save(obj: Any, path: Path) -> Path:
    torch.save(obj, path)
    return path


class MarkerPayload:
    """Unpickling this would create ``marker`` (the "pickle carrying code" case)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def write_code_pickle(path: Path, marker: Path, *, torch_format: bool = True) -> Path:
    payload = {"model": {"w": torch.zeros(2)}, "step": 1, "sneaky": MarkerPayload(marker)}
    if torch_format:
        torch.save(payload, path)
    else:
        path.write_bytes(pickle.dumps(payload))
    return path


def truncated_copy(source: Path, path: Path, keep: float = 0.5) -> Path:
    data = source.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


def random_file(path: Path, size: int = 4096) -> Path:
    path.write_bytes(os.urandom(size))
    return path


def replace_file(path: Path, data: bytes) -> None:
    """Corrupt ``path`` without touching other hard links to the same file (latest.pth is one)."""
    tmp = path.with_name(path.name + ".corrupt")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def torch_bytes(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def toy_checkpoint(step: int, seed: int = 0) -> dict[str, Any]:
    """A complete current-format checkpoint of a toy model (a few KiB: for tests that write hundreds of files).

    Real pieces everywhere (a two-group AdamW with moments, a LambdaLR, every RNG stream), only the
    model is not the GPT: nothing that checks a file's integrity or structure looks at the architecture.
    """
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Embedding(24, 8), torch.nn.Linear(8, 8), torch.nn.LayerNorm(8))
    params = list(model.parameters())
    optimizer = torch.optim.AdamW([{"params": params[:2], "weight_decay": 0.01},
                                   {"params": params[2:], "weight_decay": 0.0}], lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))
    for _ in range(2):
        for param in params:
            param.grad = torch.randn_like(param)
        optimizer.step()
        scheduler.step()
    return build_checkpoint(
        model_state=model.state_dict(), optimizer_state=optimizer.state_dict(),
        scheduler_state=scheduler.state_dict(), scaler_state=None, epoch=0, position=step, step=step,
        sampler_state={"epoch": 0, "position": step, "seed": 1, "batch_size": 2, "world_size": 1,
                       "num_items": 50, "fingerprint": "0" * 16},
        rng_state=capture_rng_state(), manifests=copy.deepcopy(MANIFESTS), tokenizer=dict(TOKENIZER),
        base_vocab_size=20, model_config={"model_dim": 8, "layers": 0}, hparams=dict(HPARAMS),
        optimizer_param_names=optimizer_param_names(model, optimizer),
        last_losses={"text_loss": 1.0, "mel_loss": 2.0}, last_val_loss=2.5, best_val_loss=2.5,
    )
