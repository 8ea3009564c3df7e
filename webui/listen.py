"""The Test tab's synthesis, without Gradio: models to compare, the synthesis command, and its result.

The Test tab (``webui.tab_testing``) only lays out what these functions return. Reference voices live in
``webui.reference_voices``; a run's training samples in ``webui.sample_saves``. Synthesis itself runs as
a supervised subprocess
(``python -m trainer.synthesize``), never in the UI process: this module builds its argv and reads the
JSON report it writes.

- :func:`model_choices` lists what can be spoken with: the base model of every config (its
  ``gpt_checkpoint`` next to it) and every checkpoint of every run under ``runs/`` and ``v2/runs/``
  (latest, best, step files), from file names and the runs' ``train_config.yaml`` only (cheap).
- :func:`resolve_model` turns a picked choice into the files synthesis needs: a checkpoint of ours uses
  the tokenizer it records (``ckpt["tokenizer"]["path"]``) and the config its run was trained with; the
  base model uses the config's ``dataset.bpe_model``; the vocoder is the config's ``bigvgan_checkpoint``
  (IndexTTS-1.5). An IndexTTS2 or IndexTTS-2.5 model speaks through the download folder its config.yaml sits in
  (S2Mel, BigVGAN v2, w2v-BERT, ...), with its S2Mel steps and emotion (:class:`EmotionChoice`); each
  generation's registry entry (``trainer.generations``) says which way it speaks.
- :func:`synthesis_argv` builds the exact command; :func:`side_result` reads the job's outcome.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from data_tools.paths import PathError, expand_text

BASE_PREFIX = "base:"
ADAPTER_OFF_PREFIX = "adapter-off:"  # a LoRA run's checkpoint spoken without its adapters (--no-adapter)
RUN_GLOBS = ("runs/*", "runs/*/*", "v2/runs/*", "v2/runs/*/*", "v25/runs/*", "v25/runs/*/*", "projects/*/runs/*",
             "projects/*/runs/*/*")
BASE_CONFIGS = ("checkpoints/config.yaml", "v2/checkpoints/config.yaml", "v25/checkpoints/config.yaml")
TRAIN_CONFIG = "train_config.yaml"
W2V_BERT_HUB_ID = "facebook/w2v-bert-2.0"  # an IndexTTS2 folder without w2v-bert-2.0/ uses it (as upstream does)
DEFAULT_V2_STEPS = 25
MAX_DURATION_FACTOR = 10.0  # trainer.synthesis.pipeline_v25.MelSettings25's bound  # S2Mel flow-matching steps (inference's default)
KIND_ORDER = {"base": 0, "latest": 1, "best": 2, "step": 3, "other": 4}
MAX_PLAY_BYTES = 64 * 1024 * 1024  # a player gets at most this much audio (a sample is a few hundred KB)
DECODE_MODES = ("greedy", "beam", "sample")
DEVICES = ("auto", "cpu", "cuda")
KEEP_RESULTS = 10
DEFAULT_TEXT = "ሰላም ለዓለም። ዛሬ አየሩ ጥሩ ነው።"


class ListenError(ValueError):
    """Something the Test tab cannot use; ``str(err)`` is one line saying what and where."""


def typed_path(text: object, what: str) -> Path:
    """A path from a field or a recorded option, ``~`` expanded by the trainer's rule; ListenError if unusable."""
    try:
        return Path(expand_text(str(text).strip(), what))
    except PathError as exc:
        raise ListenError(str(exc)) from None


def one_line(text: object) -> str:
    """``text`` on one line, runs of white space as one space (for a status or an error badge)."""
    return " ".join(str(text).split())


# -- models to pick ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelChoice:
    """One entry of the model pickers (``key`` is the dropdown value)."""

    key: str
    label: str
    kind: str  # base | latest | best | step | other
    step: int | None
    version: str  # the generation id (trainer.generations); "?" when the config is unreadable


