"""``python -m trainer.train --train s2mel``: one S2Mel run under the trainer's output-directory contract.

The plan (:mod:`trainer.s2mel.run_plan`) -> the output-dir lock -> the generation's sources (its synthesizer,
loaded from the download folder with the GPT of ``--base-checkpoint``; its semantic input; the GPT latent where
its S2Mel reads one: ``trainer.s2mel.sources.S2MelSources``, made by the entry's ``s2mel_sources``) ->
:class:`~trainer.s2mel.loop.S2MelTrainer` over :class:`~trainer.s2mel.dataset.PreparedClips`,
resumed from the output folder when it holds a run -> ``latest.pth`` / ``model_step<N>.pth`` every
``--save-interval`` steps, ``train_config.yaml`` (the resolved options), ``metrics.jsonl`` train and end events,
samples at saves (``--sample-texts`` spoken with the first ``--eval-reference``).

Exit codes as the GPT trainer: 0 finished, 2 refused, 130 stopped by SIGINT/SIGTERM after saving latest.pth.
The STUDIO_TEST_* stop and kill hooks act after a step, before that step's save.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trainer.errors import EXIT_OK, EXIT_STOPPED, UsageError
from trainer.s2mel.checkpoint import PART
from trainer.s2mel.sources import S2MelSources


class _StopRequested(Exception):
    pass


def _event(out_dir: Path, record: dict[str, Any]) -> None:
    with open(out_dir / "metrics.jsonl", "a", encoding="utf-8") as metrics:
        metrics.write(json.dumps({"part": PART, **record}) + "\n")


def _sample_texts(path: str) -> list[str]:
    return [line.strip() for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def train_s2mel(opts: dict[str, Any]) -> int:
    """The run (exit code); a setting or file the S2Mel modules refuse becomes UsageError (one line, exit 2), as
    does the forgetting guard's stop (--stop-on-forgetting). Under torchrun every rank runs this (gloo on CPU,
    NCCL on GPUs): the data-parallel step of :mod:`trainer.s2mel.data_parallel`, rank 0 writing."""
    from trainer.distributed import init_distributed, shutdown
    from trainer.forgetting import ForgettingStop
    from trainer.s2mel.loop import S2MelRunError
    from trainer.s2mel.lora import S2MelLoRAError

    ctx = init_distributed(opts["device"], float(opts.get("collective_timeout") or 1800))
    together = False
    try:
        code = _train(opts, ctx)
        together = True
        return code
    except (S2MelRunError, S2MelLoRAError, ForgettingStop) as exc:
        together = isinstance(exc, ForgettingStop)  # every rank measured the same rise
        raise UsageError(str(exc)) from None
    finally:
        shutdown(ctx, together=together)


def _guard(opts: dict[str, Any], found: Any, sources: S2MelSources, trainer: Any) -> tuple[Any, dict[str, Any]] | None:
    """--forget-margin: the guard (registered with the trainer) and each watched language's clips."""
    from data_tools.s2mel_clip import prompt_feature_path
    from trainer.s2mel.dataset import PreparedClips
    from trainer.s2mel.forgetting import new_guard

    if not found.watched:
        return None
    guard = new_guard(found.watched, float(opts["forget_margin"]))
    trainer.components[guard.name] = guard
    clips = {}
    for watched in found.watched:
        latent = sources.latent_for(watched.folder) if sources.latent_for is not None else None
        features = all((watched.folder / prompt_feature_path(stem)).is_file() for stem in watched.stems)
        clips[watched.language] = PreparedClips(watched.folder, watched.stems, sources.semantic, latent,
                                                prompt_features=features)
    return guard, clips


def _check_text_rows(opts: dict[str, Any], found: Any, sources: S2MelSources) -> None:
    """The pre-flight's text-ids check (``trainer.s2mel.text_rows``) on the GPT the run loaded."""
    from trainer.s2mel.loop import S2MelRunError
    from trainer.s2mel.text_rows import gpt_source, text_ids_refusal

    if sources.text_rows is None:
        return
    for folder, stems in [(found.data_dir, found.stems), *((w.folder, w.stems) for w in found.watched)]:
        refusal = text_ids_refusal(folder, stems, sources.text_rows, gpt_source(opts, found.model_dir))
        if refusal:
            raise S2MelRunError(refusal)


