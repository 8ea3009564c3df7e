"""A pasted value reaches the command preview while the field still has focus (issue 20 item 6).

Gradio's Textbox sends its input event only from key presses; a paste is an input event with no key press, so
the preview kept the old path until the field lost focus. The paste here is Playwright's ``insert_text``: the
browser's own input event, as Ctrl+V or the context menu's Paste give, with no key events at all.
"""

from __future__ import annotations

from pathlib import Path

from tests.studio_process import StudioProcess

UI_TIMEOUT_MS = 60_000


def test_pasted_path_shows_in_command_preview_without_leaving_the_field(page, studio_workspace: Path,
                                                                       tmp_path: Path) -> None:
    pasted = str(tmp_path / "pasted run dir")
    with StudioProcess(studio_workspace, tmp_path / "studio.log") as studio:
        studio.wait_ready()
        page.goto(studio.url)
        page.get_by_role("tab", name="Training").click()
        page.locator("#train-change-data").click()  # the run folder is in the data and model section
        field = page.locator("#opt-output-dir textarea")
        field.wait_for(timeout=UI_TIMEOUT_MS)
        command = page.locator("#train-command textarea")
        assert pasted not in command.input_value()
        quoted = f"--output-dir '{pasted}'"
        # The page's load event fills the form from the last run's options; on a busy machine it can land after
        # the paste and put the old path back (field and preview alike). So a paste the load undid is pasted again.
        for _attempt in range(3):
            field.click()
            field.press("ControlOrMeta+a")
            page.keyboard.insert_text(pasted)
            page.wait_for_function(
                "([sel, field, text, value]) => document.querySelector(sel).value.includes(text)"
                " || document.querySelector(field).value !== value",
                arg=["#train-command textarea", "#opt-output-dir textarea", quoted, pasted], timeout=UI_TIMEOUT_MS,
            )
            if field.input_value() == pasted and quoted in command.input_value():
                break
        assert field.evaluate("e => e === document.activeElement"), "the field lost focus before the preview updated"
        assert field.input_value() == pasted
        assert quoted in command.input_value()
