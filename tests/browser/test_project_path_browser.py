"""One voice, one path (issue 28) in a real browser: a new IndexTTS2 project from the demo recordings to the
training form, typing names and a transcript only.

On a copy of the demo workspace: create the project (a name, the base model picked from a list), drop the demo
recordings into its recordings folder (as a user copies files), follow Next to the Data tab, import and slice
(the form holds the project's folders and model), give a clip without a transcript its text (its gates run
again: it is accepted), save, hand the saved manifest to the IndexTTS2 preparation (its project folder and
model files filled in), prepare (nothing left out for length: the slicer cut to the model's limit), and open the
Training tab: the form trains on the project's prepared data, and the corrected clip is in it.
Every wait is on a visible condition with a timeout.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from tests.browser.test_ingest_browser import click_row, table_rows, wait_message, wait_rows
from tests.studio_process import StudioProcess

UI_TIMEOUT_MS = 60_000
JOB_TIMEOUT_MS = 300_000  # silero over the demo recordings, or a cold torch + transformers import, on 2 busy cores
NAME = "amharic-voice"
TYPED = "ሰላም ለሁሉም"


def _command_paths(command: str, flag: str) -> list[Path]:
    return [Path(path) for path in re.findall(rf"{flag} (\S+)", command)]


def test_a_new_project_walks_from_recordings_to_the_training_form(page, studio_workspace: Path, artifacts: Path,
                                                                 tmp_path: Path) -> None:
    project = studio_workspace / "projects" / NAME
    with StudioProcess(studio_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.locator("#project-steps").wait_for()
        page.locator("#project-new").get_by_text("New project").first.click()
        page.locator("#project-new-name").locator("textarea, input").first.fill(NAME)
        page.locator("#project-new-model input").click()
        page.get_by_role("option", name="v2/checkpoints (IndexTTS2)", exact=True).click()
        page.locator("#project-create").click()
        page.locator(f'#project-summary [data-project="{NAME}"][data-generation="2"]').wait_for()

        shutil.copytree(studio_workspace / "recordings", project / "recordings", dirs_exist_ok=True)
        page.locator("#project-refresh").click()
        page.locator('#project-steps tr[data-step="recordings"][data-state="done"]').wait_for()
        page.screenshot(path=str(artifacts / "project-created.png"), full_page=True)
        page.locator("#project-next").click()  # on to the Data tab, where the next step is done

        page.locator("#data-ingest").get_by_text("Recordings → clips").first.click()
        source = page.locator("#ingest-input textarea")
        source.wait_for()
        assert source.input_value() == str(project / "recordings")
        assert page.locator("#ingest-out textarea").input_value() == str(project / "ingest")
        page.locator("#ingest-start").click()
        page.wait_for_function(
            "() => { const b = document.querySelector('#ingest-summary .studio-badge, #ingest-job-message .studio-badge');"
            " return b && b.innerText.length > 0; }", timeout=JOB_TIMEOUT_MS)
        wait_rows(page, 2)
        untranscribed = [row[-1] for row in table_rows(page) if row[0] == "rejected" and row[2].startswith("no_text")]
        assert untranscribed, table_rows(page)
        corrected = untranscribed[0]
        click_row(page, corrected)
        editor = page.locator("#proof-text textarea")
        editor.click()
        page.keyboard.insert_text(TYPED)
        page.locator("#proof-pending .studio-badge").wait_for()
        page.locator("#proof-apply").click()
        wait_message(page, "passes the gates")  # the gates ran again on the new transcript
        page.locator("#proof-save").click()
        wait_message(page, "MANIFEST SAVED")
        manifest = Path(page.locator("#proof-manifest textarea").input_value())
        assert manifest.parent == project / "ingest" / "manifests"

        page.locator("#proof-use-manifest").click()  # the saved manifest to the project's generation
        page.wait_for_function("(path) => document.querySelector('#prep2-input textarea').value === path",
                               arg=str(manifest), timeout=UI_TIMEOUT_MS)
        out_dir = Path(page.locator("#prep2-out textarea").input_value())
        assert out_dir.is_relative_to(project / "prepared"), out_dir
        page.locator("#prep2-start").click()
        page.wait_for_function("() => document.querySelector('#prep2-status').innerText.includes('FINISHED')",
                               timeout=JOB_TIMEOUT_MS)
        status = page.locator("#prep2-status").inner_text()
        assert "too long" not in status, status  # the slicer cut to what the model takes: nothing left out
        page.screenshot(path=str(artifacts / "project-prepared.png"), full_page=True)

        page.get_by_role("tab", name="Training", exact=True).click()
        page.wait_for_function("(path) => document.querySelector('#train-command textarea').value.includes(path)",
                               arg=str(out_dir), timeout=UI_TIMEOUT_MS)
        command = page.locator("#train-command textarea").input_value()
        assert f"--output-dir {project / 'runs' / 'run1'}" in command, command
        manifests = _command_paths(command, "--train-manifest") + _command_paths(command, "--val-manifest")
        assert manifests and all(path.is_relative_to(out_dir) for path in manifests), command
        page.screenshot(path=str(artifacts / "project-training-form.png"), full_page=True)

    targets = {json.loads(line).get("target_id") for path in manifests
               for line in path.read_text(encoding="utf-8").splitlines()}
    assert corrected in targets, (corrected, sorted(targets))  # the corrected clip is in the training data
