"""The Test tab's model pickers, without Gradio: what can be spoken with, and the files behind a pick.

- :func:`model_choices` lists what can be spoken with: the base model of every config (its
  ``gpt_checkpoint`` next to it) and every checkpoint of every run under each demo's ``runs/`` (the registry's
  demo folders) and each project's (latest, best, step files), from file names and the runs' ``train_config.yaml`` only (cheap).
- :func:`webui.testing.model_spec.resolve_model` turns a picked choice into the files synthesis needs: a checkpoint of ours uses
  the tokenizer it records (``ckpt["tokenizer"]["path"]``) and the config its run was trained with; the
  base model uses the config's ``dataset.bpe_model``; the vocoder is the config's ``bigvgan_checkpoint``
  (IndexTTS-1.5). An IndexTTS2 or IndexTTS-2.5 model speaks through the download folder its config.yaml sits in
  (S2Mel, BigVGAN v2, w2v-BERT, ...); each generation's registry entry (``generations``) says which way
  it speaks.
- S2Mel runs (``--train s2mel``) are no GPT: :mod:`webui.testing.listen_s2mel` offers their checkpoints as the decoder a
  side speaks through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data_tools.paths import PathError, expand_text
from generations.registry import DEMO_CHECKPOINTS, DEMO_RUNS, demo_folders, demo_paths

BASE_PREFIX = "base:"
ADAPTER_OFF_PREFIX = "adapter-off:"  # a LoRA run's checkpoint spoken without its adapters (--no-adapter)
PROJECT_RUNS = "projects/*/runs"  # each voice project's runs/
TRAIN_CONFIG = "train_config.yaml"
W2V_BERT_HUB_ID = "facebook/w2v-bert-2.0"  # an IndexTTS2 folder without w2v-bert-2.0/ uses it (as upstream does)
KIND_ORDER = {"base": 0, "latest": 1, "best": 2, "step": 3, "other": 4}  # an export's kind is "export"


def run_globs() -> tuple[str, ...]:
    """Where runs sit: one and two levels under each demo's runs/ (the registry's demo folders) and each project's."""
    return tuple(f"{runs}/{level}" for runs in (*demo_folders(DEMO_RUNS), PROJECT_RUNS) for level in ("*", "*/*"))


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
    kind: str  # base | export | latest | best | step | other
    step: int | None
    version: str  # the generation id (generations); "?" when the config is unreadable


def test_facts(version: str) -> Any:
    """The Test tab's facts of generation ``version`` (its registry entry's); none for an unknown one."""
    from generations.registry import by_id
    from generations.spec import TestFacts

    try:
        return by_id(version).test
    except KeyError:
        return TestFacts()


def generation_name(version: str, unknown: str = "unknown version") -> str:
    from generations.registry import name_of

    return name_of(version, unknown)


def generation_id_of(config: Mapping[str, Any]) -> str:
    from generations.registry import generation_of_config

    return generation_of_config(config).id


def relative_to_root(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def read_yaml(path: Path) -> dict[str, Any] | None:
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
            cache[key] = generation_id_of(load_config(config))
        except (ConfigError, ValueError):
            cache[key] = "?"
    return cache[key]


def beside(config: Path, name: object) -> Path | None:
    """A file named in a config: absolute as is, relative next to the config (None when not named)."""
    text = str(name or "").strip()
    if not text:
        return None
    path = typed_path(text, f"a file named in {config}")
    return path if path.is_absolute() else config.parent / path


def trains_s2mel(folder: Path) -> bool:
    """Whether a run trained the S2Mel decoder (``--train s2mel``): its checkpoints are no GPT to speak with.

    Its ``train_config.yaml`` says so; a run without one (older S2Mel runs wrote none) by the first line of its
    ``metrics.jsonl`` (``"part": "s2mel"``)."""
    options = read_yaml(folder / TRAIN_CONFIG)
    if options:
        return str(options.get("train") or "gpt") == "s2mel"
    try:
        with open(folder / "metrics.jsonl", encoding="utf-8") as metrics:
            first = metrics.readline(64 * 1024)
    except OSError:
        return False
    return '"part": "s2mel"' in first


def run_dirs(workspace: Path | str) -> list[Path]:
    """GPT runs (folders under the workspace's and its projects' runs/ holding checkpoints), newest first; S2Mel
    runs are left out: their checkpoints are decoders, not a GPT a choice here could speak with."""
    workspace = Path(workspace)
    found: set[Path] = set()
    for pattern in run_globs():
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
    options = read_yaml(output_dir / TRAIN_CONFIG)
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
    where = relative_to_root(output_dir, workspace)
    lora = bool((read_yaml(output_dir / TRAIN_CONFIG) or {}).get("lora"))
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
    configs = [folder / "config.yaml" for folder in demo_paths(workspace, DEMO_CHECKPOINTS)]
    configs += [c for c in (run_config(folder) for folder in run_dirs(workspace)) if c is not None]
    unique: dict[Path, Path] = {}
    for config in configs:
        if config.is_file():
            unique.setdefault(config.resolve(), config)
    return list(unique.values())


def export_choices(workspace: Path, versions: dict[Path, str]) -> list[ModelChoice]:
    """One choice per export folder (its gpt.pth), newest first."""
    from webui.testing.listen_exports import EXPORT_CONFIG, EXPORT_WEIGHTS, export_dirs

    choices = []
    for folder in export_dirs(workspace):
        version = _config_version(folder / EXPORT_CONFIG, versions)
        label = f"export · {relative_to_root(folder, workspace)} ({generation_name(version)})"
        choices.append(ModelChoice(str(folder / EXPORT_WEIGHTS), label, "export", None, version))
    return choices


def base_choice(config: Path, workspace: Path, versions: dict[Path, str] | None = None) -> ModelChoice:
    version = _config_version(config, versions if versions is not None else {})
    name = generation_name(version)
    label = f"base model · {relative_to_root(config.parent, workspace)} ({name})"
    return ModelChoice(BASE_PREFIX + str(config), label, "base", None, version)


def model_choices(workspace: Path | str) -> list[ModelChoice]:
    """Everything the model pickers offer: base models first, then the exports (newest first:
    ``webui.testing.listen_exports``), then each run's checkpoints (newest run first)."""
    workspace = Path(workspace)
    versions: dict[Path, str] = {}
    choices = [base_choice(config, workspace, versions) for config in base_configs(workspace)]
    choices += export_choices(workspace, versions)
    for folder in run_dirs(workspace):
        choices += _run_choices(folder, workspace, versions)
    return choices


def default_pair(choices: Sequence[ModelChoice]) -> tuple[str | None, str | None]:
    """(A, B) to start with: a base model and the newest run's latest checkpoint of the oldest generation."""
    from generations.registry import generation_ids

    first = generation_ids()[0]
    speakable = [c for c in choices if c.version == first]
    base = next((c.key for c in speakable if c.kind == "base"), None)
    trained = next((c.key for c in speakable if c.kind == "latest"), None)
    if trained is None:
        trained = next((c.key for c in speakable if c.kind != "base"), None)
    return base, trained
