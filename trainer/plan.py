"""The run plan: resolved options -> everything a run needs, or the one sentence that says why it cannot start.

``make_plan(opts)`` walks the checks in order (manifests, tokenizer, config and model variant, device,
data, weights, output directory, resume, disk) and records each as a ``Check``. The pre-flight renders the
checks (``trainer.preflight``); the trainer executes the plan, and when a check failed it refuses with
exactly that check's sentence (exit 2). So nothing is checked twice in two ways: whatever the pre-flight
passes, the trainer starts, and whatever the trainer refuses, the pre-flight shows red with the same words.

The checks of where the run starts (resume, weights) are ``trainer.plan_start``'s, those of the files around
it (output directory, disk, model folders) ``trainer.plan_files``'s; this module holds the plan, the checks of
the inputs and their order. A check whose inputs failed is left out rather than reported as another failure.
Building a plan writes nothing and takes no lock; ``mmap=True`` (the pre-flight) maps checkpoint tensors instead
of reading them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from data_tools.config import ConfigError, load_config
from data_tools.manifest import ManifestError, parse_manifest_spec
from data_tools.shard_reader import set_shard_url
from data_tools.text_tokenizer import TextTokenizer, TokenizerError
from generations.registry import GENERATIONS, config_refusal, format_of, generation_of_config
from generations.spec import Capability, Generation
from trainer.checkpoints import Expectation, ResumeChoice, expected_state_shapes
from trainer.data import load_items, split_format, train_sampler
from trainer.epoch_estimate import add_epoch_estimate
from trainer.errors import UsageError, exception_line
from trainer.evaluation.cost import slowdown_note
from trainer.evaluation.planning import evaluation_plan
from trainer.language_row import language_row_refusal, run_language
from trainer.lora_setup import lora_config_of, lora_refusal
from trainer.memory_estimate import gpu_bytes_of, memory_check
from trainer.model_source import ModelStart
from trainer.plan_coverage import add_token_coverage
from trainer.plan_files import check_disk, check_model_folders, check_output_dir
from trainer.plan_start import check_resume, check_weights
from trainer.replay import sampling_groups, weight_refusal
from trainer.run_options import RunOptions, as_run_options
from trainer.sampler import BucketBatchSampler, ResumePoint
from trainer.samples import SamplePlan, sample_plan
from trainer.sharding import fsdp_refusal
from trainer.steps import check_amp, resolve_amp, resolve_device

# What the data check does not read: the arrays' values (only their headers: shape, dtype, size).
ARRAY_CONTENTS_NOTE = ("array headers checked; their values (NaN, code range) are checked as each batch is read, "
                       "or beforehand by the data checker")


@dataclass
class Check:
    name: str
    ok: bool
    message: str
    warning: bool = False  # ok, but worth a look (shown, never blocks)


@dataclass
class DataPlan:
    items: list[Any]
    report: Any  # trainer.data.DropReport
    lines: list[str]


@dataclass
class RunPlan:
    opts: RunOptions
    checks: list[Check] = field(default_factory=list)
    config: dict[str, Any] | None = None
    tokenizer: TextTokenizer | None = None
    generation: Generation | None = None  # the registry entry of the GPT this run trains
    gpt: dict[str, Any] | None = None  # the gpt config of the model this run trains
    device: torch.device | None = None
    train: DataPlan | None = None
    val: DataPlan | None = None
    sampler: BucketBatchSampler | None = None
    start: ModelStart | None = None  # where the weights come from (resumed, base, --init-from, random)
    resume: ResumeChoice | None = None
    resume_point: ResumePoint | None = None
    expectation: Expectation | None = None
    samples: SamplePlan | None = None

    @property
    def ok(self) -> bool:
        return bool(self.checks) and all(check.ok for check in self.checks)

    @property
    def refusal(self) -> str | None:
        """The first failed check's sentence: what the trainer says when it refuses."""
        return next((check.message for check in self.checks if not check.ok), None)

    def add(self, name: str, ok: bool, message: str, warning: bool = False) -> bool:
        # One line, spaced as the trainer's ``error:`` line prints it (trainer.errors.refuse).
        self.checks.append(Check(name, ok, " ".join(message.split()), warning))
        return ok

    def starting_point(self) -> tuple[int, int, int, int] | None:
        """(step, epoch, position, samples seen) this run resumes at; None for a fresh start at step 0."""
        choice, point = self.resume, self.resume_point
        if choice is None or point is None:
            return None
        return int(choice.checkpoint["step"]), point.epoch, point.position, point.samples_seen

    def lines(self) -> list[str]:
        marks = {(True, False): "ok", (True, True): "warn", (False, False): "FAIL", (False, True): "FAIL"}
        return [f"[{marks[(c.ok, c.warning)]}] {c.name}: {c.message}" for c in self.checks]

    def to_dict(self) -> dict[str, Any]:
        choice, point = self.resume, self.resume_point
        return {
            "ok": self.ok, "checks": [asdict(c) for c in self.checks],
            "version": self.generation.id if self.generation else None,
            "model": self.generation.name if self.generation else None,
            "resume_step": int(choice.checkpoint["step"]) if choice else None,
            "resume_epoch": point.epoch if choice and point else None,
            "resume_position": point.position if choice and point else None,
            "resume_path": str(choice.path) if choice else None,
        }


