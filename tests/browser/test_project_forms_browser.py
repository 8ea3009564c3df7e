"""Every form follows the picked project, also after a reload (issue 36), in a real browser.

Two projects over the demo's models, each with its own prepared data (recorded as a preparation from a shell
records it): an IndexTTS2 one made before the studio starts, an IndexTTS-2.5 one made after. The page lists the
late one when it loads and opens on it; picking the other and reloading opens on that one. Each time the data
check, the preparations, the training form and the Tokenizer tab hold the open project's files, never the demo's
or the other project's. Every wait is on a visible value with a timeout.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.studio_process import StudioProcess
from trainer.project import create_project, record_step

UI_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class Prepared:
    name: str
    train: Path
    val: Path
    prepared: Path  # the project's prepared folder


def _prepared_project(workspace: Path, name: str, model: str) -> Prepared:
    project = create_project(workspace, name, workspace / model)
    folder = project.dir("prepared")
    folder.mkdir(parents=True, exist_ok=True)
    train, val = folder / "train_pairs.jsonl", folder / "val_pairs.jsonl"
    train.write_text('{"id": "a"}\n', encoding="utf-8")
    val.write_text('{"id": "b"}\n', encoding="utf-8")
    record_step(project, "prepare", [train, val], source="cli")
    return Prepared(name, train, val, folder)


@pytest.fixture
def workspace(demo_workspace, tmp_path: Path) -> Iterator[Path]:
    target = tmp_path / "workspace"
    shutil.copytree(demo_workspace.root, target, ignore=shutil.ignore_patterns("runs", "jobs"))
    yield target


def _value(page, elem_id: str, expected: str) -> None:
    """Wait until the box ``elem_id`` holds ``expected``."""
    script = ("([id, want]) => { const box = document.querySelector(`#${id} textarea, #${id} input`);"
              " return box !== null && box.value === want; }")
    try:
        page.wait_for_function(script, arg=[elem_id, expected], timeout=UI_TIMEOUT_MS)
    except Exception as exc:
        shown = page.locator(f"#{elem_id} textarea, #{elem_id} input").first.input_value()
        raise AssertionError(f"#{elem_id} holds {shown!r}, not {expected!r}") from exc


def _tab(page, title: str) -> None:
    page.get_by_role("tab", name=title, exact=True).click()


def _forms_show(page, project: Prepared, other: Prepared, prefix: str, other_prefix: str) -> None:
    page.locator(f'#project-summary [data-project="{project.name}"]').wait_for(timeout=UI_TIMEOUT_MS)
    _tab(page, "Data")
    _value(page, "data-train-manifests", str(project.train))
    _value(page, "data-val-manifests", str(project.val))
    _value(page, f"{prefix}-out", str(project.prepared))
    _value(page, f"{other_prefix}-out", "")  # the other generation's form: no data of another project or the demo
    _value(page, f"{other_prefix}-input", "")
    _value(page, "data-prep-out", "")
    _tab(page, "Tokenizer")
    _value(page, "tok-verify-manifest", str(project.train))
    _value(page, "tok-verify-samples-new", str(project.val))
    _tab(page, "Training")  # the first view's summary of the data (the field itself is in a closed section)
    summary = '#train-data-summary [data-field="train_manifest"]'
    page.wait_for_function("([sel, want]) => (document.querySelector(sel)?.innerText || '').includes(want)",
                           arg=[summary, str(project.train)], timeout=UI_TIMEOUT_MS)
    assert str(other.train) not in page.locator(summary).inner_text()
    _tab(page, "Project")


def test_every_form_follows_the_picked_project_after_a_reload(workspace: Path, page) -> None:
    v2 = _prepared_project(workspace, "voice-v2", "v2/checkpoints")
    with StudioProcess(workspace, workspace.parent / "studio.log") as app:
        app.wait_ready()
        v25 = _prepared_project(workspace, "voice-v25", "v25/checkpoints")  # made after the studio started
        page.goto(app.url)
        _forms_show(page, v25, v2, "prep25", "prep2")  # listed, and opened on: the project made last

        page.locator("#project-pick input").click()
        page.get_by_role("option", name=v2.name, exact=True).click()
        page.locator(f'#project-summary [data-project="{v2.name}"]').wait_for(timeout=UI_TIMEOUT_MS)
        page.reload()
        _forms_show(page, v2, v25, "prep2", "prep25")  # the page opens on the project picked last
