"""Fine-tune the IndexTTS GPT (IndexTTS-1.5 or IndexTTS2): ``python -m trainer.train --help``.

Read top to bottom: options -> the run plan (every check; the pre-flight shows the same plan) -> the
output-dir lock -> the run's stages (``trainer.run``): model, data, optimisation, restore, outputs, loop,
finish.

Exit codes: 0 finished; 2 refused (one line ``error: ...`` on stderr), also when a checkpoint cannot be
saved or the loss stays non-finite; 130 stopped by SIGINT/SIGTERM after saving latest.pth; 1 anything
unexpected, also a collective that failed under ``torchrun`` (another rank died or stalled beyond
``--collective-timeout``: one ``error:`` line naming the rank, no traceback, no hang). Under ``torchrun``
only rank 0 writes files.
"""

from __future__ import annotations

import signal
import sys

if __name__ == "__main__":
    # A stop during the imports below (a second or more) ends the run like a stop before its first step.
    def _stopped_while_starting(signum: int, _frame: object) -> None:
        sys.stderr.write(f"{signal.Signals(signum).name} received while starting: stopped before training began\n")
        raise SystemExit(130)

    for _signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(_signum, _stopped_while_starting)

import json
import os
from pathlib import Path

from data_tools.fileio import atomic_write_text
from trainer.checkpoints import OutputDirLock, clean_stale_temp_files
from trainer.distributed import (
    DistContext,
    collective_failure,
    collective_failure_message,
    gather_objects,
    init_distributed,
    shutdown,
)
from trainer.elastic import resume_after_restart, stopped_before_restart
from trainer.errors import (
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_STOPPED,
    EXIT_UNEXPECTED,
    UsageError,
    one_line,
    refuse,
    run_cli,
)
from trainer.forgetting import ForgettingStop
from trainer.plan import make_plan
from trainer.run import NonFiniteLoss, TrainingRun
from trainer.run_options import RunOptions, parse_run_options
from trainer.run_saves import SaveFailed
from trainer.signals import GracefulStop, active_test_hooks


def main(argv: list[str] | None = None) -> int:
    values = parse_run_options(sys.argv[1:] if argv is None else argv)
    if values.preflight:
        return run_cli(lambda: preflight(values))
    if values.train == "s2mel":  # one process: the S2Mel decoder (trainer.s2mel.run_cli)
        from trainer.s2mel.run_cli import train_s2mel

        return run_cli(lambda: train_s2mel(values))
    stopped = stopped_before_restart(values.output_dir)
    if stopped:  # every rank reads the same shared folder, so all of them leave before the process group forms
        if os.environ.get("RANK", "0") == "0":
            print(stopped, flush=True)
        return EXIT_STOPPED
    ctx = init_distributed(values.device, values.collective_timeout)
    values, restart_note = resume_after_restart(values)
    if restart_note and ctx.is_main:
        print(restart_note, flush=True)
    code = EXIT_UNEXPECTED
    try:
        code = run_cli(lambda: train(values, ctx))
        return code
    finally:
        shutdown(ctx, together=code != EXIT_UNEXPECTED)


