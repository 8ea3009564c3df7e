"""A run's checkpoint saves, in one place for ``trainer.run.TrainingRun``: each save's snapshot handed to the
background writer, its commit reported, a failed write learnt by every rank, and the samples spoken after a
committed save (or owed, when a stop was asked for).

Training goes on while a file is written; the ``save`` event and the run's ``saved_step`` follow the commit, never
the queueing (``trainer.checkpoints.writer``). Only rank 0 writes.
"""

from __future__ import annotations

import contextlib
from typing import Any

from trainer.checkpoints import CheckpointManager, CheckpointSaveError, build_checkpoint
from trainer.checkpoints.writer import BackgroundWriter, WriteResult, snapshot
from trainer.distributed import any_rank
from trainer.samples import make_samples
from trainer.signals import killed_during_save, simulated_disk_full
from trainer.state import checkpoint_fields, gather_components

TrainingRun = Any  # trainer.run.TrainingRun (it imports this module)


class SaveFailed(Exception):
    """A checkpoint could not be committed (disk full, ...): exit 2 with earlier checkpoints intact."""


class RunSaves:
    def __init__(self, run: TrainingRun) -> None:
        self.run = run
        self.writer: BackgroundWriter | None = None  # checkpoint writes in the background (open)
        self._pending: dict[int, tuple[int, int]] = {}  # step -> (epoch, samples) of writes not yet reported
        self._write_failure: str | None = None
        self._submitted_step: int | None = None  # the newest step handed to the writer
        self.owed: list[int] = []  # saves whose samples a stop left for later (the end event lists them)

    def open(self, manager: CheckpointManager) -> None:
        self.writer = BackgroundWriter(manager, write_context=self._write_context)

    def save_if_finite(self, is_best: bool) -> bool:
        """Save, unless the latest step's loss or gradient was not finite (a good latest.pth is never replaced by it).

        Returns whether a save was made."""
        run = self.run
        longest, trailing, _count = run.window.nonfinite_streaks()
        run.check_nonfinite_summary({"nonfinite_streak": longest})
        if trailing:
            kept = f"latest.pth keeps step {run.saved_step}" if run.saved_step >= 0 else "nothing saved yet"
            run.say(f"warning: not saving step {run.state.step}: its loss or gradient was not finite ({kept})")
            return False
        self.save(is_best)
        return True

    def save(self, is_best: bool) -> None:
        """Snapshot the state and hand it to the background writer (rank 0); every rank learns of a failed write.

        Training goes on while the file is written; the ``save`` event and ``saved_step`` follow the commit
        (``_report``). A save waits for the one before it, so a failure is known here at the latest.
        """
        run = self.run
        state, failure = run.state, None
        # Every rank's part (its RNG streams) reaches rank 0: a collective, so no rank is still in the step
        # when rank 0 takes the snapshot, and the any_rank below is the next one.
        gather_components(run.components)
        if run.ctx.is_main:
            failure = self.settle()
            if failure is None:
                assert self.writer is not None
                ckpt = snapshot(build_checkpoint(**checkpoint_fields(run.components)))
                self._pending[state.step] = (state.epoch, state.samples_seen)
                # With --best-by cer|sim best.pth follows the evaluation's results instead (trainer.evaluation.best).
                self.writer.submit(ckpt, state.step, is_best and run.opts.best_by == "val_loss")
        if any_rank(run.ctx, failure is not None, run.device):
            raise SaveFailed(failure or "checkpoint save failed on rank 0")
        self._submitted_step = state.step
        # Rank 0 alone speaks samples, after this checkpoint committed (no collective here: a failed write
        # reaches the other ranks at the next save or at the end). Once a stop is asked for, the stopping save
        # is committed and the run ends: its samples are owed, never spoken in the stopping process.
        if self._samples_due() and self.settle() is None:
            if run.stop.requested is None:
                self._speak_samples()
            else:
                self._owe_samples(state.step)

    def _write_context(self, step: int) -> contextlib.ExitStack:
        stack = contextlib.ExitStack()
        stack.enter_context(self.run.stop.saving_checkpoint())
        stack.enter_context(simulated_disk_full(step))
        stack.enter_context(killed_during_save(step))
        return stack

    def _report(self, result: WriteResult | None) -> None:
        """Record a finished background write (rank 0): the line, the ``save`` event, ``saved_step``."""
        if result is None:
            return
        run = self.run
        epoch, samples = self._pending.pop(result.step, (run.state.epoch, run.state.samples_seen))
        if result.error is not None:
            self._write_failure = self._write_failure or result.error
            run.say(f"error: {result.error}")
            return
        run.saved_step = result.step
        run.say(f"saved checkpoint step {result.step} -> {result.path}" + (" (new best)" if result.is_best else ""))
        assert run.metrics is not None
        run.metrics.event("save", result.step, epoch, path=str(result.path), best=result.is_best, samples=samples,
                          write_s=round(result.seconds, 3))
        if run.evaluation is not None:
            run.evaluation.announce(result.step)

    def settle(self) -> str | None:
        """Wait for the write in flight (rank 0) and report it; the first failure so far, if any."""
        assert self.writer is not None
        try:
            self._report(self.writer.wait())
        except CheckpointSaveError as exc:
            self._write_failure = self._write_failure or str(exc)
        return self._write_failure

    def drain(self) -> None:
        """Every rank: wait for the last background write; SaveFailed (on every rank) when a write failed."""
        run = self.run
        failure = self.settle() if run.ctx.is_main else None
        if any_rank(run.ctx, failure is not None, run.device):
            raise SaveFailed(failure or "checkpoint save failed on rank 0")
        if not run.ctx.is_main and self._submitted_step is not None:
            run.saved_step = self._submitted_step  # rank 0 committed it (it said no failure): every rank agrees

    def poll(self) -> None:
        """Report a write that finished meanwhile; a single process stops at once on a failed one (under
        torchrun the ranks learn it at the next save, which waits for this one)."""
        run = self.run
        if not run.ctx.is_main:
            return
        assert self.writer is not None
        self._report(self.writer.poll())
        if self._write_failure is not None and not run.ctx.enabled:
            raise SaveFailed(self._write_failure)

    def settle_quietly(self) -> None:
        """On the way out after an error: let the write in flight finish, so ``saved_step`` is the truth."""
        if self.run.ctx.is_main and self.writer is not None:
            with contextlib.suppress(CheckpointSaveError):
                self._report(self.writer.wait())

    def _samples_due(self) -> bool:
        run = self.run
        plan, every = run.plan.samples, int(run.opts.sample_every)
        return bool(run.ctx.is_main and plan is not None and plan.enabled
                    and not (every and run.state.step % every))

    def _speak_samples(self) -> None:
        """Rank 0, after a committed save: hear the model (see trainer.samples; never stops training). A stop
        asked for meanwhile leaves the rest of them for later."""
        run = self.run
        assert run.metrics is not None and run.plan.samples is not None
        made = make_samples(run.plan.samples, run.model, run.plan.tokenizer, run.state.step, run.state.epoch,
                            run.out_dir, run.metrics, run.say,
                            stop_requested=lambda: run.stop.requested is not None,
                            interruptible=run.stop.interruptible())
        if not made:
            self._owe_samples(run.state.step)

    def _owe_samples(self, step: int) -> None:
        if step not in self.owed:
            self.owed.append(step)
        self.run.say(f"samples of step {step} left for later: a stop was asked for (the checkpoint is committed; its "
                     "samples and scores can be made from the Checkpoints tab)")
