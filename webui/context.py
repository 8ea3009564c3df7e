"""What every tab of the studio gets: the workspace, its well-known files, and the run supervisors.

Each tab module exposes ``build(ctx: StudioContext) -> None`` and is called by the shell inside its
``with gr.Tab(...)``. Long work (training, preprocessing, TensorBoard) runs as a supervised subprocess
through ``ctx.run_background(...)``, never inside the UI process.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from webui.jobs.supervisor import REPO_ROOT, RunSupervisor
from webui.jobs.supervisor_registry import SupervisorRegistry

if TYPE_CHECKING:
    from trainer.project import Project


@dataclass(frozen=True)
class WorkspacePaths:
    """The demo workspace layout (``python -m demo --out DIR``); user workspaces follow it too."""

    root: Path
    config: Path  # checkpoints/config.yaml
    base_checkpoint: Path  # checkpoints/gpt.pth
    base_tokenizer: Path  # checkpoints/bpe.model
    tokenizer: Path  # tokenizers/amharic_extended.model
    dvae: Path  # checkpoints/dvae.pth
    vocoder: Path  # checkpoints/bigvgan_generator.pth (IndexTTS-1.5's BigVGAN; the demo ships a tiny one)
    train_manifest: Path  # data/train.jsonl
    val_manifest: Path  # data/val.jsonl
    data_dir: Path  # data/
    tokenizers_dir: Path  # tokenizers/
    runs_dir: Path  # runs/: training output directories
    jobs_dir: Path  # jobs/: output directories of background jobs (preprocessing, TensorBoard, ...)

    @classmethod
    def for_workspace(cls, root: Path) -> WorkspacePaths:
        root = Path(root).resolve()
        return cls(
            root=root,
            config=root / "checkpoints" / "config.yaml",
            base_checkpoint=root / "checkpoints" / "gpt.pth",
            base_tokenizer=root / "checkpoints" / "bpe.model",
            tokenizer=root / "tokenizers" / "amharic_extended.model",
            dvae=root / "checkpoints" / "dvae.pth",
            vocoder=root / "checkpoints" / "bigvgan_generator.pth",
            train_manifest=root / "data" / "train.jsonl",
            val_manifest=root / "data" / "val.jsonl",
            data_dir=root / "data",
            tokenizers_dir=root / "tokenizers",
            runs_dir=root / "runs",
            jobs_dir=root / "jobs",
        )

    @property
    def default_output_dir(self) -> Path:
        return self.runs_dir / "demo"


@dataclass
class StudioContext:
    workspace: Path
    paths: WorkspacePaths
    registry: SupervisorRegistry
    repo_root: Path = REPO_ROOT
    host: str = "127.0.0.1"  # the interface the studio listens on
    tensorboard_host: str = "127.0.0.1"  # TensorBoard has no login: loopback unless the user asks (app.py flag)
    python: str = field(default=sys.executable)
    # The browser session's current voice project: a gr.State holding its name, made by the studio before the
    # tabs (None when a tab is built alone). Several sessions share this context, so the name lives in the
    # session's state, never here; a tab reads it as an input and follows its .change to refill its defaults.
    project_state: Any = None
    # The session's project stamp (webui.project.follow): set when the page loads, a project is picked or a step
    # finished; every form that takes the project's files follows its .change (follow.follow).
    project_stamp: Any = None
    tabs: Any = None  # the studio's gr.Tabs (a button may select a tab by its id)

    @classmethod
    def create(cls, workspace: Path, host: str = "127.0.0.1", tensorboard_host: str = "127.0.0.1") -> StudioContext:
        workspace = Path(workspace).resolve()
        return cls(workspace=workspace, paths=WorkspacePaths.for_workspace(workspace),
                   registry=SupervisorRegistry(workspace), host=host, tensorboard_host=tensorboard_host)

    def project(self, name: str | None) -> Project | None:
        """The workspace's project ``name`` with what its folders show taken in; None for no or a bad name."""
        if not name:
            return None
        from trainer.project import ProjectError, open_project

        try:
            return open_project(self.workspace, str(name))
        except (ProjectError, OSError):
            return None

    def opening_project(self, name: str | None) -> Project | None:
        """The project a page opening on ``name`` fills its forms from: None for a demo project (the page shows
        the demo as it always did; picking a project in the Project tab switches the forms)."""
        project = self.project(name)
        return None if project is None or is_demo_project(project.name) else project

    def default_project_name(self) -> str | None:
        """The project a new page opens on: the project file changed last, else the demo's default project."""
        from trainer.project.layout import PROJECT_FILE, projects_root

        files = sorted(projects_root(self.workspace).glob(f"*/{PROJECT_FILE}"),
                       key=lambda p: (-p.stat().st_mtime, p.parent.name))
        own = [p.parent.name for p in files if not p.parent.name.startswith("demo-")]
        if own:
            return own[0]
        from demo.projects import DEFAULT_DEMO_PROJECT

        names = [p.parent.name for p in files]
        return DEFAULT_DEMO_PROJECT if DEFAULT_DEMO_PROJECT in names else (names[0] if names else None)

    def job_dir(self, job_name: str) -> Path:
        return self.paths.jobs_dir / job_name

    def supervisor(self, output_dir: Path) -> RunSupervisor:
        return self.registry.get(output_dir)

    def run_background(self, job_name: str, argv: list[str], output_dir: Path | None = None,
                       cwd: Path | None = None, env: dict[str, str] | None = None) -> RunSupervisor:
        """Start ``argv`` as a supervised subprocess (own session, run.json + console.log in its dir).

        ``output_dir`` defaults to ``<workspace>/jobs/<job_name>``. Raises
        ``webui.jobs.supervisor.RunAlreadyActive`` if that directory's previous run is still going.
        Follow it with ``sup.poll()`` (a RunStatus), ``sup.read_log(offset)``, ``sup.stop()``.
        """
        supervisor = self.registry.get(output_dir or self.job_dir(job_name))
        supervisor.start(list(argv), cwd=cwd or self.repo_root, env=env, label=job_name)
        return supervisor


def is_demo_project(name: str) -> bool:
    """Whether ``name`` is one of the demo's projects (their forms open on the demo's presets)."""
    from demo.projects import demo_projects

    return name in demo_projects()
