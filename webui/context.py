"""What every tab of the studio gets: the workspace, its well-known files, and the run supervisors.

Each tab module exposes ``build(ctx: StudioContext) -> None`` and is called by the shell inside its
``with gr.Tab(...)``. Long work (training, preprocessing, TensorBoard) runs as a supervised subprocess
through ``ctx.run_background(...)``, never inside the UI process.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

from webui.supervisor import REPO_ROOT, RunSupervisor, SupervisorRegistry


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

    @classmethod
    def create(cls, workspace: Path, host: str = "127.0.0.1", tensorboard_host: str = "127.0.0.1") -> StudioContext:
        workspace = Path(workspace).resolve()
        return cls(workspace=workspace, paths=WorkspacePaths.for_workspace(workspace),
                   registry=SupervisorRegistry(workspace), host=host, tensorboard_host=tensorboard_host)


    def job_dir(self, job_name: str) -> Path:
        return self.paths.jobs_dir / job_name

    def supervisor(self, output_dir: Path) -> RunSupervisor:
        return self.registry.get(output_dir)

    def run_background(self, job_name: str, argv: list[str], output_dir: Path | None = None,
                       cwd: Path | None = None, env: dict[str, str] | None = None) -> RunSupervisor:
        """Start ``argv`` as a supervised subprocess (own session, run.json + console.log in its dir).

        ``output_dir`` defaults to ``<workspace>/jobs/<job_name>``. Raises
        ``webui.supervisor.RunAlreadyActive`` if that directory's previous run is still going.
        Follow it with ``sup.poll()`` (a RunStatus), ``sup.read_log(offset)``, ``sup.stop()``.
        """
        supervisor = self.registry.get(output_dir or self.job_dir(job_name))
        supervisor.start(list(argv), cwd=cwd or self.repo_root, env=env, label=job_name)
        return supervisor