def manifest_file(text: str) -> Path:
    """A manifest argument without its optional ``::lang`` suffix."""
    return parse_manifest_spec(text).path


# ----- the stages ----------------------------------------------------------------------------------


def _manifests(plan: RunPlan) -> bool:
    train, val = list(plan.opts.train_manifest or []), list(plan.opts.val_manifest or [])
    if not train:
        return plan.add("manifests", False, "no --train-manifest given")
    for text in [*train, *val]:
        path = manifest_file(text)
        if not path.is_file():
            what = "is not a regular file" if path.exists() else "not found"
            return plan.add("manifests", False, f"{path}: manifest {what}")
    extra = "" if val else "; no validation manifest (no validation, best.pth never written)"
    return plan.add("manifests", True, f"train {len(train)} file(s), val {len(val)} file(s){extra}")


def tokenizer_owner(path: str) -> Generation:
    """The generation whose kind of ``--tokenizer`` file ``path`` is (the first that reads it)."""
    return next((entry for entry in GENERATIONS if entry.reads_tokenizer(path)), GENERATIONS[-1])


def _tokenizer(plan: RunPlan) -> bool:
    if not plan.opts.tokenizer:
        return plan.add("tokenizer", False, "no --tokenizer given")
    path = str(plan.opts.tokenizer)
    owner = tokenizer_owner(path)
    try:
        plan.tokenizer = owner.open_tokenizer(plan.opts)
    except (UsageError, TokenizerError, OSError, RuntimeError) as exc:  # each table's errors are TokenizerErrors
        plan.tokenizer = None
        return plan.add("tokenizer", False, exception_line(exc))
    return plan.add("tokenizer", True, owner.describe_tokenizer(path, plan.tokenizer))


def _config(plan: RunPlan) -> bool:
    if not plan.opts.config:
        return plan.add("config", False, "no --config given")
    path = plan.opts.config
    try:
        config = load_config(path)
    except ConfigError as exc:
        return plan.add("config", False, exception_line(exc))
    generation = generation_of_config(config)
    refusal = config_refusal(config, generation, f"--config {path}") or generation.refusal(Capability.TRAIN)
    if refusal:
        return plan.add("config", False, refusal)
    mismatch = _tokenizer_kind_mismatch(plan, generation)
    if mismatch:
        return plan.add("config", False, mismatch)
    try:
        expected_state_shapes(config["gpt"])  # the model constructor accepts it
    except (KeyError, TypeError, ValueError) as exc:
        return plan.add("config", False, f"--config {path}: the gpt section does not build a model ({exception_line(exc)})")
    plan.config, plan.generation = config, generation
    gpt = config["gpt"]
    return plan.add("config", True, f"{path}: {generation.name} GPT, {gpt['layers']} layers, dim {gpt['model_dim']}, "
                                    f"{gpt['number_text_tokens']:,} text tokens")


