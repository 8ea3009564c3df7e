"""The demo's voice projects: one per generation with a demo, each pointing at that demo's own folders.

Each generation's demo facet names its project (``demo-indextts-1.5``, ``demo-indextts2``, ``demo-indextts-2.5``)
and its files: the demo's model folder (``checkpoints/``, ``v2/checkpoints/``, ``v25/checkpoints/``), tokenizer
and ready-made data. The projects share the demo recordings and ingest folder, prepare into each demo's
``data/prepared`` and train into each demo's ``runs/``, so every path the demo had keeps working; the demo's
ready-made training data is recorded as each project's prepared data.
"""

from __future__ import annotations

from pathlib import Path

from generations.registry import demo_facets
from trainer.project import ProjectError, create_project, record_step, refresh
from trainer.project.layout import projects_root

DEFAULT_DEMO_PROJECT = "demo-indextts2"  # the project a new page opens on when the user has none of their own
DEMO_NOTE = "the demo's ready-made data (python -m demo)"


def demo_projects() -> tuple[str, ...]:
    """The demo projects' names, oldest generation first (each generation's demo facet names one)."""
    return tuple(dict.fromkeys(facet.project for facet in demo_facets()))


def ensure_demo_projects(root: Path) -> list[str]:
    """Create the demo's projects that are missing (an existing one is left as it is); their names."""
    root = Path(root).resolve()
    for facet in demo_facets():
        name = facet.project
        if (projects_root(root) / name / "project.json").is_file():
            continue
        files = facet.project_files(facet.paths(root))
        folders = {"recordings": root / "recordings", "ingest": root / "ingest",
                   "manifests": root / "ingest" / "manifests", "prepared": files.folder / "data" / "prepared",
                   "runs": files.folder / "runs"}
        try:
            project = create_project(root, name, files.model_dir, tokenizer=files.tokenizer, folders=folders)
        except ProjectError:
            continue  # a demo part that is not built (an old workspace): no project for it
        refresh(project)  # the demo recordings are the first step's output
        if all(path.is_file() for path in files.prepared):
            record_step(project, "prepare", list(files.prepared), note=DEMO_NOTE, source="demo")
    return [name for name in demo_projects() if (projects_root(root) / name / "project.json").is_file()]