@dataclass(frozen=True)
class ModelSpec:
    """The files one side of the Test tab synthesizes with."""

    label: str
    checkpoint: Path
    config: Path
    tokenizer: Path | None
    vocoder: Path | None
    version: str  # the generation id (its registry entry says how it speaks)
    notes: tuple[str, ...] = ()
    model_dir: Path | None = None  # IndexTTS2 / IndexTTS-2.5: the download folder (the config's folder)
    adapter: bool = True  # False: a LoRA checkpoint's base weights alone

    @property
    def problem(self) -> str | None:
        """Why this model cannot be spoken with (None: it can)."""
        if self.tokenizer is None:
            return f"{self.label}: no tokenizer found (the checkpoint records none and the config names none)"
        if not self.tokenizer.is_file():
            return f"{self.label}: tokenizer not found: {self.tokenizer}"
        if _test_facts(self.version).speaks_through_folder:
            return self._folder_problem()
        if self.vocoder is None:
            return (f"{self.label}: the config {self.config} names no bigvgan_checkpoint: give a vocoder "
                    "(bigvgan_generator.pth)")
        if not self.vocoder.is_file():
            return f"{self.label}: vocoder not found: {self.vocoder}"
        return None

    def _folder_problem(self) -> str | None:
        """Why the IndexTTS2 / 2.5 download folder cannot speak (a file or config key missing), cheaply."""
        if self.model_dir is None:
            return f"{self.label}: no {_name(self.version)} download folder"
        check = _test_facts(self.version).folder_problem
        assert check is not None
        problem = check(self.model_dir, self.w2v_bert)
        return f"{self.label}: {problem}" if problem else None

    @property
    def w2v_bert(self) -> str | None:
        """None (the folder's w2v-bert-2.0/, for 2.5 also under hf_cache/) or the hub model id when it has none."""
        if self.model_dir is None:
            return None
        places = [self.model_dir / place for place in _test_facts(self.version).w2v_bert_places]
        return None if any(place.is_dir() for place in places) else W2V_BERT_HUB_ID

    def describe(self, root: Path | None = None) -> str:
        """One line for the tab: which files (relative to ``root`` where inside it)."""
        def show(path: Path | None) -> str:
            return "-" if path is None else _relative(path, root) if root is not None else str(path)

        parts = [f"checkpoint {show(self.checkpoint)}", f"tokenizer {show(self.tokenizer)}"]
        if _test_facts(self.version).speaks_through_folder:
            parts += [f"{_name(self.version)} folder {show(self.model_dir)}"]
            parts += [f"w2v-BERT {self.w2v_bert}"] if self.w2v_bert else []
        else:
            parts += [f"config {show(self.config)}", f"vocoder {show(self.vocoder)}"]
        return " · ".join(parts + list(self.notes))


def _test_facts(version: str) -> Any:
    """The Test tab's facts of generation ``version`` (its registry entry's); none for an unknown one."""
    from trainer.generations.registry import by_id
    from trainer.generations.spec import TestFacts

    try:
        return by_id(version).test
    except KeyError:
        return TestFacts()


def _name(version: str, unknown: str = "unknown version") -> str:
    from trainer.generations.registry import name_of

    return name_of(version, unknown)


def _generation_id(config: Mapping[str, Any]) -> str:
    from trainer.generations.registry import generation_of_config

    return generation_of_config(config).id


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _read_yaml(path: Path) -> dict[str, Any] | None:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _config_version(config: Path, cache: dict[Path, str]) -> str:
    key = config.resolve()
    if key not in cache:
        from data_tools.config import ConfigError, load_config
        try:
            cache[key] = _generation_id(load_config(config))
        except (ConfigError, ValueError):
            cache[key] = "?"
    return cache[key]


def _beside(config: Path, name: object) -> Path | None:
    """A file named in a config: absolute as is, relative next to the config (None when not named)."""
    text = str(name or "").strip()
    if not text:
        return None
    path = typed_path(text, f"a file named in {config}")
    return path if path.is_absolute() else config.parent / path


def trains_s2mel(folder: Path) -> bool:
    """Whether a run trained the S2Mel decoder (``--train s2mel``): its checkpoints are no GPT to speak with."""
    options = _read_yaml(folder / TRAIN_CONFIG)
    return bool(options) and str(options.get("train") or "gpt") == "s2mel"