def _tokenizer_kind_mismatch(plan: RunPlan, generation: Generation) -> str | None:
    """Each generation reads its own kind of text table (a SentencePiece model, a .tiktoken table, ...)."""
    path = str(plan.opts.tokenizer or "")
    if not path or generation.reads_tokenizer(path):
        return None
    owner = tokenizer_owner(path)
    return (f"--tokenizer {path} is {owner.tokenizer_kind} but --config {plan.opts.config} describes an "
            f"{generation.name} GPT, whose text table is {generation.tokenizer_file}; {owner.config_hint}")


def _device(plan: RunPlan, local_rank: int, distributed: bool) -> bool:
    try:
        plan.device = resolve_device(str(plan.opts.device or "auto"), local_rank, distributed)
        plan.opts = plan.opts.replace(amp=resolve_amp(plan.opts.amp or "off", plan.device))  # the run records this
        check_amp(plan.opts.amp, plan.device)
    except UsageError as exc:
        plan.device = None
        return plan.add("device", False, exception_line(exc))
    if (sharding_refusal := fsdp_refusal(plan.opts)) is not None:  # --sharding fsdp (trainer.fsdp)
        return plan.add("device", False, sharding_refusal)
    return plan.add("device", True, f"{plan.device}, amp {plan.opts.amp or 'off'}")


def _data(plan: RunPlan, rank: int, world_size: int) -> bool:
    """The trainer's own item loading: format, tokenize, length limits, what is dropped, batches per epoch."""
    assert plan.tokenizer is not None and plan.gpt is not None and plan.generation is not None
    gpt = plan.gpt
    limits = (int(gpt["max_text_tokens"]), int(gpt["max_mel_tokens"]))
    parts: list[str] = []
    try:
        mismatch = _format_mismatch(plan)
        if mismatch:
            return plan.add("data", False, mismatch)
        for split, paths in (("train", plan.opts.train_manifest), ("val", plan.opts.val_manifest)):
            if not paths:
                continue
            items, report = load_items(paths, plan.tokenizer, *limits, name=split, gpt=gpt)
            data = DataPlan(items, report, report.lines(split, *limits))
            setattr(plan, split, data)
            if split == "train" and not items:
                return plan.add("data", False, "no training items left after dropping the ones beyond the model's "
                                               "limits: " + "; ".join(line.strip() for line in data.lines))
            extra = f" ({report.dropped:,} dropped: beyond the model's limits or empty)" if report.dropped else ""
            parts.append(f"{split} {len(items):,} items usable{extra}")
    except (ManifestError, OSError, ValueError) as exc:
        return plan.add("data", False, exception_line(exc))
    assert plan.train is not None
    plan.sampler = train_sampler(plan.train.items, int(plan.opts.batch_size), int(plan.opts.seed),
                                 rank=rank, world_size=world_size,
                                 groups=sampling_groups(plan.train.items, plan.opts.train_manifest))
    if len(plan.sampler) == 0:
        return plan.add("data", False, f"{len(plan.train.items)} training items give no batch of {plan.opts.batch_size} "
                                       f"for each of {world_size} processes")
    if plan.generation.data_note is not None:
        parts.append(plan.generation.data_note(plan.train.items, plan.tokenizer))
    return plan.add("data", True, "; ".join(parts) + f"; {len(plan.sampler)} batches per epoch; "
                    + ARRAY_CONTENTS_NOTE)


def _format_mismatch(plan: RunPlan) -> str | None:
    """IndexTTS2 trains on paired manifests, v1.5 on codes manifests, and train and val share one format.

    Told from the manifests' fields before any item is read, so the sentence names the real problem.
    """
    assert plan.generation is not None
    train = split_format([parse_manifest_spec(p) for p in plan.opts.train_manifest])
    val_paths = plan.opts.val_manifest or []
    val = split_format([parse_manifest_spec(p) for p in val_paths]) if val_paths else train
    if val != train:
        return (f"--train-manifest is {format_of(train).name} but --val-manifest is {format_of(val).name}: one run "
                "trains one format")
    if train == plan.generation.manifest_format.id:
        return None
    return (f"--config describes an {plan.generation.name} GPT, which trains on {plan.generation.format_hint}; "
            f"--train-manifest is {format_of(train).name}")


