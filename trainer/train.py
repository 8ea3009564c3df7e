"""Fine-tune the IndexTTS GPT on a codes manifest: ``python -m trainer.train --help``.

Read top to bottom: options -> output-dir lock -> what to start from (fresh, base checkpoint grown to
the tokenizer, --init-from, or --resume) -> data -> optimizer, schedule, scaler -> restore -> loop
(micro-batches, optimizer step, frozen rows, log, validate, save, stop) -> final save.

Exit codes: 0 finished; 2 refused (one line ``error: ...`` on stderr); 130 stopped by SIGINT/SIGTERM after
saving latest.pth; 1 anything unexpected. Under ``torchrun`` only rank 0 writes files.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from data_tools.config import load_config
from data_tools.fileio import atomic_write_text
from data_tools.manifest import ManifestError
from data_tools.text_tokenizer import TextTokenizer
from trainer import loop
from trainer.checkpoints import (
    CheckpointManager,
    CheckpointSaveError,
    OutputDirLock,
    build_checkpoint,
    capture_rng_state,
    checkpoint_files_exist,
    optimizer_param_names,
    restore_rng_state,
    select_resume,
)
from trainer.data import CodesDataset, Collator, load_items, make_loader
from trainer.distributed import DistContext, any_rank, init_distributed, shutdown, sum_over_ranks
from trainer.errors import EXIT_OK, EXIT_STOPPED, UsageError, one_line, refuse, run_cli
from trainer.metrics import MetricsLog, truncate_after_step
from trainer.model import StateDictMismatchError, build_model, load_gpt_state_dict
from trainer.model_source import (
    from_base_checkpoint,
    from_init_checkpoint,
    from_resumed,
    random_init,
)
from trainer.options import parse_argv, write_train_config
from trainer.preflight import expectation_for_run
from trainer.sampler import BucketBatchSampler
from trainer.schedule import build_scheduler, set_peak_lr
from trainer.signals import GracefulStop, after_step_test_hooks, simulated_disk_full


@dataclass
class TrainState:
    step: int = 0  # optimizer steps done
    epoch: int = 0  # epoch in progress (0-based)
    position: int = 0  # batches of that epoch consumed (this rank's)
    last_val_loss: float | None = None
    best_val_loss: float | None = None
    last_losses: dict[str, float] | None = None


def main(argv: list[str] | None = None) -> int:
    values = parse_argv(sys.argv[1:] if argv is None else argv)
    if values["preflight"]:
        return run_cli(lambda: preflight(values))
    ctx = init_distributed(values["device"])
    try:
        return run_cli(lambda: train(values, ctx))
    finally:
        shutdown(ctx)


def train(opts: dict[str, Any], ctx: DistContext) -> int:
    out_dir = Path(opts["output_dir"])

    def say(message: str) -> None:
        if ctx.is_main:
            print(message, flush=True)

    lock = OutputDirLock(out_dir).acquire() if ctx.is_main else None
    stop = GracefulStop(say).install()
    metrics: MetricsLog | None = None
    loaders = contextlib.ExitStack()  # their worker processes end with the run, however it ends
    try:
        # ---------------------------------------------------------------- device and inputs
        device = loop.resolve_device(opts["device"], ctx.local_rank, ctx.enabled)
        loop.check_amp(opts["amp"], device)
        config = load_config(opts["config"])
        tokenizer = TextTokenizer(opts["tokenizer"])
        for manifest in [*opts["train_manifest"], *opts["val_manifest"]]:
            if not Path(manifest).is_file():
                raise ManifestError(Path(manifest), None, "manifest not found")
        # What a resumed checkpoint must match (the same function the pre-flight uses).
        expectation = expectation_for_run(opts, config, tokenizer)
        manifests, tok_record, hparams = expectation.manifests, expectation.tokenizer, expectation.hparams
        say(f"device {device}" + (f" x {ctx.world_size} processes" if ctx.enabled else "")
            + f", amp {opts['amp']}, tokenizer {opts['tokenizer']} ({tokenizer.vocab_size} pieces)")

        # ---------------------------------------------------------------- what to start from
        choice = select_resume(out_dir, opts["resume"], expectation)
        if choice is None and checkpoint_files_exist(out_dir):
            raise UsageError(f"output dir {out_dir} already holds checkpoints of a run: continue it with "
                             "--resume auto, or start a new run in a new --output-dir")
        if choice is not None:
            start = from_resumed(choice.checkpoint, choice.path)
            if opts["init_from"]:
                say(f"note: --init-from {opts['init_from']} ignored: resuming the run in {out_dir}")
        elif opts["init_from"]:
            start = from_init_checkpoint(Path(opts["init_from"]), config["gpt"], Path(opts["config"]), config, tokenizer)
        elif opts["base_checkpoint"]:
            start = from_base_checkpoint(Path(opts["base_checkpoint"]), config["gpt"], Path(opts["config"]),
                                         config, tokenizer)
        else:
            start = random_init(config["gpt"], tokenizer)

        # ---------------------------------------------------------------- model
        random.seed(opts["seed"])
        np.random.seed(opts["seed"])
        torch.manual_seed(opts["seed"])
        model = build_model(start.gpt_config)
        if getattr(model, "version", "1.5") != "1.5":
            raise UsageError(f"--config {opts['config']} describes an IndexTTS {model.version} GPT; this trainer "
                             "trains IndexTTS-1.5 GPTs (100-band log-mel prompts)")
        if start.state_dict is not None:
            try:
                dropped = load_gpt_state_dict(model, start.state_dict)
            except StateDictMismatchError as exc:
                raise UsageError(f"{start.source} does not fit the model of --config {opts['config']}: {exc}") from None
            if dropped:
                say(f"dropped {len(dropped)} inference-only alias keys (gpt.wte.*, inference_model.*)")
        say(f"model: {start.source}; {loop.count_parameters(model):,} parameters, "
            f"text vocabulary {model.text_vocab_size} rows")
        for line in start.lines:
            say("  " + line)
        if tokenizer.vocab_size > int(start.gpt_config["number_text_tokens"]):
            raise UsageError(f"--tokenizer has {tokenizer.vocab_size} pieces but the model has "
                             f"{start.gpt_config['number_text_tokens']} text tokens")
        model.to(device)
        model.set_gradient_checkpointing(opts["grad_checkpointing"])
        freezer = None
        if start.grown and opts["freeze_base_rows"]:
            from trainer.vocab import BaseRowFreezer

            freezer = BaseRowFreezer(model, base_rows=int(start.base_vocab_size),
                                     extra_row=int(start.gpt_config["number_text_tokens"]))
            say(f"frozen: {freezer.num_frozen_params:,} parameters (base rows 0..{start.base_vocab_size - 1} and "
                f"the extra row {start.gpt_config['number_text_tokens']} of text_embedding, text_head)")
        elif start.grown:
            say("base rows are NOT frozen (--no-freeze-base-rows): they train with the new rows")
        if freezer is not None and choice is not None and not (choice.checkpoint.get("hparams") or {}).get(
                "freeze_base_rows", True):
            say("warning: the run trained its base rows before this resume (--no-freeze-base-rows); they are "
                "frozen from now on at their current values, which are no longer the base checkpoint's")
        train_model = model
        if ctx.enabled:
            train_model = torch.nn.parallel.DistributedDataParallel(
                model, device_ids=[device.index] if device.type == "cuda" else None)

        # ---------------------------------------------------------------- data
        gpt = start.gpt_config
        limits = (int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]))
        train_items, report = load_items(opts["train_manifest"], tokenizer, *limits, name="train")
        for line in report.lines("train", *limits):
            say(line)
        if not train_items:
            raise UsageError("no training items left after dropping the ones beyond the model's limits")
        val_items = []
        if opts["val_manifest"]:
            val_items, val_report = load_items(opts["val_manifest"], tokenizer, *limits, name="val")
            for line in val_report.lines("val", *limits):
                say(line)
        collate = Collator(text_pad=int(gpt["stop_text_token"]), code_pad=int(gpt["stop_mel_token"]))
        train_set = CodesDataset(train_items, num_codes_valid=int(gpt["start_mel_token"]))
        sampler = BucketBatchSampler(train_set.lengths(), opts["batch_size"], opts["seed"],
                                     rank=ctx.rank, world_size=ctx.world_size)
        batches_per_epoch = len(sampler)
        if batches_per_epoch == 0:
            raise UsageError(f"{len(train_items)} training items give no batch for each of {ctx.world_size} processes")
        steps_per_epoch = math.ceil(batches_per_epoch / opts["grad_accumulation"])
        total_steps = steps_per_epoch * opts["epochs"]
        if opts["max_steps"]:
            total_steps = min(total_steps, opts["max_steps"])
        val_loader = None
        if val_items:
            val_set = CodesDataset(val_items, num_codes_valid=int(gpt["start_mel_token"]))
            val_batches = BucketBatchSampler(val_set.lengths(), opts["batch_size"], opts["seed"],
                                             rank=ctx.rank, world_size=ctx.world_size).batches(0)
            if opts["max_val_batches"]:
                val_batches = val_batches[: opts["max_val_batches"]]
            if val_batches:
                val_loader = loaders.enter_context(make_loader(val_set, val_batches, collate, opts["num_workers"],
                                                               device.type == "cuda", opts["seed"], persistent=True))
            else:
                say(f"warning: the validation set gives no batch for each of {ctx.world_size} processes: "
                    "no validation (and no best.pth) in this run")
        say(f"{batches_per_epoch} batches of {opts['batch_size']} per epoch, {steps_per_epoch} optimizer steps per "
            f"epoch (grad accumulation {opts['grad_accumulation']}), {total_steps} steps in total")

        # ---------------------------------------------------------------- optimizer, schedule, scaler
        optimizer = loop.build_optimizer(model, opts["learning_rate"], opts["weight_decay"], device)
        scheduler = build_scheduler(optimizer, opts["warmup_steps"], total_steps)
        scaler = loop.make_scaler(opts["amp"], device)
        weights = loop.LossWeights(opts["text_loss_weight"], opts["mel_loss_weight"])
        state = TrainState()

        # ---------------------------------------------------------------- restore or fresh start
        rng_state = None
        if choice is not None:
            ckpt = choice.checkpoint
            restored = restore_training_state(ckpt, model, optimizer, scheduler, scaler, opts, state)
            rng_state = ckpt.get("rng")
            for note in choice.notes:
                say(f"warning: {note}")
            change = sampler.describe_change(ckpt.get("sampler"))
            if change and state.position:
                say(f"warning: the data order differs from the checkpoint's ({change}); "
                    f"continuing at position {state.position} of the new order")
            say(f"resumed from {choice.path} at step {state.step}, epoch {state.epoch}, position {state.position}")
            say("restored: " + ", ".join(restored))
        elif opts["init_from"]:
            say(f"initialised from {opts['init_from']} weights with a fresh optimizer, scheduler and grad scaler: "
                f"step 0, full warm-up of {opts['warmup_steps']} steps")
        else:
            say("starting fresh at step 0")

        if ctx.is_main:
            write_train_config(opts, out_dir / "train_config.yaml")
            if choice is None:
                (out_dir / "metrics.jsonl").unlink(missing_ok=True)
            else:
                truncate_after_step(out_dir / "metrics.jsonl", state.step)
        metrics = MetricsLog(out_dir, enabled=ctx.is_main)
        metrics.event("resume" if choice else "start", state.step, state.epoch, position=state.position,
                      total_steps=total_steps, steps_per_epoch=steps_per_epoch,
                      source=str(choice.path) if choice else start.source,
                      tensorboard=str(metrics.tb_dir) if metrics.tb_dir else None)
        manager = CheckpointManager(out_dir, keep=opts["keep_checkpoints"])

        def save(is_best: bool) -> Path | None:
            """Commit a checkpoint of the current state (rank 0); every rank learns whether it worked."""
            path, failure = None, None
            if ctx.is_main:
                epoch, position = state.epoch, state.position
                ckpt = build_checkpoint(
                    model_state=model.state_dict(), optimizer_state=optimizer.state_dict(),
                    scheduler_state=scheduler.state_dict(),
                    scaler_state=scaler.state_dict() if scaler is not None else None,
                    epoch=epoch, position=position, step=state.step,
                    sampler_state=sampler.state_dict(epoch, position), rng_state=capture_rng_state(),
                    manifests=manifests, tokenizer=tok_record, base_vocab_size=start.base_vocab_size,
                    model_config=model.gpt_config, hparams=hparams,
                    optimizer_param_names=optimizer_param_names(model, optimizer),
                    last_losses=state.last_losses, last_val_loss=state.last_val_loss,
                    best_val_loss=state.best_val_loss)
                try:
                    with stop.saving_checkpoint(), simulated_disk_full(state.step):
                        path = manager.save(ckpt, state.step, is_best=is_best)
                except CheckpointSaveError as exc:
                    failure = str(exc)
            if any_rank(ctx, failure is not None, device):
                raise SaveFailed(failure or "checkpoint save failed on rank 0")
            if path is not None:
                say(f"saved checkpoint step {state.step} -> {path}" + (" (new best)" if is_best else ""))
                metrics.event("save", state.step, state.epoch, path=str(path), best=is_best)
            return path

        # ---------------------------------------------------------------- the loop
        if rng_state is not None:
            for note in restore_rng_state(rng_state):
                say(f"note: {note}")
            if ctx.rank > 0:  # only rank 0's RNG is saved: other ranks draw fresh dropout streams
                torch.manual_seed(opts["seed"] + ctx.rank + 1_000_003 * state.step)
        else:
            torch.manual_seed(opts["seed"] + ctx.rank)
        # The step whose state latest.pth holds (-1: none yet; after a fallback latest.pth is torn or stale).
        resumed_from_latest = choice is not None and choice.path.resolve() == manager.latest_path.resolve()
        saved_step = state.step if resumed_from_latest else -1
        stopping = any_rank(ctx, stop.requested is not None, device)
        window = loop.Window()
        accumulation = opts["grad_accumulation"]
        # One loader for the run (its workers start once); each epoch it walks that epoch's remaining batches.
        loader = loaders.enter_context(make_loader(train_set, [], collate, opts["num_workers"], device.type == "cuda",
                                                   opts["seed"], persistent=True))
        train_model.train()
        while state.step < total_steps and not stopping:
            epoch_batches = sampler.batches(state.epoch)
            loader.batches = epoch_batches[state.position:]
            in_step, step_parts = 0, []
            micro_total = min(accumulation, len(epoch_batches) - state.position)
            for batch in loader:
                if "error" in batch:
                    raise UsageError(batch["error"])
                last_micro = in_step + 1 == micro_total
                sync = train_model.no_sync() if ctx.enabled and not last_micro else contextlib.nullcontext()
                step_parts.append(loop.micro_step(train_model, batch, device, opts["amp"], opts["loss_mode"],
                                                  weights, 1.0 / micro_total, scaler, sync))
                state.position += 1
                in_step += 1
                if not last_micro:
                    continue
                # ---- one optimizer step
                lr = optimizer.param_groups[0]["lr"]
                grad_norm = loop.optimizer_step(model, optimizer, scaler, opts["grad_clip"])
                if freezer is not None:
                    freezer.after_optimizer_step()
                scheduler.step()
                state.step += 1
                epoch_done = state.position >= len(epoch_batches)
                if epoch_done:
                    state.epoch, state.position = state.epoch + 1, 0
                window.add(state.step, sum_parts(step_parts), grad_norm)
                in_step, step_parts = 0, []
                micro_total = min(accumulation, len(epoch_batches) - state.position)
                finished = state.step >= total_steps

                # ---- log
                if state.step % opts["log_interval"] == 0 or finished:
                    summary = window.summary(ctx.world_size)
                    if ctx.enabled:  # the mean over all ranks' batches, not rank 0's alone
                        names = ("loss", "text_loss", "mel_loss", "mel_top1")
                        totals = sum_over_ranks(ctx, [summary[k] for k in names], device)
                        summary.update({k: v / ctx.world_size for k, v in zip(names, totals)})
                    eta = summary["seconds_per_step"] * (total_steps - state.step)
                    state.last_losses = {k: summary[k] for k in ("loss", "text_loss", "mel_loss", "mel_top1")}
                    say(loop.train_line(state.step, total_steps, min(state.epoch, opts["epochs"] - 1),
                                        opts["epochs"], summary, lr, eta))
                    metrics.event("train", state.step, state.epoch, lr=lr, eta_s=round(eta, 1),
                                  total_steps=total_steps, **summary)
                    window = loop.Window()

                # ---- validate (its time and the save's do not count toward tokens/s)
                paused_at = time.perf_counter()
                is_best = False
                if val_loader is not None and (state.step % opts["val_interval"] == 0 or finished):
                    sums = sum_over_ranks(ctx, loop.evaluate(model, val_loader, device, opts["amp"],
                                                             opts["loss_mode"]), device)
                    val = loop.val_metrics(sums, weights)
                    state.last_val_loss = val["loss"]
                    is_best = state.best_val_loss is None or val["loss"] < state.best_val_loss
                    if is_best:
                        state.best_val_loss = val["loss"]
                    say(f"val step {state.step} | loss {val['loss']:.4f} (text {val['text_loss']:.4f}, "
                        f"mel {val['mel_loss']:.4f}) | mel_top1 {val['mel_top1']:.3f} | best {state.best_val_loss:.4f}")
                    metrics.event("val", state.step, state.epoch, best=is_best, **val)

                # ---- save, test hooks, stop
                if state.step % opts["save_interval"] == 0 or finished or is_best:
                    save(is_best)
                    saved_step = state.step
                window.started += time.perf_counter() - paused_at
                after_step_test_hooks(state.step)
                stopping = any_rank(ctx, stop.requested is not None, device)
                if stopping or finished or epoch_done:
                    break

        # ---------------------------------------------------------------- the end
        if stopping:
            if state.step != saved_step and state.step > 0:
                save(False)
                saved_step = state.step
            where = manager.latest_path if saved_step >= 0 else None
            say(f"stopped by signal at step {state.step}; "
                + (f"saved {where}" if where else "no step was taken, nothing new to save"))
            metrics.event("end", state.step, state.epoch, status="stopped", signal=stop.requested)
            return EXIT_STOPPED
        if saved_step != state.step:
            save(False)  # e.g. resumed at or beyond the end: latest.pth holds the final state
        say(f"training finished at step {state.step}; latest checkpoint {manager.latest_path}")
        metrics.event("end", state.step, state.epoch, status="completed", best_val_loss=state.best_val_loss)
        return EXIT_OK
    except SaveFailed as exc:
        if metrics is not None:
            metrics.event("end", state.step, state.epoch, status="save_failed", error=str(exc))
        return refuse(f"{exc}; training stopped rather than going on without a safety net")
    except Exception as exc:  # recorded for the UI's charts, then reported by run_cli (exit 2) or Python (exit 1)
        if metrics is not None:
            metrics.event("end", state.step, state.epoch, status="failed", error=one_line(exc))
        raise
    finally:
        loaders.close()
        if metrics is not None:
            metrics.close()
        stop.restore()
        if lock is not None:
            lock.release()


class SaveFailed(Exception):
    """A checkpoint could not be committed (disk full, ...): exit 2 with earlier checkpoints intact."""


def sum_parts(parts: list[loop.StepLosses]) -> loop.StepLosses:
    first = parts[0]
    for part in parts[1:]:
        first = loop.StepLosses(first.loss + part.loss, first.text + part.text, first.mel + part.mel,
                                first.top1 + part.top1, first.tokens + part.tokens)
    return first


def restore_training_state(ckpt: dict[str, Any], model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                           scheduler: Any, scaler: torch.amp.GradScaler | None, opts: dict[str, Any],
                           state: TrainState) -> list[str]:
    """Optimizer + scheduler + scaler as one set, step/epoch/position, val losses; returns what was restored."""
    restored = ["model weights"]
    if ckpt.get("optimizer") is not None:
        names = ckpt.get("optimizer_param_names")
        if names is not None and names != optimizer_param_names(model, optimizer):
            raise UsageError("the checkpoint's optimizer state belongs to different parameters than this model's; "
                             "continue from its weights with --init-from instead")
        optimizer.load_state_dict(ckpt["optimizer"])
        scheduler.load_state_dict(ckpt["scheduler"])
        set_peak_lr(scheduler, opts["learning_rate"])
        loop.apply_hparams(optimizer, opts["weight_decay"])
        parts = "optimizer + scheduler"
        if scaler is not None and ckpt.get("scaler") is not None:
            scaler.load_state_dict(ckpt["scaler"])
            parts += " + grad scaler"
        elif scaler is not None:
            parts += " (grad scaler starts fresh: the checkpoint was not trained with fp16)"
        elif ckpt.get("scaler") is not None:
            parts += " (the checkpoint's fp16 grad scaler is not used with --amp " + opts["amp"] + ")"
        restored.append(parts)
    else:
        restored.append("no optimizer state in the checkpoint: optimizer, scheduler and grad scaler start fresh")
    state.step, state.epoch, state.position = int(ckpt["step"]), int(ckpt["epoch"]), int(ckpt["position"])
    state.last_val_loss, state.best_val_loss = ckpt.get("last_val_loss"), ckpt.get("best_val_loss")
    state.last_losses = ckpt.get("last_losses")
    restored.append(f"step {state.step}, epoch {state.epoch}, position {state.position} (sampler)")
    rng = ckpt.get("rng")
    if rng is not None:
        restored.append("RNG (python, numpy, torch cpu" + (", cuda" if rng.get("torch_cuda") else "") + ")")
    return restored


def preflight(values: dict[str, Any]) -> int:
    """``--preflight``: print the checks (and write them as JSON for the UI); 0 when all pass, else 2."""
    from trainer.preflight import run_preflight

    report = run_preflight(values)
    for line in report.lines():
        print(line, flush=True)
    if values["preflight_json"]:
        atomic_write_text(Path(values["preflight_json"]), json.dumps(report.to_dict(), indent=2))
    if report.ok:
        return EXIT_OK
    failed = [check.name for check in report.checks if not check.ok]
    return refuse(f"pre-flight failed: {', '.join(failed) or 'no checks ran'}")


if __name__ == "__main__":
    raise SystemExit(main())
