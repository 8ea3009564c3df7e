"""README's pictures show no path of the machine that made them (issue 40): demo.screenshots rewrites the page's
paths as a reader's machine would have them and refuses a picture where one of ours is left."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

from demo.screenshots import SHOWN_WORKSPACE, PathLeak, hide_machine_paths, machine_paths


def _page_with(page, text: str, field: str) -> None:
    page.set_content(f"<body><p id='line'>Workspace: <code>{text}</code></p><textarea id='box'></textarea></body>")
    page.locator("#box").fill(field)


def test_the_workspace_and_the_python_path_are_shown_as_a_readers_machine_has_them(page, tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    command = f"{sys.executable} -m trainer.train --train-manifest {workspace}/data/train.jsonl"
    _page_with(page, str(workspace), command)
    hide_machine_paths(page, machine_paths(workspace))
    assert page.locator("#line").inner_text() == f"Workspace: {SHOWN_WORKSPACE}"
    assert page.locator("#box").input_value() == \
        f"python -m trainer.train --train-manifest {SHOWN_WORKSPACE}/data/train.jsonl"


def test_a_temporary_path_the_pairs_do_not_know_refuses_the_picture(page, tmp_path: Path) -> None:
    stray = Path(tempfile.gettempdir()) / "somewhere-else" / "clip.wav"
    _page_with(page, "fine", str(stray))
    with pytest.raises(PathLeak, match="would carry a path of this machine"):
        hide_machine_paths(page, machine_paths(tmp_path / "workspace"))