def run_dirs(workspace: Path | str) -> list[Path]:
    """GPT runs (folders under the workspace's and its projects' runs/ holding checkpoints), newest first; S2Mel
    runs are left out: their checkpoints are decoders, not a GPT a choice here could speak with."""
    workspace = Path(workspace)
    found: set[Path] = set()
    for pattern in RUN_GLOBS:
        for folder in workspace.glob(pattern):
            if folder.is_dir() and any(folder.glob("*.pth")) and not trains_s2mel(folder):
                found.add(folder)

    def newest(folder: Path) -> float:
        try:
            return max(p.stat().st_mtime for p in folder.glob("*.pth"))
        except (OSError, ValueError):
            return 0.0

    return sorted(found, key=lambda p: (-newest(p), str(p)))


def run_config(output_dir: Path) -> Path | None:
    """The config.yaml a run was trained with, from its ``train_config.yaml`` (None when unknown)."""
    options = _read_yaml(output_dir / TRAIN_CONFIG)
    if not options or not str(options.get("config") or "").strip():
        return None
    return typed_path(options["config"], f"config of {output_dir / TRAIN_CONFIG}")


def _linked_steps(output_dir: Path) -> dict[tuple[int, int], int]:
    """(device, inode) -> step of the model_step files (latest.pth is a hard link to the newest one)."""
    from trainer.checkpoints.store import step_checkpoints

    linked: dict[tuple[int, int], int] = {}
    for step, path in step_checkpoints(output_dir):
        try:
            info = path.stat()
        except OSError:
            continue
        linked[(info.st_dev, info.st_ino)] = step
    return linked


def _run_choices(output_dir: Path, workspace: Path, versions: dict[Path, str]) -> list[ModelChoice]:
    from trainer.checkpoints.listing import list_checkpoints

    config = run_config(output_dir)
    version = _config_version(config, versions) if config is not None and config.is_file() else "?"
    linked = _linked_steps(output_dir)
    where = _relative(output_dir, workspace)
    lora = bool((_read_yaml(output_dir / TRAIN_CONFIG) or {}).get("lora"))
    choices = []
    for summary in list_checkpoints(output_dir, verify=False):
        step = summary.step
        if step is None:
            try:
                info = summary.path.stat()
                step = linked.get((info.st_dev, info.st_ino))
            except OSError:
                continue
        label = f"{where} · {summary.path.name}" + (f" (step {step})" if step is not None else "")
        choices.append(ModelChoice(str(summary.path), label, summary.kind, step, version))
        if lora:
            choices.append(ModelChoice(ADAPTER_OFF_PREFIX + str(summary.path), label + " · LoRA adapter off",
                                       summary.kind, step, version))
    choices.sort(key=lambda c: (KIND_ORDER.get(c.kind, 9), -(c.step if c.step is not None else -1), c.label))
    return choices


def base_configs(workspace: Path | str) -> list[Path]:
    """Configs whose base model can be picked: the workspace's own, then every run's (no duplicates)."""
    workspace = Path(workspace)
    configs = [workspace / name for name in BASE_CONFIGS]
    configs += [c for c in (run_config(folder) for folder in run_dirs(workspace)) if c is not None]
    unique: dict[Path, Path] = {}
    for config in configs:
        if config.is_file():
            unique.setdefault(config.resolve(), config)
    return list(unique.values())


def base_choice(config: Path, workspace: Path, versions: dict[Path, str] | None = None) -> ModelChoice:
    version = _config_version(config, versions if versions is not None else {})
    name = _name(version)
    label = f"base model · {_relative(config.parent, workspace)} ({name})"
    return ModelChoice(BASE_PREFIX + str(config), label, "base", None, version)


def model_choices(workspace: Path | str) -> list[ModelChoice]:
    """Everything the model pickers offer: base models first, then each run's checkpoints (newest run first)."""
    workspace = Path(workspace)
    versions: dict[Path, str] = {}
    choices = [base_choice(config, workspace, versions) for config in base_configs(workspace)]
    for folder in run_dirs(workspace):
        choices += _run_choices(folder, workspace, versions)
    return choices


def default_pair(choices: Sequence[ModelChoice]) -> tuple[str | None, str | None]:
    """(A, B) to start with: a base model and the newest run's latest checkpoint of the oldest generation."""
    from trainer.generations.registry import generation_ids

    first = generation_ids()[0]
    speakable = [c for c in choices if c.version == first]
    base = next((c.key for c in speakable if c.kind == "base"), None)
    trained = next((c.key for c in speakable if c.kind == "latest"), None)
    if trained is None:
        trained = next((c.key for c in speakable if c.kind != "base"), None)
    return base, trained


