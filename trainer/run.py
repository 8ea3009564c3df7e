"""One training run, executed from its plan in short named stages.

``TrainingRun(plan, ctx)`` is made from a ``RunPlan`` whose checks all passed (``trainer.plan``), so
nothing here re-checks the inputs: it builds what the plan describes and runs it.

    build_model -> build_data -> build_optimisation -> restore -> open_outputs -> loop -> finish

The loop: micro-batches with gradient accumulation, one optimizer step (a non-finite loss or gradient
skips the update on the device, without a host sync), frozen base rows, log, validate, save, stop.
Saving (checkpoints written in the background, samples after each) is ``trainer.run_saves``'s, a validation
pass ``trainer.run_validation``'s and the language parts are ``trainer.run_languages``'s.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from networks.loading import StateDictMismatchError
from networks.unified_voice import load_gpt_state_dict
from trainer import parallel, steps
from trainer.batch_loader import make_loader
from trainer.checkpoints import CheckpointManager
from trainer.data import make_dataset
from trainer.distributed import DistContext, any_rank, gather_objects, sum_tensor
from trainer.errors import UsageError
from trainer.evaluation.best import rotation_guard
from trainer.evaluation.process import EvalProcess
from trainer.lora_setup import LoRAAdapters, adapt_model
from trainer.metrics import MetricsLog, truncate_after_step
from trainer.options import write_train_config
from trainer.plan import RunPlan
from trainer.run_languages import LanguageParts
from trainer.run_options import RunOptions
from trainer.run_saves import RunSaves
from trainer.run_validation import validate, validation_loader
from trainer.sampler import BucketBatchSampler
from trainer.schedule import build_scheduler
from trainer.signals import (
    GracefulStop,
    after_step_test_hooks,
    record_samples_hook,
    test_hook_due,
)
from trainer.state import components_of, restore_components
from trainer.vocab import BaseRowFreezer, frozen_text_rows

STOP_POLL_STEPS = 10


class NonFiniteLoss(Exception):
    """The loss or gradient was not finite for too many optimizer steps in a row: exit 2, last good checkpoint kept."""


@dataclass
class Position:
    step: int = 0  # optimizer steps done
    epoch: int = 0  # epoch in progress (0-based)
    position: int = 0  # batches of that epoch consumed (this rank's)
    samples_seen: int = 0  # training samples consumed by all ranks since step 0
    last_val_loss: float | None = None
    best_val_loss: float | None = None
    last_losses: dict[str, float] | None = None


class TrainingRun:
    def __init__(self, plan: RunPlan, ctx: DistContext, stop: GracefulStop) -> None:
        assert plan.ok and plan.start is not None and plan.device is not None and plan.sampler is not None
        self.plan, self.ctx, self.stop = plan, ctx, stop
        self.opts: RunOptions = plan.opts
        self.out_dir = Path(self.opts.output_dir)
        self.device: torch.device = plan.device
        self.start = plan.start
        self.sampler: BucketBatchSampler = plan.sampler
        self.state = Position()
        self.loaders = contextlib.ExitStack()  # their worker processes end with the run, however it ends
        self.metrics: MetricsLog | None = None
        self.freezer: BaseRowFreezer | None = None
        self.val_loader: Any = None
        self.saved_step = -1  # the step whose state latest.pth holds (-1: none yet)
        self.saves = RunSaves(self)  # checkpoint writes in the background, samples after each (trainer.run_saves)
        self.components = components_of(self)  # what a checkpoint holds, piece by piece (trainer.state)
        self.sample_ids: list[str] | None = [] if record_samples_hook() else None  # test hook only
        self.evaluation: EvalProcess | None = None  # --eval-at-saves: the child that measures each save

    def say(self, message: str) -> None:
        if self.ctx.is_main:
            print(message, flush=True)

    # ----- set-up ----------------------------------------------------------------------------------

    def build_model(self) -> None:
        opts, start, plan = self.opts, self.start, self.plan
        assert plan.generation is not None and plan.tokenizer is not None
        self.say(f"device {self.device}" + (f" x {self.ctx.world_size} processes" if self.ctx.enabled else "")
                 + f", amp {opts.amp}, tokenizer {opts.tokenizer} ({plan.tokenizer.vocab_size} pieces)")
        random.seed(opts.seed)
        np.random.seed(opts.seed)
        torch.manual_seed(opts.seed)
        self.model = plan.generation.model.build(start.gpt_config)  # its GPT class, as its entry says
        if start.state_dict is not None:
            try:
                dropped = load_gpt_state_dict(self.model, start.state_dict)
            except StateDictMismatchError as exc:  # the plan checked this; a file changed since?
                raise UsageError(f"{start.source} does not fit the model of --config {opts.config}: {exc}") from None
            if dropped:
                self.say(f"dropped {len(dropped)} inference-only alias keys (gpt.wte.*, inference_model.*)")
        self.say(f"model: {plan.generation.name} GPT from {start.source}; {steps.count_parameters(self.model):,} "
                 f"parameters, text vocabulary {self.model.text_vocab_size} rows")
        for line in start.lines:
            self.say("  " + line)
        self.adaptation = adapt_model(self.model, opts)  # LoRA: adapters wrapped, the base frozen (trainer.lora_setup)
        for line in self.adaptation.lines():
            self.say(line)
        if self.adaptation.config is not None:
            self.components.append(LoRAAdapters(self.model, self.adaptation.config))
        self.model.to(self.device)
        if self.device.type == "cuda":  # TF32 matmuls on Ampere and later: fp32 range, ~8x the throughput
            torch.set_float32_matmul_precision("high")
            torch.backends.cudnn.allow_tf32 = True
        self.model.set_gradient_checkpointing(opts.grad_checkpointing)
        self._freeze_base_rows()
        self.languages = LanguageParts(self)  # 2.5 language row, per-language validation, forgetting guard
        self.languages.prepare_model()
        self.train_model: torch.nn.Module = self.model
        if self.ctx.enabled:
            self.train_model = parallel.wrap_for_processes(self)  # DDP, or FSDP2 with --sharding fsdp (trainer.fsdp)

    def _freeze_base_rows(self) -> None:
        start, choice = self.start, self.plan.resume
        if start.grown and self.opts.freeze_base_rows:
            base_rows, extra_row = frozen_text_rows(start.gpt_config, int(start.base_vocab_size),
                                                    self.plan.generation.model.appends_text_rows)
            self.freezer = BaseRowFreezer(self.model, base_rows=base_rows, extra_row=extra_row)
            extra = f" and the extra row {extra_row}" if extra_row is not None else " (the spare row included)"
            self.say(f"frozen: {self.freezer.num_frozen_params:,} parameters (base rows 0..{base_rows - 1}{extra} "
                     "of text_embedding, text_head)")
            if choice is not None and not (choice.checkpoint.get("hparams") or {}).get("freeze_base_rows", True):
                self.say("warning: the run trained its base rows before this resume (--no-freeze-base-rows); they are "
                         "frozen from now on at their current values, which are no longer the base checkpoint's")
        elif start.grown:
            self.say("base rows are NOT frozen (--no-freeze-base-rows): they train with the new rows")

    def build_data(self) -> None:
        opts, plan, ctx = self.opts, self.plan, self.ctx
        assert plan.train is not None and plan.gpt is not None
        for data in (plan.train, plan.val):
            for line in data.lines if data else []:
                self.say(line)
        gpt = self.start.gpt_config
        text_vocab = plan.tokenizer.vocab_size if plan.tokenizer is not None else None
        self.train_set = make_dataset(plan.train.items, gpt, text_vocab, plan.train.report.format)
        self.collate = self.train_set.collate
        batches_per_epoch = len(self.sampler)
        self.steps_per_epoch = math.ceil(batches_per_epoch / opts.grad_accumulation)
        self.total_steps = self.steps_per_epoch * opts.epochs
        if opts.max_steps:
            self.total_steps = min(self.total_steps, opts.max_steps)
        self.languages.prepare_data(gpt, text_vocab)
        self.val_loader = validation_loader(self, gpt, text_vocab)
        self.global_batch = opts.batch_size * ctx.world_size * opts.grad_accumulation
        composition = (f"{opts.batch_size} per device x {ctx.world_size} processes x "
                       f"{opts.grad_accumulation} accumulated" if ctx.enabled
                       else f"grad accumulation {opts.grad_accumulation}")
        self.say(f"{batches_per_epoch} batches of {opts.batch_size} per epoch, {self.steps_per_epoch} optimizer "
                 f"steps per epoch ({composition}, global batch {self.global_batch}), "
                 f"{self.total_steps} steps in total")

    def build_optimisation(self) -> None:
        opts = self.opts
        self.optimizer = steps.build_optimizer(self.model, opts.learning_rate, opts.weight_decay, self.device,
                                               self.languages.lr_mults())
        self.scheduler = build_scheduler(self.optimizer, opts.warmup_steps, self.total_steps)
        self.scaler = steps.make_scaler(opts.amp, self.device)
        self.weights = steps.LossWeights(opts.text_loss_weight, opts.mel_loss_weight)

    def restore(self) -> None:
        """A fresh start, or every component's part of the resumed checkpoint (trainer.state)."""
        choice, point, opts = self.plan.resume, self.plan.resume_point, self.opts
        if choice is None:
            if opts.init_from:
                self.say(f"initialised from {opts.init_from} weights with a fresh optimizer, scheduler and grad "
                         f"scaler: step 0, full warm-up of {opts.warmup_steps} steps")
            else:
                self.say("starting fresh at step 0")
            torch.manual_seed(opts.seed + self.ctx.rank)
            return
        assert point is not None
        for note in choice.notes:
            self.say(f"warning: {note}")
        if point.change:
            self.say(f"warning: {point.change}")
        restored = restore_components(self.components, choice.checkpoint)
        state = self.state
        self.say(f"resumed from {choice.path} at step {state.step}, epoch {state.epoch}, position {state.position}")
        self.say("restored: " + ", ".join(restored))
        manager_latest = (self.out_dir / "latest.pth").resolve()
        self.saved_step = state.step if choice.path.resolve() == manager_latest else -1

    def open_outputs(self) -> None:
        choice, state = self.plan.resume, self.state
        if self.ctx.is_main:
            write_train_config(self.opts, self.out_dir / "train_config.yaml")
            if choice is None:
                (self.out_dir / "metrics.jsonl").unlink(missing_ok=True)
            else:
                truncate_after_step(self.out_dir / "metrics.jsonl", state.step)
        best_by = self.opts.best_by
        protect = rotation_guard(self.out_dir, best_by, self.opts.keep_best) if best_by != "val_loss" else None
        self.manager = CheckpointManager(self.out_dir, keep=self.opts.keep_checkpoints, protect=protect)
        self.saves.open(self.manager)
        self.metrics = MetricsLog(self.out_dir, enabled=self.ctx.is_main)
        assert self.plan.generation is not None
        self.metrics.event("resume" if choice else "start", state.step, state.epoch, position=state.position,
                           samples=state.samples_seen, total_steps=self.total_steps,
                           steps_per_epoch=self.steps_per_epoch, version=self.plan.generation.id,
                           global_batch=self.global_batch, world_size=self.ctx.world_size,
                           source=str(choice.path) if choice else self.start.source,
                           tensorboard=str(self.metrics.tb_dir) if self.metrics.tb_dir else None)
        if self.ctx.is_main and self.opts.eval_at_saves:
            self.evaluation = EvalProcess(self.out_dir, self.opts.eval_threads, self.say)
            self.evaluation.start()

    # ----- the loop --------------------------------------------------------------------------------

    def loop(self) -> bool:
        """Train until the last step or a stop request; True when stopped by a signal."""
        opts, state, ctx = self.opts, self.state, self.ctx
        stopping = any_rank(ctx, self.stop.requested is not None, self.device)
        self.window = steps.Window()
        accumulation = opts.grad_accumulation
        # One loader for the run (its workers start once); each epoch it walks that epoch's remaining batches.
        loader = self.loaders.enter_context(make_loader(self.train_set, [], self.collate, opts.num_workers,
                                                        self.device.type == "cuda", opts.seed, persistent=True))
        global_mean = steps.GlobalMean(ctx.world_size, lambda t: sum_tensor(ctx, t)) if ctx.enabled else None
        self.train_model.train()
        while state.step < self.total_steps and not stopping:
            epoch_batches = self.sampler.batches(state.epoch)
            rounds = self.sampler.samples_after(state.epoch)
            loader.batches = epoch_batches[state.position:]
            in_step, parts = 0, []
            micro_total = min(accumulation, len(epoch_batches) - state.position)
            for batch in loader:
                if "error" in batch:
                    raise UsageError(batch["error"])
                if self.sample_ids is not None:
                    self.sample_ids += batch["ids"]
                last_micro = in_step + 1 == micro_total
                sync = self.train_model.no_sync() if ctx.enabled and not last_micro else contextlib.nullcontext()
                parts.append(steps.micro_step(self.train_model, batch, self.device, opts.amp, opts.loss_mode,
                                             self.weights, 1.0 / micro_total, self.scaler, sync, global_mean))
                state.samples_seen += int(rounds[state.position + 1] - rounds[state.position])
                state.position += 1
                in_step += 1
                if not last_micro:
                    continue
                epoch_done = self._optimizer_step(parts, len(epoch_batches))
                in_step, parts = 0, []
                micro_total = min(accumulation, len(epoch_batches) - state.position)
                stopping = self._after_step()
                if stopping or state.step >= self.total_steps or epoch_done:
                    break
            else:
                if state.position >= len(epoch_batches):  # defensive: an epoch with no step left in it
                    state.epoch, state.position = state.epoch + 1, 0
        return stopping

    def _optimizer_step(self, parts: list[steps.StepLosses], epoch_batches: int) -> bool:
        state = self.state
        losses = steps.sum_losses(parts)
        lr = self.optimizer.param_groups[0]["lr"]
        grad_norm, nonfinite = steps.optimizer_step(self.model, self.optimizer, self.scaler, self.opts.grad_clip,
                                                   losses.loss)
        if self.freezer is not None:
            self.freezer.after_optimizer_step()
        self.languages.after_optimizer_step()
        self.scheduler.step()
        state.step += 1
        epoch_done = state.position >= epoch_batches
        if epoch_done:
            state.epoch, state.position = state.epoch + 1, 0
        self.window.add(state.step, losses, grad_norm, nonfinite, lr)
        return epoch_done

    def _after_step(self) -> bool:
        """Log, validate, save, test hooks; True when every rank should stop now."""
        opts, state = self.opts, self.state
        finished = state.step >= self.total_steps
        if state.step % opts.log_interval == 0 or finished:
            self._log()
        paused_at = time.perf_counter()  # validation and saving do not count toward tokens/s
        is_best = False
        if self.val_loader is not None and (state.step % opts.val_interval == 0 or finished):
            is_best = validate(self)
        # A new best validation loss saves at once only when best.pth follows it (--best-by val_loss).
        if state.step % opts.save_interval == 0 or finished or (is_best and opts.best_by == "val_loss"):
            self.saves.save_if_finite(is_best)
        self.saves.poll()
        self.window.started += time.perf_counter() - paused_at
        if test_hook_due(state.step):  # a hook that kills or stops here sees this step's save committed
            self.saves.drain()
        after_step_test_hooks(state.step)
        # Under torchrun the ranks agree on stopping through one all-reduce every STOP_POLL_STEPS steps (and at the
        # end), not every step; a single process looks at its own flag every step, which costs nothing.
        if self.ctx.enabled and state.step % STOP_POLL_STEPS and not finished:
            return False
        return any_rank(self.ctx, self.stop.requested is not None, self.device)

    def _log(self) -> None:
        state, ctx = self.state, self.ctx
        # Under DDP every step's values are the global batch's (all ranks' shares summed), not rank 0's alone.
        summary = self.window.summary(ctx.world_size, (lambda t: sum_tensor(ctx, t)) if ctx.enabled else None)
        self.check_nonfinite_summary(summary)
        eta = summary["seconds_per_step"] * (self.total_steps - state.step)
        lr = summary.pop("lr")
        state.last_losses = {k: summary[k] for k in ("loss", "text_loss", "mel_loss", "mel_top1")}
        if self.sample_ids is not None:  # test hook: which items each rank trained on since the last line
            summary["sample_ids"], self.sample_ids = gather_objects(ctx, self.sample_ids), []
        assert self.metrics is not None  # the event first: the studio's progress bar never lags its log
        self.metrics.event("train", state.step, state.epoch, lr=lr, eta_s=round(eta, 1), total_steps=self.total_steps,
                           samples=state.samples_seen, **summary)
        self.say(steps.train_line(state.step, self.total_steps, min(state.epoch, self.opts.epochs - 1),
                                 self.opts.epochs, summary, lr, eta))
        self.window = steps.Window(streak_before=int(summary["nonfinite_trailing"]))

    def check_nonfinite_summary(self, summary: dict[str, Any]) -> None:
        streak = int(summary.get("nonfinite_streak") or 0)
        limit = int(self.opts.max_nonfinite_steps)
        if streak >= limit:
            raise NonFiniteLoss(f"the loss or gradient was not finite for {streak} optimizer steps in a row (up to "
                                f"step {self.state.step}; --max-nonfinite-steps {limit}): those steps did not change "
                                "the weights; lower --learning-rate, use --amp off or check the data with the Data "
                                "tab's checker")

    # ----- the end ---------------------------------------------------------------------------------

    def finish(self, stopped: bool) -> bool:
        """Final save and the end event, each after the writes before it committed; returns ``stopped``."""
        state = self.state
        assert self.metrics is not None
        if stopped:  # the order a stop keeps: this event, the stopping save committed, the end event, exit
            self.metrics.event("stop", state.step, state.epoch, signal=self.stop.requested,
                               requested_at=self.stop.requested_at)
        self.saves.drain()
        if stopped:
            if state.step != self.saved_step and state.step > 0:
                self.saves.save_if_finite(False)
                self.saves.drain()
            where = self.manager.latest_path if self.saved_step >= 0 else None
            self.say(f"stopped by signal at step {state.step}; "
                     + (f"saved {where} (step {self.saved_step})" if where else "nothing saved"))
            self.metrics.event("end", state.step, state.epoch, status="stopped", signal=self.stop.requested,
                               saved_step=self.saved_step if self.saved_step >= 0 else None,
                               samples_owed=list(self.saves.owed))
            self._end_evaluation()
            return True
        if self.saved_step != state.step:  # e.g. resumed at or beyond the end: latest.pth holds the final state
            if not self.saves.save_if_finite(False):  # never report a checkpoint of a step that was not written
                raise NonFiniteLoss(f"the loss or gradient of the last step ({state.step}) was not finite, so it "
                                    "was not saved; lower --learning-rate, use --amp off or check the data with "
                                    "the Data tab's checker")
            self.saves.drain()
        self.say(f"training finished at step {state.step}; latest checkpoint {self.manager.latest_path}")
        if self.evaluation is not None:
            self.evaluation.finish()
            self.evaluation = None
        self.metrics.event("end", state.step, state.epoch, status="completed", best_val_loss=state.best_val_loss,
                           saved_step=self.saved_step)
        return False

    def end_event(self, status: str, error: str, error_type: str) -> None:
        if self.metrics is not None:
            self.metrics.event("end", self.state.step, self.state.epoch, status=status, error=error,
                               error_type=error_type, saved_step=self.saved_step if self.saved_step >= 0 else None)

    def _end_evaluation(self) -> None:
        if self.evaluation is not None:
            self.evaluation.end()
            self.evaluation = None

    def close(self) -> None:
        self.saves.settle_quietly()
        self._end_evaluation()
        self.loaders.close()
        if self.metrics is not None:
            self.metrics.close()
