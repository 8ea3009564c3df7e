"""A run's language parts, in one place for ``trainer.run.TrainingRun``: the 2.5 language row
(``trainer.language_row``), replay's weighted epochs (``trainer.replay``, built into the sampler by the plan),
validation per language and the forgetting guard (``trainer.forgetting``).

Validation per language: when the validation manifests name languages (``PATH::lang``), each language's items
are validated on their own (at most ``--max-val-batches`` batches each) and the overall validation loss is the
token-weighted total of those (the same formula as one pass over them together), so no item is validated twice.
"""

from __future__ import annotations

from typing import Any

from trainer import steps
from trainer.batch_loader import make_loader
from trainer.data import make_dataset
from trainer.distributed import sum_over_ranks
from trainer.forgetting import ForgettingGuard, ForgettingStop, checkpoint_before, watched_languages
from trainer.language_row import (
    LANG_TABLE,
    freeze_other_language_rows,
    init_language_row,
    lang_lr_mults,
    run_language,
)
from trainer.replay import describe, items_by_language
from trainer.sampler import BucketBatchSampler
from trainer.vocab import BaseRowFreezer

TrainingRun = Any  # trainer.run.TrainingRun (it imports this module)


class LanguageParts:
    def __init__(self, run: TrainingRun) -> None:
        self.run = run
        self.row_freezer: BaseRowFreezer | None = None
        self.val_loaders: dict[str, Any] = {}
        self.guard: ForgettingGuard | None = None

    # ----- the model -----------------------------------------------------------------------------------

    def _has_language_table(self) -> bool:
        return LANG_TABLE in dict(self.run.model.named_parameters())

    def prepare_model(self) -> None:
        """``--lang-init-from``: copy the row at a fresh start, then hold every other row (checked by the plan)."""
        run, opts = self.run, self.run.opts
        source = str(opts.lang_init_from or "").strip().lower()
        if not source or not self._has_language_table():
            return
        target = run_language(opts)
        assert target is not None  # the plan refused a run without a language
        if run.plan.resume is None:
            run.say(init_language_row(run.model, source, target))
        else:
            run.say(f"language row {target}: trained since --lang-init-from {source} (not copied again on resume)")
        self.row_freezer = freeze_other_language_rows(run.model, target)
        run.say(f"frozen: the other {len(self.row_freezer.rows)} rows of lang_embedding")

    def lr_mults(self) -> dict[str, float]:
        return lang_lr_mults(self.run.model, self.run.opts)

    def after_optimizer_step(self) -> None:
        if self.row_freezer is not None:
            self.row_freezer.after_optimizer_step()

    # ----- the data --------------------------------------------------------------------------------------

    def prepare_data(self, gpt: dict[str, Any], text_vocab: int | None) -> None:
        """Replay's log lines, the per-language validation loaders and the forgetting guard."""
        run, opts, plan, ctx = self.run, self.run.opts, self.run.plan, self.run.ctx
        for line in describe(run.sampler.groups):
            run.say(line)
        if plan.val is None or not plan.val.items:
            return
        for language, items in items_by_language(plan.val.items, opts.val_manifest or []).items():
            dataset = make_dataset(items, gpt, text_vocab, plan.val.report.format)
            batches = BucketBatchSampler(dataset.lengths(), opts.batch_size, opts.seed, rank=ctx.rank,
                                         world_size=ctx.world_size).batches(0)
            if opts.max_val_batches:
                batches = batches[: opts.max_val_batches]
            if not batches:
                run.say(f"warning: validation of {language} gives no batch for each of {ctx.world_size} processes: "
                        "not validated on its own")
                continue
            self.val_loaders[language] = run.loaders.enter_context(make_loader(
                dataset, batches, dataset.collate, opts.num_workers, run.device.type == "cuda", opts.seed,
                persistent=True))
        if self.val_loaders:
            run.say("validation per language: " + ", ".join(f"{lang} ({len(loader.batches)} batches)"
                                                            for lang, loader in self.val_loaders.items()))
        if float(opts.forget_margin or 0) > 0:
            watched = watched_languages(self.val_loaders, run_language(opts))
            if watched:
                self.guard = ForgettingGuard(watched, float(opts.forget_margin))
                run.components.append(self.guard)
                run.say(f"forgetting guard: validation loss of {', '.join(watched)} may rise at most "
                        f"{opts.forget_margin:g} above its first value"
                        + (" (else the run stops)" if opts.stop_on_forgetting else ""))
            else:
                run.say("warning: --forget-margin has no language to watch: give validation manifests of the "
                        "replayed languages as PATH::lang")

    # ----- validation ------------------------------------------------------------------------------------

    def validate(self) -> tuple[list[float] | None, dict[str, dict[str, float]]]:
        """(the overall sums, or None when not per language; each language's metrics)."""
        run = self.run
        if not self.val_loaders:
            return None, {}
        total: list[float] | None = None
        per_language = {}
        for language, loader in self.val_loaders.items():
            sums = sum_over_ranks(run.ctx, steps.evaluate(run.model, loader, run.device, run.opts.amp,
                                                          run.opts.loss_mode), run.device)
            per_language[language] = steps.val_metrics(sums, run.weights)
            total = sums if total is None else [a + b for a, b in zip(total, sums)]
        run.say("val per language: " + ", ".join(f"{lang} {m['loss']:.4f}" for lang, m in per_language.items()))
        return total, per_language

    def judge_forgetting(self, per_language: dict[str, dict[str, float]]) -> None:
        run = self.run
        if self.guard is None or not per_language:
            return
        state = run.state
        alarms = self.guard.observe(state.step, {k: v["loss"] for k, v in per_language.items()})
        if alarms:  # every rank sees the same (all-reduced) losses, so every rank joins this wait
            run.saves.drain()  # the checkpoint to name may still be in the background writer's hands
        for alarm in alarms:
            where = checkpoint_before(run.out_dir, alarm.last_good_step)
            run.say("warning: " + alarm.describe(where))
            run.metrics.event("forgetting", state.step, state.epoch, language=alarm.language, first=alarm.first,
                              loss=alarm.now, margin=alarm.margin, last_good_step=alarm.last_good_step,
                              checkpoint=where, stopping=bool(run.opts.stop_on_forgetting))
            if run.opts.stop_on_forgetting:
                raise ForgettingStop(alarm.describe(where))