def _resolve_base(config: Path, vocoder: Path | None) -> ModelSpec:
    from data_tools.config import ConfigError, load_config

    try:
        loaded = load_config(config)
    except ConfigError as exc:
        raise ListenError(one_line(exc)) from None
    checkpoint = _beside(config, loaded.get("gpt_checkpoint"))
    if checkpoint is None:
        raise ListenError(f"{config} names no gpt_checkpoint: the base model is unknown")
    dataset = loaded.get("dataset") if isinstance(loaded.get("dataset"), Mapping) else {}
    version = _generation_id(loaded)
    facts = _test_facts(version)
    folder = facts.speaks_through_folder
    tokenizer = (config.parent / facts.folder_table if facts.folder_table
                 else _beside(config, dataset.get("bpe_model")))
    return ModelSpec(label=f"base model {config.parent.name}/{checkpoint.name}", checkpoint=checkpoint, config=config,
                     tokenizer=tokenizer,
                     vocoder=None if folder else vocoder or _beside(config, loaded.get("bigvgan_checkpoint")),
                     version=version, model_dir=config.parent if folder else None)


def _checkpoint_config(path: Path, ckpt: Mapping[str, Any]) -> Path:
    """The config.yaml of a checkpoint: the one its run recorded, else its run's, else one beside it."""
    hparams = ckpt.get("hparams") if isinstance(ckpt.get("hparams"), Mapping) else {}
    candidates = []
    if str(hparams.get("config") or "").strip():
        candidates.append(typed_path(hparams["config"], f"config recorded in {path}"))
    from_run = run_config(path.parent)
    if from_run is not None:
        candidates.append(from_run)
    candidates.append(path.parent / "config.yaml")
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ListenError(f"{path}: cannot find the config.yaml it was trained with (looked for "
                      + ", ".join(str(c) for c in dict.fromkeys(candidates)) + ")")


def _resolve_checkpoint(path: Path, vocoder: Path | None) -> ModelSpec:
    from data_tools.config import ConfigError, load_config
    from trainer.checkpoints import CheckpointError, checkpoint_kind, load_checkpoint

    if not path.is_file():
        raise ListenError(f"checkpoint not found: {path}")
    try:
        ckpt = load_checkpoint(path, mmap=True)  # metadata only: the tensors stay on disk
    except CheckpointError as exc:
        raise ListenError(one_line(exc)) from None
    try:
        kind = checkpoint_kind(ckpt)
        config = _checkpoint_config(path, ckpt)
        try:
            loaded = load_config(config)
        except ConfigError as exc:
            raise ListenError(one_line(exc)) from None
        model_config = ckpt.get("model_config")
        if isinstance(model_config, Mapping) and model_config:
            version = _generation_id({"gpt": dict(model_config)})
        else:
            version = _generation_id(loaded)
        facts = _test_facts(version)
        record = ckpt.get("tokenizer")
        notes: list[str] = []
        if isinstance(record, Mapping) and str(record.get("path") or "").strip():
            tokenizer: Path | None = typed_path(record["path"], f"tokenizer recorded in {path}")
            notes.append("tokenizer recorded in the checkpoint")
        elif (path.parent / "bpe.model").is_file():  # an export: gpt.pth, config.yaml, bpe.model side by side
            tokenizer = path.parent / "bpe.model"
        elif facts.folder_table:
            tokenizer = config.parent / facts.folder_table
            notes.append(f"{kind} checkpoint: the download folder's table")
        else:
            dataset = loaded.get("dataset") if isinstance(loaded.get("dataset"), Mapping) else {}
            tokenizer = _beside(config, dataset.get("bpe_model"))
            notes.append(f"{kind} checkpoint: the config's tokenizer")
        step = ckpt.get("step") if isinstance(ckpt.get("step"), int) else None
    finally:
        del ckpt  # drop the mapped file
    label = f"{path.parent.name}/{path.name}" + (f" (step {step})" if step is not None else "")
    if facts.speaks_through_folder:
        return ModelSpec(label=label, checkpoint=path, config=config, tokenizer=tokenizer, vocoder=None,
                         version=version, notes=tuple(notes), model_dir=config.parent)
    return ModelSpec(label=label, checkpoint=path, config=config, tokenizer=tokenizer,
                     vocoder=vocoder or _beside(config, loaded.get("bigvgan_checkpoint")), version=version,
                     notes=tuple(notes))


