"""The Test tab's S2Mel pickers, without Gradio: which trained S2Mel decoder a side speaks through.

An IndexTTS2 / 2.5 side speaks through its download folder's ``s2mel.pth`` unless an S2Mel run's checkpoint
(``python -m trainer.train --train s2mel``: latest, best, step files under the workspace's run folders) or an
exported adapter (``s2mel_adapter.pth``, ``python -m trainer.checkpoints export-s2mel --adapter-only``) is picked;
synthesis then gets ``--s2mel <file>`` (adapters merged). The same GPT on both sides, the stock decoder on A and
the trained one on B, is the A/B of "does the S2Mel fine-tune help".

Listing reads file names and each run's ``train_config.yaml`` only (cheap); the run's download folder says its
generation, so a side of another generation is refused in one line before anything starts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from webui.testing.listen_models import (
    KIND_ORDER,
    TRAIN_CONFIG,
    ListenError,
    generation_name,
    read_yaml,
    relative_to_root,
    run_globs,
    test_facts,
    trains_s2mel,
    typed_path,
)
from webui.testing.model_spec import ModelSpec

STOCK = ""  # the picker's value for the download folder's own s2mel.pth
STOCK_LABEL = "the download folder's s2mel.pth (stock)"
ADAPTER_GLOBS = ("exports/**/s2mel_adapter.pth", "projects/*/exports/**/s2mel_adapter.pth")


@dataclass(frozen=True)
class S2MelChoice:
    """One entry of an S2Mel picker (``key`` is the dropdown value: the file's path)."""

    key: str
    label: str
    kind: str  # latest | best | step | other | adapter
    step: int | None
    version: str  # the generation id of the run's download folder; "?" when unknown


def s2mel_run_dirs(workspace: Path | str) -> list[Path]:
    """S2Mel runs (``--train s2mel``) under the workspace's run folders that hold checkpoints, by path."""
    workspace = Path(workspace)
    found = {folder for pattern in run_globs() for folder in workspace.glob(pattern)
             if folder.is_dir() and any(folder.glob("*.pth")) and trains_s2mel(folder)}
    return sorted(found, key=str)


def run_version(folder: Path) -> str:
    """The generation id of an S2Mel run (its download folder, from ``train_config.yaml``); "?" when unknown."""
    from generations.registry import generation_of_folder

    options = read_yaml(folder / TRAIN_CONFIG) or {}
    text = str(options.get("model_dir") or options.get("sample_model_dir") or "").strip()
    if not text and str(options.get("config") or "").strip():
        text = str(Path(str(options["config"])).parent)
    if not text:
        return "?"
    try:
        generation = generation_of_folder(typed_path(text, f"model_dir of {folder / TRAIN_CONFIG}"))
    except (ListenError, OSError, ValueError):
        return "?"
    return generation.id if generation is not None else "?"


def _run_choices(folder: Path, workspace: Path) -> list[S2MelChoice]:
    from trainer.checkpoints.listing import list_checkpoints
    from trainer.checkpoints.store import step_of

    version = run_version(folder)
    where = relative_to_root(folder, workspace)
    steps = {path.stat().st_ino: step for path in folder.glob("model_step*.pth") if (step := step_of(path)) is not None}
    choices = []
    for summary in list_checkpoints(folder, verify=False):
        try:
            step = summary.step if summary.step is not None else steps.get(summary.path.stat().st_ino)
        except OSError:
            continue
        label = f"S2Mel {where} · {summary.path.name}" + (f" (step {step})" if step is not None else "")
        choices.append(S2MelChoice(str(summary.path), label, summary.kind, step, version))
    choices.sort(key=lambda c: (KIND_ORDER.get(c.kind, 9), -(c.step if c.step is not None else -1), c.label))
    return choices


def s2mel_choices(workspace: Path | str) -> list[S2MelChoice]:
    """Every trained S2Mel a side can speak through: each S2Mel run's checkpoints, then exported adapters."""
    workspace = Path(workspace)
    choices = [choice for folder in s2mel_run_dirs(workspace) for choice in _run_choices(folder, workspace)]
    adapters = sorted({path for pattern in ADAPTER_GLOBS for path in workspace.glob(pattern) if path.is_file()})
    choices += [S2MelChoice(str(path), f"S2Mel adapter · {relative_to_root(path, workspace)}", "adapter", None, "?")
                for path in adapters]
    return choices


def picker_entries(workspace: Path | str) -> list[tuple[str, str]]:
    """(label, value) pairs of an S2Mel dropdown: the stock decoder first."""
    return [(STOCK_LABEL, STOCK), *((c.label, c.key) for c in s2mel_choices(workspace))]


def with_s2mel(spec: ModelSpec, key: str | None, workspace: Path | str, strength: float | None = 1.0) -> ModelSpec:
    """``spec`` speaking through the picked S2Mel at ``strength`` (unchanged for the stock one); ListenError when it
    cannot."""
    from trainer.s2mel.strength import check_strength

    text = (key or "").strip()
    if not text:
        return spec
    try:
        strength = check_strength(1.0 if strength is None else strength, "S2Mel adapter strength")
    except ValueError as exc:
        raise ListenError(str(exc)) from None
    if not test_facts(spec.version).speaks_through_folder:
        raise ListenError(f"{spec.label}: {generation_name(spec.version)} has no S2Mel decoder: pick the stock one "
                          "(a trained S2Mel is for IndexTTS2 / 2.5 sides)")
    path = typed_path(text, "S2Mel checkpoint")
    path = path if path.is_absolute() else Path(workspace) / path
    if not path.is_file():
        raise ListenError(f"S2Mel checkpoint not found: {path}")
    version = run_version(path.parent) if trains_s2mel(path.parent) else "?"
    if version not in ("?", spec.version):
        raise ListenError(f"{relative_to_root(path, Path(workspace))} is an S2Mel of {generation_name(version)}; "
                          f"{spec.label} is {generation_name(spec.version)}")
    shown = f"{path.parent.name}/{path.name}"
    at = f" at strength {strength:g}" if strength != 1.0 else ""
    return replace(spec, label=f"{spec.label} + S2Mel {shown}{at}", s2mel=path, s2mel_strength=strength,
                   notes=(*spec.notes, "the trained S2Mel replaces the folder's s2mel.pth (adapters merged)"))
