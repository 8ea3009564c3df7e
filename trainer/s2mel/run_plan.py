"""The pre-flight of ``python -m trainer.train --train s2mel``: every check before an S2Mel run starts.

The run trains the S2Mel decoder of an IndexTTS2 / 2.5 download folder (``--model-dir``, else
``--sample-model-dir``, else the folder of ``--config``) on the prepared folder of the first ``--train-manifest``
(its clips are the manifest's targets: ``codes/<stem>.npy`` plus preparation's ``s2mel_mel/`` and
``s2mel_style/`` files; IndexTTS2 also ``text_ids/``, ``condition/``, ``emo_vec/`` for the GPT latent). The
generation comes from the registry (a 1.5 config is refused by its entry, in one line naming it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from data_tools.s2mel_clip import prompt_feature_path, s2mel_paths
from generations.spec import Capability, Generation
from trainer.errors import exception_line
from trainer.lora_setup import dora_refusal
from trainer.plan import RunPlan, manifest_file
from trainer.run_options import RunOptions, as_run_options
from trainer.s2mel.cross_prompt import describe_prompt_mode, resolve_prompt_mode, resume_refusal
from trainer.s2mel.dataset import manifest_speakers, manifest_stems
from trainer.s2mel.forward import class_dropout_from_config, loss_type_from_config
from trainer.s2mel.lora import DEFAULT_TARGETS, S2MelLoRASettings
from trainer.s2mel.train_settings import S2MelTrainSettings

GPT_LATENT_FOLDERS = ("text_ids", "condition", "emo_vec")  # IndexTTS2: what the teacher-forced latent reads


@dataclass
class S2MelPlan:
    """The checks (``plan``, a :class:`trainer.plan.RunPlan`) and what a passing plan found."""

    plan: RunPlan
    generation: Generation | None = None
    model_dir: Path | None = None
    data_dir: Path | None = None
    stems: list[str] = field(default_factory=list)
    speakers: list[str | None] = field(default_factory=list)  # each stem's speaker (the manifest's "speaker")
    settings: S2MelTrainSettings | None = None
    prompt_features: bool = False
    watched: list[Any] = field(default_factory=list)  # trainer.s2mel.forgetting.WatchedSet: the guard's languages


def model_folder(opts: RunOptions) -> Path | None:
    for folder in (opts.model_dir, opts.sample_model_dir):
        if folder:
            return Path(folder)
    return Path(opts.config).parent if opts.config else None


def _generation(plan: S2MelPlan) -> bool:
    from data_tools.config import load_config
    from generations.registry import generation_of_config, generation_of_folder

    opts = plan.plan.opts
    folder = model_folder(opts)
    generation = None
    try:
        if opts.config:
            generation = generation_of_config(load_config(opts.config))
        elif folder is not None and folder.is_dir():
            generation = generation_of_folder(folder)
    except Exception as exc:  # a config that does not load: one line
        return plan.plan.add("model", False, f"--config {opts.config}: {exception_line(exc)}")
    if generation is None:
        return plan.plan.add("model", False, "no IndexTTS2 / 2.5 download folder: give --model-dir (config.yaml, "
                                             "s2mel.pth, ...)")
    refusal = generation.refusal(Capability.TRAIN_S2MEL) or (
        generation.refusal(Capability.LORA) if opts.lora else None)
    if refusal or generation.s2mel is None:
        return plan.plan.add("model", False, refusal or f"{generation.name} cannot train the S2Mel decoder")
    if folder is None or not (folder / "s2mel.pth").is_file():
        return plan.plan.add("model", False, f"{generation.name}: no s2mel.pth in {folder} (give --model-dir, "
                                             "the download folder)")
    plan.generation, plan.model_dir = generation, folder
    return plan.plan.add("model", True, f"{generation.name} S2Mel from {folder / 's2mel.pth'}")


def _data(plan: S2MelPlan) -> bool:
    opts = plan.plan.opts
    manifests = list(opts.train_manifest or [])
    if not manifests:
        return plan.plan.add("data", False, "no --train-manifest given (its prepared folder is the S2Mel data)")
    path = manifest_file(manifests[0])
    if not path.is_file():
        return plan.plan.add("data", False, f"{path}: manifest not found")
    try:
        folder, stems = manifest_stems(path)
        by_stem = manifest_speakers(path)
    except (OSError, ValueError) as exc:
        return plan.plan.add("data", False, exception_line(exc))
    missing = missing_files(folder, stems, plan.generation)
    if missing:
        stem, file = missing[0]
        return plan.plan.add("data", False, f"{folder}: {len(missing)} file(s) an S2Mel run reads are missing, e.g. "
                                            f"{file} (clip {stem}); rerun the preparation on this folder (it adds "
                                            "only the missing S2Mel files)")
    plan.prompt_features = all((folder / prompt_feature_path(stem)).is_file() for stem in stems)
    plan.data_dir, plan.stems = folder, stems
    plan.speakers = [by_stem.get(stem) for stem in stems]
    extra = ", with the prompt's continuous features" if plan.prompt_features else ""
    return plan.plan.add("data", True, f"{len(stems)} clip(s) in {folder}{extra}")


def missing_files(folder: Path, stems: list[str], generation: Generation | None) -> list[tuple[str, str]]:
    """(stem, file) of every file an S2Mel run reads for these clips that the prepared folder lacks."""
    needed = ["codes/{}.npy", *(str(p).replace("STEM", "{}") for p in s2mel_paths("STEM"))]
    if generation is not None and generation.s2mel is not None and generation.s2mel.gpt_latent:
        needed += [f"{sub}/{{}}.npy" for sub in GPT_LATENT_FOLDERS]
    return [(stem, pattern.format(stem)) for stem in stems for pattern in needed
            if not (folder / pattern.format(stem)).is_file()]


def _text_rows(plan: S2MelPlan) -> bool:
    """IndexTTS2: every clip's text ids (main data and watched languages) have rows in the latent's GPT."""
    from trainer.errors import UsageError
    from trainer.s2mel.text_rows import gpt_source, planned_text_rows, text_ids_refusal

    if plan.generation is None or plan.generation.s2mel is None or not plan.generation.s2mel.gpt_latent:
        return True
    assert plan.model_dir is not None and plan.data_dir is not None
    opts = plan.plan.opts
    source = gpt_source(opts, plan.model_dir)
    try:
        rows = planned_text_rows(opts, plan.model_dir)
    except (ValueError, UsageError) as exc:
        return plan.plan.add("text ids", False, exception_line(exc))
    for folder, stems in [(plan.data_dir, plan.stems), *((w.folder, w.stems) for w in plan.watched)]:
        refusal = text_ids_refusal(folder, stems, rows, source)
        if refusal:
            return plan.plan.add("text ids", False, refusal)
    return plan.plan.add("text ids", True, f"every clip's text ids fit the {rows} text rows of {source}")


def _forgetting(plan: S2MelPlan) -> bool:
    """--forget-margin: the other languages' validation manifests the guard watches, with their S2Mel files."""
    from trainer.s2mel.forgetting import watched_sets

    opts = plan.plan.opts
    margin = float(opts.forget_margin or 0.0)
    if margin <= 0.0:
        return True
    try:
        sets = watched_sets(opts)
    except (OSError, ValueError) as exc:
        return plan.plan.add("forgetting guard", False, exception_line(exc))
    if not sets:
        return plan.plan.add("forgetting guard", False, "--forget-margin watches other languages' voices: give "
                                                        "their validation manifests as --val-manifest PATH::lang")
    for watched in sets:
        missing = missing_files(watched.folder, watched.stems, plan.generation)
        if missing:
            return plan.plan.add("forgetting guard", False, f"{watched.folder} ({watched.language}): {len(missing)} "
                                                            f"S2Mel file(s) missing, e.g. {missing[0][1]}; rerun "
                                                            "its preparation")
    plan.watched = sets
    shown = ", ".join(f"{w.language} ({len(w.stems)} clip(s))" for w in sets)
    return plan.plan.add("forgetting guard", True, f"watching {shown} at every save, margin {margin:g}")