def resolve_model(key: str | None, workspace: Path | str, vocoder: str | Path | None = None) -> ModelSpec:
    """The files behind a picked (or typed) model; raises ListenError (one line) when they cannot be found.

    ``key`` is a :class:`ModelChoice` key (``base:<config>`` or a checkpoint path) or a typed checkpoint path
    (relative to the workspace). ``vocoder`` overrides the config's ``bigvgan_checkpoint``.
    """
    text = (key or "").strip()
    if not text:
        raise ListenError("no model picked")
    workspace = Path(workspace)
    override = None
    if vocoder is not None and str(vocoder).strip():
        override = typed_path(vocoder, "vocoder")
        override = override if override.is_absolute() else workspace / override
    if text.startswith(BASE_PREFIX):
        config = typed_path(text[len(BASE_PREFIX):], "base model config")
        if not config.is_file():
            raise ListenError(f"config not found: {config}")
        return _resolve_base(config, override)
    adapter = not text.startswith(ADAPTER_OFF_PREFIX)
    path = typed_path(text.removeprefix(ADAPTER_OFF_PREFIX), "model")
    spec = _resolve_checkpoint(path if path.is_absolute() else workspace / path, override)
    if adapter:
        return spec
    return replace(spec, label=spec.label + " (LoRA adapter off)", adapter=False,
                   notes=(*spec.notes, "LoRA adapter off: the base weights alone"))


# -- the command ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecodeChoice:
    mode: str = "beam"
    num_beams: int = 3
    temperature: float = 1.0
    top_k: int = 30
    top_p: float = 0.8
    seed: int = 0

    def problems(self) -> list[str]:
        from trainer.synthesis.generation import DecodeSettings

        return DecodeSettings(mode=self.mode, num_beams=self.num_beams, temperature=self.temperature,  # type: ignore[arg-type]
                              top_k=self.top_k, top_p=self.top_p, seed=self.seed).problems()

    def flags(self) -> list[str]:
        """The decoding flags of ``trainer.synthesize`` for this mode (others keep the CLI's defaults)."""
        flags = ["--decode", self.mode]
        if self.mode in ("beam", "sample"):
            flags += ["--num-beams", str(self.num_beams)]
        if self.mode == "sample":
            flags += ["--temperature", f"{self.temperature:g}", "--top-k", str(self.top_k), "--top-p",
                      f"{self.top_p:g}", "--seed", str(self.seed)]
        return flags


def decode_choice(mode: str | None, num_beams: float | None, temperature: float | None, top_k: float | None,
                  top_p: float | None, seed: float | None) -> DecodeChoice:
    """Form values -> DecodeChoice; raises ListenError naming what is wrong."""
    try:
        choice = DecodeChoice(mode=str(mode or "beam"), num_beams=int(num_beams if num_beams is not None else 3),
                              temperature=float(temperature if temperature is not None else 1.0),
                              top_k=int(top_k if top_k is not None else 30),
                              top_p=float(top_p if top_p is not None else 0.8), seed=int(seed or 0))
    except (TypeError, ValueError) as exc:
        raise ListenError(f"decoding settings: {one_line(exc)}") from None
    problems = choice.problems()
    if problems:
        raise ListenError("decoding settings: " + "; ".join(problems))
    return choice


@dataclass(frozen=True)
class EmotionChoice:
    """IndexTTS2 and 2.5: the S2Mel steps and the emotion (the speaker's own, or a reference blended by alpha);
    IndexTTS-2.5 only: the duration factor (the speech's length; 1 = upstream's)."""

    steps: int = DEFAULT_V2_STEPS
    reference: Path | None = None  # staged emotion reference audio (None: the voice's own emotion)
    alpha: float = 1.0
    duration_factor: float = 1.0

    def flags(self) -> list[str]:
        flags = ["--steps", str(self.steps)]
        if self.reference is not None:
            flags += ["--emotion-reference", str(self.reference), "--emotion-alpha", f"{self.alpha:g}"]
        return flags


