"""The training form as plain data: options <-> form fields <-> values <-> run argv, presets, YAML.

Everything comes from ``trainer.options`` (the one declaration of the trainer's options) and, for how many
processes and nodes run it, ``webui.jobs.launcher`` (torchrun's options); this module only translates between
what Gradio components hold and those values. No Gradio here, so the round trip (form -> argv -> trainer
and launcher parsers -> same values) is tested without a browser.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from data_tools.paths import PathError, expand_text, path_lines
from generations.registry import GENERATIONS, by_id, oldest_first
from generations.spec import FormFacts
from trainer import options as trainer_options
from trainer.options import OPTIONS, Option
from trainer.run_options import parse_run_options
from webui.jobs import launcher
from webui.jobs.launcher import LAUNCH_KEYS, LAUNCH_OPTIONS, TRAINER_MODULE, LaunchError
from webui.training.field_titles import title_of
from webui.training.presets import DEMO_PRESET as DEMO_PRESET
from webui.training.presets import S2MEL_FULL24_PRESET as S2MEL_FULL24_PRESET
from webui.training.presets import S2MEL_LORA12_PRESET as S2MEL_LORA12_PRESET
from webui.training.presets import demo_presets, preset_settings
from webui.training.presets import preset_names as preset_names

RESUME = "resume"
RESUME_AUTO = "auto"
RESUME_AUTO_LABEL = "latest (auto: latest.pth, else the newest valid checkpoint)"

# Options the form shows as ordinary fields: everything with form=True except resume (its own checkbox).
FORM_OPTIONS: tuple[Option, ...] = tuple(o for o in OPTIONS if o.form and o.name != RESUME)
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(o.group for o in FORM_OPTIONS))
# The decisions that matter, in the form's first view (issue 40); the data and model show there as a summary, and
# every other field sits in its closed section.
FIRST_VIEW: tuple[str, ...] = ("train", "lora", "epochs", "max_steps")
DATA_SUMMARY: tuple[str, ...] = ("train_manifest", "config", "base_checkpoint", "tokenizer", "output_dir")
# Every field of the form in order: the trainer's options, then the launcher's (processes, nodes, rendezvous).
FIELD_OPTIONS: tuple[Option, ...] = (*FORM_OPTIONS, *LAUNCH_OPTIONS)


def elem_id(option: Option) -> str:
    return f"opt-{option.name.replace('_', '-')}"


# -- one field <-> one value -----------------------------------------------------------------------------
def to_field(option: Option, value: Any) -> Any:
    """The value a Gradio component of this option holds for the trainer value ``value``."""
    if option.repeatable:
        return "\n".join(str(item) for item in value or [])
    if option.kind == "bool":
        return bool(value)
    if option.kind in ("int", "float"):
        return value
    return "" if value is None else str(value)


class FormError(ValueError):
    """A form field holds something the trainer would refuse; the message names the field."""


def from_field(option: Option, raw: Any) -> Any:
    """The trainer value for what the component holds (empty numbers fall back to the default).

    Paths go through ``data_tools.paths`` (the trainer's parser uses the same rule): ``~`` is expanded,
    a multi-path field takes one path per line (blank lines ignored), a single-path field refuses a
    line break.
    """
    if option.repeatable:
        text = raw if isinstance(raw, str) else "\n".join(str(item) for item in raw or [])
        try:
            return path_lines(text, option.flag)
        except PathError as exc:
            raise FormError(str(exc)) from None
    if option.kind == "bool":
        return bool(raw)
    if option.kind in ("int", "float"):
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return option.default
        try:
            number = float(raw)
        except (TypeError, ValueError):
            raise FormError(f"{option.flag}: expected a number, got {raw!r}") from None
        if option.kind == "int":
            if not math.isfinite(number) or number != int(number):
                raise FormError(f"{option.flag}: expected a whole number, got {raw!r}")
            return int(number)
        return number
    text = "" if raw is None else str(raw).strip()
    try:
        return expand_text(text, option.flag) if option.kind == "path" else _single_line(option, text)
    except PathError as exc:
        raise FormError(str(exc)) from None


def _single_line(option: Option, text: str) -> str:
    if "\n" in text or "\r" in text:
        raise FormError(f"{option.flag}: one line only, got a line break in {text!r}")
    return text


def field_info(option: Option, version: str | None = None) -> str:
    """The small text under a field: its flag, then the option's help and how a multi-path field is filled; for a
    model generation the option does not apply to, the one-line reason instead (it names the flag)."""
    if not applies(option, version):
        return not_for(option, version)
    if option.repeatable:
        return f"{option.flag}: {option.help} (here: one path per line; blank lines are ignored)"
    return f"{option.flag}: {option.help}"


# -- what applies to which generation (each generation's registry entry says: generations) ----------
def _form_facts(version: str | None) -> FormFacts | None:
    """The form facts of generation ``version`` (None: not known yet, or no such generation)."""
    try:
        return by_id(str(version)).form if version is not None else None
    except KeyError:
        return None


# The sample fields (what speaks samples at saves: they follow the generation; --sample-texts and
# --sample-every apply to every one) and the generation-only fields (e.g. the text scheme).
SAMPLE_OPTIONS = tuple(sorted({name for entry in GENERATIONS for name in entry.form.sample_options}))
GENERATION_OPTIONS = tuple(sorted({name for entry in GENERATIONS for name in entry.form.options}))


def not_for(option: Option, version: str | None) -> str:
    """Why ``option`` does nothing for generation ``version`` (one line)."""
    facts = _form_facts(version)
    if option.name in GENERATION_OPTIONS or facts is None:
        users = " and ".join(entry.name for entry in oldest_first() if option.name in entry.form.options)
        return f"not used for this model: {option.flag} applies to {users or 'no'} runs only"
    return facts.not_for


def applies(option: Option, version: str | None) -> bool:
    """Whether the option does anything for a model of generation ``version`` (None: not known yet)."""
    facts = _form_facts(version)
    if facts is None:
        return True
    if option.name in SAMPLE_OPTIONS:
        return option.name in facts.sample_options
    if option.name in GENERATION_OPTIONS:
        return option.name in facts.options
    return True


def field_label(option: Option, version: str | None = None) -> str:
    """The field's label: what it decides in plain words, ``*`` when required, and for manifests which format this
    model reads (the flag is in ``field_info``)."""
    label = title_of(option.name, option.flag) + (" *" if option.required else "")
    facts = _form_facts(version)
    if option.name in ("train_manifest", "val_manifest") and facts is not None:
        label += f" ({facts.manifest_kind})"
    return label


# -- the whole form --------------------------------------------------------------------------------------
def resume_value(resume_ticked: bool, resume_from: str | None) -> str:
    if not resume_ticked:
        return ""
    return (resume_from or RESUME_AUTO).strip() or RESUME_AUTO


def default_values() -> dict[str, Any]:
    """The form's values before anything is typed: the trainer's defaults and one process on one node."""
    return {**trainer_options.default_values(), **launcher.default_values()}


def values_from_form(fields: list[Any], resume_ticked: bool, resume_from: str | None) -> dict[str, Any]:
    """Form values (the trainer's and the launcher's) from the fields (FIELD_OPTIONS order) and the resume
    controls; a launcher combination torchrun cannot run is refused here, in one line."""
    if len(fields) != len(FIELD_OPTIONS):
        raise ValueError(f"expected {len(FIELD_OPTIONS)} form fields, got {len(fields)}")
    values = default_values()
    for option, raw in zip(FIELD_OPTIONS, fields):
        values[option.name] = from_field(option, raw)
    values[RESUME] = resume_value(resume_ticked, resume_from)
    try:
        launcher.launch_of(values)
    except LaunchError as exc:
        raise FormError(str(exc)) from None
    return values


def form_from_values(values: dict[str, Any]) -> tuple[list[Any], bool, str]:
    """(fields in FIELD_OPTIONS order, resume ticked, resume choice) for ``values``."""
    merged = {**default_values(), **values}
    fields = [to_field(option, merged[option.name]) for option in FIELD_OPTIONS]
    resume = str(merged.get(RESUME) or "")
    return fields, bool(resume), resume or RESUME_AUTO


def missing_required(values: dict[str, Any]) -> list[str]:
    return [o.flag for o in FORM_OPTIONS if o.required and not values.get(o.name)]


def trainer_values(values: dict[str, Any]) -> dict[str, Any]:
    """The trainer's options out of form values (the launcher's left out)."""
    return {key: value for key, value in values.items() if key not in LAUNCH_KEYS}


def trainer_argv(values: dict[str, Any], python: str = sys.executable) -> list[str]:
    """The single-process trainer command for ``values`` (what one rank runs; the pre-flight runs this)."""
    return [python, "-m", TRAINER_MODULE, *trainer_options.options_to_argv(trainer_values(values))]


def run_argv(values: dict[str, Any], python: str = sys.executable) -> list[str]:
    """Exactly the command Start runs: the trainer, under torchrun when more than one process takes part
    (raises LaunchError for launcher values torchrun cannot run)."""
    launch = launcher.launch_of(values)
    single = trainer_argv(values, python)
    if not launch.distributed:
        return single
    return launcher.command(launch, single[3:], str(values.get("output_dir") or ""), python)


def preflight_argv(values: dict[str, Any], report_path: Path, python: str = sys.executable) -> list[str]:
    """The pre-flight of what Start runs: one process that plans for every rank the launcher would start."""
    argv = [*trainer_argv(values, python), "--preflight", "--preflight-json", str(report_path)]
    try:
        launch = launcher.launch_of(values)
    except launcher.LaunchError:
        return argv  # Start refuses these values itself, with the launcher's own line
    if launch.distributed:
        argv += ["--preflight-processes", str(launch.nproc_per_node * launch.nnodes)]
    return argv


def values_from_trainer_argv(argv: list[str] | tuple[str, ...]) -> dict[str, Any] | None:
    """Form values of a recorded run command (``python -m trainer.train ...`` or torchrun around it), or
    None if it is neither."""
    split = launcher.split_command(argv)
    if split is None:
        return None
    launch, trainer_args = split
    try:
        recorded = parse_run_options(trainer_args)
    except SystemExit:
        return None
    shown = recorded.replace(preflight=False, preflight_json="")  # the form starts a run, not its pre-flight
    return {**shown.to_dict(), **launcher.values_of(launch)}


# -- presets ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class WorkspaceFiles:
    """The files a preset points at (the demo workspace layout)."""

    train_manifest: Path
    val_manifest: Path
    tokenizer: Path
    config: Path
    base_checkpoint: Path
    output_dir: Path
    vocoder: Path | None = None  # BigVGAN for samples at saves (IndexTTS-1.5); None: no samples
    sample_model_dir: Path | None = None  # IndexTTS2 / 2.5 download folder for samples at saves; None: no samples


def workspace_values(files: WorkspaceFiles) -> dict[str, Any]:
    values = default_values()
    values.update(
        train_manifest=[str(files.train_manifest)], val_manifest=[str(files.val_manifest)],
        tokenizer=str(files.tokenizer), config=str(files.config), base_checkpoint=str(files.base_checkpoint),
        output_dir=str(files.output_dir), vocoder=str(files.vocoder) if files.vocoder else "",
        sample_model_dir=str(files.sample_model_dir) if files.sample_model_dir else "",
    )
    return values


def demo_preset_files(workspace: Path, preset: str) -> WorkspaceFiles | None:
    """The files demo preset ``preset`` fills in: those of the demo (in ``workspace``) of the generation whose entry
    names that preset; None where its entry's demo takes the workspace's own files (or no entry names it)."""
    for entry in GENERATIONS:
        demo = entry.demo
        if entry.form.demo_preset == preset and demo is not None and demo.form_files is not None:
            return WorkspaceFiles(**demo.form_files(demo.paths(Path(workspace))))
    return None


def apply_preset(name: str, current: dict[str, Any], files: WorkspaceFiles) -> dict[str, Any]:
    """A demo preset resets the trainer's options to ``files`` (that demo's); GPU presets (their memory settings
    from the memory estimate, ``trainer.gpu_preset``) keep the form's paths. Every preset keeps the launcher fields: they describe the machines, not the recipe."""
    settings = preset_settings(name)
    demo = name in demo_presets()
    base = workspace_values(files) if demo else {**default_values(), **current}
    base.update({key: current[key] for key in LAUNCH_KEYS if key in current})
    base.update(settings)
    if demo:
        base[RESUME] = ""
    return base