def _train(opts: dict[str, Any], ctx: Any) -> int:
    from networks.s2mel import load_s2mel
    from trainer.checkpoints import OutputDirLock
    from trainer.distributed import any_rank
    from trainer.options import write_train_config
    from trainer.s2mel.dataset import PreparedClips
    from trainer.s2mel.export import base_record
    from trainer.s2mel.forgetting import watch
    from trainer.s2mel.loop import S2MelTrainer
    from trainer.s2mel.run_plan import make_s2mel_plan
    from trainer.s2mel.samples import sample_hook
    from trainer.signals import GracefulStop, active_test_hooks, after_step_test_hooks, test_hook_due
    from trainer.steps import resolve_device
    from trainer.synthesis.s2mel_types import seeded_noise

    say = print if ctx.is_main else (lambda *_args, **_kw: None)
    found = make_s2mel_plan(opts, own_lock=not ctx.is_main)
    for line in found.plan.lines():
        say(line, flush=True)
    if not found.plan.ok:
        raise UsageError(found.plan.refusal)
    assert found.generation is not None and found.model_dir is not None and found.data_dir is not None
    assert found.settings is not None and found.generation.s2mel is not None
    out_dir = Path(opts["output_dir"])
    out_dir.mkdir(parents=True, exist_ok=True)
    lock = OutputDirLock(out_dir).acquire() if ctx.is_main else None  # rank 0 holds it for the job
    if ctx.is_main:
        # As a GPT run: its resolved options, which the studio reads (an S2Mel run's checkpoints are no GPT to
        # speak with; the Test tab offers them as the decoder instead) and a resume can be compared against.
        write_train_config(opts, out_dir / "train_config.yaml")
    stop = GracefulStop(say).install()
    trainer: S2MelTrainer | None = None
    try:
        for line in active_test_hooks():
            say(line, flush=True)
        device = resolve_device(opts["device"])
        sources = found.generation.s2mel.sources(opts, found.model_dir, device)
        _check_text_rows(opts, found, sources)
        latent = sources.latent_for(found.data_dir) if sources.latent_for is not None else None
        clips = PreparedClips(found.data_dir, found.stems, sources.semantic, latent,
                              prompt_features=found.prompt_features)
        base = found.model_dir / "s2mel.pth"
        model = load_s2mel(base, sources.config["s2mel"], **sources.model_kwargs)
        trainer = S2MelTrainer(model, clips, found.settings, out_dir, base=base_record(base), device=device,
                               rank=ctx.rank, world_size=ctx.world_size, speakers=found.speakers)
        guarded = _guard(opts, found, sources, trainer)  # before the resume: its state rides in the checkpoints
        resumed = trainer.resume_if_any()
        for note in trainer.notes:
            say(f"note: {note}", flush=True)
        say(f"S2Mel {found.settings.mode}: " + (f"resumed from {resumed.name} at step {trainer.step_count}"
                                                  if resumed else "fresh start at step 0")
            + (f", {ctx.world_size} processes" if ctx.enabled else ""), flush=True)
        speak = None
        if opts.get("sample_texts") and ctx.is_main:
            speak = sample_hook(sources.synthesizer, _sample_texts(opts["sample_texts"]), opts["eval_reference"][0],
                                out_dir, noise_for=seeded_noise)

        def on_save(run: S2MelTrainer) -> None:
            assert speak is not None
            print(f"samples: {', '.join(p.name for p in speak(run))}", flush=True)
        if ctx.is_main:
            _event(out_dir, {"event": "start", "step": trainer.step_count, "mode": found.settings.mode,
                             "generation": found.generation.name, "world_size": ctx.world_size})
        interval = int(opts["log_interval"])

        def on_step(report: Any) -> None:
            if report.step % interval == 0 or report.step == found.settings.max_steps:
                say(f"step {report.step} epoch {report.epoch} loss {report.loss:.5f} "
                      f"grad_norm {report.grad_norm:.4f}", flush=True)
            saving = report.step % found.settings.save_interval == 0 or report.step == found.settings.max_steps
            if guarded is not None and saving:  # before the save: the checkpoint holds this measurement
                for line in watch(trainer, *guarded, stop=bool(opts.get("stop_on_forgetting"))):
                    say(line, flush=True)
            if test_hook_due(report.step):  # as the GPT trainer: a hook that kills here sees earlier saves committed
                trainer._raise_on_failed(trainer.writer.wait())
            after_step_test_hooks(report.step)
            if any_rank(ctx, bool(stop.requested), device):  # every rank stops after the same step
                raise _StopRequested

        try:
            trainer.run(on_step=on_step, on_save=on_save if speak is not None else None)
        except _StopRequested:
            with stop.saving_checkpoint():
                trainer._raise_on_failed(trainer.save())
                trainer._raise_on_failed(trainer.writer.wait())
            if ctx.is_main:
                _event(out_dir, {"event": "end", "step": trainer.step_count, "status": "stopped"})
            say(f"stopped by {stop.requested or 'another rank'}: saved latest.pth at step {trainer.step_count}",
                flush=True)
            return EXIT_STOPPED
        if ctx.is_main:
            _event(out_dir, {"event": "end", "step": trainer.step_count, "status": "finished"})
        say(f"finished at step {trainer.step_count}: {out_dir / 'latest.pth'}", flush=True)
        return EXIT_OK
    finally:
        if trainer is not None:
            trainer.writer.wait()
        stop.restore()
        if lock is not None:
            lock.release()