def emotion_choice(steps: float | None, reference: str | Path | None, alpha: float | None,
                   duration_factor: float | None = None) -> EmotionChoice:
    """Form values -> EmotionChoice (reference not yet staged); raises ListenError naming what is wrong."""
    try:
        count = int(steps if steps is not None else DEFAULT_V2_STEPS)
        weight = float(alpha if alpha is not None else 1.0)
        factor = float(duration_factor if duration_factor is not None else 1.0)
    except (TypeError, ValueError) as exc:
        raise ListenError(f"IndexTTS2 settings: {one_line(exc)}") from None
    if not 0.0 < factor <= MAX_DURATION_FACTOR:
        raise ListenError(f"IndexTTS-2.5 settings: the duration factor must be in (0, {MAX_DURATION_FACTOR:g}], "
                          f"got {factor:g}")
    if count < 1:
        raise ListenError(f"IndexTTS2 settings: S2Mel steps must be >= 1, got {count}")
    if not 0.0 <= weight <= 1.0:
        raise ListenError(f"IndexTTS2 settings: emotion alpha must be in [0, 1], got {weight:g}")
    text = str(reference or "").strip()
    return EmotionChoice(count, typed_path(text, "emotion reference") if text else None, weight, factor)


def clean_text(text: str | None) -> str:
    """The text to speak: lines joined by spaces (one utterance per side); raises ListenError when empty."""
    joined = " ".join(line.strip() for line in (text or "").splitlines() if line.strip())
    if not joined:
        raise ListenError("type a text to speak")
    return joined


def synthesis_argv(python: str, spec: ModelSpec, text: str, reference: Path, out: Path, report: Path,
                   decode: DecodeChoice, device: str = "auto", emotion: EmotionChoice | None = None) -> list[str]:
    """The exact ``python -m trainer.synthesize`` command for one side (``emotion``: IndexTTS2 only)."""
    facts = _test_facts(spec.version)
    if facts.speaks_through_folder:
        assert spec.model_dir is not None
        argv = [python, "-m", "trainer.synthesize", "--model-dir", str(spec.model_dir), "--checkpoint",
                str(spec.checkpoint), "--tokenizer", str(spec.tokenizer)]
        argv += ["--w2v-bert", spec.w2v_bert] if spec.w2v_bert else []
    else:
        argv = [python, "-m", "trainer.synthesize", "--checkpoint", str(spec.checkpoint), "--config",
                str(spec.config), "--tokenizer", str(spec.tokenizer)]
        if spec.vocoder is not None:
            argv += ["--vocoder", str(spec.vocoder)]
    if not spec.adapter:
        argv.append("--no-adapter")
    argv += ["--reference", str(reference), "--text", text, "--out", str(out), "--json", str(report),
             *decode.flags()]
    if facts.speaks_through_folder:
        argv += (emotion or EmotionChoice()).flags()
    if "duration_factor" in _synthesis_options(spec.version):
        argv += ["--duration-factor", f"{(emotion or EmotionChoice()).duration_factor:g}"]
    return [*argv, "--device", device]


def _synthesis_options(version: str) -> frozenset[str]:
    from trainer.generations.registry import by_id

    try:
        return by_id(version).synthesis_options
    except KeyError:
        return frozenset()


def new_results_dir(jobs_root: Path, keep: int = KEEP_RESULTS) -> Path:
    """A fresh ``<jobs_root>/results/<time>`` folder; the oldest beyond ``keep`` are removed."""
    root = jobs_root / "results"
    root.mkdir(parents=True, exist_ok=True)
    while True:  # time to the nanosecond, fixed width: names sort in creation order
        now = time.time_ns()
        folder = root / (time.strftime("%Y%m%d_%H%M%S", time.localtime(now / 1e9)) + f"_{now % 10**9:09d}")
        try:
            folder.mkdir()
            break
        except FileExistsError:
            continue
    old = sorted((p for p in root.iterdir() if p.is_dir() and p != folder), key=lambda p: p.name)
    for stale in old[:max(0, len(old) - (keep - 1))]:
        shutil.rmtree(stale, ignore_errors=True)
    return folder