# -- YAML ------------------------------------------------------------------------------------------------
LAUNCHER_KEY = "launcher"  # the saved form's mapping of the launcher fields (torchrun's, not the trainer's)


def form_yaml(values: dict[str, Any]) -> str:
    header = ("# IndexTTS Fine-tuning Studio training form (the same keys as the trainer's train_config.yaml;\n"
              f"# '{LAUNCHER_KEY}' holds how many processes and nodes run it)\n")
    plain: dict[str, Any] = {k: v for k, v in trainer_options.resolved_config(trainer_values(values)).items()
                             if trainer_options.option_by_name(k).form}
    plain[LAUNCHER_KEY] = {**launcher.default_values(), **{k: values[k] for k in LAUNCH_KEYS if k in values}}
    return header + yaml.safe_dump(plain, sort_keys=False, allow_unicode=True)


def _launcher_from_yaml(raw: Any, values: dict[str, Any], notes: list[str]) -> None:
    if not isinstance(raw, dict):
        raise FormError(f"{LAUNCHER_KEY}: expected a mapping of launcher fields, got {raw!r}")
    for key, value in raw.items():
        name = str(key).replace("-", "_").lstrip("_")
        option = next((o for o in LAUNCH_OPTIONS if o.name == name), None)
        if option is None:
            notes.append(f"ignored unknown launcher field {key!r}")
            continue
        values[option.name] = from_field(option, value)


