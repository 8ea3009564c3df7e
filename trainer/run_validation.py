"""A run's validation, for ``trainer.run.TrainingRun``: the loader over its validation set, and one validation pass
(the loss summed over every rank, the best so far, the ``val`` line and event, the forgetting guard's look).

Manifests that name languages are validated language by language (``trainer.run_languages``), nothing twice.
"""

from __future__ import annotations

import math
from typing import Any

from trainer import steps
from trainer.batch_loader import make_loader
from trainer.data import make_dataset
from trainer.distributed import sum_over_ranks
from trainer.sampler import BucketBatchSampler

TrainingRun = Any  # trainer.run.TrainingRun (it imports this module)


def validation_loader(run: TrainingRun, gpt: dict[str, Any], text_vocab: int | None) -> Any:
    """The loader (or the languages' loaders) ``validate`` walks; None when the run has nothing to validate on."""
    opts, plan, ctx = run.opts, run.plan, run.ctx
    if run.languages.val_loaders:  # validated language by language (trainer.run_languages), nothing twice
        return run.languages.val_loaders
    if plan.val is None or not plan.val.items:
        return None
    val_set = make_dataset(plan.val.items, gpt, text_vocab, plan.val.report.format)
    val_batches = BucketBatchSampler(val_set.lengths(), opts.batch_size, opts.seed,
                                     rank=ctx.rank, world_size=ctx.world_size).batches(0)
    if opts.max_val_batches:
        val_batches = val_batches[: opts.max_val_batches]
    if not val_batches:
        run.say(f"warning: the validation set gives no batch for each of {ctx.world_size} processes: "
                "no validation (and no best.pth) in this run")
        return None
    return run.loaders.enter_context(make_loader(
        val_set, val_batches, run.collate, opts.num_workers, run.device.type == "cuda", opts.seed, persistent=True))


def validate(run: TrainingRun) -> bool:
    """One validation pass at the run's current step; True when its loss is the best so far."""
    state = run.state
    sums, per_language = run.languages.validate()  # per language when the val manifests name languages
    if sums is None:
        sums = sum_over_ranks(run.ctx, steps.evaluate(run.model, run.val_loader, run.device, run.opts.amp,
                                                      run.opts.loss_mode), run.device)
    val = steps.val_metrics(sums, run.weights)
    state.last_val_loss = val["loss"]
    is_best = math.isfinite(val["loss"]) and (state.best_val_loss is None or val["loss"] < state.best_val_loss)
    if is_best:
        state.best_val_loss = val["loss"]
    best = f"{state.best_val_loss:.4f}" if state.best_val_loss is not None else "-"
    run.say(f"val step {state.step} | loss {val['loss']:.4f} (text {val['text_loss']:.4f}, "
            f"mel {val['mel_loss']:.4f}) | mel_top1 {val['mel_top1']:.3f} | best {best}")
    assert run.metrics is not None
    run.metrics.event("val", state.step, state.epoch, best=is_best, **val,
                      **({"languages": per_language} if per_language else {}))
    run.languages.judge_forgetting(per_language)
    return is_best