def _lora_and_languages(plan: RunPlan) -> bool | None:
    """LoRA settings, the 2.5 language row options and replay weights (a check only when any is used)."""
    opts = plan.opts
    weighted = any(parse_manifest_spec(text).weight_text is not None for text in opts.train_manifest or [])
    used = opts.lora or opts.lora_dora or opts.lang_init_from or float(opts.lang_lr_mult) != 1.0 or weighted
    if not used:
        return None
    refusal = (weight_refusal(opts.train_manifest or [])
               or (plan.generation.refusal(Capability.LORA) if plan.generation and opts.lora else None)
               or (lora_refusal(opts, plan.gpt) if plan.gpt is not None else None)
               or language_row_refusal(opts, plan.generation))
    if refusal:
        return plan.add("LoRA and languages", False, refusal)
    parts = []
    if opts.lora:
        config = lora_config_of(opts)
        assert config is not None
        parts.append(f"{'DoRA' if config.dora else 'LoRA'} rank {config.rank}, alpha {config.alpha:g} on {', '.join(config.targets)}")
    if opts.lang_init_from:
        parts.append(f"language row {run_language(opts)} from {opts.lang_init_from}")
    if float(opts.lang_lr_mult) != 1.0:
        parts.append(f"language table lr x{float(opts.lang_lr_mult):g}")
    if weighted:
        parts.append("weighted replay of the training manifests")
    return plan.add("LoRA and languages", True, "; ".join(parts))


def _samples(plan: RunPlan) -> bool:
    assert plan.config is not None and plan.generation is not None
    val_items = plan.val.items if plan.val is not None else []
    plan.samples = sample_plan(plan.opts, plan.config, plan.generation, val_items)
    if plan.samples.refusal:
        return plan.add("samples", False, plan.samples.refusal)
    return plan.add("samples", True, plan.samples.message)


def _memory(plan: RunPlan, world_size: int) -> None:
    """What the run needs per GPU against the card's memory (CUDA's, or --gpu-memory-gb). A CPU run without a card
    size gets no line: counting the model on the meta device costs seconds, and there is no card to fit."""
    if gpu_bytes_of(plan.opts, plan.device) is None or plan.gpt is None or plan.train is None:
        return
    ok, message, warning = memory_check(plan.opts, plan.gpt, plan.device, world_size, plan.train.items,
                                        strategy=str(plan.opts.sharding))
    plan.add("memory", ok, message, warning=warning)


def make_plan(opts: RunOptions | Mapping[str, Any], *, mmap: bool = False, rank: int = 0, world_size: int = 1,
              local_rank: int = 0, distributed: bool = False, own_lock: bool = False) -> RunPlan:
    """Every pre-start check, in order; never raises for bad input (see ``RunPlan.refusal``). A plain dict of
    options is taken as ``RunOptions.from_dict`` takes it (an undeclared name raises ``UnknownOption``)."""
    plan = RunPlan(opts=as_run_options(opts))
    set_shard_url(plan.opts.shard_url)  # before any feature file is read (the loader's workers inherit it)
    check_model_folders(plan)  # first: a damaged download is named before any of its files is read
    manifests_ok = _manifests(plan)
    _tokenizer(plan)
    _config(plan)
    _device(plan, local_rank, distributed)
    if plan.config is not None and plan.tokenizer is not None and plan.generation is not None:
        plan.gpt = plan.generation.target_gpt_config(copy.deepcopy(plan.config["gpt"]), plan.tokenizer)
    _lora_and_languages(plan)
    if plan.config is not None and plan.tokenizer is not None and manifests_ok:
        _data(plan, rank, world_size)
    if plan.gpt is not None and plan.train is not None:
        _memory(plan, world_size)
        add_epoch_estimate(plan)
    dir_ok = check_output_dir(plan, own_lock)
    # The resume target cannot be judged without a usable output directory, nor the weights without it.
    if plan.config is not None and plan.tokenizer is not None and manifests_ok and dir_ok and check_resume(plan, mmap):
        check_weights(plan, mmap)
        add_token_coverage(plan)
    if plan.generation is not None and plan.train is not None:
        _samples(plan)
        if plan.add("evaluation", *evaluation_plan(plan.opts, plan.generation)):
            slower = slowdown_note(plan.opts)
            if slower is not None:
                plan.add("evaluation cost", True, slower, warning=True)
    if plan.gpt is not None and dir_ok:
        check_disk(plan)
    return plan
