"""The Test tab offers a project's exports and follows its newest model (issue 36), without a browser: the model
lists hold each export (by its gpt.pth), and Model B moves to a run or export that appears in the project since
it last moved, while a pick of the user's own stays until something newer appears. The Listen tab's run pick
follows the project's newest evaluated run the same way."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from trainer.project import create_project, open_project
from webui.testing.listen_models import model_choices
from webui.testing.tab_testing import followed_b


def write(path: Path, text: str, when: float) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    os.utime(path, (when, when))
    return path


@pytest.fixture
def project_ws(demo_workspace, tmp_path: Path):
    project = create_project(tmp_path, "voice", demo_workspace.root / "v2" / "checkpoints")
    ctx = SimpleNamespace(workspace=tmp_path, project=lambda name: open_project(tmp_path, name) if name else None)
    return project, ctx


def _run(project, name: str, when: float) -> Path:
    run = project.dir("runs") / name
    write(run / "train_config.yaml", f"config: {project.model_path / 'config.yaml'}\nmax_steps: 2\n", when)
    return write(run / "latest.pth", "weights", when)


def _export(project, name: str, when: float) -> Path:
    folder = project.dir("exports") / name
    folder.mkdir(parents=True)
    shutil.copyfile(project.model_path / "config.yaml", folder / "config.yaml")
    return write(folder / "gpt.pth", "weights", when)


def test_the_model_lists_offer_a_projects_export(project_ws):
    project, ctx = project_ws
    export = _export(project, "run1_latest", 1_000_000)
    offered = {c.key: c for c in model_choices(ctx.workspace)}
    assert str(export) in offered
    choice = offered[str(export)]
    assert choice.kind == "export" and choice.version == project.generation and "run1_latest" in choice.label


def test_model_b_follows_a_new_run_or_export_and_keeps_the_users_pick_meanwhile(project_ws):
    project, ctx = project_ws
    first = _run(project, "run1", 1_000_000)
    picked, followed = followed_b(ctx, "voice", None, None)
    assert picked == followed == str(first)  # on opening the tab: the project's newest run

    mine = "base:" + str(project.model_path / "config.yaml")
    assert followed_b(ctx, "voice", mine, followed) == (mine, followed)  # nothing new: the user's pick stays

    export = _export(project, "run1_latest", 1_000_100)
    picked, followed = followed_b(ctx, "voice", mine, followed)
    assert picked == followed == str(export)  # exported since: B moves to the export

    second = _run(project, "run2", 1_000_200)
    picked, followed = followed_b(ctx, "voice", picked, followed)
    assert picked == followed == str(second)  # a newer run: B moves again

    assert followed_b(ctx, None, "x", "y") == ("x", "y")  # no project: nothing moves


def test_the_listen_tabs_run_follows_the_projects_newest_evaluated_run(project_ws):
    from webui.listen.tab_listen import followed_run

    project, ctx = project_ws

    def evaluated(name: str, when: float) -> str:
        run = _run(project, name, when).parent
        (run / "eval" / "audio").mkdir(parents=True)
        os.utime(run, (when, when))
        return str(run)

    first = evaluated("run1", 1_000_000)
    picked, followed = followed_run(ctx, "voice", None, None)
    assert picked == followed == first
    assert followed_run(ctx, "voice", "elsewhere", followed) == ("elsewhere", followed)  # the user's pick stays
    second = evaluated("run2", 1_000_100)
    assert followed_run(ctx, "voice", "elsewhere", followed) == (second, second)
