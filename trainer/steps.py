"""The pieces of one training step and of validation, kept out of train.py so it reads top to bottom.

Weight decay (a decision, documented in the README): AdamW decays only weight matrices of linear and
convolution layers. Biases, norm gains, embedding tables (text, mel, both position tables) and the
perceiver's latents and the conformer's positional biases are not decayed: they are lookups or
offsets, and shrinking them toward 0 only loses information. The frozen base rows of an extended
vocabulary do not rely on this: ``BaseRowFreezer`` restores them after every optimizer step.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from trainer.errors import UsageError

NO_DECAY_NAME_PARTS = ("latents", "pos_bias_u", "pos_bias_v")



def _is_dtensor(value: object) -> bool:
    """Whether ``value`` is an FSDP2 DTensor, without importing torch.distributed.tensor (a second of every
    trainer start): only an FSDP2 run (trainer.fsdp) imports it, and nothing else makes one."""
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(value, module.DTensor)


def resolve_device(option: str, local_rank: int = 0, distributed: bool = False) -> torch.device:
    if option == "auto":
        option = "cuda" if torch.cuda.is_available() else "cpu"
    if option.startswith("cuda"):
        if not torch.cuda.is_available():
            raise UsageError(f"--device {option}: CUDA is not available on this machine (use --device cpu)")
        if distributed:
            return torch.device("cuda", local_rank)
        index = int(option.split(":", 1)[1]) if ":" in option else 0
        if index >= torch.cuda.device_count():
            raise UsageError(f"--device {option}: only {torch.cuda.device_count()} CUDA device(s) present")
        return torch.device("cuda", index)
    return torch.device("cpu")


def resolve_amp(amp: str, device: torch.device) -> str:
    """``auto``: bf16 on a CUDA device that supports it (Ampere and later), else off; other values as given."""
    if amp != "auto":
        return amp
    return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "off"


def check_amp(amp: str, device: torch.device) -> None:
    if amp == "fp16" and device.type != "cuda":
        raise UsageError("--amp fp16 needs a CUDA device (its grad scaler is GPU-only); use --amp bf16 or off on CPU")
    if amp == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        raise UsageError("--amp bf16 is not supported by this GPU; use --amp fp16 or off")


def autocast(device: torch.device, amp: str) -> contextlib.AbstractContextManager:
    if amp == "off":
        return contextlib.nullcontext()
    dtype = torch.bfloat16 if amp == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)


def make_scaler(amp: str, device: torch.device) -> torch.amp.GradScaler | None:
    return torch.amp.GradScaler("cuda") if amp == "fp16" and device.type == "cuda" else None


def parameter_groups(model: nn.Module, weight_decay: float, lr_mults: dict[str, float] | None = None
                     ) -> list[dict[str, Any]]:
    """Two AdamW groups: decayed weight matrices, and everything else (see the module docstring); frozen
    parameters (``requires_grad`` off, e.g. the base under LoRA) are in none.

    ``lr_mults`` (parameter name -> multiplier, e.g. the language row's ``--lang-lr-mult``): each such
    parameter gets a group of its own after those two, undecayed, with ``lr_mult`` applied to the lr."""
    embedding_weights = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay: list[nn.Parameter] = []
    no_decay: list[nn.Parameter] = []
    own: list[dict[str, Any]] = []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if lr_mults and name in lr_mults:
            own.append({"params": [param], "weight_decay": 0.0, "lr_mult": float(lr_mults[name])})
            continue
        skip = (param.dim() < 2 or id(param) in embedding_weights
                or any(part in name for part in NO_DECAY_NAME_PARTS))
        (no_decay if skip else decay).append(param)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}, *own]


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, device: torch.device,
                    lr_mults: dict[str, float] | None = None) -> torch.optim.AdamW:
    """AdamW with the fused kernel, on CUDA and on CPU (``resolve_device`` gives nothing else): one pass over
    all parameters; on CPU about 6x faster than the per-parameter loop, which took a sixth of a demo step."""
    groups = parameter_groups(model, weight_decay, lr_mults)
    for group in groups:
        if "lr_mult" in group:
            group["lr"] = lr * group["lr_mult"]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999), eps=1e-8, fused=True)


def refresh_lr_mults(optimizer: torch.optim.Optimizer, model: nn.Module, lr_mults: dict[str, float]) -> None:
    """After restoring an optimizer, its own-rate groups take this run's multipliers (before ``set_peak_lr``)."""
    names = {id(param): name for name, param in model.named_parameters()}
    for group in optimizer.param_groups:
        if "lr_mult" in group and len(group["params"]) == 1:
            group["lr_mult"] = float(lr_mults.get(names.get(id(group["params"][0]), ""), group["lr_mult"]))


def apply_hparams(optimizer: torch.optim.Optimizer, weight_decay: float) -> None:
    """After restoring an optimizer, use this run's weight decay (the decayed group is the first)."""
    optimizer.param_groups[0]["weight_decay"] = weight_decay
    for group in optimizer.param_groups[1:]:
        group["weight_decay"] = 0.0


def to_device(batch: dict[str, Any], device: torch.device) -> dict[str, Any]:
    non_blocking = device.type == "cuda"
    return {k: v.to(device, non_blocking=non_blocking) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


SEQUENCE_KEYS = ("text_ids", "text_lengths", "codes", "code_lengths")
V15_PROMPT_KEYS = ("cond_mels", "cond_mel_lengths")  # IndexTTS-1.5: the prompt's log-mel, encoded in the step
V2_PROMPT_KEYS = ("condition", "emo_vec")  # IndexTTS2: precomputed speaker latents and emotion vector
V25_PROMPT_KEYS = ("spk_vec", "emo_vec", "langs")  # IndexTTS-2.5: CAM++ vector, emotion vector, language rows


HOST_LENGTH_KEYS = ("text_lengths_host", "code_lengths_host")  # plain lists: no read-back from the device


def model_inputs(batch: dict[str, Any]) -> dict[str, Any]:
    """The model's keyword arguments for a collated batch of either format."""
    prompt = (V25_PROMPT_KEYS if "spk_vec" in batch else V2_PROMPT_KEYS if "condition" in batch
              else V15_PROMPT_KEYS)
    keys = (*SEQUENCE_KEYS, *prompt, *(key for key in HOST_LENGTH_KEYS if key in batch))
    return {key: batch[key] for key in keys}


@dataclass
class LossWeights:
    text: float
    mel: float


@dataclass
class StepLosses:
    """Per-step sums of the micro-batch values (detached tensors, so logging needs no sync per step)."""

    loss: torch.Tensor
    text: torch.Tensor
    mel: torch.Tensor
    top1: torch.Tensor
    tokens: int


@dataclass
class Window:
    """Metrics between two log lines."""

    streak_before: int = 0  # non-finite steps in a row that ended the previous window
    started: float = field(default_factory=time.perf_counter)
    steps: list[tuple[int, StepLosses]] = field(default_factory=list)
    grad_norms: list[torch.Tensor] = field(default_factory=list)
    nonfinite: list[torch.Tensor] = field(default_factory=list)  # per step, on the device: no sync per step
    lr: float = 0.0  # the learning rate of the latest step

    def add(self, step: int, losses: StepLosses, grad_norm: torch.Tensor | None, nonfinite: torch.Tensor,
            lr: float) -> None:
        self.steps.append((step, losses))
        if grad_norm is not None:
            self.grad_norms.append(grad_norm.detach())
        self.nonfinite.append(nonfinite)
        self.lr = lr

    def nonfinite_streaks(self) -> tuple[int, int, int]:
        """(longest run of non-finite steps, the run the window ends with, non-finite steps) incl. the carry."""
        flags = torch.stack(self.nonfinite).cpu().tolist() if self.nonfinite else []
        longest = run = self.streak_before
        for flag in flags:
            run = run + 1 if flag else 0
            longest = max(longest, run)
        return longest, run, int(sum(flags))

    def nonfinite_streak(self) -> int:
        return self.nonfinite_streaks()[0]

    def summary(self, world_size: int, sum_over_ranks: Callable[[torch.Tensor], torch.Tensor] | None = None
                ) -> dict[str, Any]:
        """The window's means; under DDP ``sum_over_ranks`` makes each step's values the global batch's (each
        rank's are its share of the global token mean, see ``GlobalMean``): one all-reduce per log line."""
        elapsed = max(time.perf_counter() - self.started, 1e-9)
        n = len(self.steps)
        stacked = torch.stack([torch.stack([s.loss, s.text, s.mel, s.top1]) for _, s in self.steps]).double()
        if sum_over_ranks is not None:
            stacked = sum_over_ranks(stacked) / world_size
        stacked = stacked.cpu()
        per_step = {str(step): float(v) for (step, _), v in zip(self.steps, stacked[:, 0].tolist())}
        means = stacked.mean(dim=0).tolist()
        tokens = sum(s.tokens for _, s in self.steps) * world_size
        out = {
            "loss": means[0], "text_loss": means[1], "mel_loss": means[2], "mel_top1": means[3],
            "tokens_per_s": tokens / elapsed, "seconds_per_step": elapsed / n, "losses": per_step,
        }
        if self.grad_norms:
            out["grad_norm"] = float(torch.stack(self.grad_norms).double().mean().cpu())
        longest, trailing, count = self.nonfinite_streaks()
        out.update(nonfinite_streak=longest, nonfinite_trailing=trailing, nonfinite_steps=count, lr=self.lr)
        return out


def format_eta(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    seconds = int(max(0, seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}"


def train_line(step: int, total: int, epoch: int, epochs: int, m: dict[str, Any], lr: float, eta_s: float) -> str:
    return (f"step {step}/{total} | epoch {epoch + 1}/{epochs} | loss {m['loss']:.4f} "
            f"(text {m['text_loss']:.4f}, mel {m['mel_loss']:.4f}) | mel_top1 {m['mel_top1']:.3f} | "
            f"lr {lr:.3e} | {m['tokens_per_s']:,.0f} tok/s | ETA {format_eta(eta_s)}")


@dataclass(frozen=True)
class GlobalMean:
    """Under DDP: each rank's token means become its share of the token mean over the *global* batch.

    A rank's loss is a mean over its own ``n_r`` counted positions. Scaled by ``n_r x world_size / N`` (N: the
    positions of all ranks' micro-batches together), DDP's gradient average gives exactly the gradient of the
    global token mean, as one process with the whole global batch would compute it. The counts are summed
    over the ranks as device tensors: one small all-reduce per micro-batch, no host sync.
    """

    world_size: int
    sum_over_ranks: Callable[[torch.Tensor], torch.Tensor]

    def factors(self, counts: list[int], device: torch.device) -> torch.Tensor:
        local = torch.tensor(counts, dtype=torch.float64).to(device, non_blocking=True)
        total = self.sum_over_ranks(local.clone())
        return (local * self.world_size / total.clamp(min=1.0)).float()


def counted_positions(out: Any, loss_mode: str) -> list[int]:
    """What the text loss, the mel loss and mel_top1 average over on this rank (host ints, no sync)."""
    if loss_mode == "indextts":  # every position of the padded segments
        text = out.text_logits.size(0) * out.text_logits.size(2)
        mel = out.mel_logits.size(0) * out.mel_logits.size(2)
        return [text, mel, out.mel_tokens]
    return [out.text_tokens, out.mel_tokens, out.mel_tokens]


def micro_step(model: nn.Module, batch: dict[str, Any], device: torch.device, amp: str, loss_mode: str,
               weights: LossWeights, scale: float, scaler: torch.amp.GradScaler | None,
               sync: contextlib.AbstractContextManager, global_mean: GlobalMean | None = None) -> StepLosses:
    """Forward and backward one micro-batch; ``scale`` = 1 / micro-batches in this optimizer step.

    ``global_mean`` (under DDP): the losses are this rank's share of the global batch's token means.
    """
    batch = to_device(batch, device)
    with sync:
        with autocast(device, amp):
            out = model(**model_inputs(batch), loss_mode=loss_mode)
        text, mel, top1 = out.loss_text, out.loss_mel, out.mel_top1
        if global_mean is not None:
            factor = global_mean.factors(counted_positions(out, loss_mode), device)
            text, mel, top1 = text * factor[0], mel * factor[1], top1 * factor[2]
        loss = weights.text * text + weights.mel * mel
        scaled = loss * scale
        (scaler.scale(scaled) if scaler is not None else scaled).backward()
    return StepLosses(loss=loss.detach() * scale, text=text.detach() * scale,
                      mel=mel.detach() * scale, top1=top1.detach() * scale,
                      tokens=int(batch["num_tokens"]))


def sum_losses(parts: list[StepLosses]) -> StepLosses:
    """The optimizer step's values: the sum of its micro-batches' (each already scaled by 1/micro-batches)."""
    first = parts[0]
    for part in parts[1:]:
        first = StepLosses(first.loss + part.loss, first.text + part.text, first.mel + part.mel,
                           first.top1 + part.top1, first.tokens + part.tokens)
    return first


def optimizer_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler | None,
                   grad_clip: float, loss: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Unscale, clip, step, zero the gradients; returns (gradient norm before clipping, non-finite flag).

    A non-finite loss or gradient skips the update on the device: the fused AdamW kernel reads
    ``found_inf`` (as it does from a grad scaler) and leaves weights, moments and step counts as they
    were, with no host sync. Under fp16 the grad scaler does the same for overflowing gradients.
    """
    norm = None
    if scaler is not None:
        if grad_clip > 0:
            scaler.unscale_(optimizer)
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        scaler.step(optimizer)
        scaler.update()
        nonfinite = ~torch.isfinite(loss.detach())
    else:
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        if grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        else:
            norm = torch.nn.utils.get_total_norm(grads) if grads else torch.zeros((), device=loss.device)
        if _is_dtensor(norm):  # FSDP2: the norm over all shards, the same on every rank
            norm = norm.full_tensor()
        nonfinite = ~(torch.isfinite(norm) & torch.isfinite(loss.detach()))
        optimizer.found_inf = nonfinite.to(torch.float32).reshape(())  # type: ignore[attr-defined]
        optimizer.step()
        del optimizer.found_inf  # type: ignore[attr-defined]
    optimizer.zero_grad(set_to_none=True)
    return norm, nonfinite


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[dict[str, Any]], device: torch.device, amp: str,
             loss_mode: str) -> list[float]:
    """Token-weighted sums over the given batches: [text_loss*n_text, n_text, mel_loss*n_mel, top1*n_mel, n_mel].

    The loss sums stay on the device (float64) until the end: one host sync per validation, not one per batch.
    """
    was_training = model.training
    model.eval()
    weighted = torch.zeros(3, dtype=torch.float64, device=device)  # text loss, mel loss, top1; token-weighted
    text_tokens = mel_tokens = 0
    try:
        for batch in batches:
            if "error" in batch:
                raise UsageError(batch["error"])
            batch = to_device(batch, device)
            with autocast(device, amp):
                out = model(**model_inputs(batch), loss_mode=loss_mode)
            weighted += torch.stack([out.loss_text.double() * out.text_tokens, out.loss_mel.double() * out.mel_tokens,
                                     out.mel_top1.double() * out.mel_tokens])
            text_tokens += out.text_tokens
            mel_tokens += out.mel_tokens
    finally:
        model.train(was_training)
    text, mel, top1 = weighted.tolist()
    return [text, float(text_tokens), mel, top1, float(mel_tokens)]


def val_metrics(sums: list[float], weights: LossWeights) -> dict[str, float]:
    text = sums[0] / max(sums[1], 1.0)
    mel = sums[2] / max(sums[4], 1.0)
    return {"text_loss": text, "mel_loss": mel, "mel_top1": sums[3] / max(sums[4], 1.0),
            "loss": weights.text * text + weights.mel * mel}


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


