"""What each step of a project hands to the next: the values a form of the studio starts with.

``defaults_for(project, step)`` answers with plain values keyed by the names the forms use (the trainer's option
names for ``train``): the saved manifest to the preparation, the prepared manifests to the checker and the
training form, the runs to the Checkpoints, evaluation, Test and Listen tabs, and the model folder's own files
(never a Hub id where the folder has a local copy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from data_tools.config import ConfigError, load_config
from generations.registry import by_id
from trainer.project.layout import Project, ProjectError, inside
from trainer.project.steps import outputs_of, run_dirs

HANDOFF_STEPS = ("prepare", "check", "tokenizer", "train", "checkpoints", "test", "listen", "export")


def _config(project: Project) -> dict[str, Any]:
    try:
        return load_config(project.model_path / "config.yaml")
    except (ConfigError, OSError):
        return {}


def _beside(folder: Path, name: object) -> Path | None:
    if not isinstance(name, str) or not name.strip():
        return None
    path = folder / name
    return path if path.exists() else None


def local_w2v_bert(project: Project) -> Path | None:
    """The w2v-BERT folder inside the model folder (the places its generation's entry names), if there is one."""
    facts = by_id(project.generation).test
    for place in facts.w2v_bert_places if facts is not None else ():
        folder = project.model_path / place
        if (folder / "config.json").is_file():
            return folder
    return None


def model_files(project: Project) -> dict[str, str]:
    """The model folder's files the forms ask for ("" where the folder has none): config, gpt, w2v_bert,
    tokenizer, model_dir (a download folder the samples and the Test tab speak through)."""
    folder = project.model_path
    config = _config(project)
    generation = by_id(project.generation)
    facts = generation.test
    dataset = config.get("dataset") if isinstance(config.get("dataset"), dict) else {}
    table = _beside(folder, facts.folder_table) if facts is not None else None
    tokenizer = (project.absolute(project.tokenizer) if project.tokenizer else table
                 or _beside(folder, dataset.get("bpe_model")))
    w2v = local_w2v_bert(project)
    speaks_through_folder = facts is not None and facts.speaks_through_folder
    return {"config": str(folder / "config.yaml") if (folder / "config.yaml").is_file() else "",
            "gpt": str(_beside(folder, config.get("gpt_checkpoint")) or ""),
            "w2v_bert": str(w2v) if w2v is not None else "",
            "tokenizer": str(tokenizer) if tokenizer is not None else "",
            "model_dir": str(folder) if speaks_through_folder else ""}


def saved_manifest(project: Project) -> Path | None:
    """The manifest the proofreading saved last (the proofread step's output), None before one is saved."""
    recorded = [p for p in outputs_of(project, "proofread") if p.is_file()]
    if recorded:
        return recorded[0]
    folder = project.dir("manifests")
    saved = sorted(p for p in folder.glob("manifest_*.jsonl") if project.in_workspace(p)) if folder.is_dir() else []
    return saved[-1] if saved else None


SPLIT_FOLDER = "split"  # beside a prepared manifest: its train/val split (held out by recording)
# Shares of the utterances tried for validation, smallest first: a project of a few recordings needs a larger
# share before one whole recording can go to validation.
VAL_FRACTIONS = (0.1, 0.25, 0.5)


def prepared_manifests(project: Project) -> tuple[list[Path], list[Path]]:
    """(training, validation) manifests the preparation produced; a file named val* is validation. One prepared
    manifest without a validation one is split (``split_prepared``): training without validation would have no
    validation loss, no samples at saves and no evaluation voices."""
    produced = [p for p in outputs_of(project, "prepare") if p.is_file()]
    train = [p for p in produced if not p.name.startswith("val")]
    val = [p for p in produced if p.name.startswith("val")]
    if len(train) == 1 and not val:
        return split_prepared(train[0], within=project.folder)
    return train, val


def split_prepared(manifest: Path, within: Path | None = None) -> tuple[list[Path], list[Path]]:
    """``manifest`` split into ``split/<stem>/train.jsonl`` and ``val.jsonl`` beside it by ``data_tools.split``
    (no recording, text or id on both sides; the same manifest gives the same split, made again only when the
    manifest is newer; a few recordings get a larger validation share, so one whole recording can go there).
    ([manifest], []) where it cannot be split (a single recording).

    Nothing is written outside ``within`` (the project's folder; default: the manifest's folder): a manifest
    elsewhere (the demo's prepared data) is split into ``within/split/<stem>``, and a split folder or file that
    is a link leading out of ``within`` is never written through nor read."""
    from data_tools.split import SplitError, split_manifest

    within = Path(within) if within is not None else manifest.parent
    out = manifest.parent / SPLIT_FOLDER / manifest.stem
    if not inside(manifest.parent, within):
        out = within / SPLIT_FOLDER / manifest.stem
    if not inside(out, within):  # a link on the way leads out
        return [manifest], []
    train, val = out / "train.jsonl", out / "val.jsonl"
    made = all(not p.is_symlink() and p.is_file() and p.stat().st_mtime >= manifest.stat().st_mtime
               for p in (train, val))
    if not made:
        for fraction in VAL_FRACTIONS:
            try:
                if split_manifest(manifest, out, val_fraction=fraction).val_count:
                    break
            except SplitError:
                return [manifest], []
    if not val.is_file() or not val.read_text(encoding="utf-8").strip():
        return [manifest], []
    return [train], [val]


def project_runs(project: Project) -> list[Path]:
    """The project's run folders, newest first (by their newest checkpoint, else their options file)."""
    def newest(folder: Path) -> float:
        times = [p.stat().st_mtime for p in folder.glob("*.pth")] or [(folder / "train_config.yaml").stat().st_mtime]
        return max(times)

    runs = [run for run in run_dirs(project.dir("runs")) if project.in_workspace(run)]  # never a link out
    return sorted(runs, key=lambda p: (-newest(p), str(p)))


def next_run_dir(project: Project) -> Path:
    runs = project.dir("runs")
    number = 1
    while (runs / f"run{number}").exists():
        number += 1
    return runs / f"run{number}"


def defaults_for(project: Project, step: str) -> dict[str, Any]:
    """The values the form of ``step`` (one of ``HANDOFF_STEPS``) starts with for this project."""
    files = model_files(project)
    train, val = prepared_manifests(project)
    runs = project_runs(project)
    if step == "prepare":
        manifest = saved_manifest(project)
        return {"input": str(manifest) if manifest else "", "out_dir": str(project.dir("prepared")),
                "generation": project.generation, **{k: files[k] for k in ("config", "gpt", "w2v_bert", "tokenizer")}}
    if step == "check":
        return {"train_manifest": [str(p) for p in train], "val_manifest": [str(p) for p in val],
                "config": files["config"], "tokenizer": files["tokenizer"]}
    if step == "tokenizer":
        manifest = saved_manifest(project)
        config = _config(project)
        dataset = config.get("dataset") if isinstance(config.get("dataset"), dict) else {}
        base = _beside(project.model_path, dataset.get("bpe_model"))
        return {"base_tokenizer": str(base) if base is not None else "", "tokenizer": files["tokenizer"],
                "corpus": [str(manifest)] if manifest else [str(p) for p in train],
                "train_manifest": [str(p) for p in train], "val_manifest": [str(p) for p in val],
                "config": files["config"]}
    if step == "train":
        return {"train_manifest": [str(p) for p in train], "val_manifest": [str(p) for p in val],
                "config": files["config"], "base_checkpoint": files["gpt"], "tokenizer": files["tokenizer"],
                "output_dir": str(next_run_dir(project)), "sample_model_dir": files["model_dir"],
                "generation": project.generation}
    if step in ("checkpoints", "test", "listen", "export"):
        latest = [r / "latest.pth" for r in runs if (r / "latest.pth").is_file()]
        return {"runs": [str(r) for r in runs], "run": str(runs[0]) if runs else "",
                "checkpoint": str(latest[0]) if latest else "", "exports": str(project.dir("exports")),
                "evaluations": str(project.dir("evaluations"))}
    raise ProjectError(f"no hand-off for step {step!r} (one of {', '.join(HANDOFF_STEPS)})")