def values_from_yaml(text: str, base: dict[str, Any] | None = None) -> tuple[dict[str, Any], list[str]]:
    """Values from a saved form or a run's train_config.yaml, and notes on what was ignored.

    Options the file does not mention keep their value from ``base`` (the form as it is), else the default.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise FormError(f"not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise FormError("expected a mapping of option names to values")
    values = {**default_values(), **(base or {})}
    notes: list[str] = []
    for key, raw in data.items():
        name = str(key).replace("-", "_").lstrip("_")
        if name == LAUNCHER_KEY:
            _launcher_from_yaml(raw, values, notes)
            continue
        try:
            option = trainer_options.option_by_name(name)
        except KeyError:
            notes.append(f"ignored unknown option {key!r}")
            continue
        if not option.form:
            continue
        if option.repeatable and isinstance(raw, str):
            raw = [raw]
        if option.kind == "bool" and not isinstance(raw, bool):
            raise FormError(f"{option.flag}: expected true or false, got {raw!r}")
        if option.kind == "choice" and raw not in (option.choices or ()):
            raise FormError(f"{option.flag}: expected one of {', '.join(option.choices or ())}, got {raw!r}")
        values[option.name] = from_field(option, raw) if option.kind != "bool" else raw
    try:
        launcher.launch_of(values)
    except LaunchError as exc:
        raise FormError(str(exc)) from None
    return values, notes
