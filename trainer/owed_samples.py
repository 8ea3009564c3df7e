"""Samples a stop left for later: ``python -m trainer.owed_samples RUN [--step N ...]``.

A stop never waits for synthesis (``trainer.run``): the stopping save is committed, and the saves whose samples
were not spoken are listed in the ``end`` event's ``samples_owed``. This speaks them afterwards, in its own
process, exactly as the run would have: the run's own options (``train_config.yaml``), the checkpoint of that
step (``model_step<N>.pth``, else ``latest.pth`` / ``best.pth`` when they hold it), the same sample plan and
decoding, into ``samples/step_<N>/`` with the ``sample`` event in ``metrics.jsonl``. A step whose samples exist
is not spoken again. The run must not be training meanwhile (its output folder's lock says so).

Exit codes: 0 made (or nothing owed), 1 a step could not be spoken, 2 bad input.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from trainer.run_options import OptionTypeError, RunOptions, stored_run_options

TRAIN_CONFIG = "train_config.yaml"


class OwedSamplesError(RuntimeError):
    """Bad input for making owed samples; the message is one line naming what and where."""


def _events(run: Path) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    try:
        with open(run / "metrics.jsonl", encoding="utf-8") as handle:
            for line in handle:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a killed run
                if isinstance(event, dict):
                    events.append(event)
    except OSError:
        return []
    return events


def owed_steps(run: Path) -> list[int]:
    """The saves whose samples a stop left unmade and that no later ``sample`` event made (oldest first)."""
    owed: list[int] = []
    for event in _events(Path(run)):
        if event.get("event") == "end":
            owed += [step for step in event.get("samples_owed") or [] if isinstance(step, int) and step not in owed]
        elif event.get("event") == "sample" and not event.get("error") and event.get("step") in owed:
            owed.remove(event["step"])
    return owed


def _options(run: Path) -> RunOptions:
    path = run / TRAIN_CONFIG
    try:
        opts = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise OwedSamplesError(f"{path}: cannot read the run's options ({' '.join(str(exc).split())})") from None
    if not isinstance(opts, dict):
        raise OwedSamplesError(f"{path}: not a mapping of the run's options")
    try:
        return stored_run_options(opts)
    except OptionTypeError as exc:
        raise OwedSamplesError(f"{path}: {exc}") from None


def _checkpoints_of(run: Path, step: int) -> list[Path]:
    return [path for path in (run / f"model_step{step}.pth", run / "latest.pth", run / "best.pth") if path.is_file()]


def _planned(run: Path, opts: RunOptions, step: int) -> Any:
    """The run plan resumed at ``step``'s checkpoint (its samples plan, tokenizer, device and weights)."""
    from trainer.plan import make_plan

    refusals: list[str] = []
    for path in _checkpoints_of(run, step):
        plan = make_plan(opts.replace(output_dir=str(run), resume=str(path)))
        if plan.resume is not None and int(plan.resume.checkpoint["step"]) == step and plan.ok:
            return plan
        if plan.resume is not None and int(plan.resume.checkpoint["step"]) != step:
            continue  # latest.pth or best.pth holds another step
        refusals.append(plan.refusal or f"{path}: not usable")
    if refusals:
        raise OwedSamplesError(f"step {step}: {refusals[0]}")
    raise OwedSamplesError(f"step {step}: no checkpoint of it in {run} (model_step{step}.pth was rotated away?)")


def _model(plan: Any) -> Any:
    from networks.unified_voice import load_gpt_state_dict
    from trainer.lora_setup import checkpoint_adapter, merge_checkpoint_adapter

    start = plan.start
    state = start.state_dict
    if state is not None and checkpoint_adapter(plan.resume.checkpoint) is not None:
        state = merge_checkpoint_adapter(plan.resume.checkpoint, state)  # the adapted model, as it spoke in training
    model = plan.generation.model.build(start.gpt_config)
    if state is not None:
        load_gpt_state_dict(model, state)
    return model.to(plan.device)


def make_owed_samples(run: Path, steps: list[int] | None = None, say: Any = print) -> dict[int, str]:
    """Speak the samples of ``steps`` (default: every owed one); step -> '' (made) or why not."""
    from trainer.metrics import MetricsLog
    from trainer.samples import make_samples

    run = Path(run)
    if not run.is_dir():
        raise OwedSamplesError(f"{run}: run folder not found")
    opts = _options(run)
    wanted = owed_steps(run) if steps is None else steps
    outcome: dict[int, str] = {}
    if not wanted:
        return outcome
    metrics = MetricsLog(run, tensorboard=False)
    try:
        for step in wanted:
            try:
                plan = _planned(run, opts, step)
            except OwedSamplesError as exc:
                outcome[step] = str(exc)
                say(f"error: {exc}")
                continue
            if plan.samples is None or not plan.samples.enabled:
                outcome[step] = f"step {step}: {plan.samples.message if plan.samples else 'no sample plan'}"
                say(f"error: {outcome[step]}")
                continue
            made = make_samples(plan.samples, _model(plan), plan.tokenizer, step,
                                int(plan.resume.checkpoint["epoch"]), run, metrics, say)
            outcome[step] = "" if made else f"step {step}: stopped"
    finally:
        metrics.close()
    return outcome


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainer.owed_samples", description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the run's output folder")
    parser.add_argument("--step", type=int, action="append", help="a save to speak (default: every owed one)")
    parser.add_argument("--json", action="store_true", help="print the outcome as JSON on stdout (progress on stderr)")
    args = parser.parse_args(argv)
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else print
    try:
        outcome = make_owed_samples(args.run, args.step, say=say)
    except OwedSamplesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    failed = {step: why for step, why in outcome.items() if why}
    made = [step for step in outcome if step not in failed]
    if args.json:
        print(json.dumps({"run": str(args.run), "made": made, "failed": {str(k): v for k, v in failed.items()}}))
    elif not outcome:
        print(f"no samples owed in {args.run}")
    else:
        print(f"owed samples: {len(made)} step(s) spoken, {len(failed)} not")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
