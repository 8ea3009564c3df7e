"""Where a run starts from, for the run plan: the checkpoint it resumes and the weights it starts with.

``check_resume`` picks the checkpoint ``--resume`` names (or none), checks that it matches this run
(``expectation_for_run``), that its position still lies in the epoch and that its optimizer state fits the
optimizer this run builds (``optimizer_state_refusal``, the one rule the restore in ``trainer.state`` uses too).
``check_weights`` finds where the weights come from (the resumed checkpoint, the base checkpoint, ``--init-from``,
random) and checks that they fit the model of ``--config``. Both add their check to a ``trainer.plan.RunPlan``
(typed ``Any`` here: the plan imports this module) and set its ``resume``, ``resume_point`` and ``start``.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import torch

from data_tools.manifest import parse_manifest_spec
from data_tools.shape_rules import seconds_of_codes
from generations.registry import build_gpt, config_refusal, generation_of_config
from generations.spec import Capability, Generation
from networks.loading import state_dict_mismatches
from networks.lora import LoRAError
from networks.unified_voice import INFERENCE_ONLY_PREFIXES
from trainer.checkpoints import (
    CheckpointError,
    Expectation,
    checkpoint_files_exist,
    manifests_record,
    select_resume,
)
from trainer.errors import UsageError, exception_line
from trainer.language_row import lang_lr_mults
from trainer.lora_setup import adapt_model, lora_resume_refusal
from trainer.model_source import from_resumed
from trainer.options import resolved_config
from trainer.run_options import RunOptions
from trainer.sampler import PositionError, resume_position
from trainer.steps import parameter_groups

OPTIMIZER_OF_OTHER_PARAMETERS = ("the checkpoint's optimizer state belongs to different parameters than this "
                                 "model's; continue from its weights with --init-from instead")


def expectation_for_run(opts: RunOptions, config: dict[str, Any], tokenizer: Any,
                        generation: Generation | None = None) -> Expectation:
    """What a resumed checkpoint must match."""
    generation = generation or generation_of_config(config)
    return Expectation(
        gpt_config=generation.target_gpt_config(config["gpt"], tokenizer),
        tokenizer=generation.tokenizer_record(opts, tokenizer),
        base_vocab_size=int(config["gpt"]["number_text_tokens"]) if opts.base_checkpoint else None,
        manifests=manifests_record([parse_manifest_spec(p).path for p in opts.train_manifest or []],
                                   [parse_manifest_spec(p).path for p in opts.val_manifest or []]),
        hparams=resolved_config(opts))


def _record_hours(plan: Any) -> None:
    """Each manifest record gets the hours of its items this run trains on (from their code counts)."""
    if plan.expectation is None or plan.generation is None:
        return
    manifests = plan.expectation.manifests or {}
    for split in ("train", "val"):
        data = getattr(plan, split)  # a trainer.plan.DataPlan
        if data is None:
            continue
        seconds: dict[str, float] = {}
        for item in data.items:
            path = str(Path(item.where.rsplit(":", 1)[0]).resolve())
            seconds[path] = seconds.get(path, 0.0) + seconds_of_codes(item.num_codes, plan.generation.codes_per_second)
        for record in manifests.get(split) or []:
            record["hours"] = round(seconds.get(str(record["path"]), 0.0) / 3600, 4)


def check_resume(plan: Any, mmap: bool) -> bool:
    """The ``resume`` check: the checkpoint the run continues from, if any, and where in its epoch."""
    assert plan.config is not None and plan.tokenizer is not None
    out_dir = Path(plan.opts.output_dir)
    resume = str(plan.opts.resume or "").strip()
    plan.expectation = expectation_for_run(plan.opts, plan.config, plan.tokenizer, plan.generation)
    _record_hours(plan)
    if not resume:
        if checkpoint_files_exist(out_dir):
            return plan.add("resume", False, f"output dir {out_dir} already holds checkpoints of a run: continue it "
                                             "with --resume auto, or start a new run in a new --output-dir")
        return plan.add("resume", True, "fresh start at step 0 (no --resume)")
    refusal = plan.generation.refusal(Capability.RESUME) if plan.generation is not None else None
    if refusal:
        return plan.add("resume", False, refusal)
    try:
        choice = select_resume(out_dir, resume, plan.expectation, mmap=mmap)
    except CheckpointError as exc:
        return plan.add("resume", False, exception_line(exc))
    if choice is None:
        return plan.add("resume", True, f"--resume auto: no checkpoint in {out_dir} yet: fresh start at step 0")
    ckpt = choice.checkpoint
    try:
        point = resume_position(plan.sampler, int(ckpt["epoch"]), int(ckpt["position"]), int(ckpt["step"]),
                                ckpt.get("sampler"), str(choice.path)) if plan.sampler is not None else None
    except PositionError as exc:
        return plan.add("resume", False, f"cannot resume from {exception_line(exc)}")
    gpt = from_resumed(ckpt, choice.path).gpt_config
    refusal = (lora_resume_refusal(ckpt, plan.opts, str(choice.path))
               or optimizer_state_refusal(ckpt, _trained_optimizer_names(gpt, plan.opts), str(choice.path)))
    if refusal:
        return plan.add("resume", False, refusal)
    plan.resume, plan.resume_point = choice, point
    where = (f"epoch {point.epoch}, position {point.position}" if point
             else f"epoch {ckpt['epoch']}, position {ckpt['position']}")
    message = f"will resume from step {int(ckpt['step'])}, {where} ({choice.path})"
    notes = [*choice.notes, *([point.change] if point and point.change else [])]
    if notes:
        message += "; " + "; ".join(f"warning: {note}" for note in notes)
    return plan.add("resume", True, message, warning=bool(notes))


def _meta_model(gpt_config: dict[str, Any]) -> torch.nn.Module:
    """The model of ``gpt_config`` without memory (shapes and names only)."""
    with torch.device("meta"):
        return build_gpt(gpt_config)


def model_optimizer_names(model: torch.nn.Module, lr_mults: dict[str, float] | None = None) -> list[list[str]]:
    """Parameter names of each param group of the optimizer the trainer builds for ``model`` (trainer.steps)."""
    names = {id(param): name for name, param in model.named_parameters()}
    return [[names[id(param)] for param in group["params"]] for group in parameter_groups(model, 0.0, lr_mults)]


def _trained_optimizer_names(gpt: dict[str, Any], opts: RunOptions) -> list[list[str]]:
    """The optimizer's parameter names of the run ``opts`` describe: LoRA adapters and frozen parts included."""
    model = _meta_model(gpt)
    with contextlib.suppress(LoRAError):  # refused by the "LoRA and languages" check
        adapt_model(model, opts)
    return model_optimizer_names(model, lang_lr_mults(model, opts))