def lora_targets(text: str) -> tuple[str, ...]:
    return DEFAULT_TARGETS if text in ("", "all") else tuple(part.strip() for part in text.split(",") if part.strip())


def s2mel_section(folder: Path) -> dict[str, Any]:
    """The ``s2mel:`` section of the download folder's config.yaml (the one the run builds its S2Mel from), its
    training settings checked (``reg_loss_type``, ``DiT.class_dropout_prob``); ValueError naming the file."""
    from networks.download_folder import read_config

    path, config = read_config(folder)
    section = config.get("s2mel")
    if not isinstance(section, dict):
        raise ValueError(f"{path}: no 's2mel:' section (the S2Mel decoder's config)")
    try:
        loss_type_from_config(section)
        class_dropout_from_config(section)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return section


def train_settings(opts: RunOptions, clips: int, section: dict[str, Any] | None = None) -> S2MelTrainSettings:
    """The S2Mel run's settings from the trainer's options (``--max-steps`` 0: ``--epochs`` passes) and the
    config's ``s2mel`` section (``section``: its ``reg_loss_type`` and ``DiT.class_dropout_prob``, refused in one
    line, a ValueError, when unsupported)."""
    section = section or {}
    loss_type, class_dropout = loss_type_from_config(section), class_dropout_from_config(section)
    batch = min(int(opts.batch_size), clips)
    steps = int(opts.max_steps) or int(opts.epochs) * math.ceil(clips / batch)
    return S2MelTrainSettings(
        loss_type=loss_type, class_dropout_prob=class_dropout,
        mode="lora" if opts.lora else "full",
        lora=S2MelLoRASettings(rank=int(opts.lora_rank), alpha=float(opts.lora_alpha),
                               dropout=float(opts.lora_dropout), targets=lora_targets(opts.lora_targets),
                               dora=bool(opts.lora_dora)),
        learning_rate=float(opts.learning_rate), weight_decay=float(opts.weight_decay), batch_size=batch,
        max_steps=steps, save_interval=int(opts.save_interval), keep_checkpoints=int(opts.keep_checkpoints),
        grad_clip=float(opts.grad_clip) or math.inf, seed=int(opts.seed), prompt=opts.s2mel_prompt or "auto")


