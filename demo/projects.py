"""The demo's voice projects: one per generation, each pointing at the demo's own folders.

``demo-indextts-1.5``, ``demo-indextts2`` and ``demo-indextts-2.5`` fine-tune the demo's model folders
(``checkpoints/``, ``v2/checkpoints/``, ``v25/checkpoints/``). They share the demo recordings and ingest folder,
prepare into each demo's ``data/prepared`` and train into each demo's ``runs/``, so every path the demo had keeps
working; the demo's ready-made training data is recorded as each project's prepared data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from trainer.project import ProjectError, create_project, record_step, refresh
from trainer.project.layout import projects_root

DEMO_PROJECTS = ("demo-indextts-1.5", "demo-indextts2", "demo-indextts-2.5")
DEFAULT_DEMO_PROJECT = "demo-indextts2"
DEMO_NOTE = "the demo's ready-made data (python -m demo)"


class DemoV15Files(Protocol):
    """What the projects need of ``demo.workspace.DemoPaths`` (passed in: demo.workspace imports this module)."""

    config: Path
    extended_tokenizer: Path
    train_manifest: Path
    val_manifest: Path


def _demo_facts(root: Path, v15: DemoV15Files) -> dict[str, tuple[Path, Path | None, Path, list[Path]]]:
    """name -> (model folder, tokenizer or None, the demo's own folder, its prepared manifests)."""
    from demo.v2 import DemoV2Paths
    from demo.v25 import DemoV25Paths

    v2, v25 = DemoV2Paths.under(root), DemoV25Paths.under(root)
    return {"demo-indextts-1.5": (v15.config.parent.resolve(), v15.extended_tokenizer.resolve(), root,
                                  [v15.train_manifest.resolve(), v15.val_manifest.resolve()]),
            "demo-indextts2": (v2.config.parent, v2.extended_tokenizer, v2.root, [v2.train_manifest, v2.val_manifest]),
            "demo-indextts-2.5": (v25.config.parent, None, v25.root, [v25.train_manifest, v25.val_manifest])}


def ensure_demo_projects(root: Path, v15: DemoV15Files) -> list[str]:
    """Create the demo's projects that are missing (an existing one is left as it is); their names. ``v15``: the
    IndexTTS-1.5 demo's files (``demo.workspace.DemoPaths``)."""
    root = Path(root).resolve()
    for name, (model_dir, tokenizer, own, prepared) in _demo_facts(root, v15).items():
        if (projects_root(root) / name / "project.json").is_file():
            continue
        folders = {"recordings": root / "recordings", "ingest": root / "ingest",
                   "manifests": root / "ingest" / "manifests", "prepared": own / "data" / "prepared",
                   "runs": own / "runs"}
        try:
            project = create_project(root, name, model_dir, tokenizer=tokenizer, folders=folders)
        except ProjectError:
            continue  # a demo part that is not built (an old workspace): no project for it
        refresh(project)  # the demo recordings are the first step's output
        if all(path.is_file() for path in prepared):
            record_step(project, "prepare", prepared, note=DEMO_NOTE, source="demo")
    return [name for name in DEMO_PROJECTS if (projects_root(root) / name / "project.json").is_file()]