def optimizer_state_refusal(ckpt: dict[str, Any], names: list[list[str]], where: str) -> str | None:
    """Why ``ckpt``'s optimizer state cannot be restored into an optimizer over ``names`` (None: it can).

    The one rule for the plan (names from a meta model) and the restore (trainer.state.Optimisation, names
    from the real optimizer). Checkpoints without recorded names (older or repaired) are not judged here.
    """
    saved = ckpt.get("optimizer_param_names")
    if ckpt.get("optimizer") is None or saved is None or saved == names:
        return None
    return f"{where}: {OPTIMIZER_OF_OTHER_PARAMETERS}"


def check_weights(plan: Any, mmap: bool) -> bool:
    """Where the weights come from, and that they fit the model this run builds."""
    assert plan.config is not None and plan.tokenizer is not None and plan.generation is not None
    opts, config, tokenizer, generation = plan.opts, plan.config, plan.tokenizer, plan.generation
    config_path = Path(opts.config)
    try:
        if plan.resume is not None:
            plan.start = from_resumed(plan.resume.checkpoint, plan.resume.path)
        else:
            plan.start = generation.start(opts, config, config_path, tokenizer, mmap)
    except (UsageError, CheckpointError) as exc:
        plan.start = None
        return plan.add("weights", False, exception_line(exc))
    start = plan.start
    held = generation_of_config(start.gpt_config)
    if config_refusal(start.gpt_config, held, f"the model of {start.source}") or held is not generation:
        return plan.add("weights", False, f"{start.source} holds an {held.name} GPT but --config {config_path} "
                                          f"describes an {generation.name} GPT")
    if start.state_dict is not None:
        model = _meta_model(start.gpt_config)
        kept = {k: v for k, v in start.state_dict.items() if not k.startswith(INFERENCE_ONLY_PREFIXES)}
        problems = state_dict_mismatches(model, kept)
        if problems:
            return plan.add("weights", False, f"{start.source} does not fit the model of --config {config_path}: "
                                              "state dict does not fit the model: " + "; ".join(problems))
    rows = generation.rows_refusal(int(start.gpt_config["number_text_tokens"]), tokenizer, start.source)
    if rows:
        return plan.add("weights", False, rows)
    note = f"; {len(start.lines)} growth note(s)" if start.lines else ""
    return plan.add("weights", True, f"{start.source}{note}")