def _settings(plan: S2MelPlan) -> bool:
    opts = plan.plan.opts
    if opts.resume not in ("", "auto"):
        return plan.plan.add("settings", False, f"--resume {opts.resume}: an S2Mel run resumes from its "
                                                "--output-dir only (auto)")
    dora = dora_refusal(opts)
    if dora:
        return plan.plan.add("settings", False, dora)
    if opts.sample_texts and not opts.eval_reference:
        return plan.plan.add("settings", False, "--sample-texts of an S2Mel run are spoken with the first "
                                                "--eval-reference (reference voice audio): give one")
    try:
        assert plan.model_dir is not None
        plan.settings = train_settings(opts, len(plan.stems), s2mel_section(plan.model_dir))
        prompts = describe_prompt_mode(plan.settings.prompt, plan.speakers)
    except ValueError as exc:
        return plan.plan.add("settings", False, exception_line(exc))
    s = plan.settings
    kind = "DoRA" if s.lora.dora else "LoRA"
    what = f"{kind} rank {s.lora.rank} on {', '.join(s.lora.targets)}" if s.mode == "lora" else "full fine-tune"
    return plan.plan.add("settings", True, f"{what}, {s.max_steps} steps of {s.batch_size} clip(s), saves every "
                                           f"{s.save_interval}; {s.loss_type.upper()} loss, class dropout "
                                           f"{s.class_dropout_prob:g} (config s2mel); {prompts}")