def stage_reference(source: Path, folder: Path, name: str = "reference") -> Path:
    """Copy the chosen reference into the job's folder, so the job never depends on the upload cache."""
    if not source.is_file():
        raise ListenError(f"{name.replace('_', ' ')} audio not found: {source}")
    target = folder / f"{name}{source.suffix.lower() or '.wav'}"
    shutil.copyfile(source, target)
    return target


# -- the job's result -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SideResult:
    """One side's synthesis as the tab shows it."""

    state: str  # idle | running | finished | failed | stopped | killed
    message: str  # one line
    wav: Path | None = None
    audio_seconds: float | None = None
    seconds: float | None = None
    real_time_factor: float | None = None
    sample_rate: int | None = None
    hit_stop: bool | None = None
    notes: tuple[str, ...] = ()

    @property
    def running(self) -> bool:
        return self.state == "running"


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value after ``flag`` in an argv (None when absent)."""
    for index, item in enumerate(argv[:-1]):
        if item == flag:
            return argv[index + 1]
    return None


def read_report(path: Path) -> dict[str, Any]:
    """The synthesis CLI's ``--json`` report; raises ListenError when missing or not its shape."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ListenError(f"no report at {path}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ListenError(f"unreadable report {path}: {one_line(exc)}") from None
    if not isinstance(data, dict) or not isinstance(data.get("items"), list) or not data["items"]:
        raise ListenError(f"report {path} lists no audio")
    return data


def _wav_rate(path: Path) -> int | None:
    import soundfile

    try:
        return int(soundfile.info(str(path)).samplerate)
    except (RuntimeError, OSError, ValueError):
        return None


def _error_line(status: Any) -> str:
    summary = str(getattr(status, "summary", "") or "")
    failure = getattr(status, "failure", None)
    detail = getattr(failure, "detail", "") if failure is not None else ""
    line = detail or summary or "failed"
    line = re.sub(r"^error:\s*", "", one_line(line))
    code = getattr(status, "exit_code", None)
    return f"{line} (exit {code})" if code is not None and f"exit {code}" not in line else line


def side_result(status: Any) -> SideResult:
    """Read one side's job (a supervisor RunStatus, duck-typed) into what the tab shows."""
    state = str(getattr(status, "state", "idle"))
    if state == "idle":
        return SideResult(state, "not run yet")
    if state == "running":
        return SideResult(state, "synthesizing…")
    if state != "finished":
        return SideResult(state, _error_line(status) if state in ("failed", "killed") else f"{state}")
    report_path = flag_value(tuple(getattr(status, "argv", ()) or ()), "--json")
    if report_path is None:
        return SideResult("failed", "the job's command has no --json report")
    try:
        report = read_report(Path(report_path))
    except ListenError as exc:
        return SideResult("failed", str(exc))
    item = report["items"][0]
    wav = Path(str(item.get("out", "")))
    if not wav.is_file():
        return SideResult("failed", f"the audio file is gone: {wav}")
    audio = float(item.get("audio_seconds") or 0.0)
    taken = float(item.get("seconds") or 0.0)
    rtf = item.get("real_time_factor")
    rate = _wav_rate(wav)
    message = f"{audio:.2f} s of audio in {taken:.2f} s"
    message += f" · real-time factor {rtf:.3f}" if isinstance(rtf, (int, float)) else ""
    message += f" · {rate} Hz" if rate else ""
    message += f" · on {report.get('device')}" if report.get("device") else ""
    return SideResult("finished", message, wav=wav, audio_seconds=audio, seconds=taken,
                      real_time_factor=float(rtf) if isinstance(rtf, (int, float)) else None, sample_rate=rate,
                      hit_stop=bool(item.get("hit_stop")), notes=tuple(str(n) for n in item.get("notes") or ()))


def audio_bytes(path: Path | None) -> bytes | None:
    """The file's bytes for a player (served as they are: the header's rate, 24 or 22.05 kHz, is kept); None when
    unusable."""
    if path is None:
        return None
    try:
        if path.stat().st_size > MAX_PLAY_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None