def train(opts: RunOptions, ctx: DistContext) -> int:
    stop = GracefulStop(print if ctx.is_main else lambda _message: None).install()
    lock = None
    run: TrainingRun | None = None
    try:
        # Rank 0 takes the output-dir lock for the job: the other ranks do not look at it (they would find rank 0's).
        plan = make_plan(opts, rank=ctx.rank, world_size=ctx.world_size, local_rank=ctx.local_rank,
                         distributed=ctx.enabled, own_lock=not ctx.is_main)
        # The ranks refuse together (one collective), so none goes on to wait for a rank that left. They also
        # compare where they start: each reads the checkpoint in its own --output-dir, and a node that finds
        # another checkpoint (or none) would train out of step with the others until a collective timed out.
        shared = gather_objects(ctx, (plan.refusal, plan.starting_point() if plan.ok else None))
        refusal = next((text if not ctx.enabled else f"rank {rank}: {text}"
                        for rank, (text, _) in enumerate(shared) if text), None)
        refusal = refusal or start_disagreement([point for _, point in shared])
        if refusal:
            if not ctx.is_main:
                return EXIT_REFUSED  # rank 0 says why, once for the job (its own refusal or another rank's)
            raise UsageError(refusal)
        out_dir = Path(opts.output_dir)
        if ctx.is_main:
            lock = OutputDirLock(out_dir).acquire()
            for stale in clean_stale_temp_files(out_dir):
                print(f"removed {stale.name}: a checkpoint write that never finished", flush=True)
        for line in active_test_hooks() if ctx.is_main else []:
            print(line, flush=True)
        run = TrainingRun(plan, ctx, stop)
        run.build_model()
        run.build_data()
        run.build_optimisation()
        run.restore()
        run.open_outputs()
        stopped = run.loop()
        return EXIT_STOPPED if run.finish(stopped) else EXIT_OK
    except SaveFailed as exc:
        if run is not None:
            run.saves.settle_quietly()
            run.end_event("save_failed", str(exc), "SaveFailed")
        return refuse(f"{exc}; training stopped rather than going on without a safety net")
    except NonFiniteLoss as exc:
        if run is not None:
            run.saves.settle_quietly()
        last = f"step {run.saved_step}" if run is not None and run.saved_step >= 0 else "none yet"
        if run is not None:
            run.end_event("nonfinite", str(exc), "NonFiniteLoss")
        return refuse(f"{exc}; nothing was saved after them (last good checkpoint: {last})")
    except ForgettingStop as exc:  # --stop-on-forgetting: exit 2, the line names the checkpoint to go back to
        if run is not None:
            run.saves.settle_quietly()
            run.end_event("forgetting", str(exc), "ForgettingStop")
        return refuse(f"{exc}; stopped by --stop-on-forgetting")
    except Exception as exc:  # recorded for the UI's charts, then reported by run_cli (exit 2) or Python (exit 1)
        if ctx.enabled and collective_failure(exc):  # a dead or stalled rank: one line, exit 1, no hang
            message = collective_failure_message(ctx, exc, opts.collective_timeout)
            last = f"step {run.saved_step}" if run is not None and run.saved_step >= 0 else "none from this run"
            if run is not None:
                run.end_event("failed", message, "CollectiveFailure")
            refuse(f"{message}; last checkpoint: {last}")
            return EXIT_UNEXPECTED
        if run is not None:
            run.end_event("failed", one_line(exc), type(exc).__name__)
        raise
    finally:
        if run is not None:
            run.close()
        stop.restore()
        if lock is not None:
            lock.release()


def start_disagreement(points: list[tuple[int, int, int, int] | None]) -> str | None:
    """One line when the ranks would not all start where rank 0 does (``RunPlan.starting_point`` of each rank),
    e.g. a node whose --output-dir lacks the checkpoint node 0 resumes from; None when they agree."""
    odd = next((rank for rank, point in enumerate(points) if point != points[0]), None)
    if odd is None:
        return None

    def where(point: tuple[int, int, int, int] | None) -> str:
        return ("start fresh at step 0" if point is None
                else f"resume at step {point[0]} (epoch {point[1]}, position {point[2]}, {point[3]} samples seen)")

    return (f"rank {odd} would {where(points[odd])} but rank 0 would {where(points[0])}: every node must find the "
            "same checkpoint in its --output-dir (a directory all nodes share, or a copy of node 0's)")


def preflight(values: RunOptions) -> int:
    """``--preflight``: print the plan's checks (and write them as JSON for the UI); 0 when all pass, else 2."""
    from trainer.preflight import run_preflight

    report = run_preflight(values)
    for line in report.lines():
        print(line, flush=True)
    if values.preflight_json:
        atomic_write_text(Path(values.preflight_json), json.dumps(report.to_dict(), indent=2))
    if report.ok:
        return EXIT_OK
    return refuse(report.refusal or "pre-flight failed: no checks ran")


if __name__ == "__main__":
    raise SystemExit(main())