def longest_clip_frames(folder: Path, stems: list[str]) -> int | None:
    """The mel frames of the longest prepared clip (the .npy headers only); None when none can be read."""
    import numpy as np

    longest = None
    for stem in stems:
        try:
            frames = int(np.load(folder / s2mel_paths(stem)[0], mmap_mode="r").shape[-1])
        except (OSError, ValueError, IndexError):
            continue
        longest = frames if longest is None else max(longest, frames)
    return longest


def _memory(plan: S2MelPlan) -> bool:
    """A note of the step's memory (it refuses nothing: the estimate is approximate)."""
    from networks.download_folder import read_config
    from trainer.s2mel.memory_estimate import S2MelShape, estimate_s2mel_memory, memory_line, s2mel_facts

    settings, folder, generation = plan.settings, plan.model_dir, plan.generation
    if settings is None or folder is None or generation is None or plan.data_dir is None:
        return True
    frames = longest_clip_frames(plan.data_dir, plan.stems)
    if frames is None:
        return True
    try:
        _path, config = read_config(folder)
        kwargs = ({"gpt_dim": int(config["gpt"]["model_dim"])}
                  if generation.s2mel is not None and generation.s2mel.gpt_latent else {"with_gpt_layer": False})
        facts = s2mel_facts(config["s2mel"], kwargs, settings.lora if settings.mode == "lora" else None)
    except (ValueError, KeyError, TypeError) as exc:
        return plan.plan.add("memory", True, f"not estimated ({exception_line(exc)})")
    import torch

    device = str(plan.plan.opts.device or "auto")
    on_cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    shape = S2MelShape(settings.batch_size, frames, resolve_prompt_mode(settings.prompt, plan.speakers),
                       settings.prompt_fraction[1], "cpu" if on_cpu else "cuda")
    return plan.plan.add("memory", True, memory_line(estimate_s2mel_memory(facts, shape), shape))


def _resume(plan: S2MelPlan) -> bool:
    from trainer.checkpoints.format import CheckpointError
    from trainer.s2mel.checkpoint import select_s2mel_resume

    try:
        choice = select_s2mel_resume(plan.plan.opts.output_dir)
    except CheckpointError as exc:
        return plan.plan.add("resume", False, exception_line(exc))
    if choice is None:
        return plan.plan.add("resume", True, "fresh start at step 0")
    path, ckpt, _ = choice
    if plan.settings is not None and ckpt.get("mode") != plan.settings.mode:
        return plan.plan.add("resume", False, f"{path} is a {ckpt.get('mode')} S2Mel run; this run is "
                                              f"{plan.settings.mode} (use a new --output-dir)")
    if plan.settings is not None:
        refusal = resume_refusal(ckpt, resolve_prompt_mode(plan.settings.prompt, plan.speakers), str(path))
        if refusal:
            return plan.plan.add("resume", False, refusal)
    return plan.plan.add("resume", True, f"resume from {path.name} at step {ckpt.get('step')}")


def make_s2mel_plan(opts: RunOptions | Mapping[str, Any], *, own_lock: bool = False) -> S2MelPlan:
    """Every pre-start check of an S2Mel run, in order; never raises for bad input (a plain dict of options
    is taken strictly, as ``RunOptions.from_dict``)."""
    from trainer.plan_files import check_model_folders, check_output_dir

    plan = S2MelPlan(RunPlan(opts=as_run_options(opts)))
    check_model_folders(plan.plan)  # first: a damaged download is named before any of its files is read
    generation_ok = _generation(plan)
    data_ok = generation_ok and _data(plan)
    settings_ok = data_ok and _settings(plan) and _forgetting(plan) and _text_rows(plan) and _memory(plan)
    if check_output_dir(plan.plan, own_lock) and settings_ok:
        _resume(plan)
    plan.plan.generation = plan.generation
    return plan
